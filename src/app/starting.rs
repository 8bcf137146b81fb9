//! A server that answers while it starts. Building the sandbox image on a first start takes
//! minutes and copying its tree seconds, but a client gives `initialize` and `server/discover`
//! a few seconds before it gives up on the server. So a start makes only the checks that need
//! no engine before the transport serves (a bad flag still stops the process at once), and the
//! rest runs in a task of its own.
//!
//! The starts are three, each a task: the one app's ([`App::begin`]: stdio, and HTTP without
//! tokens), what tenants share ([`Shared::begin`]: HTTP with tokens), and a tenant's
//! ([`App::begin_tenant`]: the shared start, then the tenant's opening).
//!
//! [`Starting`] is how the rest of the server sees that task: what it is doing now, since when
//! and about how long is left ([`StartState::Working`]), what it made once it is ready (an
//! [`App`], or the [`Shared`](crate::app::Shared) part tenants open over), or why it could not
//! start. [`Progress`] is the task's side: each step it enters is logged on stderr and shown to
//! whoever asks; a tenant's start shows the shared start's steps while it waits for it
//! ([`Progress::follow`]).
//!
//! A server told to stop while it starts asks the start to stop too ([`Starting::cancel`]): it
//! stops where stopping leaves nothing behind, at the next step it enters or at once in work
//! that the engine drops with its client (connecting, building the image). The tree copy
//! stops at once too, removing its container and its partial copy
//! ([`Progress::stop_signal`]); the limits' probes, a few seconds each, end first, so that no
//! container outlives the server. A stop waits for them at most [`STOP_WAIT`].

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use tracing::Instrument;

use crate::app::{App, Shared, StartError};
use crate::config::Config;

/// How long a server that stops waits for a start it asked to stop: the step it is in ends
/// first (a probe of the engine's limits: about 5 s, longer on a loaded machine).
pub const STOP_WAIT: Duration = Duration::from_secs(30);

/// How long opening a tenant usually takes (its workspace, skills, vault and pool).
pub(super) const OPEN_TENANT: std::time::Duration = std::time::Duration::from_secs(1);

/// One step of a start: what the server is doing, since when, and how long it usually takes.
#[derive(Debug, Clone)]
pub struct Step {
    pub what: &'static str,
    pub since: Instant,
    /// How long this step usually takes on the machine it was measured on.
    pub usual: Duration,
    /// What the steps after this one usually take together.
    pub after: Duration,
}

impl Step {
    /// About how long is left: what this step usually takes beyond the time it has had (at
    /// least a few seconds while it runs), and the steps after it.
    pub fn left(&self) -> Duration {
        let this = self.usual.saturating_sub(self.since.elapsed());
        this.max(Duration::from_secs(2)) + self.after
    }
}

/// Where a start is; `T` is what it makes (the [`App`] of a server without tenants).
#[derive(Clone)]
pub enum StartState<T = Arc<App>> {
    Working(Step),
    Ready(T),
    /// Why it stopped; the message says what to change.
    Failed(Arc<StartError>),
}

impl<T> StartState<T> {
    /// The same state, with what a ready start made turned into `f`'s.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> StartState<U> {
        match self {
            StartState::Working(step) => StartState::Working(step),
            StartState::Ready(made) => StartState::Ready(f(made)),
            StartState::Failed(e) => StartState::Failed(e),
        }
    }
}

/// The start as the transports and the tools see it.
#[derive(Clone)]
pub struct Starting<T = Arc<App>> {
    state: watch::Receiver<StartState<T>>,
    began: Instant,
    /// Whether the configuration names upstream MCP servers, whose tools change the listing
    /// once the start has opened them.
    upstreams: bool,
    /// Asks the starting task to stop.
    stop: CancellationToken,
}

impl Starting<Arc<App>> {
    /// A start that is already over: an `App` started by [`App::start`].
    pub fn ready(app: Arc<App>) -> Self {
        let upstreams = app.config().gateway.upstreams.is_some();
        let (_, state) = watch::channel(StartState::Ready(app));
        Self {
            state,
            began: Instant::now(),
            upstreams,
            stop: CancellationToken::new(),
        }
    }
}

impl<T: Clone> Starting<T> {
    /// [`Starting::upstreams`] as the configuration says.
    pub fn with_upstreams(mut self, upstreams: bool) -> Self {
        self.upstreams = upstreams;
        self
    }

    /// Whether the configuration names upstream MCP servers: without them the tool listing
    /// is the same before and after the start.
    pub fn upstreams(&self) -> bool {
        self.upstreams
    }

    /// Where the start is now.
    pub fn now(&self) -> StartState<T> {
        self.state.borrow().clone()
    }

    /// When the server began to start.
    pub fn began(&self) -> Instant {
        self.began
    }

    /// What the start made once it is ready, or why it is not: the step still running after
    /// `limit`, or the start's failure.
    pub async fn wait(&self, limit: Duration) -> StartState<T> {
        match tokio::time::timeout(limit, self.finished()).await {
            Ok(Ok(made)) => StartState::Ready(made),
            Ok(Err(e)) => StartState::Failed(e),
            Err(_) => self.now(),
        }
    }

    /// What the start made, or why it failed, however long that takes.
    pub async fn finished(&self) -> Result<T, Arc<StartError>> {
        let mut state = self.state.clone();
        let settled = state
            .wait_for(|s| !matches!(s, StartState::Working(_)))
            .await
            .map(|s| s.clone());
        match settled {
            Ok(StartState::Ready(made)) => Ok(made),
            Ok(StartState::Failed(e)) => Err(e),
            // The task ended without saying how: it panicked, which its log shows.
            Ok(StartState::Working(_)) | Err(_) => Err(Arc::new(StartError::Interrupted)),
        }
    }

    /// Asks the start to stop (a server that stops), and returns at once.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Asks the start to stop, and waits up to [`STOP_WAIT`] for it to end either way: what it
    /// ended as. A start that had ended is as it was: what it made is the caller's to shut
    /// down.
    pub async fn cancel(&self) -> StartState<T> {
        self.stop();
        self.wait(STOP_WAIT).await
    }
}

/// The starting task's side: it names each step as it enters it.
pub struct Progress<T = Arc<App>> {
    state: Option<watch::Sender<StartState<T>>>,
    stop: CancellationToken,
}

impl<T: Clone> Progress<T> {
    /// A start that reports to no one (the tests' `App::start`) and is never asked to stop.
    pub fn silent() -> Self {
        Self {
            state: None,
            stop: CancellationToken::new(),
        }
    }

    /// A start whose steps the returned [`Starting`] shows.
    pub fn new(first: &'static str) -> (Self, Starting<T>) {
        let step = Step {
            what: first,
            since: Instant::now(),
            usual: Duration::ZERO,
            after: Duration::ZERO,
        };
        let (tx, rx) = watch::channel(StartState::Working(step));
        let stop = CancellationToken::new();
        let starting = Starting {
            state: rx,
            began: Instant::now(),
            upstreams: false,
            stop: stop.clone(),
        };
        let progress = Self {
            state: Some(tx),
            stop,
        };
        (progress, starting)
    }

    /// Enters a step that usually takes `usual`, followed by steps that take `after`; or,
    /// once the start was asked to stop, stops it here instead.
    pub fn step(
        &self,
        what: &'static str,
        usual: Duration,
        after: Duration,
    ) -> Result<(), StartError> {
        if self.stop.is_cancelled() {
            return Err(StartError::Cancelled);
        }
        if self.state.is_none() {
            return Ok(());
        }
        if usual >= Duration::from_secs(5) {
            tracing::info!(
                "starting: {what} (usually about {} s); the server answers meanwhile",
                usual.as_secs()
            );
        } else {
            tracing::debug!("starting: {what}");
        }
        self.show(Step {
            what,
            since: Instant::now(),
            usual,
            after,
        });
        Ok(())
    }

    /// Cancelled once the start is asked to stop: for a step that stops in its own way,
    /// removing what it made ([`Progress::unless_stopped`] only drops its work).
    pub fn stop_signal(&self) -> &CancellationToken {
        &self.stop
    }

    fn show(&self, step: Step) {
        if let Some(state) = &self.state {
            state.send_replace(StartState::Working(step));
        }
    }

    /// `work`, unless the start is asked to stop first. Only for work that leaves nothing
    /// behind when it is dropped (a connection, an image build the engine drops with its
    /// client).
    pub async fn unless_stopped<R>(
        &self,
        work: impl Future<Output = Result<R, StartError>>,
    ) -> Result<R, StartError> {
        tokio::select! {
            biased;
            () = self.stop.cancelled() => Err(StartError::Cancelled),
            done = work => done,
        }
    }

    /// Waits for `other`, the start this one goes on from, showing its steps as this start's
    /// (with `after` added for what follows): what it made, or why it did not.
    pub async fn follow<U: Clone>(
        &self,
        other: &Starting<U>,
        after: Duration,
    ) -> Result<U, Arc<StartError>> {
        let mut state = other.state.clone();
        loop {
            let now = state.borrow_and_update().clone();
            match now {
                StartState::Ready(made) => return Ok(made),
                StartState::Failed(e) => return Err(e),
                StartState::Working(step) => self.show(Step {
                    after: step.after + after,
                    ..step
                }),
            }
            tokio::select! {
                () = self.stop.cancelled() => return Err(Arc::new(StartError::Cancelled)),
                changed = state.changed() => {
                    if changed.is_err() {
                        return Err(Arc::new(StartError::Interrupted));
                    }
                }
            }
        }
    }

    /// The end of the start, either way. A failure is logged here, but for a tenant's, whose
    /// start logged the cause with the tenant's name, and a stop, which is no failure.
    pub fn finish(self, result: Result<T, StartError>) {
        let Some(state) = self.state else { return };
        let end = match result {
            Ok(made) => StartState::Ready(made),
            Err(e) => {
                match e {
                    StartError::Cancelled => tracing::info!("the start stopped: {e}"),
                    StartError::TenantUnavailable => {}
                    _ => tracing::error!("cannot start: {e}"),
                }
                StartState::Failed(Arc::new(e))
            }
        };
        state.send_replace(end);
    }
}

/// The starts that run in the background.
impl App {
    /// [`App::start`] in a task of its own, after the checks that need no engine
    /// ([`Shared::check`]): a transport serves the returned [`Starting`] at once, so a client's
    /// handshake is answered while the image is built or its tree copied.
    pub fn begin(config: Config) -> Result<Starting, StartError> {
        Shared::check(&config)?;
        let (progress, starting) = Progress::new("connecting to the engine");
        let starting = starting.with_upstreams(config.gateway.upstreams.is_some());
        let start = async move {
            let result = Self::start_reporting(config, &progress).await;
            progress.finish(result.map(Arc::new));
        };
        tokio::spawn(start.in_current_span());
        Ok(starting)
    }

    /// Tenant `name`'s start in a task of its own, on a server whose shared part may still be
    /// starting: it waits for `shared` (showing its steps), then [`App::open`]s the tenant. So
    /// a tenant's first request is answered while the server starts ([`crate::mcp::Front`]).
    /// A failure's cause names the server's paths: it is logged, and the tenant is told it
    /// could not be opened ([`StartError::TenantUnavailable`]), or that the server could not
    /// start.
    pub fn begin_tenant(shared: &Starting<Arc<Shared>>, name: &str) -> Starting {
        let (progress, starting) =
            Progress::new("opening the tenant's workspace, skills and sandbox pool");
        let upstreams = shared.upstreams();
        let shared = shared.clone();
        let name = name.to_string();
        let start = async move {
            let result = async {
                let shared = match progress.follow(&shared, OPEN_TENANT).await {
                    Ok(shared) => shared,
                    Err(e) if matches!(*e, StartError::Cancelled) => {
                        return Err(StartError::Cancelled);
                    }
                    Err(_) => return Err(StartError::ServerUnavailable),
                };
                progress.step(
                    "opening the tenant's workspace, skills and sandbox pool",
                    OPEN_TENANT,
                    Duration::ZERO,
                )?;
                let dirs = shared.config.storage.tenant_dirs(&name);
                Self::open(shared, dirs, Some(&name)).await.map_err(|e| {
                    tracing::error!("cannot open tenant {name}: {e}");
                    StartError::TenantUnavailable
                })
            };
            let result = result.await;
            progress.finish(result.map(Arc::new));
        };
        // Not in the span of the request that began it: the tenant's own span is App::open's.
        tokio::spawn(start);
        starting.with_upstreams(upstreams)
    }
}

impl Shared {
    /// [`Shared::start`] in a task of its own, after [`Shared::check`]: the start of a server
    /// with tenants, which serves the returned [`Starting`] at once and opens each tenant over
    /// it ([`App::begin_tenant`]).
    pub fn begin(config: Config) -> Result<Starting<Arc<Self>>, StartError> {
        Self::check(&config)?;
        let upstreams = config.gateway.upstreams.is_some();
        let (progress, starting) = Progress::new("connecting to the engine");
        let start = async move {
            let result = Self::start_reporting(config, &progress).await;
            progress.finish(result);
        };
        tokio::spawn(start.in_current_span());
        Ok(starting.with_upstreams(upstreams))
    }
}
