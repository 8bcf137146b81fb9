//! What gVisor costs beside runc: `cargo bench --bench runtimes`.
//!
//! `--runtime runsc` changes where every sandbox's system calls go (a user-space kernel instead
//! of the host's), so it changes start-up, memory and I/O. This bench puts figures on that, for
//! README's Engines section and [docs/measured.md](../docs/measured.md#runtimes).
//!
//! One process, the engine at `DOCKER_HOST`, which must have `runsc` registered (as README says;
//! `bash tests/engines/gvisor.sh up` starts such an engine and prints its `DOCKER_HOST`). Every
//! row runs on two in-process servers identical but for `--runtime`: none (the engine's
//! default, runc) and `runsc`. Their calls alternate sample by sample, so whatever else loads
//! the machine weighs on both alike; each row prints both and the runsc/runc ratio.
//!
//! 1. cold start: `execute_code("print(1)")` with `--pool-size 0` (every call creates and
//!    starts its container), p50 and p90 of `BENCH_N` samples (default 20);
//! 2. paced: the same on a pool of 2, one call every `BENCH_PACE_MS` (default 500) so the pool
//!    has refilled: what an agent's turn sees;
//! 3. throughput: 8 concurrent callers (`--max-concurrency 8`), `BENCH_CALLS` calls in all
//!    (default 48) per round, two rounds each, alternating: executions a second;
//! 4. idle pooled memory: once the pool is full and has sat 2 s, the memory the engine reports
//!    for each pooled container (one-shot stats: usage less inactive file pages, as `docker
//!    stats` shows it), mean over the pool, with the host processes and threads each holds;
//!    on the minimal image and on the data image;
//! 5. `import numpy` on the data image, pooled (pool of 2, paced), with `--preload none` so the
//!    import is timed, not done ahead by the pooled container.
//!
//! Rows 1-4 use the minimal image (the standard library only), row 5 the data image; no
//! preloading anywhere. Before each row (and each sample of rows 1, 2 and 5) the bench waits
//! until both servers' pools are full and their removal backlogs empty, so a sample does not
//! pay for the previous one's clean-up. At the end every server shuts down and the bench checks
//! that no container of this process is left (after a failed run, the next server start's
//! reaper removes them: their owner is gone).
//!
//! Figures are noisy on a shared machine: compare the ratios within one run.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use bollard::query_parameters::{ListContainersOptionsBuilder, StatsOptionsBuilder};
use code_execution_mcp::app::App;
use code_execution_mcp::config::{Config, ImageProfile};
use code_execution_mcp::sandbox::Engine;
use code_execution_mcp::sandbox::container::spec::LABEL_INSTANCE;
use common::config::defaults_in;
use common::in_process::execution_ms;
use common::knobs::env_usize;
use common::stdio::{leftover_containers, loadavg, p, sorted};
use futures::StreamExt;

const CALLERS: usize = 8;
const ROUNDS: usize = 2;

/// The two servers of a row: runc (the engine's default) and runsc.
struct Pair {
    runc: App,
    runsc: App,
    _dirs: [tempfile::TempDir; 2],
}

impl Pair {
    async fn start(profile: ImageProfile, pool: usize) -> Self {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let runc = App::start(config(dirs[0].path(), profile, pool, None)).await;
        let runsc = App::start(config(dirs[1].path(), profile, pool, Some("runsc"))).await;
        let pair = Self {
            runc: runc.unwrap_or_else(|e| panic!("the runc server does not start: {e}")),
            runsc: runsc.unwrap_or_else(|e| panic!("the runsc server does not start: {e}")),
            _dirs: dirs,
        };
        pair.settle().await;
        pair
    }

    fn both(&self) -> [&App; 2] {
        [&self.runc, &self.runsc]
    }

    /// Both pools full, nothing starting, no removal waiting.
    async fn settle(&self) {
        for app in self.both() {
            settle(app).await;
        }
    }

    async fn shutdown(self) {
        self.runc.shutdown_all().await;
        self.runsc.shutdown_all().await;
    }
}

fn config(dir: &Path, profile: ImageProfile, pool: usize, runtime: Option<&str>) -> Config {
    let mut c = defaults_in(dir);
    c.pool.pool_size = pool;
    c.pool.max_concurrency = CALLERS;
    c.sandbox.image_profile = profile;
    c.sandbox.preload = Some(vec!["none".into()]);
    c.sandbox.runtime = runtime.map(str::to_string);
    c
}

async fn settle(app: &App) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let s = app.execution_stats();
        if s.pool.ready >= s.pool.target && s.pool.starting == 0 && s.removal_backlog == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the pool did not settle within 180 s: {:?}",
            s.pool
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `n` samples of `code` on each server, alternating, each after `pause` and a settled pool.
/// Returns (runc, runsc) latencies and how many of the calls took a pooled container.
async fn alternate(pair: &Pair, code: &str, n: usize, pause: Duration) -> [(Vec<f64>, u64); 2] {
    let pooled = |app: &App| app.execution_stats().executions_pooled;
    let before = pair.both().map(pooled);
    let mut samples = [Vec::new(), Vec::new()];
    for _ in 0..n {
        for (i, app) in pair.both().into_iter().enumerate() {
            settle(app).await;
            tokio::time::sleep(pause).await;
            samples[i].push(execution_ms(app, code).await);
        }
    }
    let after = pair.both().map(pooled);
    let [a, b] = samples;
    [(a, after[0] - before[0]), (b, after[1] - before[1])]
}

/// Prints a latency row: p50/p90 for each runtime, the p50 ratio, and the pooled share.
fn latency_row(name: &str, [(runc, pooled_c), (runsc, pooled_s)]: [(Vec<f64>, u64); 2]) {
    let n = runc.len();
    let (c, s) = (sorted(runc.into_iter()), sorted(runsc.into_iter()));
    let (c50, s50) = (p(&c, 0.5), p(&s, 0.5));
    println!(
        "{name:<28} n={n:<3} runc p50 {c50:>7.1} p90 {:>7.1} ms | runsc p50 {s50:>7.1} p90 {:>7.1} ms | ×{:.2}  (pooled: {pooled_c}/{n}, {pooled_s}/{n})",
        p(&c, 0.9),
        p(&s, 0.9),
        s50 / c50,
    );
}

/// `calls` executions from `CALLERS` concurrent callers: executions a second.
async fn throughput(app: &App, calls: usize) -> (usize, Duration) {
    settle(app).await;
    let each = calls.div_ceil(CALLERS);
    let started = Instant::now();
    common::stdio::concurrent(CALLERS, each, async || execution_ms(app, "print(1)").await).await;
    (each * CALLERS, started.elapsed())
}

/// Mean memory (MiB, as `docker stats` shows it) and host pids of `app`'s running containers,
/// which, with the pool settled, are its idle pooled ones; and how many there were.
async fn idle_memory(engine: &Engine, app: &App) -> (f64, f64, usize) {
    settle(app).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let docker = engine.client();
    let label = format!("{LABEL_INSTANCE}={}", app.sandbox().instance().id);
    let filters = std::collections::HashMap::from([
        ("label".to_string(), vec![label]),
        ("status".to_string(), vec!["running".to_string()]),
    ]);
    let opts = ListContainersOptionsBuilder::default()
        .filters(&filters)
        .build();
    let ids: Vec<String> = docker
        .list_containers(Some(opts))
        .await
        .expect("list the pooled containers")
        .into_iter()
        .filter_map(|c| c.id)
        .collect();
    assert!(!ids.is_empty(), "no pooled container is running");
    let (mut mib, mut pids) = (0.0, 0.0);
    for id in &ids {
        let opts = StatsOptionsBuilder::default()
            .stream(false)
            .one_shot(true)
            .build();
        let stats = docker
            .stats(id, Some(opts))
            .next()
            .await
            .expect("one stats answer")
            .expect("the engine reports the container's stats");
        let memory = stats.memory_stats.expect("memory stats");
        let inactive = memory.stats.as_ref().and_then(|s| {
            s.get("total_inactive_file") // cgroup v1
                .or_else(|| s.get("inactive_file")) // cgroup v2
                .copied()
        });
        let usage = memory
            .usage
            .expect("memory usage")
            .saturating_sub(inactive.unwrap_or(0));
        mib += usage as f64 / (1 << 20) as f64;
        pids += stats.pids_stats.and_then(|p| p.current).unwrap_or(0) as f64;
    }
    let n = ids.len() as f64;
    (mib / n, pids / n, ids.len())
}

async fn memory_row(engine: &Engine, name: &str, pair: &Pair) {
    let (c, cp, cn) = idle_memory(engine, &pair.runc).await;
    let (s, sp, sn) = idle_memory(engine, &pair.runsc).await;
    println!(
        "{name:<28} runc {c:>6.1} MiB, {cp:.0} pids (n={cn}) | runsc {s:>6.1} MiB, {sp:.0} pids (n={sn}) | ×{:.2}, +{:.1} MiB",
        s / c,
        s - c,
    );
}

#[tokio::main]
async fn main() {
    code_execution_mcp::install_tls_provider();
    let n = env_usize("BENCH_N", 20);
    let pace = Duration::from_millis(env_usize("BENCH_PACE_MS", 500) as u64);
    let calls = env_usize("BENCH_CALLS", 48);
    let engine = Engine::connect()
        .await
        .unwrap_or_else(|e| panic!("the engine at DOCKER_HOST does not answer: {e}"));
    let runtimes = engine
        .runtimes()
        .await
        .expect("the engine lists its runtimes");
    if !runtimes.contains_key("runsc") {
        let mut names: Vec<_> = runtimes.keys().cloned().collect();
        names.sort();
        panic!(
            "this engine has no `runsc` runtime (registered: {}). Start one that has: \
             `sudo bash tests/engines/gvisor.sh up`, then export the DOCKER_HOST=unix://… it \
             prints last and run the bench again",
            names.join(", ")
        );
    }
    let started = Instant::now();
    println!(
        "runtimes: runc (the engine's default) vs runsc; 1-min load average {} at the start",
        loadavg()
    );

    let cold = Pair::start(ImageProfile::Minimal, 0).await;
    for app in cold.both() {
        execution_ms(app, "print(1)").await; // the image's pages, both ways
    }
    latency_row(
        "cold print(1), pool 0",
        alternate(&cold, "print(1)", n, Duration::ZERO).await,
    );
    cold.shutdown().await;

    let pooled = Pair::start(ImageProfile::Minimal, 2).await;
    for app in pooled.both() {
        execution_ms(app, "print(1)").await;
    }
    memory_row(&engine, "idle pooled, minimal image", &pooled).await;
    latency_row(
        &format!("paced print(1), every {}ms", pace.as_millis()),
        alternate(&pooled, "print(1)", n, pace).await,
    );
    let mut spent = [(0, Duration::ZERO); 2];
    for _ in 0..ROUNDS {
        for (i, app) in pooled.both().into_iter().enumerate() {
            let (done, took) = throughput(app, calls).await;
            spent[i] = (spent[i].0 + done, spent[i].1 + took);
        }
    }
    let [c, s] = spent.map(|(done, took)| done as f64 / took.as_secs_f64());
    println!(
        "{:<28} n={:<3} runc {c:>5.2} exec/s | runsc {s:>5.2} exec/s | ×{:.2}",
        format!("{CALLERS} callers, print(1)"),
        spent[0].0,
        s / c
    );
    pooled.shutdown().await;

    let data = Pair::start(ImageProfile::Data, 2).await;
    for app in data.both() {
        execution_ms(app, "import numpy").await;
    }
    memory_row(&engine, "idle pooled, data image", &data).await;
    latency_row(
        "import numpy, paced, data",
        alternate(&data, "import numpy", n, pace).await,
    );
    data.shutdown().await;

    let left = leftover_containers(&[std::process::id()]).await;
    assert!(left.is_empty(), "containers left behind: {left:?}");
    println!(
        "1-min load average {} at the end; run took {:.0} s; containers left behind: none",
        loadavg(),
        started.elapsed().as_secs_f64()
    );
}
