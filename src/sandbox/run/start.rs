//! Step 1 of an execution: a container ready for its job. Created, attached and started under a
//! [`ContainerGuard`] that removes it on every path (including a dropped future), or taken from
//! the pool already started; then sent its job, all within the start deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant as TokioInstant;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::sandbox::cleanup::removal::{self, Removals};
use crate::sandbox::container::runtime::RuntimeKind;
use crate::sandbox::container::spec::SandboxSpec;
use crate::sandbox::engine::backend::{Backend, InputSink, OutputStream};
use crate::sandbox::engine::error::EngineError;
use crate::sandbox::run::channel::ToHarness;
use crate::sandbox::run::{Job, Runner};
use crate::sandbox::stats::{Phase, Stats};

/// What a container's guard needs to remove it: the task tracker shutdown waits on, the
/// stats its removal is timed in, and the backlog a stopped container may wait in.
#[derive(Clone)]
pub(crate) struct Cleanup {
    pub tracker: TaskTracker,
    pub stats: Arc<Stats>,
    pub removals: Arc<Removals>,
}

/// Removes its container when dropped: at once, in the background, tracked so shutdown can
/// wait; or, once [`ContainerGuard::ended`] says every process of it has ended, through the
/// removal backlog ([`Removals`]).
pub(crate) struct ContainerGuard {
    backend: Arc<dyn Backend>,
    id: String,
    cleanup: Cleanup,
    /// Whether the engine answered the create. A create abandoned half-way (its execution
    /// timed out or was cancelled) may still land after a first removal found nothing, so
    /// then the removal is repeated for a few seconds.
    created: bool,
    /// The container's output ended after its execution: nothing in it runs any more.
    ended: bool,
    /// The container's state directory on the host, removed with it.
    state_dir: Option<std::path::PathBuf>,
    /// The container's egress directory on the host, removed with it.
    egress_dir: Option<std::path::PathBuf>,
}

impl ContainerGuard {
    pub(crate) fn new(backend: Arc<dyn Backend>, id: String, cleanup: Cleanup) -> Self {
        Self {
            backend,
            id,
            cleanup,
            created: false,
            ended: false,
            state_dir: None,
            egress_dir: None,
        }
    }

    /// Drops the guard of a container whose processes have all ended: its removal may wait
    /// for an idle engine.
    pub(crate) fn ended(mut self) {
        self.ended = true;
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        for dir in [self.state_dir.take(), self.egress_dir.take()]
            .into_iter()
            .flatten()
        {
            crate::sandbox::container::state_dir::remove(&dir);
        }
        let id = std::mem::take(&mut self.id);
        let cleanup = &self.cleanup;
        if self.created && self.ended && cleanup.removals.defers() {
            cleanup.removals.defer(id, cleanup.stats.clone());
            return;
        }
        let (backend, stats) = (self.backend.clone(), cleanup.stats.clone());
        let created = self.created;
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            cleanup.tracker.spawn_on(
                async move {
                    if !created {
                        // Removing a name the engine does not know (yet) succeeds: repeat it.
                        for delay in [0, 1, 2, 4] {
                            tokio::time::sleep(Duration::from_secs(delay)).await;
                            let _ = backend.remove(&id).await;
                        }
                    }
                    removal::remove(backend.as_ref(), &id, &stats).await;
                }
                .in_current_span(),
                &handle,
            );
        }
    }
}

/// A created, attached and started container whose harness waits for its job. Dropping it
/// removes the container.
pub(crate) struct Started {
    pub(super) name: String,
    pub(super) output: OutputStream,
    pub(crate) input: InputSink,
    pub(super) guard: ContainerGuard,
    /// A session's state is loaded in it already (a prepared container).
    pub(crate) loaded: bool,
    /// Its state directory on the host, where a session's blobs are linked.
    pub(crate) state_dir: Option<std::path::PathBuf>,
    /// Its egress directory on the host, where an execution's proxy socket is bound.
    pub(crate) egress_dir: Option<std::path::PathBuf>,
    /// The proxy socket of the execution it was handed, while that execution runs.
    pub(crate) listening: Option<crate::sandbox::run::egress::Listening>,
}

/// The frames a container announces itself with before its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Announcement {
    /// The interpreter and its preload are ready.
    Ready,
    /// A session's state is loaded.
    Loaded,
}

impl Started {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// False when the container has already ended or printed before its job: it must not be
    /// used (a pooled container is checked this way before it is handed out).
    pub(crate) fn is_waiting(&mut self) -> bool {
        self.output.next().now_or_never().is_none()
    }

    /// Waits for the harness to send `what` as its next frame (stderr before it is ignored).
    /// Anything else, or more after it, means the container cannot be trusted with a job.
    pub(crate) async fn announced(&mut self, what: Announcement) -> Result<(), EngineError> {
        let broken = |message: String| EngineError::Api {
            action: "prepare a sandbox container",
            message,
        };
        let mut line = Vec::new();
        while !line.ends_with(b"\n") {
            match self.output.next().await {
                None => return Err(broken("it ended before it was ready".into())),
                Some(Err(e)) => return Err(e),
                Some(Ok(crate::sandbox::engine::backend::Output::Stderr(_))) => continue,
                Some(Ok(crate::sandbox::engine::backend::Output::Stdout(bytes))) => {
                    line.extend_from_slice(&bytes);
                    if line.len() > 4096 {
                        return Err(broken("it wrote more than a ready frame".into()));
                    }
                }
            }
        }
        let frame = crate::sandbox::run::channel::parse_frame(&line[..line.len() - 1]);
        match (what, frame) {
            (Announcement::Ready, Some(crate::sandbox::run::channel::FromHarness::Ready))
            | (Announcement::Loaded, Some(crate::sandbox::run::channel::FromHarness::Loaded)) => {
                Ok(())
            }
            (_, Some(crate::sandbox::run::channel::FromHarness::Done(done))) => Err(broken(
                format!("it failed: {}", done.error.unwrap_or_default()),
            )),
            _ => Err(broken(format!(
                "it sent {} instead of its {what:?} frame",
                String::from_utf8_lossy(&line[..line.len().min(200)])
            ))),
        }
    }
}

/// Creates, attaches and starts a container made from `spec`. The guard comes first and
/// works by name: a create the engine carried out but whose answer was lost is still removed.
pub(crate) async fn start(
    backend: &Arc<dyn Backend>,
    spec: &SandboxSpec,
    name: &str,
    cleanup: &Cleanup,
) -> Result<Started, EngineError> {
    let stats = &cleanup.stats;
    let mut guard = ContainerGuard::new(backend.clone(), name.to_string(), cleanup.clone());
    let without_state;
    let spec = match &spec.state {
        Some(dir) => match crate::host::blocking_here(|| dir.create()) {
            Ok(()) => {
                guard.state_dir = Some(dir.host.clone());
                spec
            }
            // A session's state then goes through the channel; the execution runs all the same.
            Err(e) => {
                tracing::warn!("no state directory for {name}: {}: {e}", dir.host.display());
                without_state = SandboxSpec {
                    state: None,
                    ..spec.clone()
                };
                &without_state
            }
        },
        None => spec,
    };
    if let Some(egress) = &spec.egress {
        // Without it the execution runs all the same; a job that asked for egress is told.
        match crate::host::blocking_here(|| egress.create()) {
            Ok(()) => guard.egress_dir = Some(egress.host().clone()),
            Err(e) => tracing::warn!("no egress directory for {name}: {e}"),
        }
    }
    let t = Instant::now();
    let created = backend.create(name, spec).await;
    guard.created = true;
    created?;
    stats.phase(Phase::Create, t.elapsed());
    let t = Instant::now();
    let attached = backend.attach(name).await?;
    stats.phase(Phase::Attach, t.elapsed());
    let t = Instant::now();
    if let Err(e) = backend.start(name).await {
        if spec.container.runtime_kind == RuntimeKind::Gvisor {
            end_gvisor_leftovers(backend.as_ref(), name).await;
        }
        return Err(e);
    }
    stats.phase(Phase::Start, t.elapsed());
    Ok(Started {
        name: name.to_string(),
        output: attached.output,
        input: attached.input,
        loaded: false,
        state_dir: spec.state.as_ref().map(|dir| dir.host.clone()),
        egress_dir: guard.egress_dir.clone(),
        listening: None,
        guard,
    })
}

/// Ends what a failed gVisor start left running (`host::runtime_leftovers`): runsc created the
/// sandbox, the start failed, and the engine's removal would leave the shim, the sandbox and the
/// gofer behind.
async fn end_gvisor_leftovers(backend: &dyn Backend, name: &str) {
    let Ok(Some(id)) = backend.container_id(name).await else {
        return;
    };
    let ended = crate::host::runtime_leftovers::end(&id);
    if ended > 0 {
        tracing::warn!(
            container = name,
            "a failed gVisor start left {ended} processes (containerd shim, runsc sandbox and gofer): killed"
        );
    }
}

/// Where an execution's container comes from.
pub(crate) enum Source<'a> {
    /// Created now from this spec, under this name.
    Cold(&'a SandboxSpec, &'a str),
    /// Started ahead (the pool).
    Warm(Box<Started>),
}

/// How getting ready ended, when it did not give a container with its job.
pub(super) enum NotReady {
    Cancelled,
    Failed(EngineError),
}

/// A container from `source` that has received `job`, by `start_deadline`. Cancellation wins
/// over everything else; a start the engine did not finish in time is [`EngineError::Slow`].
pub(super) async fn ready_for_job(
    runner: &Runner<'_>,
    source: Source<'_>,
    job: &Job,
    cancel: &tokio_util::sync::CancellationToken,
    start_deadline: TokioInstant,
) -> Result<Started, NotReady> {
    let setup = async {
        let mut ready = match source {
            Source::Warm(ready) => *ready,
            Source::Cold(spec, name) => start(runner.backend, spec, name, runner.cleanup).await?,
        };
        if let Some(carry) = &job.carry
            && !ready.loaded
        {
            let t = Instant::now();
            let dir = ready.state_dir.clone();
            crate::sandbox::run::carry::deliver(
                carry.store.as_ref(),
                &mut ready.input,
                dir.as_deref(),
            )
            .await
            .map_err(|e| EngineError::Api {
                action: "deliver the session's state to the sandbox",
                message: e.to_string(),
            })?;
            runner.cleanup.stats.phase(Phase::StateSent, t.elapsed());
        }
        let egress = open_egress(&mut ready, job)?;
        let job_line = ToHarness::Job {
            code: &job.code,
            context_vars: &job.context_vars,
            limits: runner.limits,
            edge_bytes: crate::sandbox::run::output::EDGE_BYTES,
            servers: job.servers.as_deref(),
            packages: job.packages.as_deref(),
            session: job
                .carry
                .as_ref()
                .map(|c| crate::sandbox::run::channel::SessionLimits {
                    max_bytes: c.max_bytes,
                }),
            plan: job.calls.as_ref().and_then(|c| c.plan_spec()),
            egress,
        }
        .to_line();
        // The harness reads its job before it runs anything, so this completes promptly.
        let t = Instant::now();
        ready
            .input
            .write_all(&job_line)
            .await
            .map_err(|e| EngineError::Api {
                action: "deliver the job to the sandbox",
                message: e.to_string(),
            })?;
        runner.cleanup.stats.phase(Phase::JobWritten, t.elapsed());
        Ok::<_, EngineError>(ready)
    };
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(NotReady::Cancelled),
        _ = tokio::time::sleep_until(start_deadline) => {
            Err(NotReady::Failed(EngineError::Slow(runner.start_limit.as_secs())))
        }
        ready = setup => ready.map_err(NotReady::Failed),
    }
}

/// Binds the job's proxy socket in the container's egress directory, if the job has egress:
/// what the job line tells the harness of it.
fn open_egress(
    ready: &mut Started,
    job: &Job,
) -> Result<Option<crate::sandbox::run::channel::EgressJob>, EngineError> {
    let Some(handler) = &job.egress else {
        return Ok(None);
    };
    let Some(dir) = &ready.egress_dir else {
        return Err(EngineError::Api {
            action: "give the sandbox its egress socket",
            message: "the container has no egress directory (see the server's log)".into(),
        });
    };
    let listening = crate::sandbox::run::egress::listen(dir, handler.clone()).map_err(|e| {
        EngineError::Api {
            action: "give the sandbox its egress socket",
            message: e.to_string(),
        }
    })?;
    ready.listening = Some(listening);
    Ok(Some(crate::sandbox::run::channel::EgressJob {
        http: handler.plain_http(),
    }))
}
