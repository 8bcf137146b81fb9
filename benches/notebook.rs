//! Notebook-style use of `execute_code`, one call per agent turn, beside `docker run --rm`:
//! `cargo bench --bench notebook`.
//!
//! One run, against the real Docker engine and the real server binary driven by an rmcp client
//! over stdio, on the default image (the data profile; pooled containers preload what the
//! tenant's recent code imported, `--preload auto`), measures:
//!
//! 1. the baseline: `docker run --rm` of the sandbox image with the server's isolation flags
//!    running `python3 -c 'print(1)'`, sequential, and 8 parallel loops of it beside
//!    `execute_code("print(1)")` from 8 concurrent callers on one MCP session;
//! 2. `print(1)` paced (an agent's think time between calls) and back to back;
//! 3. `import pandas` and a 2-row DataFrame, paced, after the pool has learned what it imports
//!    (`Server::teach`: the pressure window of the row before waited out, then untimed calls
//!    until every pooled container is one started after the learning);
//! 4. a matplotlib bar chart with `plt.show()` (one PNG back), paced, on the default server
//!    and on one that also preloads `matplotlib.pyplot`;
//! 5. sessions: one holding a ~100 MB DataFrame (1.6 M x 8 floats) whose follow-ups read it,
//!    paced; and one with a small state (`n = n + 1`) interleaved call by call with the same
//!    code without a session, so the difference is what the session adds;
//! 6. `import numpy, pandas` in a fresh `python3 -I` subprocess (so no preload hides it), timed
//!    inside the container: in an execution, in `docker run` of the image, and in `docker run`
//!    with the image's /usr exported to a host directory and bind-mounted read-only (reads that
//!    do not go through the engine's storage driver); with `--image-tree` (when the binary has
//!    it) also in executions of servers started with `--image-tree engine` and `host`.
//!
//! Where the time goes: for each row the mean of each phase of `get_execution_stats` (engine
//! phases of a container's life, `state_sent` for sessions, and the server's `run` and `call`)
//! over the row's calls. In paced rows a snapshot is taken in the middle of each think time, so
//! a call is charged with what it caused in the background (refill, removal, preparing a
//! session's next container); back-to-back and concurrent rows take one before and one after
//! the row, after the pool has settled.
//!
//! Every server gets its own temporary data directory and is shut down by closing its stdin;
//! at the end the bench checks that no sandbox container of its servers is left. A failed call
//! fails the bench with the error text and the tail of the server's stderr. Percentiles are
//! nearest-rank; an aim is printed beside its figure, never asserted.
//!
//! Knobs (environment): `BENCH_N` samples of the paced `print(1)`, back-to-back and session
//! rows (default 30); `BENCH_N_SHORT` samples of the heavier rows (default 15); `BENCH_CALLS`
//! calls per caller and per `docker run` loop in the throughput row (default 5);
//! `BENCH_IMPORTS` timed imports per import row (default 8).
//!
//! Figures on a shared machine are noisy: compare within one run, not across runs.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use code_execution_mcp::config::Config;
use common::docker_run::{docker_print1, docker_run, docker_run_args};
use common::knobs::env_usize;
use common::server::{BIN, PHASES, Phases, Server, Storage};
use common::stdio::{
    command_stdout, concurrent, docker_version, leftover_containers, loadavg, ms, p,
    report_leftovers, sorted,
};
use serde_json::{Value, json};
use tokio::process::Command;

const WARMUPS: usize = 2;
const LOOPS: usize = 8;

const PANDAS: &str = "import pandas; result = len(pandas.DataFrame({'a':[1,2]}))";
const CHART: &str = "import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(6, 4))
ax.bar(['a', 'b', 'c', 'd'], [3, 1, 4, 1])
plt.show()";
const BIG_STATE: &str = "import numpy as np, pandas as pd
df = pd.DataFrame(np.random.rand(1_600_000, 8))
result = int(df.memory_usage().sum())";
const BIG_FOLLOW_UP: &str = "result = float(df[0].sum())";

/// Times `import numpy, pandas` in fresh `python3 -I` subprocesses; sets `result` to their
/// p50 and max in ms and prints it as JSON (the `docker run` rows read the printed line).
const IMPORT_SNIPPET: &str = r#"
import json, subprocess, sys
code = "import time; t = time.perf_counter(); import numpy, pandas; print((time.perf_counter() - t) * 1000)"
one = lambda: float(subprocess.run([sys.executable, "-I", "-c", code], check=True, capture_output=True, text=True).stdout)
one()  # warm-up: the first read of the files
ms = sorted(one() for _ in range(N))
result = {"n": len(ms), "p50_ms": ms[(len(ms) - 1) // 2], "max_ms": ms[-1]}
print(json.dumps(result))
"#;

fn progress(what: &str) {
    eprintln!("bench notebook: {what}");
}

/// One call to time: the code, its session handle, and what its answer must hold.
struct Job {
    code: String,
    session: Option<String>,
    check: fn(&Value, usize) -> bool,
}

impl Job {
    fn new(code: impl Into<String>, check: fn(&Value, usize) -> bool) -> Self {
        Self {
            code: code.into(),
            session: None,
            check,
        }
    }
}

fn prints_1(v: &Value, _: usize) -> bool {
    v["output"] == json!(["1"])
}

fn any_ok(_: &Value, _: usize) -> bool {
    true
}

fn one_image(v: &Value, _: usize) -> bool {
    v["images"].as_array().is_some_and(|a| a.len() == 1)
}

fn result_is_2(v: &Value, _: usize) -> bool {
    v["result"] == json!(2)
}

/// The session's state was saved again (the follow-up's snapshot replaced the previous one).
fn state_saved(v: &Value, _: usize) -> bool {
    v["state"]["saved"] == json!(true)
}

/// `n = n + 1` in a session that started with `n = 0`: the i-th call (from 0, warm-ups
/// included) answers i + 1.
fn counts(v: &Value, i: usize) -> bool {
    v["result"] == json!(i + 1) && state_saved(v, i)
}

/// A row's samples: client latency and `execution_time_ms`, and its phases.
struct Series {
    name: String,
    job: Job,
    client: Vec<f64>,
    server: Vec<f64>,
    phases: Phases,
    aim: Option<Aim>,
}

/// What a row aims at, printed beside its figures.
#[derive(Clone, Copy)]
enum Aim {
    P50(f64),
    P50P99(f64, f64),
}

impl Series {
    fn new(name: impl Into<String>, job: Job, aim: Option<Aim>) -> Self {
        Self {
            name: name.into(),
            job,
            client: Vec::new(),
            server: Vec::new(),
            phases: Phases::default(),
            aim,
        }
    }

    fn p50(&self) -> f64 {
        p(&sorted(self.client.iter().copied()), 0.5)
    }

    fn p99(&self) -> f64 {
        p(&sorted(self.client.iter().copied()), 0.99)
    }

    fn mean(&self) -> f64 {
        self.client.iter().sum::<f64>() / self.client.len().max(1) as f64
    }
}

/// What the notebook's rows ask of a server besides the common calls.
impl Server {
    /// One `execute_code` of `code`, in `session` if given; fails the bench unless it ended
    /// `ok`. Returns the answer, the client's latency and `execution_time_ms`.
    async fn exec(&self, code: &str, session: Option<&str>) -> (Value, f64, f64) {
        let mut args = json!({"code": code, "timeout_seconds": 300});
        if let Some(s) = session {
            args["session"] = json!(s);
        }
        let t = Instant::now();
        let v = self.call("execute_code", args).await;
        let client = ms(t.elapsed());
        if v["status"] != json!("ok") {
            self.fail(format!("execute_code({code:?}) answered {v}"));
        }
        let server = v["execution_time_ms"].as_f64().unwrap_or_default();
        (v, client, server)
    }

    /// One timed call of `job`; `i` counts its calls, warm-ups included.
    async fn run(&self, job: &Job, i: usize) -> (f64, f64) {
        let (v, client, server) = self.exec(&job.code, job.session.as_deref()).await;
        if !(job.check)(&v, i) {
            self.fail(format!("execute_code({:?}) answered {v}", job.code));
        }
        (client, server)
    }

    /// A new session whose first call runs `code`; returns its handle.
    async fn new_session(&self, code: &str) -> String {
        let (v, _, _) = self.exec(code, Some("new")).await;
        match v["session"].as_str() {
            Some(s) if v["state"]["saved"] == json!(true) => s.to_string(),
            _ => self.fail(format!("a new session answered {v}")),
        }
    }

    /// Calls each series in turn, `n` samples each after the warm-ups, with `think` before
    /// every call; a stats snapshot in the middle of each think time charges each call with
    /// what it caused in the background.
    async fn paced(&self, series: &mut [&mut Series], n: usize, think: Duration, pool: usize) {
        let mut last = self.settle(pool).await;
        let mut previous: Option<usize> = None;
        for i in 0..WARMUPS + n {
            for k in 0..series.len() {
                tokio::time::sleep(think / 2).await;
                let now = Phases::from_stats(&self.executions().await);
                if let Some(j) = previous {
                    series[j].phases.add(&now.since(&last));
                }
                last = now;
                tokio::time::sleep(think / 2).await;
                let (client, server) = self.run(&series[k].job, i).await;
                if i >= WARMUPS {
                    series[k].client.push(client);
                    series[k].server.push(server);
                    previous = Some(k);
                } else {
                    previous = None;
                }
            }
        }
        tokio::time::sleep(think / 2).await;
        let now = self.settle(pool).await;
        if let Some(j) = previous {
            series[j].phases.add(&now.since(&last));
        }
    }

    /// Lets the pool learn what `job` imports (the default `--preload auto`): waits out the
    /// pressure window a back-to-back row leaves (replacements skip the preload for 10 s after
    /// a call found the pool empty), then runs `job` untimed, paced, until every container the
    /// pool held before has been used and replaced by one that preloads what it learned.
    async fn teach(&self, job: &Job, pool: usize) {
        tokio::time::sleep(Duration::from_secs(11)).await;
        for i in 0..pool + 2 {
            self.settle(pool).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            self.run(job, i).await;
        }
    }

    /// `n` calls back to back from a settled pool.
    async fn back_to_back(&self, series: &mut Series, n: usize, pool: usize) {
        let before = self.settle(pool).await;
        for i in 0..n {
            let (client, server) = self.run(&series.job, i).await;
            series.client.push(client);
            series.server.push(server);
        }
        series.phases = self.settle(pool).await.since(&before);
    }
}

/// The import snippet's (p50, max) in ms from its answer (`result`, or a printed JSON line).
fn import_ms(v: &Value) -> (f64, f64) {
    match (v["p50_ms"].as_f64(), v["max_ms"].as_f64()) {
        (Some(a), Some(b)) => (a, b),
        _ => panic!("the import snippet answered {v}"),
    }
}

/// The image's /usr, exported into `dir` (a created, never started container, removed after).
async fn export_usr(image: &str, dir: &Path) {
    let id = command_stdout("docker", &["create", image]).await;
    let script = format!(
        "docker export {id} | tar -x -C {} usr",
        shell_quote(&dir.display().to_string())
    );
    let ok = Command::new("sh")
        .args(["-c", &script])
        .status()
        .await
        .expect("run sh");
    let _ = command_stdout("docker", &["rm", &id]).await;
    assert!(ok.success(), "exporting the image's /usr failed: {ok}");
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn main() {
    common::block_on(run());
}

async fn run() {
    let n = env_usize("BENCH_N", 30);
    let n_short = env_usize("BENCH_N_SHORT", 15);
    let calls = env_usize("BENCH_CALLS", 5);
    let imports = env_usize("BENCH_IMPORTS", 8);
    let (run_started, load_before) = (Instant::now(), loadavg());
    let pool = env_usize("CEM_POOL_SIZE", Config::defaults().pool.pool_size);
    assert!(pool > 0, "the bench needs a pool size > 0");
    let docker_version = docker_version().await;
    progress("making sure the sandbox image is built");
    let image = command_stdout(BIN, &["image", "build"]).await;
    let help = command_stdout(BIN, &["serve", "--help"]).await;
    let image_tree = help.contains("--image-tree");
    let mut pids = Vec::new();
    let think_short = Duration::from_millis(300);

    // 1. docker run --rm, sequential.
    progress("docker run --rm, sequential");
    let (docker_dir, workspace) = common::docker_run::workspace();
    let print_args = docker_run_args(&image, &workspace, &[], "print(1)");
    for _ in 0..WARMUPS {
        docker_print1(&print_args).await;
    }
    let mut docker_seq = Vec::new();
    for _ in 0..n_short {
        docker_seq.push(docker_print1(&print_args).await);
    }

    // 2 to 5 on the default server.
    progress("default server (--max-concurrency 8)");
    let server = Server::start(Storage::DataDir, &["--max-concurrency", "8"]).await;
    pids.push(server.pid);

    progress("print(1) paced, 300 ms think time");
    let mut print_paced = Series::new(
        "`print(1)`, paced (300 ms think time)",
        Job::new("print(1)", prints_1),
        Some(Aim::P50P99(5.0, 25.0)),
    );
    server
        .paced(&mut [&mut print_paced], n, think_short, pool)
        .await;

    progress("print(1) back to back");
    let mut print_b2b = Series::new(
        "`print(1)`, back to back",
        Job::new("print(1)", prints_1),
        Some(Aim::P50(50.0)),
    );
    server.back_to_back(&mut print_b2b, n, pool).await;

    progress("pandas paced, 500 ms think time");
    let mut pandas = Series::new(
        "`import pandas` + 2-row DataFrame, paced (500 ms)",
        Job::new(PANDAS, result_is_2),
        Some(Aim::P50(50.0)),
    );
    server.teach(&pandas.job, pool).await;
    server
        .paced(
            &mut [&mut pandas],
            n_short,
            Duration::from_millis(500),
            pool,
        )
        .await;

    progress("matplotlib bar chart paced, 1 s think time");
    let mut chart = Series::new(
        "matplotlib bar chart + `plt.show()`, paced (1 s)",
        Job::new(CHART, one_image),
        Some(Aim::P50(300.0)),
    );
    server.teach(&chart.job, pool).await;
    server
        .paced(&mut [&mut chart], n_short, Duration::from_secs(1), pool)
        .await;

    progress("small-state session interleaved with the same code without one");
    let first = server.new_session("n = 0").await;
    let mut small = Series::new(
        "session, small state: `n = n + 1`, paced (300 ms)",
        Job {
            code: "n = n + 1; result = n".into(),
            session: Some(first),
            check: counts,
        },
        None,
    );
    let mut stateless = Series::new(
        "the same without a session: `n = 0; n = n + 1`, paced (300 ms)",
        Job::new("n = 0; n = n + 1; result = n", any_ok),
        None,
    );
    server
        .paced(&mut [&mut stateless, &mut small], n, think_short, pool)
        .await;

    progress("session holding a ~100 MB DataFrame, follow-ups paced 3 s");
    let t = Instant::now();
    let big_handle = server.new_session(BIG_STATE).await;
    let big_first = ms(t.elapsed());
    let mut big = Series::new(
        "session with a ~100 MB DataFrame: `float(df[0].sum())`, paced (3 s)",
        Job {
            code: BIG_FOLLOW_UP.into(),
            session: Some(big_handle),
            check: state_saved,
        },
        Some(Aim::P50(100.0)),
    );
    server
        .paced(&mut [&mut big], n_short, Duration::from_secs(3), pool)
        .await;
    let big_bytes = server
        .exec(BIG_FOLLOW_UP, big.job.session.as_deref())
        .await
        .0["state"]["bytes"]
        .as_u64()
        .unwrap_or_default();

    // 1, continued: 8 callers beside 8 docker run loops.
    progress("print(1), 8 concurrent callers");
    let before = server.settle(pool).await;
    let mut eight = Series::new(
        format!("`print(1)`, {LOOPS} concurrent callers"),
        Job::new("print(1)", prints_1),
        None,
    );
    let samples = std::sync::Mutex::new(Vec::new());
    let took = concurrent(LOOPS, calls, async || {
        let (client, server_ms) = server.run(&eight.job, 0).await;
        samples.lock().unwrap().push((client, server_ms));
    })
    .await;
    for (c, s) in samples.into_inner().unwrap() {
        eight.client.push(c);
        eight.server.push(s);
    }
    eight.phases = server.settle(pool).await.since(&before);

    // 6, in an execution of the default server.
    progress("import numpy, pandas in a subprocess, in an execution");
    let snippet = IMPORT_SNIPPET.replace("range(N)", &format!("range({imports})"));
    let import_exec = import_ms(&server.exec(&snippet, None).await.0["result"]);
    server.shutdown().await;

    progress(&format!("{LOOPS} parallel docker run --rm loops"));
    let docker_took = concurrent(LOOPS, calls, async || docker_print1(&print_args).await).await;

    // 4, with matplotlib.pyplot preloaded too.
    progress("matplotlib with --preload numpy,pandas,matplotlib.pyplot");
    let mpl = Server::start(
        Storage::DataDir,
        &["--preload", "numpy,pandas,matplotlib.pyplot"],
    )
    .await;
    pids.push(mpl.pid);
    let mut chart_preloaded = Series::new(
        "the same chart, `--preload numpy,pandas,matplotlib.pyplot`",
        Job::new(CHART, one_image),
        Some(Aim::P50(300.0)),
    );
    mpl.paced(
        &mut [&mut chart_preloaded],
        n_short,
        Duration::from_secs(1),
        pool,
    )
    .await;
    mpl.shutdown().await;

    // 6: the image's /usr through the engine's storage driver, and from a host directory.
    progress("import numpy, pandas: docker run, the image's /usr vs a host directory");
    let usr = tempfile::tempdir().expect("temp dir");
    let t = Instant::now();
    export_usr(&image, usr.path()).await;
    let export_s = t.elapsed().as_secs_f64();
    let import_engine = {
        // The same flags as the host-directory row (no --init), without the bind.
        let args = docker_run_args(&image, &workspace, &["--rm".to_string()], &snippet);
        let (_, out) = docker_run(&args).await;
        import_ms(&serde_json::from_str(out.lines().last().unwrap_or("")).expect("JSON"))
    };
    let import_host = {
        let bind = vec![
            "-v".to_string(),
            format!("{}:/usr:ro", usr.path().join("usr").display()),
        ];
        let args = docker_run_args(&image, &workspace, &bind, &snippet);
        let (_, out) = docker_run(&args).await;
        import_ms(&serde_json::from_str(out.lines().last().unwrap_or("")).expect("JSON"))
    };
    drop(usr);

    let mut tree_rows = Vec::new();
    if image_tree {
        for tree in ["engine", "host"] {
            progress(&format!("--image-tree {tree}"));
            let s = Server::start(Storage::DataDir, &["--image-tree", tree]).await;
            pids.push(s.pid);
            let import = import_ms(&s.exec(&snippet, None).await.0["result"]);
            let mut chart = Series::new(
                format!("matplotlib chart, paced (1 s), `--image-tree {tree}`"),
                Job::new(CHART, one_image),
                Some(Aim::P50(300.0)),
            );
            s.paced(&mut [&mut chart], n_short, Duration::from_secs(1), pool)
                .await;
            s.shutdown().await;
            tree_rows.push((tree, import, chart));
        }
    }

    let left = leftover_containers(&pids).await;
    drop(docker_dir);

    // Report.
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "\n## Notebook speed\n\nmachine: nproc {nproc}, Docker {docker_version}; image {image}; \
         pool size {pool}; release build; 1-min load average {load_before} at the start, {} at \
         the end; run took {:.0} s\n",
        loadavg(),
        run_started.elapsed().as_secs_f64()
    );
    let docker = sorted(docker_seq.iter().copied());
    let docker_p50 = p(&docker, 0.5);
    println!("| row | n | p50 ms | p99 ms | server-side p50 ms | aim | met |");
    println!("|---|---:|---:|---:|---:|---|---|");
    println!(
        "| `docker run --rm` `print(1)` (same flags), sequential | {} | {:.1} | {:.1} | – | – | – |",
        docker.len(),
        docker_p50,
        p(&docker, 0.99)
    );
    let mut rows: Vec<&Series> = vec![
        &print_paced,
        &print_b2b,
        &pandas,
        &chart,
        &chart_preloaded,
        &stateless,
        &small,
        &big,
        &eight,
    ];
    rows.extend(tree_rows.iter().map(|(_, _, s)| s));
    for s in &rows {
        let (p50, p99) = (s.p50(), s.p99());
        let (aim, met) = match s.aim {
            None => ("–".to_string(), "–"),
            Some(Aim::P50(a)) => (format!("p50 ≤ {a} ms"), yes(p50 <= a)),
            Some(Aim::P50P99(a, b)) => (
                format!("p50 ≤ {a} ms, p99 ≤ {b} ms"),
                yes(p50 <= a && p99 <= b),
            ),
        };
        println!(
            "| {} | {} | {p50:.1} | {p99:.1} | {:.1} | {aim} | {met} |",
            s.name,
            s.client.len(),
            p(&sorted(s.server.iter().copied()), 0.5),
        );
    }
    let added_p50 = small.p50() - stateless.p50();
    let added_mean = small.mean() - stateless.mean();
    println!(
        "\nA small-state session adds {added_p50:.1} ms at p50 ({added_mean:.1} ms in the mean) \
         to the same code without a session (aim ≤ 10 ms: {}). The ~100 MB DataFrame's session \
         started in {big_first:.0} ms (the first call: build and save) and carries {:.1} MB.\n",
        yes(added_p50 <= 10.0),
        big_bytes as f64 / 1e6
    );

    let n_tp = LOOPS * calls;
    let exec_tp = n_tp as f64 / took.as_secs_f64();
    let docker_tp = n_tp as f64 / docker_took.as_secs_f64();
    println!("| throughput | runs | seconds | per second | vs docker run loops |");
    println!("|---|---:|---:|---:|---:|");
    println!(
        "| `execute_code(\"print(1)\")`, {LOOPS} concurrent callers | {n_tp} | {:.2} | {exec_tp:.1} \
         | {:.2}x (aim ≥ 1.5x: {}) |",
        took.as_secs_f64(),
        exec_tp / docker_tp,
        yes(exec_tp / docker_tp >= 1.5)
    );
    println!(
        "| `docker run --rm`, {LOOPS} parallel loops | {n_tp} | {:.2} | {docker_tp:.1} | 1.00x |\n",
        docker_took.as_secs_f64()
    );

    println!(
        "`import numpy, pandas` in a fresh `python3 -I` subprocess ({imports} timed after one \
         warm-up; the image's /usr exported to a host directory in {export_s:.0} s):\n"
    );
    println!("| where | p50 ms | max ms | vs host directory |");
    println!("|---|---:|---:|---:|");
    let mut imports_rows = vec![
        ("an execution (default server)".to_string(), import_exec),
        (
            "`docker run`, the image's /usr (the engine's storage driver)".to_string(),
            import_engine,
        ),
        (
            "`docker run`, /usr bind-mounted read-only from a host directory".to_string(),
            import_host,
        ),
    ];
    imports_rows.extend(
        tree_rows
            .iter()
            .map(|(tree, import, _)| (format!("an execution, `--image-tree {tree}`"), *import)),
    );
    for (name, (p50, max)) in &imports_rows {
        println!(
            "| {name} | {p50:.1} | {max:.1} | {:.2}x |",
            p50 / import_host.0
        );
    }
    println!(
        "\nExecution vs host directory: {:.2}x (aim ≤ 1.5x: {}).{}\n",
        import_exec.0 / import_host.0,
        yes(import_exec.0 / import_host.0 <= 1.5),
        if image_tree {
            ""
        } else {
            " This binary has no `--image-tree`: those rows were skipped."
        }
    );

    println!(
        "Where the time goes (mean ms per timing, count in brackets; engine phases, then the \
         server's `run` and `call`, then the client's mean; pooled and prepared: executions \
         served by a pooled container and by one prepared for their session):\n"
    );
    println!(
        "| row | {} | pooled | prepared | client |",
        PHASES.join(" | ")
    );
    println!("|---|{}---:|---:|---:|", "---:|".repeat(PHASES.len()));
    for s in &rows {
        let cells = s.phases.cells();
        println!(
            "| {} | {} | {} | {} | {:.1} |",
            s.name,
            cells.join(" | "),
            s.phases.pooled,
            s.phases.prepared,
            s.mean()
        );
    }
    println!();
    report_leftovers(&left, pids.len()).await;
}

fn yes(met: bool) -> &'static str {
    if met { "yes" } else { "no" }
}
