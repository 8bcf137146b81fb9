//! A server that answers while it starts. Building the sandbox image on a first start takes
//! minutes and copying its tree seconds, but a client gives `initialize` and `server/discover`
//! a few seconds before it gives up on the server. So [`App::begin`](crate::app::App::begin)
//! makes only the checks that need no engine before the transport serves (a bad flag still
//! stops the process at once), and the rest of the start runs in a task of its own.
//!
//! [`Starting`] is how the rest of the server sees that task: what it is doing now, since when
//! and about how long is left ([`StartState::Working`]), the [`App`] once it is ready, or why it
//! could not start. [`Progress`] is the task's side: each step it enters is logged on stderr
//! and shown to whoever asks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::app::{App, StartError};

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

/// Where a start is.
#[derive(Clone)]
pub enum StartState {
    Working(Step),
    Ready(Arc<App>),
    /// Why it stopped; the message says what to change.
    Failed(Arc<StartError>),
}

/// The start as the transports and the tools see it.
#[derive(Clone)]
pub struct Starting {
    state: watch::Receiver<StartState>,
    began: Instant,
    /// Whether the configuration names upstream MCP servers, whose tools change the listing
    /// once the start has opened them.
    upstreams: bool,
}

impl Starting {
    /// A start that is already over: an `App` started by [`App::start`].
    pub fn ready(app: Arc<App>) -> Self {
        let upstreams = app.config().gateway.upstreams.is_some();
        let (_, state) = watch::channel(StartState::Ready(app));
        Self {
            state,
            began: Instant::now(),
            upstreams,
        }
    }

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
    pub fn now(&self) -> StartState {
        self.state.borrow().clone()
    }

    /// When the server began to start.
    pub fn began(&self) -> Instant {
        self.began
    }

    /// The app once it is ready, or why it is not: the step still running after `limit`, or
    /// the start's failure.
    pub async fn wait(&self, limit: Duration) -> StartState {
        match tokio::time::timeout(limit, self.finished()).await {
            Ok(Ok(app)) => StartState::Ready(app),
            Ok(Err(e)) => StartState::Failed(e),
            Err(_) => self.now(),
        }
    }

    /// The app, or why the start failed, however long that takes.
    pub async fn finished(&self) -> Result<Arc<App>, Arc<StartError>> {
        let mut state = self.state.clone();
        let settled = state
            .wait_for(|s| !matches!(s, StartState::Working(_)))
            .await
            .map(|s| s.clone());
        match settled {
            Ok(StartState::Ready(app)) => Ok(app),
            Ok(StartState::Failed(e)) => Err(e),
            // The task ended without saying how: it panicked, which its log shows.
            Ok(StartState::Working(_)) | Err(_) => Err(Arc::new(StartError::Interrupted)),
        }
    }
}

/// The starting task's side: it names each step as it enters it.
pub struct Progress {
    state: Option<watch::Sender<StartState>>,
}

impl Progress {
    /// A start that reports to no one (the tests' and the tenants' `App::start`).
    pub fn silent() -> Self {
        Self { state: None }
    }

    /// A start whose steps the returned [`Starting`] shows.
    pub fn new(first: &'static str) -> (Self, Starting) {
        let step = Step {
            what: first,
            since: Instant::now(),
            usual: Duration::ZERO,
            after: Duration::ZERO,
        };
        let (tx, rx) = watch::channel(StartState::Working(step));
        let starting = Starting {
            state: rx,
            began: Instant::now(),
            upstreams: false,
        };
        (Self { state: Some(tx) }, starting)
    }

    /// Enters a step that usually takes `usual`, followed by steps that take `after`.
    pub fn step(&self, what: &'static str, usual: Duration, after: Duration) {
        let Some(state) = &self.state else { return };
        if usual >= Duration::from_secs(5) {
            tracing::info!(
                "starting: {what} (usually about {} s); the server answers meanwhile",
                usual.as_secs()
            );
        } else {
            tracing::debug!("starting: {what}");
        }
        state.send_replace(StartState::Working(Step {
            what,
            since: Instant::now(),
            usual,
            after,
        }));
    }

    /// The end of the start, either way.
    pub fn finish(self, result: Result<Arc<App>, StartError>) {
        let Some(state) = self.state else { return };
        let end = match result {
            Ok(app) => StartState::Ready(app),
            Err(e) => {
                tracing::error!("cannot start: {e}");
                StartState::Failed(Arc::new(e))
            }
        };
        state.send_replace(end);
    }
}
