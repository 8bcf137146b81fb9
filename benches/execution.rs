//! Execution latency, throughput and footprint of `execute_code`, beside `docker run --rm`:
//! `cargo bench --bench execution`.
//!
//! One run measures, against the real Docker engine and the real server binary driven by an
//! rmcp client over stdio (exactly as an MCP client runs it):
//!
//! 1. the python3 start-up floor inside the sandbox image: one execution times 20
//!    `subprocess.run([sys.executable, "-I", "-c", "pass"])` in the sandbox; any design that
//!    starts an interpreter per execution pays at least this;
//! 2. `docker run --rm` of the sandbox image with the server's isolation flags (network none,
//!    read-only root, tmpfs /tmp, --init, user 10001, no capabilities, no-new-privileges, the
//!    shipped seccomp profile, 500 MiB memory and swap, 128 pids, no logging, workspace bind)
//!    running `python3 -c 'print(1)'`, sequential: the baseline every ratio refers to;
//! 3. `execute_code("print(1)")` on the cold path (`--pool-size 0`), sequential;
//! 4. the pooled path (default pool size), sequential with a think time between calls that
//!    models an agent's turn, so the pool has refilled before each call;
//! 5. the pooled path back to back: calls outpace the refill, the pool empties and calls take
//!    the cold path;
//! 6. throughput of 1, 4 and 8 concurrent callers on one MCP session (`--max-concurrency 8`),
//!    beside 8 parallel `docker run --rm` loops doing the same number of runs;
//! 7. the server's resident memory: idle with the pool full, the maximum sampled every 50 ms
//!    while 8 callers run, and the high-water mark at the end;
//! 8. the time from spawning the server to the first execution served (MCP handshake
//!    included), median of 3 fresh processes;
//! 9. the previous design in the same run, for before/after: a fixed pool (`--pool-max` equal
//!    to the pool size) and every container removed at once (`--removal-backlog 0`), back to
//!    back and with 8 callers.
//!
//! Where the time goes: for the cold, paced, back-to-back and 8-caller rows the bench prints
//! the mean of each engine phase of a container's life (create, attach, start, the wait for a
//! pooled container, job written, first frame, done, kill/wait, remove) and of the server's
//! own handling (`run`: the sandbox; `call`: the whole `execute_code` inside the server), from
//! the cumulative `phases` of `get_execution_stats` before and after the row (after the row the
//! bench waits until the pool has refilled and the removal backlog is empty, so a row is
//! charged with the work it caused).
//!
//! Rows 4 to 7 share one server (default pool size, `--max-concurrency 8`); before each timed
//! phase the bench waits until `get_execution_stats` reports the pool at its target. Every server gets
//! its own temporary workspace and skills directory, is shut down by closing its stdin, and must
//! exit cleanly; at the end the bench checks that no sandbox container of its servers is left.
//! A failed call fails the bench with the error text and the tail of the server's stderr.
//! Percentiles are nearest-rank.
//!
//! Knobs (environment): `BENCH_N` samples of the paced pooled row (default 100);
//! `BENCH_N_SHORT` samples of the docker run, cold and back-to-back rows (default 30);
//! `BENCH_THINK_MS` think time of the paced row (default 500); `BENCH_CALLS` calls per caller
//! and per docker run loop in the throughput phase (default 10); `BENCH_SAMPLES=1` also prints
//! every latency sample in call order; `CEM_POOL_SIZE` the pool size of the pooled rows;
//! `BENCH_ENGINE=overlay2` runs everything against a private engine the bench starts (its
//! own `dockerd` in its own network namespace, data root under the temp directory, the
//! `overlay2` storage driver and runc: a standard Docker setup), into which it loads the
//! sandbox image first; `BENCH_ENGINE=overlay2-crun` does the same with `crun` (Debian's
//! package) as the engine's default runtime. The servers inherit the
//! environment, so `CEM_*` settings (e.g. `CEM_BASE_IMAGE` for the first image build) apply.
//! The sandbox image is built first when missing (`code-execution-mcp image build`).
//!
//! Figures on a shared machine are noisy (the bench, the server and the engine share the same
//! cores): compare the ratios within one run, not absolute figures across runs.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use code_execution_mcp::config::Config;
use common::docker_run::{docker_print1, docker_run_args};
use common::knobs::env_usize;
use common::server::{BIN, PHASES, Phases, Server, Storage};
use common::stdio::{
    command_stdout, concurrent, docker_version, leftover_containers, loadavg, ms, p,
    report_leftovers, sorted,
};
use serde_json::json;

/// Every server of this bench keeps only its workspace and skills in its temporary directory:
/// the copies of the image's `/usr` stay in the user's data home between servers.
const STORAGE: Storage = Storage::WorkspaceAndSkills;
const WARMUPS: usize = 2;
const FLOOR_N: usize = 20;
const CALLERS: [usize; 3] = [1, 4, 8];
const DOCKER_LOOPS: usize = 8;

/// Times python3 start-ups inside the sandbox; `result` holds their p50/p90 in ms.
const FLOOR_SNIPPET: &str = r#"
import math, subprocess, sys, time
subprocess.run([sys.executable, "-I", "-c", "pass"], check=True)  # warm-up
ms = []
for _ in range(N):
    t = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-c", "pass"], check=True)
    ms.append((time.perf_counter() - t) * 1000)
ms.sort()
rank = lambda p: ms[max(1, math.ceil(p * len(ms))) - 1]
result = {"n": len(ms), "p50_ms": rank(0.5), "p90_ms": rank(0.9)}
"#;

struct Knobs {
    n_paced: usize,
    n_short: usize,
    think: Duration,
    calls: usize,
    dump: bool,
}

impl Knobs {
    fn from_env() -> Self {
        Self {
            n_paced: env_usize("BENCH_N", 100),
            n_short: env_usize("BENCH_N_SHORT", 30),
            think: Duration::from_millis(env_usize("BENCH_THINK_MS", 500) as u64),
            calls: env_usize("BENCH_CALLS", 10),
            dump: env_usize("BENCH_SAMPLES", 0) != 0,
        }
    }
}

/// Samples in call order, for `BENCH_SAMPLES=1`.
fn dump(name: &str, samples: &[f64]) {
    let list: Vec<String> = samples.iter().map(|v| format!("{v:.1}")).collect();
    println!("samples, {name} (ms, in call order): {}", list.join(" "));
}

fn progress(what: &str) {
    eprintln!("bench execution: {what}");
}

/// One `execute_code` call: latency seen by the client, and `execution_time_ms` as the server
/// reports it (from taking a slot to the sandbox's answer), both in ms.
#[derive(Clone, Copy)]
struct Call {
    client: f64,
    server: f64,
}

/// One row of the phase table: a row's name, its client-side mean, and its phases.
struct PhaseRow {
    name: String,
    client_mean: f64,
    phases: Phases,
}

/// One row of the latency table.
struct Row {
    name: String,
    n: usize,
    p50: f64,
    p90: f64,
    p99: Option<f64>,
    server_p50: Option<f64>,
}

impl Row {
    fn from_samples(name: impl Into<String>, samples: &[f64]) -> Self {
        let s = sorted(samples.iter().copied());
        Self {
            name: name.into(),
            n: s.len(),
            p50: p(&s, 0.50),
            p90: p(&s, 0.90),
            p99: Some(p(&s, 0.99)),
            server_p50: None,
        }
    }

    fn from_calls(name: impl Into<String>, calls: &[Call]) -> Self {
        let server = sorted(calls.iter().map(|c| c.server));
        let client: Vec<f64> = calls.iter().map(|c| c.client).collect();
        Self {
            server_p50: Some(p(&server, 0.50)),
            ..Self::from_samples(name, &client)
        }
    }
}

/// What the execution rows ask of a server besides the common calls.
impl Server {
    /// One `execute_code("print(1)")`, checked.
    async fn print1(&self) -> Call {
        let t = Instant::now();
        let v = self.call("execute_code", json!({"code": "print(1)"})).await;
        let client = ms(t.elapsed());
        match v["execution_time_ms"].as_f64() {
            Some(server) if v["output"] == json!(["1"]) => Call { client, server },
            _ => self.fail(format!("execute_code(\"print(1)\") answered {v}")),
        }
    }

    async fn pool_ready(&self) -> usize {
        self.executions().await["pool"]["ready"]
            .as_u64()
            .unwrap_or_default() as usize
    }

    /// `n` calls back to back from a settled pool, and their phase row.
    async fn back_to_back(&self, name: &str, n: usize, pool_size: usize) -> (Vec<Call>, PhaseRow) {
        let before = self.settle(pool_size).await;
        let mut calls = Vec::with_capacity(n);
        for _ in 0..n {
            calls.push(self.print1().await);
        }
        let row = PhaseRow {
            name: name.into(),
            client_mean: mean_client(&calls),
            phases: self.settle(pool_size).await.since(&before),
        };
        (calls, row)
    }

    async fn wait_pool_full(&self, size: usize) {
        self.settle(size).await;
    }
}

/// A `/proc/<pid>/status` field in KiB (VmRSS, VmHWM).
fn proc_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line[field.len() + 1..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Samples VmRSS of `pid` every 50 ms until `stop`; returns the maximum in KiB.
fn rss_sampler(pid: u32, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut max = 0;
        loop {
            max = max.max(proc_kib(pid, "VmRSS").unwrap_or(0));
            if stop.load(Ordering::Relaxed) {
                return max;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

/// `n` samples after the warm-ups, from an async sampler.
async fn sample<T, F: AsyncFnMut() -> T>(n: usize, mut one: F) -> Vec<T> {
    for _ in 0..WARMUPS {
        one().await;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(one().await);
    }
    out
}

fn main() {
    // A private engine is started before the runtime's worker threads exist, so that pointing
    // this process (and the servers and docker CLI it spawns) at it with DOCKER_HOST is safe.
    let engine = match std::env::var("BENCH_ENGINE").as_deref() {
        Err(_) | Ok("" | "default") => None,
        Ok(name @ ("overlay2" | "overlay2-crun")) => {
            let runtime: &[String] = if name == "overlay2-crun" {
                &[
                    "--add-runtime=crun=/usr/bin/crun".into(),
                    "--default-runtime=crun".into(),
                ]
            } else {
                &[]
            };
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let engine = rt.block_on(common::private_engine::PrivateEngine::start_with(
                &["overlay2"],
                runtime,
            ));
            let image = std::process::Command::new(BIN)
                .args(["image", "build"])
                .output()
                .expect("run image build");
            let image = String::from_utf8_lossy(&image.stdout).trim().to_string();
            progress(&format!("loading {image} into the private engine"));
            engine.load_image(&image);
            // SAFETY: no other thread exists yet (the runtime above is single-threaded and
            // idle), so nothing reads the environment concurrently.
            unsafe { std::env::set_var("DOCKER_HOST", engine.host()) };
            Some(engine)
        }
        Ok(other) => panic!("BENCH_ENGINE={other:?}: use `default`, `overlay2` or `overlay2-crun`"),
    };
    common::block_on(run());
    drop(engine);
}

async fn run() {
    let knobs = Knobs::from_env();
    let (run_started, load_before) = (Instant::now(), loadavg());
    // The servers read CEM_POOL_SIZE like any other setting: so does the bench.
    let pool_size = env_usize("CEM_POOL_SIZE", Config::defaults().pool.pool_size);
    assert!(pool_size > 0, "the pooled rows need a pool size > 0");
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let docker_version = docker_version().await;
    progress("making sure the sandbox image is built");
    let image = command_stdout(BIN, &["image", "build"]).await;
    let mut pids = Vec::new();

    // 2. docker run --rm baseline.
    progress("docker run --rm, sequential");
    let (docker_dir, workspace) = common::docker_run::workspace();
    let run_args = docker_run_args(&image, &workspace, &[], "print(1)");
    let docker_samples = sample(knobs.n_short, async || docker_print1(&run_args).await).await;
    let baseline = Row::from_samples("`docker run --rm` (same flags)", &docker_samples);

    // 1 and 3. Cold path (and the interpreter start-up floor measured in it).
    progress("cold path (--pool-size 0)");
    let cold = Server::start(STORAGE, &["--pool-size", "0"]).await;
    pids.push(cold.pid);
    let code = FLOOR_SNIPPET.replace("range(N)", &format!("range({FLOOR_N})"));
    let floor = cold.call("execute_code", json!({ "code": code })).await;
    let floor_ms = |k: &str| {
        floor["result"][k]
            .as_f64()
            .unwrap_or_else(|| panic!("the floor snippet returned no {k}: {floor}"))
    };
    let floor_row = Row {
        name: format!("python3 start-up inside the sandbox (subprocess, N={FLOOR_N})"),
        n: FLOOR_N,
        p50: floor_ms("p50_ms"),
        p90: floor_ms("p90_ms"),
        p99: None,
        server_p50: None,
    };
    let mut phase_rows = Vec::new();
    let before = cold.settle(0).await;
    let cold_samples = sample(knobs.n_short, async || cold.print1().await).await;
    phase_rows.push(PhaseRow {
        name: "cold".into(),
        client_mean: mean_client(&cold_samples),
        phases: cold.settle(0).await.since(&before),
    });
    cold.shutdown().await;

    // 4 to 7. Pooled server: paced, back to back, throughput, memory.
    progress("pooled path (default pool size, --max-concurrency 8)");
    let pooled = Server::start(STORAGE, &["--max-concurrency", "8"]).await;
    pids.push(pooled.pid);
    pooled.wait_pool_full(pool_size).await;
    let rss_idle = proc_kib(pooled.pid, "VmRSS").expect("server VmRSS");
    for _ in 0..WARMUPS {
        pooled.print1().await;
    }
    let before = pooled.settle(pool_size).await;
    progress(&format!(
        "pooled, paced ({} calls, {} ms think time)",
        knobs.n_paced,
        knobs.think.as_millis()
    ));
    let mut paced = Vec::with_capacity(knobs.n_paced);
    let mut full_before = 0;
    for _ in 0..knobs.n_paced {
        tokio::time::sleep(knobs.think).await;
        if pooled.pool_ready().await >= pool_size {
            full_before += 1;
        }
        paced.push(pooled.print1().await);
    }
    phase_rows.push(PhaseRow {
        name: "pooled, paced".into(),
        client_mean: mean_client(&paced),
        phases: pooled.settle(pool_size).await.since(&before),
    });
    progress("pooled, back to back");
    let (back_to_back, row) = pooled
        .back_to_back("pooled, back to back", knobs.n_short, pool_size)
        .await;
    phase_rows.push(row);
    let grown = pooled.executions().await["pool"].clone();
    let mut throughput = Vec::new();
    let mut rss_load = 0;
    for callers in CALLERS {
        progress(&format!("throughput, {callers} caller(s)"));
        let before = pooled.settle(pool_size).await;
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = rss_sampler(pooled.pid, stop.clone());
        let calls = std::sync::Mutex::new(Vec::new());
        let took = concurrent(callers, knobs.calls, async || {
            let call = pooled.print1().await;
            calls.lock().unwrap().push(call);
        })
        .await;
        stop.store(true, Ordering::Relaxed);
        let max = sampler.await.expect("RSS sampler");
        if callers == DOCKER_LOOPS {
            rss_load = max;
            let client_mean = mean_client(&calls.lock().unwrap());
            phase_rows.push(PhaseRow {
                name: format!("pooled, {callers} callers"),
                client_mean,
                phases: pooled.settle(pool_size).await.since(&before),
            });
        }
        throughput.push((
            match callers {
                1 => "execute_code, 1 caller".to_string(),
                n => format!("execute_code, {n} concurrent callers (one session)"),
            },
            callers * knobs.calls,
            took,
        ));
    }
    let rss_hwm = proc_kib(pooled.pid, "VmHWM").expect("server VmHWM");
    pooled.shutdown().await;

    // 9. The previous design, same run: fixed pool, every container removed at once.
    progress("previous design: fixed pool, --removal-backlog 0");
    let size = pool_size.to_string();
    let fixed = Server::start(
        STORAGE,
        &[
            "--max-concurrency",
            "8",
            "--pool-max",
            &size,
            "--removal-backlog",
            "0",
        ],
    )
    .await;
    pids.push(fixed.pid);
    let (fixed_b2b, row) = fixed
        .back_to_back(
            "fixed pool, immediate removal, back to back",
            knobs.n_short,
            pool_size,
        )
        .await;
    phase_rows.push(row);
    let before = fixed.settle(pool_size).await;
    let calls = std::sync::Mutex::new(Vec::new());
    let took = concurrent(DOCKER_LOOPS, knobs.calls, async || {
        let call = fixed.print1().await;
        calls.lock().unwrap().push(call);
    })
    .await;
    let client_mean = mean_client(&calls.lock().unwrap());
    phase_rows.push(PhaseRow {
        name: format!("fixed pool, immediate removal, {DOCKER_LOOPS} callers"),
        client_mean,
        phases: fixed.settle(pool_size).await.since(&before),
    });
    throughput.push((
        format!("execute_code, {DOCKER_LOOPS} callers, fixed pool and immediate removal"),
        DOCKER_LOOPS * knobs.calls,
        took,
    ));
    fixed.shutdown().await;

    progress(&format!("throughput, {DOCKER_LOOPS} docker run --rm loops"));
    let docker_took = concurrent(DOCKER_LOOPS, knobs.calls, async || {
        docker_print1(&run_args).await
    })
    .await;
    let docker_tp = (DOCKER_LOOPS * knobs.calls) as f64 / docker_took.as_secs_f64();
    throughput.push((
        format!("`docker run --rm`, {DOCKER_LOOPS} parallel loops"),
        DOCKER_LOOPS * knobs.calls,
        docker_took,
    ));

    // 8. Start to first execution served.
    progress("start to first execution, 3 fresh servers");
    let mut first = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let server = Server::start(STORAGE, &[]).await;
        server.print1().await;
        first.push(ms(t.elapsed()));
        pids.push(server.pid);
        server.shutdown().await;
    }
    let mut first_sorted = first.clone();
    first_sorted.sort_by(f64::total_cmp);

    let left = leftover_containers(&pids).await;
    drop(docker_dir);

    // Report.
    println!(
        "\n## execute_code latency, throughput and footprint\n\nmachine: nproc {nproc}, Docker \
         {docker_version}; image {image}; pool size {pool_size}; release build; 1-min load \
         average {load_before} at the start, {} at the end; run took {:.0} s\n",
        loadavg(),
        run_started.elapsed().as_secs_f64()
    );
    let rows = [
        floor_row,
        baseline,
        Row::from_calls("execute_code, cold (`--pool-size 0`)", &cold_samples),
        Row::from_calls(
            format!(
                "execute_code, pooled, paced ({} ms think time)",
                knobs.think.as_millis()
            ),
            &paced,
        ),
        Row::from_calls("execute_code, pooled, back to back", &back_to_back),
        Row::from_calls(
            "execute_code, back to back, fixed pool and immediate removal",
            &fixed_b2b,
        ),
    ];
    let base = rows[1].p50;
    println!("| path | n | p50 ms | p90 ms | p99 ms | p50 vs docker run | server-side p50 ms |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let cell = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.1}"));
    for r in &rows {
        println!(
            "| {} | {} | {:.1} | {:.1} | {} | {:.3}x | {} |",
            r.name,
            r.n,
            r.p50,
            r.p90,
            cell(r.p99),
            r.p50 / base,
            cell(r.server_p50)
        );
    }
    println!(
        "\nThe pool was full before {full_before} of {} paced calls. Each row has {WARMUPS} \
         warm-ups before its samples (none for back to back, which starts with a full pool). \
         Server-side: `execution_time_ms` of the responses, from taking an execution slot to \
         the sandbox's answer (the rest is MCP, stdio and the server's own handling).\n",
        knobs.n_paced
    );
    if knobs.dump {
        let client = |calls: &[Call]| calls.iter().map(|c| c.client).collect::<Vec<_>>();
        dump("docker run", &docker_samples);
        dump("cold, client", &client(&cold_samples));
        dump("paced, client", &client(&paced));
        dump("back to back, client", &client(&back_to_back));
        let server = |calls: &[Call]| calls.iter().map(|c| c.server).collect::<Vec<_>>();
        dump("paced, server", &server(&paced));
        dump("back to back, server", &server(&back_to_back));
    }
    println!(
        "After the back-to-back row the pool's target was {} (base {}, share {}), refilling at \
         {} containers/s over the last 10 s.\n",
        grown["target"], grown["base"], grown["share"], grown["refill_per_second"]
    );
    print_phases(&phase_rows);
    println!("| callers | executions | seconds | exec/s | vs {DOCKER_LOOPS} docker run loops |");
    println!("|---|---:|---:|---:|---:|");
    for (name, n, took) in &throughput {
        let tp = *n as f64 / took.as_secs_f64();
        println!(
            "| {name} | {n} | {:.2} | {tp:.1} | {:.2}x |",
            took.as_secs_f64(),
            tp / docker_tp
        );
    }
    println!(
        "\nserver RSS: idle {} (pool full, before any execution); max {} sampled every 50 ms \
         during the {DOCKER_LOOPS}-caller phase; VmHWM {} at the end",
        mib(rss_idle),
        mib(rss_load),
        mib(rss_hwm)
    );
    println!(
        "start to first execution served (spawn, MCP handshake, print(1); default pool size): \
         median {:.0} ms of 3 ({})",
        first_sorted[1],
        first
            .iter()
            .map(|v| format!("{v:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    report_leftovers(&left, pids.len()).await;
}

fn mean_client(calls: &[Call]) -> f64 {
    calls.iter().map(|c| c.client).sum::<f64>() / calls.len().max(1) as f64
}

/// The phase table: mean ms per phase (and how many were timed) for each row.
fn print_phases(rows: &[PhaseRow]) {
    println!(
        "Where the time goes (mean ms per timing, count in brackets; engine phases, then the \
         server's `run` and `call`, then what the client saw):\n"
    );
    println!("| row | {} | client |", PHASES.join(" | "));
    println!("|---|{}---:|", "---:|".repeat(PHASES.len()));
    for row in rows {
        let cells = row.phases.cells();
        println!(
            "| {} | {} | {:.1} |",
            row.name,
            cells.join(" | "),
            row.client_mean
        );
    }
    println!();
}
