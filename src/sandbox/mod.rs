//! The sandbox: `Sandbox::run(Job) -> Outcome` is the one entry point. Each run gets a fresh,
//! hardened container ([`spec`]) that is removed afterwards on every path; concurrency is
//! bounded by a semaphore with a bounded wait queue; shutdown cancels what runs and waits for
//! the removals; containers a crashed server left behind are reaped at start ([`reaper`]).

pub mod channel;
pub mod engine;
pub mod events;
pub mod execution;
pub mod image;
pub mod output;
pub mod pool;
pub mod reaper;
pub mod spec;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use channel::{BuiltinCalls, CallHandler, HarnessLimits};
pub use engine::{Engine, EngineError, EngineInfo};
pub use execution::{Job, Outcome, Status};
use spec::{LABEL_INSTANCE, LABEL_MANAGED, LABEL_OWNER, SandboxSpec};

use crate::stats::Stats;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "the server is busy: {running} executions are running and {queued} are waiting (limits: --max-concurrency, --max-queue). Retry in a moment"
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

/// Settings fixed for the server's lifetime.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    pub image: String,
    pub workspace: PathBuf,
    pub skills: Option<PathBuf>,
    pub uid: u32,
    pub gid: u32,
    pub pids_limit: i64,
    pub tmpfs_bytes: u64,
    pub limits: HarnessLimits,
    pub max_concurrency: usize,
    pub max_queue: usize,
    pub runtime: Option<String>,
    /// Containers kept started ahead (0: every execution starts its own).
    pub pool_size: usize,
    /// The memory limit pooled containers carry (the default one).
    pub pool_memory_bytes: i64,
    /// The id `image` resolved to at start (pooled containers are made from the id).
    pub image_id: String,
}

/// Identity of this server process, written on every container it creates.
#[derive(Debug, Clone)]
pub struct Instance {
    pub id: String,
    pub owner: String,
}

impl Instance {
    pub fn new() -> Self {
        Self {
            id: uuid::Uuid::new_v4().simple().to_string(),
            owner: reaper::current_owner(),
        }
    }
}

impl Default for Instance {
    fn default() -> Self {
        Self::new()
    }
}

pub struct Sandbox {
    engine: Engine,
    settings: SandboxSettings,
    calls: Arc<dyn CallHandler>,
    instance: Instance,
    slots: Arc<Semaphore>,
    waiting: AtomicUsize,
    seq: AtomicU64,
    shutdown: CancellationToken,
    cleanup: TaskTracker,
    stats: Arc<Stats>,
    pool: Arc<pool::Pool>,
    oom: events::OomEvents,
}

impl Sandbox {
    pub fn new(
        engine: Engine,
        settings: SandboxSettings,
        calls: Arc<dyn CallHandler>,
        stats: Arc<Stats>,
    ) -> Self {
        Self {
            pool: Arc::new(pool::Pool::new(
                settings.pool_size,
                settings.pool_memory_bytes,
                settings.image_id.clone(),
            )),
            slots: Arc::new(Semaphore::new(settings.max_concurrency)),
            engine,
            settings,
            calls,
            instance: Instance::new(),
            waiting: AtomicUsize::new(0),
            seq: AtomicU64::new(0),
            shutdown: CancellationToken::new(),
            cleanup: TaskTracker::new(),
            stats,
            oom: events::OomEvents::default(),
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
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
        if self.shutdown.is_cancelled() {
            return Err(SandboxError::ShuttingDown);
        }
        let permit = match self.slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let queued = self.waiting.fetch_add(1, Ordering::SeqCst);
                let _leave = scopeguard(|| {
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                });
                if queued >= self.settings.max_queue {
                    return Err(SandboxError::Busy {
                        running: self.settings.max_concurrency,
                        queued,
                    });
                }
                tokio::select! {
                    biased;
                    _ = self.shutdown.cancelled() => return Err(SandboxError::ShuttingDown),
                    _ = cancel.cancelled() => {
                        self.stats.record(Status::Cancelled, std::time::Duration::ZERO);
                        return Ok(cancelled_before_start());
                    }
                    p = self.slots.clone().acquire_owned() => p.map_err(|_| SandboxError::ShuttingDown)?,
                }
            }
        };
        // Shutdown may have begun while this call waited: it must not start a container then.
        if self.shutdown.is_cancelled() {
            return Err(SandboxError::ShuttingDown);
        }

        // Waiting here (for a replacement on its way) is waiting for a start, like a queue.
        let warm = tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => return Err(SandboxError::ShuttingDown),
            _ = cancel.cancelled() => {
                self.stats.record(Status::Cancelled, std::time::Duration::ZERO);
                return Ok(cancelled_before_start());
            }
            warm = self.take_warm(job.memory_bytes) => warm,
        };
        let cold;
        let source = match warm {
            Some(ready) => {
                self.stats.record_pooled();
                execution::Source::Warm(ready)
            }
            None => {
                cold = (self.spec(job.memory_bytes), self.next_name());
                execution::Source::Cold(&cold.0, &cold.1)
            }
        };
        let _running = self.stats.running_guard();
        let result = {
            let linked = LinkedCancel::new(&cancel, &self.shutdown);
            let runner = execution::Runner {
                engine: &self.engine,
                limits: self.settings.limits,
                calls: self.calls.as_ref(),
                tracker: &self.cleanup,
                oom: &self.oom,
            };
            let run = execution::execute(&runner, source, &job, linked.token());
            tokio::pin!(run);
            // The replacement starts once this execution has answered, or after REFILL_DELAY
            // if it runs longer: on a small machine, a container start beside a short
            // execution is what made it slow.
            tokio::select! {
                biased;
                result = &mut run => {
                    self.refill();
                    result
                }
                _ = tokio::time::sleep(REFILL_DELAY) => {
                    self.refill();
                    run.await
                }
            }
        };
        drop(permit);
        match &result {
            Ok(outcome) => self.stats.record(outcome.status, outcome.elapsed),
            Err(_) => self.stats.record_engine_failure(),
        }
        Ok(result?)
    }

    /// A pooled container set to `memory_bytes`, if one is ready (and, for a non-default
    /// limit, the engine applied it).
    async fn take_warm(&self, memory_bytes: i64) -> Option<execution::Started> {
        let ready = self.pool.take_or_wait(execution::START_LIMIT).await?;
        if memory_bytes == self.pool.memory_bytes() {
            return Some(ready);
        }
        match self
            .engine
            .set_memory_limit(ready.name(), memory_bytes)
            .await
        {
            Ok(()) => Some(ready),
            Err(e) => {
                tracing::warn!("running cold: {e}");
                None
            }
        }
    }

    /// The hardened spec for a container with this memory limit.
    fn spec(&self, memory_bytes: i64) -> SandboxSpec {
        SandboxSpec {
            image: self.settings.image.clone(),
            memory_bytes,
            pids_limit: self.settings.pids_limit,
            tmpfs_bytes: self.settings.tmpfs_bytes,
            workspace: self.settings.workspace.clone(),
            skills: self.settings.skills.clone(),
            uid: self.settings.uid,
            gid: self.settings.gid,
            labels: self.labels(),
            runtime: self.settings.runtime.clone(),
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
        for _ in 0..self.pool.reserve() {
            let (engine, pool, tracker) =
                (self.engine.clone(), self.pool.clone(), self.cleanup.clone());
            let image = self.pool.image();
            let spec = SandboxSpec {
                image: image.clone(),
                ..self.spec(self.pool.memory_bytes())
            };
            let name = self.next_name();
            let shutdown = self.shutdown.clone();
            self.cleanup.spawn(async move {
                match execution::start(&engine, &spec, &name, &tracker).await {
                    // Shutdown began meanwhile: dropping it removes the container.
                    Ok(_) if shutdown.is_cancelled() => pool.failed(),
                    Ok(ready) => pool.put(ready, &image),
                    Err(e) => {
                        pool.failed();
                        tracing::warn!("could not start a pooled sandbox container: {e}");
                    }
                }
            });
        }
    }

    /// Follows the engine's events for as long as the server runs (a broken stream is
    /// reopened): `oom` events of this instance's containers (see [`events`]), and image
    /// events, so that when the sandbox image's tag moves to another image the pool is rebuilt
    /// from the new one (cold starts use the tag, so they follow by themselves).
    pub fn watch_engine(self: &Arc<Self>) {
        let sandbox = self.clone();
        self.cleanup.spawn(async move {
            let shutdown = sandbox.shutdown.clone();
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = sandbox.follow_oom_events() => {}
                _ = sandbox.follow_image_events() => {}
            }
        });
    }

    async fn follow_oom_events(&self) {
        let instance = format!("{LABEL_INSTANCE}={}", self.instance.id);
        let filters = HashMap::from([
            ("type", vec!["container"]),
            ("event", vec!["oom"]),
            ("label", vec![instance.as_str()]),
        ]);
        self.follow_events(&filters, |event| {
            let name = event
                .actor
                .as_ref()
                .and_then(|a| a.attributes.as_ref())
                .and_then(|a| a.get("name"));
            if let Some(name) = name {
                self.oom.record(name);
            }
            std::future::ready(())
        })
        .await
    }

    async fn follow_image_events(&self) {
        if self.settings.pool_size == 0 {
            return std::future::pending().await;
        }
        let filters = HashMap::from([("type", vec!["image"])]);
        // Checked once at start as well: the tag may have moved while the server started.
        self.check_image().await;
        self.follow_events(&filters, |_| self.check_image()).await
    }

    /// Calls `on_event` for every event matching `filters`, reconnecting (after a second)
    /// whenever the stream breaks or ends.
    async fn follow_events<F: Future<Output = ()>>(
        &self,
        filters: &HashMap<&str, Vec<&str>>,
        mut on_event: impl FnMut(bollard::models::EventMessage) -> F,
    ) {
        use futures::StreamExt;
        loop {
            let opts = bollard::query_parameters::EventsOptionsBuilder::default()
                .filters(filters)
                .build();
            let mut events = self.engine.client().events(Some(opts));
            while let Some(Ok(event)) = events.next().await {
                on_event(event).await;
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    }

    /// Retargets the pool when the image tag now names another image.
    async fn check_image(&self) {
        match image::image_id(&self.engine, &self.settings.image).await {
            Ok(Some(id)) if self.pool.retarget(&id) => {
                tracing::info!(image = %self.settings.image, id = %id, "the sandbox image changed: the pool is rebuilt from it");
                self.refill();
            }
            Ok(_) => {}
            Err(e) => tracing::debug!("could not check the sandbox image: {e}"),
        }
    }

    fn labels(&self) -> HashMap<String, String> {
        HashMap::from([
            (LABEL_MANAGED.to_string(), "true".to_string()),
            (LABEL_INSTANCE.to_string(), self.instance.id.clone()),
            (LABEL_OWNER.to_string(), self.instance.owner.clone()),
        ])
    }

    /// Stops accepting work, kills what runs, and waits until every container this instance
    /// created is removed (then removes any stragglers by label).
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        // Running executions see the cancellation, kill their containers and drop their guards;
        // holding every slot (and closing the semaphore) keeps new ones from starting.
        let all = self
            .slots
            .acquire_many(self.settings.max_concurrency as u32)
            .await;
        self.slots.close();
        drop(all);
        self.pool.drain();
        self.cleanup.close();
        self.cleanup.wait().await;
        let label = format!("{LABEL_INSTANCE}={}", self.instance.id);
        if let Err(e) = reaper::remove_labelled(&self.engine, &[label]).await {
            tracing::warn!("could not remove this instance's containers at shutdown: {e}");
        }
    }
}

fn cancelled_before_start() -> Outcome {
    Outcome {
        status: Status::Cancelled,
        result: serde_json::Value::Null,
        result_truncated: false,
        stdout: output::BoundedText::new(0),
        stderr: output::BoundedText::new(0),
        error: Some("Execution cancelled before it started".into()),
        error_type: None,
        traceback: None,
        elapsed: std::time::Duration::ZERO,
    }
}

/// A token cancelled when either the caller's token or the server's shutdown token is.
struct LinkedCancel {
    token: CancellationToken,
    _task: tokio::task::JoinHandle<()>,
}

impl LinkedCancel {
    fn new(a: &CancellationToken, b: &CancellationToken) -> Self {
        let token = CancellationToken::new();
        let (a, b, t) = (a.clone(), b.clone(), token.clone());
        let task = tokio::spawn(async move {
            tokio::select! {
                _ = a.cancelled() => {}
                _ = b.cancelled() => {}
                _ = t.cancelled() => return,
            }
            t.cancel();
        });
        Self { token, _task: task }
    }

    fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for LinkedCancel {
    fn drop(&mut self) {
        self._task.abort();
    }
}

/// Runs a closure when dropped.
fn scopeguard<F: FnOnce()>(f: F) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f()
            }
        }
    }
    Guard(Some(f))
}
