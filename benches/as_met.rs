//! Speed as a user meets it: `cargo bench --bench as_met`.
//!
//! The execution bench warms the pool and waits out its pressure before it times anything;
//! a user's server gets no such care. Here each scenario starts a fresh server process (the
//! default flags and image; a new workspace, the rest of its data where an installed server
//! keeps it, so the copy of the image's `/usr` made once is reused as a user's would be) and
//! times, with no untimed warm-up:
//!
//! 1. the first `execute_code("print(1)")`, right after the MCP handshake;
//! 2. a burst of `BENCH_BURST` (50) `print(1)` calls back to back;
//! 3. right after the burst, `BENCH_PACED` (30) `print(1)` calls paced 300 ms apart: what an
//!    agent's next turns meet while the burst's aftermath (an empty pool, a removal backlog)
//!    is still there;
//! 4. the first minutes of data work: `BENCH_DATA` (12) calls paced 0.5 s apart whose code
//!    imports pandas and sums a column (the learned preload starts from zero); the table gives
//!    the first call and the p50 from the third call on;
//! 5. 8 callers at once, beside 8 parallel `docker run --rm` loops of the same number of runs
//!    in the same scenario (the ratio is the server's throughput over docker run's).
//!
//! For the paced calls and the 8 callers it also prints where their time went: the difference
//! of the phases of `get_execution_stats` over them (mean ms per timing and the count; creates
//! and removes there are the pool's refills and the removal backlog working beside the calls).
//!
//! With `BENCH_SERIES=1` it prints each paced call in order with the pool's state just before
//! it (one `get_execution_stats` call more between the calls): which calls of a run were slow,
//! and what the pool was doing then.
//!
//! Each scenario runs twice: on a quiet machine, and with one core held by a CPU-bound process
//! (`sh -c 'while :; do :; done'`) that the bench starts before the server and stops after it.
//! Percentiles are nearest-rank. The bench checks that no sandbox container of its servers is
//! left. Figures on a shared machine are noisy: compare the columns of one run.

mod common;

use std::time::{Duration, Instant};

use serde_json::json;

use common::busy::BusyCore;
use common::docker_run::{docker_print1, docker_run_args, workspace};
use common::knobs::env_usize;
use common::server::{BIN, PHASES, Phases, Server, Storage};
use common::stdio::{
    command_stdout, concurrent, leftover_containers, loadavg, ms, p, report_leftovers, sorted,
};

const PANDAS: &str = "import pandas as pd\n\
    df = pd.DataFrame({'a': range(10_000), 'b': range(10_000)})\n\
    print(int(df['a'].sum() + df['b'].mean()))";
const CALLERS: usize = 8;
const CALLS_PER_CALLER: usize = 5;

/// One scenario's figures, in milliseconds (and the throughput ratio).
struct Figures {
    first: f64,
    burst_p50: f64,
    paced: Vec<f64>,
    paced_phases: Phases,
    callers_phases: Phases,
    callers: Vec<f64>,
    data_first: f64,
    data_from_third: Vec<f64>,
    ratio: f64,
}

fn progress(what: &str) {
    eprintln!("[as_met] {what}");
}

async fn timed(server: &Server, code: &str) -> f64 {
    let t = Instant::now();
    let v = server.call("execute_code", json!({ "code": code })).await;
    if v["success"] != true {
        server.fail(format!("{code:.40}: {v}"));
    }
    ms(t.elapsed())
}

async fn paced(server: &Server, code: &str, n: usize, gap: Duration) -> Vec<f64> {
    let series = std::env::var_os("BENCH_SERIES").is_some();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        tokio::time::sleep(gap).await;
        let pool = match series {
            true => pool_state(server).await,
            false => String::new(),
        };
        let took = timed(server, code).await;
        if series {
            eprintln!("[as_met] paced call {i:2}: {took:7.1} ms; before it: {pool}");
        }
        out.push(took);
    }
    out
}

/// The pool and the removal backlog as `get_execution_stats` has them now.
async fn pool_state(server: &Server) -> String {
    let e = server.executions().await;
    let pool = &e["pool"];
    format!(
        "ready {}, starting {}, target {}, removal backlog {}",
        pool["ready"], pool["starting"], pool["target"], e["removal_backlog"]
    )
}

async fn scenario(image: &str, pids: &mut Vec<u32>) -> Figures {
    let server = Server::start(Storage::WorkspaceAndSkills, &[]).await;
    pids.push(server.pid);
    let first = timed(&server, "print(1)").await;
    let mut burst = Vec::new();
    for _ in 0..env_usize("BENCH_BURST", 50) {
        burst.push(timed(&server, "print(1)").await);
    }
    let before = Phases::from_stats(&server.executions().await);
    let paced_ms = paced(
        &server,
        "print(1)",
        env_usize("BENCH_PACED", 30),
        Duration::from_millis(300),
    )
    .await;
    let paced_phases = Phases::from_stats(&server.executions().await).since(&before);
    let data = paced(
        &server,
        PANDAS,
        env_usize("BENCH_DATA", 12).max(3),
        Duration::from_millis(500),
    )
    .await;
    let before = Phases::from_stats(&server.executions().await);
    let callers_ms = std::sync::Mutex::new(Vec::new());
    let server_time = concurrent(CALLERS, CALLS_PER_CALLER, async || {
        let took = timed(&server, "print(1)").await;
        callers_ms.lock().unwrap().push(took);
    })
    .await;
    let callers_phases = Phases::from_stats(&server.executions().await).since(&before);
    let (_dir, ws) = workspace();
    let args = docker_run_args(image, &ws, &[], "print(1)");
    let docker_time = concurrent(CALLERS, CALLS_PER_CALLER, async || {
        docker_print1(&args).await
    })
    .await;
    server.shutdown().await;
    Figures {
        first,
        burst_p50: p(&sorted(burst.into_iter()), 0.5),
        paced: sorted(paced_ms.into_iter()),
        paced_phases,
        callers_phases,
        callers: callers_ms.into_inner().unwrap(),
        data_first: data[0],
        data_from_third: sorted(data[2..].iter().copied()),
        ratio: docker_time.as_secs_f64() / server_time.as_secs_f64(),
    }
}

fn main() {
    common::block_on(run());
}

async fn run() {
    let load_before = loadavg();
    progress("making sure the sandbox image is built");
    let image = command_stdout(BIN, &["image", "build"]).await;
    let mut pids = Vec::new();
    progress("quiet machine: a fresh server");
    let quiet = scenario(&image, &mut pids).await;
    progress("one core held by a busy loop: a fresh server");
    let busy = {
        let _core = BusyCore::start();
        scenario(&image, &mut pids).await
    };
    let left = leftover_containers(&pids).await;

    println!("\n## Speed as a user meets it (fresh server, no untimed warm-up)\n");
    println!("image {image}; load average before: {load_before}\n");
    println!("| | quiet | one core busy |");
    println!("|---|---:|---:|");
    let row = |name: &str, f: &dyn Fn(&Figures) -> String| {
        println!("| {name} | {} | {} |", f(&quiet), f(&busy));
    };
    row("first `print(1)` after the handshake", &|f| {
        format!("{:.1} ms", f.first)
    });
    row("`print(1)` back to back (burst of 50), p50", &|f| {
        format!("{:.1} ms", f.burst_p50)
    });
    row(
        "`print(1)` paced 300 ms right after the burst, p50 / p99",
        &|f| format!("{:.1} / {:.1} ms", p(&f.paced, 0.5), p(&f.paced, 0.99)),
    );
    row("`import pandas` call paced 0.5 s, the first", &|f| {
        format!("{:.0} ms", f.data_first)
    });
    row("the same from the third call on, p50", &|f| {
        format!("{:.1} ms", p(&f.data_from_third, 0.5))
    });
    row(
        "8 callers, throughput vs 8 parallel `docker run --rm`",
        &|f| format!("{:.2}×", f.ratio),
    );
    println!(
        "\nWhere the time went (mean ms per timing, count in brackets; create, start and \
         remove there are the pool's refills and the removal backlog; pooled: calls that took \
         a pooled container):\n"
    );
    println!("| | {} | pooled | client mean |", PHASES.join(" | "));
    println!("|---|{}---:|---:|", "---:|".repeat(PHASES.len()));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    for (name, phases, client) in [
        ("paced, quiet", &quiet.paced_phases, mean(&quiet.paced)),
        (
            "paced, one core busy",
            &busy.paced_phases,
            mean(&busy.paced),
        ),
        (
            "8 callers, quiet",
            &quiet.callers_phases,
            mean(&quiet.callers),
        ),
        (
            "8 callers, one core busy",
            &busy.callers_phases,
            mean(&busy.callers),
        ),
    ] {
        let cells = phases.cells();
        println!(
            "| {name} | {} | {} | {client:.1} |",
            cells.join(" | "),
            phases.pooled
        );
    }
    println!("\nload average after: {}", loadavg());
    report_leftovers(&left, pids.len()).await;
}
