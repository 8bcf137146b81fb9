//! Sessions in the application: `execute_code(session=…)` carries the code's variables from
//! one call to the next while every call still runs in a fresh container.
//!
//! The store on disk ([`crate::sessions`]) keeps each session's snapshot; this module adds what
//! lives only while the server runs: one call of a session at a time (a second call waits for
//! the first, its snapshot included, and then sees its state), and the container prepared for
//! the session's next call ([`crate::sandbox::Prepared`]) once a snapshot is saved. A session's
//! turn ends when its snapshot has arrived (or failed to), in the background: the caller has
//! its result before that.
//!
//! `HANDLE@N` runs a call on revision N (a rewind: its result becomes the newest revision);
//! `fork` first makes a new session whose revision 1 is the source's state, sharing its blobs,
//! and runs the call there: the source is never touched. Its first call takes the container
//! prepared for the source when that loaded the forked state; the source's is prepared again
//! after it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedMutexGuard, oneshot};
use tracing::Instrument;

use crate::app::events::Events;
use crate::sandbox::Prepared;
use crate::sandbox::run::carry::{
    Carry, Restore, SnapshotStore, SnapshotWriter, StateReport, StateVar,
};
use crate::sessions::view::{SessionView, uri};
use crate::sessions::{RevisionWriter, SessionCounts, SessionError, SessionStore};

/// What `execute_code`'s `session` argument asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionArg {
    /// `"new"`: start a session.
    New,
    /// A handle, and maybe one of its revisions (`HANDLE@N`): continue from that state.
    Continue {
        handle: String,
        revision: Option<u64>,
    },
}

impl SessionArg {
    pub fn parse(value: &str) -> Result<Self, SessionError> {
        if value == "new" {
            return Ok(SessionArg::New);
        }
        let (handle, revision) = match value.split_once('@') {
            None => (value, None),
            Some((handle, n)) => match n.parse::<u64>() {
                Ok(n) if n >= 1 => (handle, Some(n)),
                _ => {
                    return Err(SessionError::BadRevision {
                        given: crate::text::cut(value, 80),
                    });
                }
            },
        };
        Ok(SessionArg::Continue {
            handle: handle.to_string(),
            revision,
        })
    }
}

/// One session while the server runs.
#[derive(Default)]
struct Live {
    /// Held for a call and its snapshot: calls of one session run one after the other.
    turn: Arc<tokio::sync::Mutex<()>>,
    /// The container prepared for the next call, and the revision it loaded.
    prepared: Mutex<Option<(u64, Prepared)>>,
}

/// One tenant's sessions.
pub struct Sessions {
    store: Arc<SessionStore>,
    live: Mutex<HashMap<String, Arc<Live>>>,
    /// Where a new revision, a new session and expired ones are announced (`session://`).
    events: Arc<Events>,
}

impl Sessions {
    pub fn new(store: SessionStore, events: Arc<Events>) -> Self {
        Self {
            store: Arc::new(store),
            live: Mutex::default(),
            events,
        }
    }

    /// What a session holds, from its files.
    pub fn view(&self, handle: &str) -> Result<SessionView, SessionError> {
        self.store.view(handle)
    }

    /// Waits, at most `limit`, for the turn of `handle` that is running now to end. A call's
    /// result comes back before its snapshot has arrived, so a view read at once could miss
    /// the revision that result named; a call still running past `limit` is not waited for.
    pub async fn settle(&self, handle: &str, limit: std::time::Duration) {
        let turn = (self.live.lock().expect("sessions lock").get(handle)).map(|l| l.turn.clone());
        if let Some(turn) = turn {
            let _ = tokio::time::timeout(limit, turn.lock_owned()).await;
        }
    }

    /// The handles of the sessions held.
    pub fn handles(&self) -> Vec<String> {
        self.store.handles()
    }

    pub fn counts(&self) -> SessionCounts {
        let mut counts = self.store.counts();
        counts.prepared = (self.live.lock().expect("sessions lock").values())
            .filter(|l| {
                (l.prepared.lock().expect("session lock").as_ref())
                    .is_some_and(|(_, p)| p.is_ready())
            })
            .count();
        counts
    }

    fn live(&self, handle: &str) -> Arc<Live> {
        self.live
            .lock()
            .expect("sessions lock")
            .entry(handle.to_string())
            .or_default()
            .clone()
    }

    /// The requirements a session keeps (none for an unknown handle).
    pub fn packages(&self, handle: &str) -> Vec<String> {
        self.store.packages(handle)
    }

    /// Stores the requirements a session keeps.
    pub fn set_packages(&self, handle: &str, texts: &[String]) -> Result<(), SessionError> {
        self.store.set_packages(handle, texts)
    }

    /// Removes expired sessions, and ends the preparations of sessions that are gone.
    pub fn sweep(&self) {
        if self.store.expire_idle() > 0 {
            self.events.resources_changed(Vec::new(), true, false);
        }
        let on_disk: std::collections::HashSet<String> = self.store.handles().into_iter().collect();
        self.live
            .lock()
            .expect("sessions lock")
            .retain(|handle, live| {
                let keep = on_disk.contains(handle);
                if !keep && let Some((_, p)) = live.prepared.lock().expect("session lock").take() {
                    p.cancel();
                }
                keep
            });
    }

    /// The outcomes of the plan made by the call that produced `handle`'s revision `n` (for
    /// `plan_results()`), if it made one.
    pub fn plan_results(&self, handle: &str, n: u64) -> Option<serde_json::Value> {
        (n > 0).then(|| crate::host::blocking_here(|| self.store.plan_results(handle, n)))?
    }

    /// Keeps the outcomes of the plan made by the call that produced `handle`'s revision `n`.
    pub async fn keep_plan_results(&self, handle: String, n: u64, value: serde_json::Value) {
        let store = self.store.clone();
        let kept = tokio::task::spawn_blocking(move || store.save_plan_results(&handle, n, &value));
        if let Ok(Err(e)) = kept.await {
            tracing::warn!("a plan's outcomes could not be kept for the session's next call: {e}");
        }
    }

    /// Begins a call of a session: a new one, the one `arg` names (waiting for a call of it
    /// already running), or, with `fork`, a new one made from it. The turn holds the session
    /// until [`Turn::finish`].
    pub async fn begin(&self, arg: SessionArg, fork: bool) -> Result<Turn, SessionError> {
        let store = self.store.clone();
        let (mut forked_from, mut created) = (None, false);
        let mut handed = None;
        let (handle, revision) = match (arg, fork) {
            (SessionArg::New, true) => return Err(SessionError::ForkOfNew),
            (SessionArg::New, false) => {
                let store = store.clone();
                let handle = crate::host::blocking_here(move || {
                    store.expire_idle();
                    store.create()
                })?;
                created = true;
                (handle, None)
            }
            (SessionArg::Continue { handle, revision }, true) => {
                // After the source's call under way, its snapshot included.
                let source = self.live(&handle);
                let _source_turn = source.turn.clone().lock_owned().await;
                let store = store.clone();
                let source_handle = handle.clone();
                let (forked, from) = crate::host::blocking_here(move || {
                    store.expire_idle();
                    store.fork(&source_handle, revision)
                })?;
                handed = hand_over(&source, &handle, &from);
                forked_from = Some(from);
                (forked, None)
            }
            (SessionArg::Continue { handle, revision }, false) => (handle, revision),
        };
        if forked_from.is_some() || created {
            // A session that was not there before this call: the listing changed.
            self.events
                .resources_changed(vec![uri(&handle)], true, false);
        }
        let live = self.live(&handle);
        let guard = live.turn.clone().lock_owned().await;
        // Checked once the turn is ours: the call before may have been the last of it.
        let opened = crate::host::blocking_here(|| self.store.open_turn(&handle, revision));
        let (newest, next) = match opened {
            Ok(numbers) => numbers,
            // The session is gone: so are its container and its place here. (Calls waiting
            // for this turn find it gone too.)
            Err(e @ (SessionError::Unknown { .. } | SessionError::Expired { .. })) => {
                if let Some((_, p)) = live.prepared.lock().expect("session lock").take() {
                    p.cancel();
                }
                self.live.lock().expect("sessions lock").remove(&handle);
                cancel_handed(handed);
                return Err(e);
            }
            Err(e) => {
                cancel_handed(handed);
                return Err(e);
            }
        };
        let prepared = live.prepared.lock().expect("session lock").take();
        let (prepared, source) = match handed {
            Some((p, source)) => (Some((FORK_REVISION, p)), Some(source)),
            None => (prepared, None),
        };
        Ok(Turn {
            handle,
            revision: revision.unwrap_or(newest),
            next,
            forked_from,
            events: self.events.clone(),
            store,
            live,
            guard,
            prepared,
            source,
        })
    }
}

/// The revision a fork starts from: its first, the source's state.
const FORK_REVISION: u64 = 1;

/// The source's container prepared with the state a fork was just made from (`from`,
/// `HANDLE@N`), taken for the fork's first call: it loaded that very state, so the fork's
/// first call is as quick as a session's next. The source gets another once the fork's call
/// has ended ([`Turn::finish`]).
fn hand_over(source: &Arc<Live>, handle: &str, from: &str) -> Option<(Prepared, Source)> {
    let revision: u64 = from.rsplit_once('@')?.1.parse().ok()?;
    let mut prepared = source.prepared.lock().expect("session lock");
    let (_, p) = prepared.take_if(|(r, _)| *r == revision)?;
    let again = Source {
        live: source.clone(),
        handle: handle.to_string(),
        revision,
        package_set: p.package_set.clone(),
    };
    Some((p, again))
}

/// Removes the container a fork took from its source, when the fork's call cannot begin.
fn cancel_handed(handed: Option<(Prepared, Source)>) {
    if let Some((p, _)) = handed {
        p.cancel();
    }
}

/// A session whose prepared container a fork took: prepared again after the fork's call.
struct Source {
    live: Arc<Live>,
    handle: String,
    revision: u64,
    package_set: Option<String>,
}

/// One call's hold on its session.
pub struct Turn {
    pub handle: String,
    /// The revision the call starts from (0: the session has none yet).
    pub revision: u64,
    /// The number its snapshot gets when saved.
    pub next: u64,
    /// `HANDLE@N`, when this session was made for this call as a fork of it.
    pub forked_from: Option<String>,
    events: Arc<Events>,
    store: Arc<SessionStore>,
    live: Arc<Live>,
    guard: OwnedMutexGuard<()>,
    prepared: Option<(u64, Prepared)>,
    /// The source of a fork whose prepared container this turn took.
    source: Option<Source>,
}

impl Turn {
    /// What the job carries, and the signal of its snapshot (if one is taken). A container
    /// prepared with another revision or package set than the call's is not used.
    pub fn carry(&mut self, package_set: Option<&str>) -> (Carry, Saved) {
        let fits = |(revision, p): &(u64, Prepared)| {
            *revision == self.revision && p.package_set.as_deref() == package_set
        };
        if !self.prepared.as_ref().is_none_or(fits)
            && let Some((_, p)) = self.prepared.take()
        {
            p.cancel();
        }
        let (tx, rx) = oneshot::channel();
        let store = Arc::new(TurnStore {
            store: self.store.clone(),
            handle: self.handle.clone(),
            revision: self.revision,
            next: self.next,
            saved: Mutex::new(Some(tx)),
            events: Some(self.events.clone()),
        });
        let carry = Carry {
            store: store.clone(),
            max_bytes: self.store.limits().max_bytes,
            prepared: self.prepared.as_ref().map(|(_, p)| p.clone()),
        };
        (carry, Saved { store, rx })
    }

    /// Ends a turn whose call did not run: its prepared container is removed, and the next
    /// call of the session may start.
    pub fn abandon(self) {
        let Some((_, prepared)) = self.prepared else {
            return;
        };
        // A fork's source gets back the container this turn took from it, when no call of
        // the source runs and its state is still the one the container loaded.
        if let Some(source) = self.source
            && let Ok(_turn) = source.live.turn.clone().try_lock_owned()
            && crate::host::blocking_here(|| self.store.newest(&source.handle))
                .is_ok_and(|n| n == source.revision)
        {
            let mut theirs = source.live.prepared.lock().expect("session lock");
            if theirs.is_none() {
                *theirs = Some((source.revision, prepared));
                return;
            }
        }
        prepared.cancel();
    }

    /// Ends the turn once the snapshot has arrived (in the background): prepares the
    /// session's next container when it was saved, then lets the next call in.
    pub fn finish(
        self,
        saved: Saved,
        sandbox: Arc<crate::sandbox::Sandbox>,
        package_set: Option<String>,
    ) {
        let Turn {
            handle,
            store,
            live,
            guard,
            prepared,
            source,
            ..
        } = self;
        // Taken by the call, or left unused (the call ran elsewhere): either way it is done.
        if let Some((_, prepared)) = prepared {
            prepared.cancel();
        }
        let taken = saved.store.taken();
        let again = source.map(|source| {
            let reader = Arc::new(TurnStore {
                store: store.clone(),
                handle: source.handle,
                revision: source.revision,
                next: 0,
                saved: Mutex::new(None),
                events: None,
            });
            (sandbox.clone(), source.live, reader, source.package_set)
        });
        let own = async move {
            if !taken {
                drop(guard);
                return;
            }
            let revision = match saved.rx.await {
                Ok(Ok(revision)) => revision,
                Ok(Err(reason)) => {
                    tracing::warn!("a session's snapshot was not saved: {reason}");
                    return drop(guard);
                }
                Err(_) => {
                    tracing::warn!("a session's snapshot was abandoned");
                    return drop(guard);
                }
            };
            let reader = Arc::new(TurnStore {
                store,
                handle,
                revision,
                next: 0,
                saved: Mutex::new(None),
                events: None,
            });
            let next = sandbox.prepare(reader.clone(), package_set.clone());
            let paused = next.is_none();
            let replaced = std::mem::replace(
                &mut *live.prepared.lock().expect("session lock"),
                next.map(|p| (revision, p)),
            );
            // One a fork's abandoned call gave back meanwhile: of an older revision now.
            if let Some((_, old)) = replaced {
                old.cancel();
            }
            drop(guard);
            if paused {
                prepare_when_calm(sandbox, live, reader, package_set).await;
            }
        };
        let ending = async move {
            own.await;
            // Then the fork's source, whose prepared container this call took.
            if let Some((sandbox, live, reader, package_set)) = again {
                prepare_when_calm(sandbox, live, reader, package_set).await;
            }
        };
        tokio::spawn(ending.in_current_span());
    }
}

/// Longest a preparation paused by pressure on the pool waits for it to end.
const CALM_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Prepares the session's next container once the pool is calm again, unless a call of the
/// session came first (it loads the state itself) or the state moved on meanwhile.
async fn prepare_when_calm(
    sandbox: Arc<crate::sandbox::Sandbox>,
    live: Arc<Live>,
    reader: Arc<TurnStore>,
    package_set: Option<String>,
) {
    if !sandbox.calm(CALM_WAIT).await {
        return;
    }
    let Ok(_turn) = live.turn.clone().try_lock_owned() else {
        return;
    };
    let newest = crate::host::blocking_here(|| reader.store.newest(&reader.handle))
        .is_ok_and(|n| n == reader.revision);
    let mut prepared = live.prepared.lock().expect("session lock");
    if newest && prepared.is_none() {
        let revision = reader.revision;
        *prepared = sandbox.prepare(reader, package_set).map(|p| (revision, p));
    }
}

/// The signal that a call's snapshot was saved (its revision) or not (why).
pub struct Saved {
    store: Arc<TurnStore>,
    rx: oneshot::Receiver<Result<u64, String>>,
}

/// The report for a call whose harness said nothing of its state (it timed out, ran out of
/// memory, or was cancelled): the session keeps its previous state.
pub fn unsaved(status: &str) -> StateReport {
    StateReport {
        saved: false,
        reason: Some(format!(
            "the execution ended without a snapshot ({status}): the session keeps the state it had before this call"
        )),
        ..StateReport::default()
    }
}

/// A turn's view of the store, as the sandbox sees it: the revision to load, and the next.
struct TurnStore {
    store: Arc<SessionStore>,
    handle: String,
    /// The revision loaded (0: none).
    revision: u64,
    /// The number the snapshot gets (a turn's: 0 for a preparation, which saves none).
    next: u64,
    /// Taken by the first [`SnapshotStore::next`].
    saved: Mutex<Option<oneshot::Sender<Result<u64, String>>>>,
    /// Where the new revision is announced.
    events: Option<Arc<Events>>,
}

impl TurnStore {
    /// Whether a writer was handed out (so a snapshot is on its way).
    fn taken(&self) -> bool {
        self.saved.lock().expect("turn lock").is_none()
    }

    fn loaded(&self) -> std::io::Result<Option<crate::sessions::revisions::Manifest>> {
        if self.revision == 0 {
            return Ok(None);
        }
        (self.store)
            .manifest(&self.handle, Some(self.revision))
            .map_err(std::io::Error::other)
    }
}

impl SnapshotStore for TurnStore {
    fn restore(&self) -> std::io::Result<Option<Restore>> {
        let Some(manifest) = self.loaded()? else {
            return Ok(None);
        };
        let vars = (manifest.vars.iter()).map(|v| StateVar {
            name: v.name.clone(),
            blob: v.blob.clone(),
            sizes: v.sizes.clone(),
        });
        let files = (manifest.vars.iter())
            .filter_map(|v| Some((v.blob.clone(), self.store.blob_path(&v.blob)?)));
        Ok(Some(Restore {
            modules: manifest.modules,
            vars: vars.collect(),
            files: files.collect(),
        }))
    }

    fn next(&self) -> std::io::Result<Box<dyn SnapshotWriter>> {
        let tx = self
            .saved
            .lock()
            .expect("turn lock")
            .take()
            .ok_or_else(|| std::io::Error::other("this call's snapshot is already on its way"))?;
        let writer = (self.store)
            .writer(&self.handle, self.loaded()?, self.next)
            .map_err(std::io::Error::other)?;
        let announce = (self.events.clone()).map(|events| (events, uri(&self.handle)));
        Ok(Box::new(TurnWriter {
            writer,
            tx,
            announce,
        }))
    }
}

struct TurnWriter {
    writer: RevisionWriter,
    tx: oneshot::Sender<Result<u64, String>>,
    /// The bus and the session's URI, told of the new revision.
    announce: Option<(Arc<Events>, String)>,
}

impl SnapshotWriter for TurnWriter {
    fn blob(&mut self, bytes: u64) -> std::io::Result<()> {
        self.writer.blob(bytes)
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer.write(bytes)
    }

    fn commit(self: Box<Self>, manifest: serde_json::Value) -> std::io::Result<()> {
        let TurnWriter {
            writer,
            tx,
            announce,
        } = *self;
        match writer.commit(manifest) {
            Ok(saved) => {
                if let Some((events, uri)) = announce {
                    events.resources_changed(vec![uri], false, false);
                }
                let _ = tx.send(Ok(saved.revision));
                Ok(())
            }
            Err(e) => {
                let _ = tx.send(Err(e.to_string()));
                Err(e)
            }
        }
    }

    fn abort(self: Box<Self>, reason: String) {
        let TurnWriter { writer, tx, .. } = *self;
        crate::host::blocking_here(|| writer.abort(reason.clone()));
        let _ = tx.send(Err(reason));
    }
}
