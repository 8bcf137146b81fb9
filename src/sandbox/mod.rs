//! The sandbox: `Sandbox::run(Job) -> Outcome` is the one entry point. Each run gets a fresh,
//! hardened container ([`spec`](container::spec)) that is removed afterwards on every path;
//! concurrency is bounded by a semaphore with a bounded wait queue (`admission.rs`); shutdown
//! cancels what runs and waits for the removals (`shutdown.rs`); containers a crashed server
//! left behind are reaped at start (`reaper`). What a sandbox is made with, its settings and
//! this server's identity, is in `settings.rs`.
//!
//! The engine may stop, restart or stall under a running server. Every engine call an
//! execution makes is bounded (the start by `--start-timeout-secs`, the code by its timeout,
//! kill and inspect by fixed limits), so a call answers with an error that says what happened
//! instead of hanging; the event watcher reconnects, failed pool starts are retried with
//! backoff, and shutdown waits a bounded time for removals (the next start reaps the rest). The
//! server therefore serves again once the engine is back, without a restart.

mod admission;
pub mod cleanup;
pub mod container;
pub mod enforcement;
pub mod engine;
pub mod image;
pub mod pool;
pub mod run;
mod settings;
mod shutdown;
pub mod stats;
mod taking;
#[cfg(test)]
mod tests;
mod watch;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use admission::{LinkedCancel, Waited};
pub use cleanup::removal::Removals;
use container::spec::{LABEL_INSTANCE, LABEL_MANAGED, LABEL_OWNER, SandboxSpec};
pub use container::state_dir::StateDirs;
pub use engine::{Backend, Engine, EngineError, EngineInfo, SwarmNode};
use pool::preload;
pub use pool::{PoolBudget, PoolSnapshot};
use run::carry;
pub use run::channel::{BuiltinCalls, CallHandler, HarnessLimits};
pub use run::output::{BoundedText, OutputTap};
pub use run::prepared::Prepared;
pub use run::{DEFAULT_START_LIMIT, Edges, Job, Outcome, Status};
pub use settings::{Instance, SandboxSettings};
use stats::{Phase, Stats};
pub use taking::{StartNote, StartReason};

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "the server is busy: {running} executions are running and {queued} are waiting (limits: --max-concurrency, --tenant-max-concurrency, --max-queue). Retry in a moment"
    )]
    Busy { running: usize, queued: usize },
    #[error(
        "the server is shutting down and accepts no new executions: retry once it has restarted"
    )]
    ShuttingDown,
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// How long an execution runs before the pool's replacement for its container is started
/// beside it (a shorter one starts it when it ends).
const REFILL_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

pub struct Sandbox {
    backend: Arc<dyn Backend>,
    settings: SandboxSettings,
    calls: Arc<dyn CallHandler>,
    instance: Instance,
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    seq: AtomicU64,
    shutdown: CancellationToken,
    cleanup: run::Cleanup,
    stats: Arc<Stats>,
    pool: Arc<pool::Pool>,
    oom: engine::events::OomEvents,
    breaks: engine::events::EngineBreaks,
    /// Set once the engine answered that it cannot update a container's memory limit, or from
    /// the start under a runtime that cannot (gVisor's runsc has no `update`): a non-default
    /// limit then runs cold without taking (and wasting) a pooled container.
    no_memory_update: std::sync::atomic::AtomicBool,
    /// Cancelled (and replaced) when an execution finds the pool empty: prepared containers
    /// give their place back.
    pressure: std::sync::Mutex<CancellationToken>,
    /// What recent executions imported (for a learned preload).
    learned: preload::Learned,
    /// Where this server's containers' state directories are made (none: sessions' state goes
    /// through the channel).
    state_dirs: Option<StateDirs>,
    /// Where this server's containers' egress directories are made (none: no egress).
    egress_dirs: Option<container::egress_dir::EgressDirs>,
}

impl Sandbox {
    pub fn new(
        backend: Arc<dyn Backend>,
        settings: SandboxSettings,
        calls: Arc<dyn CallHandler>,
        stats: Arc<Stats>,
    ) -> Self {
        let no_memory_update = (!settings.container.runtime_kind.updates_limits()).into();
        let instance = Instance::new();
        let state_dirs = instance.state_dirs(settings.state_dirs.as_ref());
        let egress_dirs = (settings.egress_dirs.as_ref()).and_then(|e| {
            let dirs = instance.state_dirs(Some(&e.dirs))?;
            Some(container::egress_dir::EgressDirs {
                dirs,
                ca_pem: e.ca_pem.clone(),
            })
        });
        Self {
            pool: Arc::new(pool::Pool::new(
                settings.pool_size,
                settings.pool_idle_floor,
                settings.pool_budget.clone(),
                settings.pool_memory_bytes,
                settings.image_id.clone(),
            )),
            cleanup: run::Cleanup {
                tracker: TaskTracker::new(),
                stats: stats.clone(),
                removals: settings.removals.clone(),
            },
            slots: Arc::new(Semaphore::new(settings.max_concurrency)),
            backend,
            settings,
            calls,
            instance,
            waiting: AtomicUsize::new(0),
            seq: AtomicU64::new(0),
            shutdown: CancellationToken::new(),
            stats,
            oom: engine::events::OomEvents::default(),
            breaks: engine::events::EngineBreaks::default(),
            no_memory_update,
            pressure: Default::default(),
            learned: Default::default(),
            state_dirs,
            egress_dirs,
        }
    }

    pub fn settings(&self) -> &SandboxSettings {
        &self.settings
    }

    pub fn instance(&self) -> &Instance {
        &self.instance
    }

    /// Runs one job in a fresh container. `cancel` is the caller's cancellation (an MCP
    /// `notifications/cancelled`); server shutdown cancels as well.
    pub async fn run(&self, job: Job, cancel: CancellationToken) -> Result<Outcome, SandboxError> {
        let Some(admitted) = self.admit(&cancel).await? else {
            return Ok(self.cancelled_before_start());
        };
        let run_started = std::time::Instant::now();
        let turn = tokio::time::Instant::now();
        // The engine is busy until this execution has answered: removals wait.
        let _busy = self.settings.removals.busy();
        // One limit for getting a container ready, whether from the pool or cold.
        let start_deadline = tokio::time::Instant::now() + self.settings.start_limit;
        // Waiting here (for a replacement on its way, or a session's container being
        // prepared) is waiting for a start, like a queue.
        let taken = self.take_ready(&job, start_deadline);
        let taken = match self.unless_stopped(&cancel, taken).await {
            Waited::Done(taken) => taken,
            Waited::ShuttingDown => return Err(SandboxError::ShuttingDown),
            Waited::Cancelled => return Ok(self.cancelled_before_start()),
        };
        let taking = turn.elapsed();
        let cold;
        let source = match taken.ready {
            Some(ready) => {
                self.stats.record_pooled();
                run::Source::Warm(Box::new(ready))
            }
            None => {
                let name = self.next_name();
                cold = (self.spec(job.memory_bytes, &name), name);
                run::Source::Cold(&cold.0, &cold.1)
            }
        };
        let _running = self.stats.running_guard();
        let mut result = self
            .run_and_refill(source, &job, &cancel, start_deadline)
            .await;
        drop(admitted);
        if let (Ok(outcome), Some((pooled, reason))) = (&mut result, taken.note) {
            outcome.start = Some(StartNote {
                pooled,
                waited_ms: (taking + outcome.ready_after).as_millis() as u64,
                reason,
            });
        }
        self.stats.phase(Phase::Run, run_started.elapsed());
        match &result {
            Ok(outcome) => self.stats.record(outcome.status, outcome.elapsed),
            Err(_) => self.stats.record_engine_failure(),
        }
        Ok(result?)
    }

    /// Runs the job in its container, cancelled by the caller or by shutdown, and starts the
    /// pool's replacement for the container beside it.
    async fn run_and_refill(
        &self,
        source: run::Source<'_>,
        job: &Job,
        cancel: &CancellationToken,
        start_deadline: tokio::time::Instant,
    ) -> Result<Outcome, EngineError> {
        let linked = LinkedCancel::new(cancel, &self.shutdown);
        let runner = run::Runner {
            oom_reported: self.settings.oom_reported,
            runtime: self.settings.container.runtime_kind,
            pids_limit: self.settings.container.pids_limit,
            backend: &self.backend,
            limits: self.settings.limits,
            calls: self.calls.as_ref(),
            cleanup: &self.cleanup,
            oom: &self.oom,
            breaks: &self.breaks,
            start_limit: self.settings.start_limit,
        };
        let run = run::execute(&runner, source, job, linked.token(), start_deadline);
        tokio::pin!(run);
        // The replacement starts once this execution has answered, or after REFILL_DELAY
        // if it runs longer: on a small machine, a container start beside a short
        // execution is what made it slow.
        tokio::select! {
            biased;
            result = &mut run => {
                // The replacement preloads what this execution's code imported too.
                self.learn(&result);
                self.refill();
                result
            }
            _ = tokio::time::sleep(REFILL_DELAY) => {
                self.refill();
                let result = run.await;
                self.learn(&result);
                result
            }
        }
    }

    /// Notes what an execution's code imported, for a learned preload.
    fn learn(&self, result: &Result<Outcome, EngineError>) {
        if let Ok(outcome) = result {
            self.learned.record(&outcome.imports);
        }
    }

    /// What replacements import ahead: `--preload`'s modules in every one, or the usual
    /// imports in the share of the pool they are wanted in.
    fn wanted(&self) -> pool::Wanted {
        match &self.settings.preload {
            preload::Preload::Fixed(modules) => pool::Wanted {
                modules: modules.clone(),
                keep: usize::MAX,
            },
            preload::Preload::Learned => pool::Wanted {
                modules: self.learned.modules(),
                keep: self.learned.keep(self.pool.target()),
            },
        }
    }

    /// The hardened spec for a container with this memory limit. With a host tree of the
    /// image the pool runs, the container is made from that image's id, so its root and the
    /// tree always come from one image; once the tag has moved to another image the containers
    /// read it from the engine's storage (the next start extracts its tree).
    fn spec(&self, memory_bytes: i64, name: &str) -> SandboxSpec {
        let tree = (self.settings.image_tree.as_ref()).filter(|t| t.image_id == self.pool.image());
        SandboxSpec {
            image: tree.map_or_else(|| self.settings.image.clone(), |t| t.image_id.clone()),
            image_tree: tree.cloned(),
            memory_bytes,
            container: self.settings.container.clone(),
            workspace: self.settings.workspace.clone(),
            skills: self.settings.skills.clone(),
            servers: self.settings.servers.clone(),
            packages: self.settings.packages.clone(),
            uid: self.settings.uid,
            gid: self.settings.gid,
            labels: self.labels(),
            preload: Vec::new(),
            package_set: None,
            state: (self.state_dirs.as_ref()).map(|dirs| dirs.for_container(name)),
            egress: (self.egress_dirs.as_ref()).map(|dirs| dirs.for_container(name)),
            seccomp: self.settings.seccomp.clone(),
        }
    }

    fn next_name(&self) -> String {
        format!(
            "cem-{}-{}",
            &self.instance.id[..12],
            self.seq.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Containers of the pool waiting for a job.
    pub fn pool_ready(&self) -> usize {
        self.pool.ready()
    }

    /// The pool's size, target, share of the budget and refill rate.
    pub fn pool_snapshot(&self) -> PoolSnapshot {
        self.pool.snapshot()
    }

    /// The image id the pool's containers are made from.
    pub fn pool_image(&self) -> String {
        self.pool.image()
    }

    /// Starts, in the background, the containers the pool lacks. A failure is logged; the
    /// next execution tries again (and runs cold meanwhile).
    pub fn refill(&self) {
        if self.shutdown.is_cancelled() {
            return;
        }
        for preload in self.pool.reserve(&self.wanted()) {
            let (backend, pool, cleanup) = (
                self.backend.clone(),
                self.pool.clone(),
                self.cleanup.clone(),
            );
            // A start is engine work: removals wait for it.
            let busy = self.settings.removals.busy();
            let image = self.pool.image();
            let name = self.next_name();
            let spec = SandboxSpec {
                image: image.clone(),
                preload: preload.clone(),
                ..self.spec(self.pool.memory_bytes(), &name)
            };
            let shutdown = self.shutdown.clone();
            let limit = self.settings.start_limit;
            let fill = async move {
                // Offered only once its interpreter and preload are ready: a call never waits
                // on a preload in progress.
                let begun = std::time::Instant::now();
                let start = async {
                    let mut started = run::start(&backend, &spec, &name, &cleanup).await?;
                    let t = std::time::Instant::now();
                    started.announced(run::Announcement::Ready).await?;
                    cleanup.stats.phase(Phase::Ready, t.elapsed());
                    Ok(started)
                };
                let started = tokio::time::timeout(limit, start)
                    .await
                    .unwrap_or(Err(EngineError::Slow(limit.as_secs())));
                drop(busy);
                match started {
                    // Shutdown began meanwhile: dropping it removes the container.
                    Ok(_) if shutdown.is_cancelled() => pool.failed(&preload),
                    Ok(ready) => pool.put(ready, &image, preload, begun.elapsed()),
                    Err(e) => {
                        pool.failed(&preload);
                        tracing::warn!("could not start a pooled sandbox container: {e}");
                    }
                }
            };
            self.cleanup
                .tracker
                .spawn(fill.instrument(self.settings.span.clone()));
        }
    }

    /// Prepares a container for a session's next call, in the background: one from the pool
    /// (or started now), given the snapshot `store` holds, its state loaded. `None` when the
    /// server is shutting down or while the pool is under pressure ([`Sandbox::calm`] says when
    /// that is over): the next call then loads the state itself. See [`prepared`].
    pub fn prepare(
        &self,
        store: Arc<dyn carry::SnapshotStore>,
        package_set: Option<String>,
    ) -> Option<Prepared> {
        if self.shutdown.is_cancelled() || self.pool.pressing() {
            return None;
        }
        let (prepared, mut slot) = Prepared::new(package_set.clone());
        let pressure = self.pressure.lock().expect("pressure lock").clone();
        // A pooled container takes the state; a session with packages gets a container
        // started with its set on sys.path, its modules preloaded, before the state loads.
        let pooled = if package_set.is_none() {
            self.pool.take(&pool::Wants::Imports(Vec::new()))
        } else {
            None
        };
        if pooled.is_some() {
            self.refill();
        }
        let name = self.next_name();
        let spec = SandboxSpec {
            image: self.pool.image(),
            preload: match (&package_set, &self.settings.preload) {
                (None, _) => Vec::new(),
                (Some(_), preload::Preload::Fixed(modules)) => modules.clone(),
                (Some(_), preload::Preload::Learned) => self.learned.modules(),
            },
            package_set,
            ..self.spec(self.pool.memory_bytes(), &name)
        };
        let (backend, cleanup) = (self.backend.clone(), self.cleanup.clone());
        let (shutdown, limit) = (self.shutdown.clone(), self.settings.start_limit);
        // Unclaimed this long, a prepared container gives its memory back, as the pool does.
        let unused = (!self.settings.pool_idle.is_zero()).then_some(self.settings.pool_idle);
        let (ends, handle) = (prepared.ends.clone(), prepared.clone());
        let readying = async move {
            let work = load_state(pooled, &backend, &spec, &name, &cleanup, store.as_ref());
            let ended = async {
                tokio::select! {
                    _ = ends.cancelled() => {}
                    _ = pressure.cancelled() => {}
                    _ = shutdown.cancelled() => {}
                }
            };
            tokio::select! {
                _ = ended => return,
                done = tokio::time::timeout(limit + carry::receive_limit(0), work) => match done {
                    Ok(Ok(started)) => *slot = Some(started),
                    Ok(Err(e)) => tracing::warn!("could not prepare a session's next container: {e}"),
                    Err(_) => tracing::warn!("preparing a session's next container took too long"),
                },
            }
            drop(slot);
            let expired = async {
                match unused {
                    Some(limit) => tokio::time::sleep(limit).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = ends.cancelled() => {}
                _ = pressure.cancelled() => {}
                _ = shutdown.cancelled() => {}
                _ = expired => {}
            }
            // Still unclaimed: dropping it removes the container.
            handle.slot.lock().await.take();
        };
        self.cleanup
            .tracker
            .spawn(readying.instrument(self.settings.span.clone()));
        Some(prepared)
    }

    /// Waits, up to `limit`, until the pool is no longer under pressure; whether it is calm
    /// (and the server not shutting down).
    pub async fn calm(&self, limit: std::time::Duration) -> bool {
        let until = tokio::time::Instant::now() + limit;
        while self.pool.pressing() && tokio::time::Instant::now() < until {
            tokio::select! {
                _ = self.shutdown.cancelled() => return false,
                _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            }
        }
        !self.pool.pressing() && !self.shutdown.is_cancelled()
    }

    fn labels(&self) -> HashMap<String, String> {
        HashMap::from([
            (LABEL_MANAGED.to_string(), "true".to_string()),
            (LABEL_INSTANCE.to_string(), self.instance.id.clone()),
            (LABEL_OWNER.to_string(), self.instance.owner.clone()),
        ])
    }
}

/// A container with a session's state loaded: `pooled` (or one started now from `spec`) given
/// the snapshot `store` holds.
async fn load_state(
    pooled: Option<run::Started>,
    backend: &Arc<dyn Backend>,
    spec: &SandboxSpec,
    name: &str,
    cleanup: &run::Cleanup,
    store: &dyn carry::SnapshotStore,
) -> Result<run::Started, EngineError> {
    let t = std::time::Instant::now();
    let mut started = match pooled {
        Some(started) => started,
        None => {
            let mut started = run::start(backend, spec, name, cleanup).await?;
            started.announced(run::Announcement::Ready).await?;
            started
        }
    };
    let dir = started.state_dir.clone();
    carry::deliver(store, &mut started.input, dir.as_deref())
        .await
        .map_err(|e| EngineError::Api {
            action: "deliver the session's state to the sandbox",
            message: e.to_string(),
        })?;
    started.announced(run::Announcement::Loaded).await?;
    cleanup.stats.phase(Phase::StateSent, t.elapsed());
    started.loaded = true;
    Ok(started)
}
