//! Unit tests of the sandbox's logic — the execution state machine, the pool, admission and
//! shutdown — against [`fake::FakeEngine`], in virtual time. Each test is named after the path
//! it covers, and every test ends by checking that no container the fake engine created is left
//! (cleanup on every path). The isolation the sandbox claims is tested against the real engine
//! in `tests/`.

mod breathing;
mod execution;
mod fake;
mod pool;
mod prepared;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::sandbox::run::channel::{BuiltinCalls, HarnessLimits};
use crate::sandbox::stats::Stats;
use crate::sandbox::{Job, Outcome, Sandbox, SandboxError, SandboxSettings, Status};
use fake::{FakeEngine, Step};

const MB: i64 = 1024 * 1024;

/// Settings of a sandbox with `pool_size` pooled containers and `max_concurrency` slots.
fn settings(pool_size: usize, max_concurrency: usize) -> SandboxSettings {
    SandboxSettings {
        image: "sandbox:test".into(),
        workspace: "/nonexistent/workspace".into(),
        skills: None,
        servers: None,
        packages: None,
        uid: 10001,
        gid: 10001,
        container: crate::sandbox::container::spec::ContainerOptions {
            pids_limit: 64,
            tmpfs_bytes: 8 << 20,
            runtime: None,
            runtime_kind: Default::default(),
        },
        limits: HarnessLimits {
            max_output_bytes: 1024,
            max_result_bytes: 1024,
            max_images: 0,
        },
        max_concurrency,
        max_queue: 1,
        server_slots: Arc::new(tokio::sync::Semaphore::new(max_concurrency)),
        pool_size,
        // A budget of one pool: no growth (the breathing tests give it more).
        pool_budget: crate::sandbox::PoolBudget::new(pool_size),
        pool_idle: Duration::ZERO,
        pool_idle_floor: pool_size,
        // Replaced by the rig with one on its own fake engine.
        removals: crate::sandbox::Removals::new(Arc::new(Arc::new(FakeEngine::new(Vec::new()))), 0),
        pool_memory_bytes: 256 * MB,
        image_id: "sha256:one".into(),
        start_limit: Duration::from_secs(30),
        preload: crate::sandbox::pool::preload::Preload::Fixed(Vec::new()),
        seccomp: Default::default(),
        oom_reported: true,
        image_tree: None,
        state_dirs: None,
        egress_dirs: None,
        span: tracing::Span::none(),
    }
}

/// A sandbox on a fake engine whose containers play `script`.
struct Rig {
    engine: Arc<FakeEngine>,
    sandbox: Arc<Sandbox>,
    stats: Arc<Stats>,
}

impl Rig {
    fn new(script: Vec<Step>, settings: SandboxSettings) -> Self {
        Self::with_backlog(script, settings, 0)
    }

    /// A rig whose used containers may wait in a removal backlog of `bound`.
    fn with_backlog(script: Vec<Step>, mut settings: SandboxSettings, bound: usize) -> Self {
        let engine = Arc::new(FakeEngine::new(script));
        settings.removals = crate::sandbox::Removals::new(Arc::new(engine.clone()), bound);
        let stats = Arc::new(Stats::new());
        let sandbox = Arc::new(Sandbox::new(
            Arc::new(engine.clone()),
            settings,
            Arc::new(BuiltinCalls),
            stats.clone(),
        ));
        Self {
            engine,
            sandbox,
            stats,
        }
    }

    fn cold(script: Vec<Step>) -> Self {
        Self::new(script, settings(0, 2))
    }

    /// A sandbox whose pool of `size` is full.
    async fn pooled(script: Vec<Step>, size: usize) -> Self {
        let rig = Self::new(script, settings(size, 2));
        rig.sandbox.refill();
        rig.engine.until_live(size).await;
        settle().await;
        rig
    }

    /// Runs `job` in a task of its own, cancelled by `cancel`.
    fn spawn_run(
        &self,
        job: Job,
        cancel: CancellationToken,
    ) -> tokio::task::JoinHandle<Result<Outcome, SandboxError>> {
        let sandbox = self.sandbox.clone();
        tokio::spawn(async move { sandbox.run(job, cancel).await })
    }

    async fn run(&self, timeout_secs: u64) -> Result<Outcome, SandboxError> {
        self.sandbox
            .run(job(timeout_secs), CancellationToken::new())
            .await
    }

    /// Shuts the sandbox down and checks that every container it created was removed.
    async fn finish(self) {
        self.sandbox.shutdown().await;
        assert!(
            self.engine.live().is_empty(),
            "containers left: {:?}",
            self.engine.live()
        );
    }
}

fn job(timeout_secs: u64) -> Job {
    Job {
        code: "print(1)".into(),
        context_vars: serde_json::Value::Null,
        timeout: Duration::from_secs(timeout_secs),
        memory_bytes: 256 * MB,
        tap: None,
        calls: None,
        servers: None,
        packages: None,
        replaces_image: false,
        carry: None,
        egress: None,
    }
}

fn error_text(outcome: &Outcome) -> &str {
    outcome.error.as_deref().unwrap_or_default()
}

/// Lets spawned tasks (removals, refills) run, in virtual time.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(500)).await;
}

fn status_count(stats: &Stats, status: Status) -> u64 {
    stats.snapshot().executions_by_status[status.as_str()]
}
