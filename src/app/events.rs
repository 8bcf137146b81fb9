//! One tenant's change events, for `subscriptions/listen` (MCP 2026-07-28): resources that
//! changed (the workspace's files; any other resource of the tenant may use the same event),
//! and the tenant's `tools/list` changing. Why a bus on the [`crate::app::App`] and
//! not on the MCP session: over HTTP on 2026-07-28 a `CodeExecutionServer` may be made per
//! request, so the request that writes a file and the listen stream that must hear of it need
//! not share anything but their tenant. Each tenant has its own bus, so an event of one tenant
//! can never reach another's listener.
//!
//! Publishing never waits: the bus is a bounded `tokio::sync::broadcast` of [`CAPACITY`]
//! events. A listener that falls further behind than that (a client that does not read its
//! stream) loses the oldest events it had not read, and is then told everything it listens to
//! may have changed: `resources/list_changed`, `resources/updated` for each URI it subscribed
//! to, and `tools/list_changed`. A lagging client refetches more than it needed to, and never
//! misses a change; no one else waits for it.
//!
//! Bounds: at most [`MAX_STREAMS`] listen streams per tenant at once, at most [`MAX_URIS`] URIs
//! per stream, at most [`MAX_EVENT_URIS`] URIs per event (more changed files make the event
//! "possibly every file"), and at most `MAX_URIS + 2` notices queued per stream.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Weak};

use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast};
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::Instrument;

use crate::gateway::GatewayView;

/// Events the bus holds for its slowest listener before that listener lags.
pub const CAPACITY: usize = 256;
/// `subscriptions/listen` streams one tenant may have open at once.
pub const MAX_STREAMS: usize = 32;
/// Resource URIs one stream may subscribe to.
pub const MAX_URIS: usize = 1000;
/// URIs one workspace event carries; an event with more says "possibly every file".
pub const MAX_EVENT_URIS: usize = 1000;

/// Something that changed for this tenant.
#[derive(Debug, Clone)]
pub enum Event {
    /// Resources changed: workspace files a tool or an execution wrote or deleted.
    Resources(Arc<ResourceChange>),
    /// What `tools/list` returns for this tenant changed.
    ToolsListChanged,
}

/// Resources of this tenant that changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceChange {
    /// Their URIs as clients see them (`workspace:///…`, personal data tokenized).
    pub uris: Vec<String>,
    /// Resources appeared or went away (`resources/list` changed).
    pub listing_changed: bool,
    /// More resources may have changed than `uris` names.
    pub more: bool,
    /// A file came in through an upload link: no MCP session's own call made it, so
    /// handshake-era sessions that subscribed hear of it through [`Events::arrivals`].
    pub through_link: bool,
}

/// What one listen stream asked for (and the server accepted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interest {
    pub resources_list: bool,
    pub tools_list: bool,
    pub uris: BTreeSet<String>,
}

/// One notification a listener is to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    ResourceUpdated(String),
    ResourcesListChanged,
    ToolsListChanged,
}

/// Why a listen stream was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ListenError {
    #[error(
        "this tenant already has {max} subscriptions/listen streams open (the most it may have): close one (end its listen request) and listen again"
    )]
    TooManyStreams { max: usize },
    #[error(
        "a subscriptions/listen stream may subscribe to at most {max} resource URIs, and this one asked for {asked}: split them over several streams, or listen to resourcesListChanged and read what changed"
    )]
    TooManyUris { asked: usize, max: usize },
}

/// One tenant's event bus.
pub struct Events {
    sender: broadcast::Sender<Event>,
    streams: Arc<Semaphore>,
    /// Stops the task that watches the upstreams for this tenant when the bus goes.
    _stop: DropGuard,
    stop: CancellationToken,
}

impl Default for Events {
    fn default() -> Self {
        let stop = CancellationToken::new();
        Self {
            sender: broadcast::Sender::new(CAPACITY),
            streams: Arc::new(Semaphore::new(MAX_STREAMS)),
            _stop: stop.clone().drop_guard(),
            stop,
        }
    }
}

impl Events {
    /// A bus that also tells of `view`'s `tools/list` changes (see [`watch_upstreams`]).
    pub fn open(view: Option<&Arc<GatewayView>>) -> Arc<Self> {
        let events = Arc::new(Self::default());
        if let Some(view) = view.filter(|v| !v.upstreams().is_empty()) {
            watch_upstreams(view.clone(), &events);
        }
        events
    }

    /// Resources changed (`uris` as clients see them). Never waits.
    pub fn resources_changed(&self, uris: Vec<String>, listing_changed: bool, more: bool) {
        self.publish(uris, listing_changed, more, false);
    }

    /// A file came in through an upload link (`uri` as clients see it). Never waits.
    pub fn arrived(&self, uri: String, listing_changed: bool) {
        self.publish(vec![uri], listing_changed, false, true);
    }

    fn publish(
        &self,
        mut uris: Vec<String>,
        listing_changed: bool,
        more: bool,
        through_link: bool,
    ) {
        let more = more || uris.len() > MAX_EVENT_URIS;
        uris.truncate(MAX_EVENT_URIS);
        if uris.is_empty() && !listing_changed && !more {
            return;
        }
        // No listener is no error.
        let _ = self.sender.send(Event::Resources(Arc::new(ResourceChange {
            uris,
            listing_changed,
            more,
            through_link,
        })));
    }

    /// What `tools/list` returns for this tenant changed. Never waits.
    pub fn tools_list_changed(&self) {
        let _ = self.sender.send(Event::ToolsListChanged);
    }

    /// A listener for one stream; fails when the tenant has [`MAX_STREAMS`] open or `interest`
    /// names more than [`MAX_URIS`] URIs. The stream's slot is freed when the listener drops.
    pub fn listen(&self, interest: Interest) -> Result<Listener, ListenError> {
        if interest.uris.len() > MAX_URIS {
            return Err(ListenError::TooManyUris {
                asked: interest.uris.len(),
                max: MAX_URIS,
            });
        }
        let slot = self
            .streams
            .clone()
            .try_acquire_owned()
            .map_err(|_| ListenError::TooManyStreams { max: MAX_STREAMS })?;
        Ok(Listener {
            events: self.sender.subscribe(),
            interest,
            pending: VecDeque::new(),
            _slot: slot,
        })
    }

    /// The tenant's `tools/list` changes, for a session of the handshake era (no stream slot:
    /// one per session, which ends with it).
    pub fn tool_changes(&self) -> ToolChanges {
        ToolChanges(self.sender.subscribe())
    }

    /// Files that came in through upload links, for a session of the handshake era that
    /// subscribed to resources (no stream slot: one per session, which ends with it).
    pub fn arrivals(&self) -> Arrivals {
        Arrivals(self.sender.subscribe())
    }

    /// Listen streams open now.
    pub fn open_streams(&self) -> usize {
        MAX_STREAMS - self.streams.available_permits()
    }
}

/// One listen stream's view of the bus.
pub struct Listener {
    events: broadcast::Receiver<Event>,
    interest: Interest,
    /// Notices of the event being handed out; at most `MAX_URIS + 2`.
    pending: VecDeque<Notice>,
    _slot: OwnedSemaphorePermit,
}

impl Listener {
    pub fn interest(&self) -> &Interest {
        &self.interest
    }

    /// The next notice for this stream; `None` once the tenant is gone.
    pub async fn next(&mut self) -> Option<Notice> {
        loop {
            if let Some(notice) = self.pending.pop_front() {
                return Some(notice);
            }
            match self.events.recv().await {
                Ok(event) => self.queue(&event),
                Err(RecvError::Lagged(lost)) => {
                    tracing::warn!(
                        lost,
                        "a subscriptions/listen stream fell {lost} events behind: it is told everything it listens to may have changed"
                    );
                    self.queue_everything();
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }

    fn queue(&mut self, event: &Event) {
        match event {
            Event::ToolsListChanged => {
                if self.interest.tools_list {
                    self.pending.push_back(Notice::ToolsListChanged);
                }
            }
            Event::Resources(change) => {
                if change.more {
                    self.queue_resources(self.interest.uris.iter().cloned().collect(), true);
                } else {
                    let updated = change
                        .uris
                        .iter()
                        .filter(|u| self.interest.uris.contains(*u))
                        .cloned()
                        .collect();
                    self.queue_resources(updated, change.listing_changed);
                }
            }
        }
    }

    fn queue_resources(&mut self, updated: Vec<String>, listing_changed: bool) {
        self.pending
            .extend(updated.into_iter().map(Notice::ResourceUpdated));
        if listing_changed && self.interest.resources_list {
            self.pending.push_back(Notice::ResourcesListChanged);
        }
    }

    fn queue_everything(&mut self) {
        self.queue_resources(self.interest.uris.iter().cloned().collect(), true);
        if self.interest.tools_list {
            self.pending.push_back(Notice::ToolsListChanged);
        }
    }
}

/// The tenant's `tools/list` changes, without the workspace's.
pub struct ToolChanges(broadcast::Receiver<Event>);

impl ToolChanges {
    /// Resolves when `tools/list` changed (or may have: after lagging); `None` once the tenant
    /// is gone.
    pub async fn next(&mut self) -> Option<()> {
        loop {
            match self.0.recv().await {
                Ok(Event::ToolsListChanged) | Err(RecvError::Lagged(_)) => return Some(()),
                Ok(Event::Resources(_)) => {}
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

/// Files that came in through upload links, as a handshake-era session hears of them.
pub struct Arrivals(broadcast::Receiver<Event>);

impl Arrivals {
    /// The next arrival; after lagging, a change of the listing and every subscribed URI
    /// (`more`); `None` once the tenant is gone.
    pub async fn next(&mut self) -> Option<Arc<ResourceChange>> {
        loop {
            match self.0.recv().await {
                Ok(Event::Resources(change)) if change.through_link => return Some(change),
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => {
                    return Some(Arc::new(ResourceChange {
                        uris: Vec::new(),
                        listing_changed: true,
                        more: true,
                        through_link: true,
                    }));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

/// Publishes [`Event::ToolsListChanged`] whenever `view`'s listing (what `tools/list` says of
/// this tenant's upstreams) differs from the last one seen. The gateway wakes it on any
/// upstream's change, other tenants' included and relists that changed nothing; comparing the
/// listing keeps those from reaching this tenant's clients. Ends with the bus.
fn watch_upstreams(view: Arc<GatewayView>, events: &Arc<Events>) {
    let mut changes = view.watch();
    let stop = events.stop.clone();
    let events: Weak<Events> = Arc::downgrade(events);
    let watch = async move {
        let listing = |view: Arc<GatewayView>| async move {
            tokio::task::spawn_blocking(move || view.listing().ok())
                .await
                .ok()
                .flatten()
        };
        let mut last = listing(view.clone()).await;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = changes.changed() => if changed.is_err() { return },
            }
            let now = listing(view.clone()).await;
            if now != last {
                last = now;
                match events.upgrade() {
                    Some(events) => events.tools_list_changed(),
                    None => return,
                }
            }
        }
    };
    tokio::spawn(watch.in_current_span());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interest(uris: &[&str], resources_list: bool, tools_list: bool) -> Interest {
        Interest {
            resources_list,
            tools_list,
            uris: uris.iter().map(|u| u.to_string()).collect(),
        }
    }

    fn uris(list: &[&str]) -> Vec<String> {
        list.iter().map(|u| u.to_string()).collect()
    }

    /// The notices a listener has ready now, without waiting for more.
    async fn ready(l: &mut Listener) -> Vec<Notice> {
        let mut out = Vec::new();
        while let Ok(Some(n)) =
            tokio::time::timeout(std::time::Duration::from_millis(20), l.next()).await
        {
            out.push(n);
        }
        out
    }

    #[tokio::test]
    async fn a_listener_hears_only_what_it_asked_for() {
        let bus = Events::default();
        let mut files = bus
            .listen(interest(&["workspace:///a.txt"], false, false))
            .unwrap();
        let mut listing = bus.listen(interest(&[], true, false)).unwrap();
        let mut tools = bus.listen(interest(&[], false, true)).unwrap();
        bus.resources_changed(
            uris(&["workspace:///a.txt", "workspace:///b.txt"]),
            false,
            false,
        );
        bus.resources_changed(uris(&["workspace:///c.txt"]), true, false);
        bus.tools_list_changed();
        assert_eq!(
            ready(&mut files).await,
            [Notice::ResourceUpdated("workspace:///a.txt".into())]
        );
        assert_eq!(ready(&mut listing).await, [Notice::ResourcesListChanged]);
        assert_eq!(ready(&mut tools).await, [Notice::ToolsListChanged]);
    }

    #[tokio::test]
    async fn two_buses_never_share_an_event() {
        let (a, b) = (Events::default(), Events::default());
        let mut on_b = b
            .listen(interest(&["workspace:///a.txt"], true, true))
            .unwrap();
        a.resources_changed(uris(&["workspace:///a.txt"]), true, false);
        a.tools_list_changed();
        assert_eq!(ready(&mut on_b).await, []);
    }

    #[tokio::test]
    async fn more_files_than_named_updates_every_subscribed_uri() {
        let bus = Events::default();
        let mut l = bus
            .listen(interest(&["workspace:///x", "workspace:///y"], true, false))
            .unwrap();
        bus.resources_changed(uris(&["workspace:///other"]), false, true);
        assert_eq!(
            ready(&mut l).await,
            [
                Notice::ResourceUpdated("workspace:///x".into()),
                Notice::ResourceUpdated("workspace:///y".into()),
                Notice::ResourcesListChanged
            ]
        );
        // An event with more URIs than it may carry becomes one of those.
        let many: Vec<String> = (0..=MAX_EVENT_URIS)
            .map(|i| format!("workspace:///f{i}"))
            .collect();
        bus.resources_changed(many, false, false);
        assert_eq!(ready(&mut l).await.len(), 3);
    }

    #[tokio::test]
    async fn a_lagging_listener_is_told_everything_may_have_changed_and_blocks_no_one() {
        use futures::FutureExt;
        let bus = Events::default();
        let mut slow = bus
            .listen(interest(&["workspace:///s"], true, true))
            .unwrap();
        let mut quick = bus.listen(interest(&[], false, true)).unwrap();
        let mut quick_heard = Vec::new();
        // The publisher never waits, however far behind `slow` is; `quick` reads as it goes.
        for i in 0..CAPACITY * 3 {
            bus.resources_changed(uris(&[&format!("workspace:///f{i}")]), false, false);
            if i % CAPACITY == 0 {
                bus.tools_list_changed();
            }
            // Unconstrained: tokio's cooperative budget would otherwise make a ready receive
            // look pending after a hundred or so in one poll of this task.
            while let Some(Some(n)) = tokio::task::unconstrained(quick.next()).now_or_never() {
                quick_heard.push(n);
            }
        }
        assert_eq!(
            quick_heard,
            [const { Notice::ToolsListChanged }; 3],
            "the quick one lost nothing"
        );
        let heard = ready(&mut slow).await;
        for wanted in [
            Notice::ResourceUpdated("workspace:///s".into()),
            Notice::ResourcesListChanged,
            Notice::ToolsListChanged,
        ] {
            assert!(heard.contains(&wanted), "{wanted:?} missing from {heard:?}");
        }
    }

    #[tokio::test]
    async fn streams_and_uris_are_bounded_with_errors_that_say_what_to_do() {
        let bus = Events::default();
        let too_many: Vec<String> = (0..=MAX_URIS)
            .map(|i| format!("workspace:///{i}"))
            .collect();
        let refused = bus
            .listen(Interest {
                uris: too_many.into_iter().collect(),
                ..Default::default()
            })
            .err()
            .unwrap();
        assert_eq!(
            refused,
            ListenError::TooManyUris {
                asked: MAX_URIS + 1,
                max: MAX_URIS
            }
        );
        assert!(
            refused
                .to_string()
                .contains("split them over several streams")
        );
        let open: Vec<Listener> = (0..MAX_STREAMS)
            .map(|_| bus.listen(Interest::default()).unwrap())
            .collect();
        assert_eq!(bus.open_streams(), MAX_STREAMS);
        let refused = bus.listen(Interest::default()).err().unwrap();
        assert!(refused.to_string().contains("close one"), "{refused}");
        drop(open);
        assert_eq!(bus.open_streams(), 0);
        assert!(
            bus.listen(Interest::default()).is_ok(),
            "a closed stream frees its slot"
        );
    }

    #[tokio::test]
    async fn a_listener_ends_when_its_tenant_goes() {
        let bus = Events::default();
        let mut l = bus.listen(Interest::default()).unwrap();
        let mut t = bus.tool_changes();
        drop(bus);
        assert_eq!(l.next().await, None);
        assert_eq!(t.next().await, None);
    }

    #[tokio::test]
    async fn tool_changes_skip_workspace_events() {
        let bus = Events::default();
        let mut t = bus.tool_changes();
        bus.resources_changed(uris(&["workspace:///a"]), true, false);
        bus.tools_list_changed();
        assert_eq!(t.next().await, Some(()));
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(20), t.next())
                .await
                .is_err()
        );
    }
}
