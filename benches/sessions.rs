//! Sessions as a person doing analysis meets them, on a fresh server: `cargo bench --bench
//! sessions`.
//!
//! One server binary, driven by an rmcp client over stdio against the real Docker engine on the
//! default (data) image, started fresh: its pool filled, then one `print(1)` before anything is
//! timed. Every call is paced (1 s of think time before it), as an agent's turns are. Rows:
//!
//! 1. the baseline: `print(1)` without a session;
//! 2. follow-ups to a session holding `pd.DataFrame(rng.random((2_000_000, 6)))` (96 MB) that
//!    read it (`result = abs(float(df.a.sum()) - expected) < 1e-6`), on a quiet machine and with
//!    one core kept busy by a spinning thread of this process;
//! 3. a rewind: the same read on the revision three before the newest (`HANDLE@N`; each
//!    rewind's state becomes the newest revision, so the next goes three back from there);
//! 4. a fork of it: the time to the new handle (`fork=true`, code `pass`), then the fork's first
//!    call (the read);
//! 5. a second matplotlib chart in one session (`plt.show()`, one PNG back), after its first.
//!
//! Each row prints p50 and p99 (nearest rank), its aim from the issue beside it (printed, never
//! asserted), and its p50 over the baseline's. At the end no sandbox container of the server
//! may be left.
//!
//! Knobs (environment): `BENCH_N` samples per row (default 20).
//!
//! Figures on a shared machine are noisy: compare within one run, not across runs.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use code_execution_mcp::config::Config;
use common::knobs::env_usize;
use common::server::{Server, Storage};
use common::stdio::{leftover_containers, loadavg, ms, p, report_leftovers, sorted};
use serde_json::{Value, json};

const THINK: Duration = Duration::from_secs(1);

const BIG: &str = "import numpy as np, pandas as pd\nrng = np.random.default_rng(7)\n\
df = pd.DataFrame(rng.random((2_000_000, 6)), columns=list('abcdef'))\n\
expected = float(df.a.sum())";
const READ: &str = "result = abs(float(df.a.sum()) - expected) < 1e-6";
const CHART: &str = "import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [1, 2])\nplt.show()";

fn main() {
    common::block_on(run());
}

/// A row's samples (client latency, ms) and its aim (p50, p99).
struct Row {
    name: &'static str,
    samples: Vec<f64>,
    aim: (f64, Option<f64>),
}

impl Row {
    fn new(name: &'static str, aim: (f64, Option<f64>)) -> Self {
        Self {
            name,
            samples: Vec::new(),
            aim,
        }
    }

    fn p(&self, q: f64) -> f64 {
        p(&sorted(self.samples.iter().copied()), q)
    }

    fn met(&self) -> bool {
        self.p(0.5) <= self.aim.0 && self.aim.1.is_none_or(|p99| self.p(0.99) <= p99)
    }
}

/// One `execute_code`; fails the bench unless it ended `ok`. The answer and its latency (ms).
async fn exec(server: &Server, args: Value) -> (Value, f64) {
    tokio::time::sleep(THINK).await;
    let t = Instant::now();
    let v = server.call("execute_code", args.clone()).await;
    let took = ms(t.elapsed());
    if v["status"] != json!("ok") {
        server.fail(format!("execute_code({args}) answered {v}"));
    }
    (v, took)
}

fn revision(server: &Server, v: &Value) -> u64 {
    v["state"]["revision"]
        .as_u64()
        .unwrap_or_else(|| server.fail(format!("no revision in {v}")))
}

fn handle(server: &Server, v: &Value) -> String {
    match v["session"].as_str() {
        Some(s) if v["state"]["saved"] == json!(true) => s.to_string(),
        _ => server.fail(format!("no saved session in {v}")),
    }
}

/// A thread that keeps one core busy until dropped.
struct Busy(Arc<AtomicBool>);

impl Busy {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            let mut x = 0u64;
            while !flag.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        });
        Self(stop)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

async fn run() {
    let n = env_usize("BENCH_N", 20);
    let pool = Config::defaults().pool.pool_size;
    let max_count = (2 * n + 16).to_string();
    let server = Server::start(Storage::DataDir, &["--session-max-count", &max_count]).await;
    server.settle(pool).await;
    exec(&server, json!({"code": "print(1)"})).await;
    eprintln!("bench sessions: fresh server, pool of {pool} filled, one call made");

    let mut baseline = Row::new("`print(1)`, no session (baseline)", (f64::INFINITY, None));
    for _ in 0..n {
        baseline
            .samples
            .push(exec(&server, json!({"code": "print(1)"})).await.1);
    }
    let (v, _) = exec(
        &server,
        json!({"code": BIG, "session": "new", "timeout_seconds": 120}),
    )
    .await;
    let big = handle(&server, &v);
    let follow = |code: &str, session: &str| json!({"code": code, "session": session});
    let mut quiet = Row::new("follow-up to a 96 MB state", (100.0, Some(300.0)));
    let mut busy = Row::new("the same, one core busy", (100.0, Some(300.0)));
    for _ in 0..n {
        quiet
            .samples
            .push(exec(&server, follow(READ, &big)).await.1);
    }
    {
        let _busy = Busy::start();
        for _ in 0..n {
            busy.samples.push(exec(&server, follow(READ, &big)).await.1);
        }
    }
    let mut rewind = Row::new(
        "rewind to an earlier revision of it, then its read",
        (100.0, None),
    );
    let mut newest = revision(&server, &exec(&server, follow(READ, &big)).await.0);
    for _ in 0..n {
        // Three revisions back: within the history (8), and not the state the session holds.
        let (v, took) = exec(&server, follow(READ, &format!("{big}@{}", newest - 3))).await;
        rewind.samples.push(took);
        newest = revision(&server, &v);
    }
    let mut forked = Row::new("fork of it, to the new handle", (50.0, None));
    let mut first = Row::new("the fork's first call", (100.0, None));
    for _ in 0..n {
        let args = json!({"code": "pass", "session": big, "fork": true});
        let (v, took) = exec(&server, args).await;
        forked.samples.push(took);
        let fork = handle(&server, &v);
        first
            .samples
            .push(exec(&server, follow(READ, &fork)).await.1);
    }
    let mut chart = Row::new("a second chart in one session", (60.0, None));
    for _ in 0..n.min(10) {
        let (v, _) = exec(&server, follow(CHART, "new")).await;
        let s = handle(&server, &v);
        chart.samples.push(exec(&server, follow(CHART, &s)).await.1);
    }

    let rows = [&baseline, &quiet, &busy, &rewind, &forked, &first, &chart];
    report(&rows, n, &server).await;
    let pid = server.pid;
    server.shutdown().await;
    report_leftovers(&leftover_containers(&[pid]).await, 1).await;
}

async fn report(rows: &[&Row], n: usize, server: &Server) {
    let base = rows[0].p(0.5);
    println!(
        "\nsessions on a fresh server (pool filled, one call before), calls paced {} s, {n} samples a row; load {}",
        THINK.as_secs(),
        loadavg()
    );
    println!("| row | p50 ms | p99 ms | p50 vs baseline | aim | met |");
    println!("|---|---:|---:|---:|---|---|");
    for row in rows {
        let aim = match row.aim {
            (p50, _) if p50.is_infinite() => "".to_string(),
            (p50, None) => format!("p50 ≤ {p50} ms"),
            (p50, Some(p99)) => format!("p50 ≤ {p50} ms, p99 ≤ {p99} ms"),
        };
        let met = if aim.is_empty() {
            ""
        } else if row.met() {
            "yes"
        } else {
            "no"
        };
        println!(
            "| {} | {:.1} | {:.1} | {:.2}x | {aim} | {met} |",
            row.name,
            row.p(0.5),
            row.p(0.99),
            row.p(0.5) / base
        );
    }
    let stats = server.executions().await;
    println!(
        "\nexecutions prepared: {} of {} pooled or prepared",
        stats["executions_prepared"], stats["executions_pooled"]
    );
}
