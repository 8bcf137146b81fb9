//! Speed as a user meets it: `cargo bench --bench as_met`.
//!
//! The execution bench warms the pool and waits out its pressure before it times anything;
//! a user's server gets no such care. Here every scenario starts a fresh server process (the
//! default flags and image; a data directory of its own, but for the copy of the image's
//! `/usr`, which an installed server makes once and reuses: `--image-tree-dir`) and
//! times, with no untimed warm-up, what a user does first on it:
//!
//! - **data, 0.5 s / 1 s**: right after the handshake, calls whose code imports pandas and sums
//!   a column, paced 0.5 s or 1 s apart (the learned preload starts from zero);
//! - **follow-ups**: a session holding a 96 MB DataFrame, then calls of it that read the frame,
//!   `BENCH_THINK_MS` (2,000) apart, as a model thinks between them;
//! - **forks**: the same session, then forks of it whose first call reads the frame;
//! - **burst**: `BENCH_BURST` (50) `print(1)` calls back to back, then `print(1)` paced 300 ms
//!   apart in the burst's aftermath (an empty pool, a removal backlog).
//!
//! Each scenario runs on `BENCH_SERVERS` (4) fresh servers, `BENCH_CALLS` (8) timed calls each
//! after the first, which is reported apart: p50 and p90 are over the calls of all its servers.
//! With `BENCH_BASELINE_BIN` (a build of another commit) every server of this build is
//! followed or preceded by one of the baseline, alternately, so both share the machine's hour;
//! the ratio is this build's figure over the baseline's. `BENCH_FLAGS` and
//! `BENCH_BASELINE_FLAGS` add server flags to either; without `BENCH_BASELINE_BIN`, baseline
//! flags compare this binary with itself (`BENCH_FLAGS='--runtime crun'
//! BENCH_BASELINE_FLAGS='--runtime runc'`).
//!
//! What one call costs: for each scenario, the CPU time of the containers, the engine's own
//! processes and the server (see `common::cpu`) from the handshake to the server's exit, over
//! the containers the server created (its `create` count): the lifetime of one container,
//! its start, its job, its removal. The burst's figure is the cost of a `print(1)` container,
//! the data scenarios' that of a container that imports pandas (ahead, once the preload has
//! learned it). It also counts the mounts a pooled container has and the files the engine
//! keeps for it.
//!
//! Everything runs twice: on a quiet machine, and with one core held by a CPU-bound process
//! (`BENCH_LOADS=quiet` for the first only). `BENCH_SCENARIOS` picks scenarios by name
//! (`data05,data1,followups,forks,burst`). Percentiles are nearest-rank. The bench checks that
//! no sandbox container of its servers is left. Figures on a shared machine are noisy: compare
//! the columns of one run.

mod common;

use std::time::{Duration, Instant};

use serde_json::json;

use common::busy::BusyCore;
use common::cpu::{CpuMeter, CpuSample};
use common::knobs::env_usize;
use common::server::{BIN, Phases, Server, Storage};
use common::stdio::{command_stdout, leftover_containers, loadavg, ms, p, report_leftovers};

const PANDAS: &str = "import pandas as pd\n\
    df = pd.DataFrame({'a': range(10_000), 'b': range(10_000)})\n\
    print(int(df['a'].sum() + df['b'].mean()))";
/// 1.5 million rows of 8 floats: 96 MB.
const FRAME: &str = "import numpy as np, pandas as pd\n\
    df = pd.DataFrame(np.random.default_rng(1).random((1_500_000, 8)))\n\
    result = int(df.shape[0])";
const READ: &str = "result = float(df[0].sum())";

#[derive(Clone, Copy, PartialEq)]
enum Scenario {
    Data05,
    Data1,
    FollowUps,
    Forks,
    Burst,
}

impl Scenario {
    const ALL: [Scenario; 5] = [
        Scenario::Data05,
        Scenario::Data1,
        Scenario::FollowUps,
        Scenario::Forks,
        Scenario::Burst,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::Data05 => "data05",
            Scenario::Data1 => "data1",
            Scenario::FollowUps => "followups",
            Scenario::Forks => "forks",
            Scenario::Burst => "burst",
        }
    }

    /// Its rows' names, in the order [`one_server`] returns their samples.
    fn rows(self) -> &'static [&'static str] {
        match self {
            Scenario::Data05 => &["`import pandas` calls paced 0.5 s, right after the handshake"],
            Scenario::Data1 => &["the same paced 1 s"],
            Scenario::FollowUps => &["a 96 MB session's follow-up, reading it"],
            Scenario::Forks => &["a fork of a 96 MB session, its first call reading it"],
            Scenario::Burst => &[
                "`print(1)` back to back (a burst of 50)",
                "`print(1)` paced 300 ms right after the burst",
            ],
        }
    }

    /// What its CPU per container stands for.
    fn costs(self) -> &'static str {
        match self {
            Scenario::Data05 | Scenario::Data1 => "a container that imports pandas",
            Scenario::FollowUps | Scenario::Forks => "a container given a 96 MB session",
            Scenario::Burst => "a `print(1)` container",
        }
    }
}

/// One server's figures for one scenario: per row, the first call and the rest (ms); the
/// CPU it cost and the containers it created.
struct Run {
    rows: Vec<(f64, Vec<f64>)>,
    starts: Vec<String>,
    cpu: Option<CpuSample>,
    created: f64,
}

/// All servers' figures for one scenario, one build and one load.
#[derive(Default)]
struct Figures {
    firsts: Vec<Vec<f64>>,
    rest: Vec<Vec<f64>>,
    cpu: CpuSample,
    cpu_measured: bool,
    created: f64,
    starts: std::collections::BTreeMap<String, usize>,
}

impl Figures {
    fn add(&mut self, run: Run) {
        self.firsts.resize(run.rows.len(), Vec::new());
        self.rest.resize(run.rows.len(), Vec::new());
        for (i, (first, rest)) in run.rows.into_iter().enumerate() {
            self.firsts[i].push(first);
            self.rest[i].extend(rest);
        }
        if let Some(cpu) = run.cpu {
            self.cpu.add(&cpu);
            self.cpu_measured = true;
        }
        self.created += run.created;
        for reason in run.starts {
            *self.starts.entry(reason).or_default() += 1;
        }
    }

    /// "p50 / p90 (first: a–b)" of row `i`, and its p50.
    fn cell(&self, i: usize) -> (String, f64) {
        let (Some(rest), Some(firsts)) = (self.rest.get(i), self.firsts.get(i)) else {
            return ("–".into(), f64::NAN);
        };
        let rest = sorted(rest);
        let firsts = sorted(firsts);
        let (p50, p90) = (p(&rest, 0.5), p(&rest, 0.9));
        let text = format!(
            "{} / {} (first {}–{}; n={})",
            fmt_ms(p50),
            fmt_ms(p90),
            fmt_ms(firsts[0]),
            fmt_ms(firsts[firsts.len() - 1]),
            rest.len()
        );
        (text, p50)
    }
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

fn fmt_ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn progress(what: &str) {
    eprintln!("[as_met] {what}");
}

/// The `start` of the calls of the server measured now that had one, as `reason` or
/// `reason (pooled)`: why those calls met no container ready at once.
static STARTS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

async fn timed(server: &Server, args: serde_json::Value) -> (f64, serde_json::Value) {
    let t = Instant::now();
    let v = server.call("execute_code", args.clone()).await;
    let took = ms(t.elapsed());
    if v["success"] != true {
        server.fail(format!("{args}: {v}"));
    }
    if let Some(reason) = v["start"]["reason"].as_str() {
        let pooled = if v["start"]["pooled"] == true {
            " (pooled)"
        } else {
            ""
        };
        STARTS.lock().unwrap().push(format!("{reason}{pooled}"));
    }
    (took, v)
}

async fn code(server: &Server, code: &str) -> f64 {
    timed(server, json!({ "code": code })).await.0
}

async fn paced(server: &Server, code_text: &str, n: usize, gap: Duration) -> (f64, Vec<f64>) {
    let mut out = Vec::with_capacity(n + 1);
    for _ in 0..=n {
        tokio::time::sleep(gap).await;
        out.push(code(server, code_text).await);
    }
    (out[0], out[1..].to_vec())
}

/// A session holding the 96 MB frame, made right after the handshake.
async fn frame_session(server: &Server) -> String {
    let (_, v) = timed(server, json!({ "code": FRAME, "session": "new" })).await;
    match v["session"].as_str() {
        Some(s) => s.to_string(),
        None => server.fail(format!("no session handle: {v}")),
    }
}

async fn in_session(
    server: &Server,
    session: &str,
    n: usize,
    think: Duration,
    fork: bool,
) -> (f64, Vec<f64>) {
    let mut out = Vec::with_capacity(n + 1);
    for _ in 0..=n {
        tokio::time::sleep(think).await;
        let args = json!({ "code": READ, "session": session, "fork": fork });
        out.push(timed(server, args).await.0);
    }
    (out[0], out[1..].to_vec())
}

/// One fresh server of `bin` through `scenario`.
async fn one_server(
    build: &Build,
    scenario: Scenario,
    meter: Option<&CpuMeter>,
    pids: &mut Vec<u32>,
) -> Run {
    let calls = env_usize("BENCH_CALLS", 8);
    let think = Duration::from_millis(env_usize("BENCH_THINK_MS", 2000) as u64);
    let server = start(build).await;
    pids.push(server.pid);
    let before = meter.map(|m| m.sample(server.pid));
    STARTS.lock().unwrap().clear();
    let rows = match scenario {
        Scenario::Data05 => vec![paced(&server, PANDAS, calls, Duration::from_millis(500)).await],
        Scenario::Data1 => vec![paced(&server, PANDAS, calls, Duration::from_secs(1)).await],
        Scenario::FollowUps => {
            let session = frame_session(&server).await;
            vec![in_session(&server, &session, calls, think, false).await]
        }
        Scenario::Forks => {
            let session = frame_session(&server).await;
            vec![in_session(&server, &session, calls, think, true).await]
        }
        Scenario::Burst => {
            let mut burst = Vec::new();
            for _ in 0..env_usize("BENCH_BURST", 50) {
                burst.push(code(&server, "print(1)").await);
            }
            let after = paced(&server, "print(1)", calls, Duration::from_millis(300)).await;
            vec![(burst[0], burst[1..].to_vec()), after]
        }
    };
    let created = Phases::from_stats(&server.executions().await).phases[0].0;
    let server_cpu = meter.map(|m| m.sample(server.pid).server);
    let pid = server.pid;
    server.shutdown().await;
    let cpu = match (meter, before, server_cpu) {
        (Some(m), Some(before), Some(server_cpu)) => {
            let mut after = m.sample(pid);
            after.server = server_cpu;
            Some(after.since(&before))
        }
        _ => None,
    };
    let starts = std::mem::take(&mut *STARTS.lock().unwrap());
    Run {
        rows,
        starts,
        cpu,
        created,
    }
}

/// A server binary and the flags its servers get.
struct Build {
    name: &'static str,
    bin: String,
    flags: Vec<String>,
}

/// The builds this run compares: this one, and the baseline when given (another binary, or
/// this one with other flags); `BENCH_FLAGS` and `BENCH_BASELINE_FLAGS` add flags to either.
fn builds() -> Vec<Build> {
    let flags = |var: &str| -> Vec<String> {
        let v = std::env::var(var).unwrap_or_default();
        v.split_whitespace().map(str::to_string).collect()
    };
    let mut builds = vec![Build {
        name: "this build",
        bin: BIN.to_string(),
        flags: flags("BENCH_FLAGS"),
    }];
    let base_flags = flags("BENCH_BASELINE_FLAGS");
    if let Ok(bin) = std::env::var("BENCH_BASELINE_BIN") {
        builds.push(Build {
            name: "baseline",
            bin,
            flags: base_flags,
        });
    } else if !base_flags.is_empty() {
        builds.push(Build {
            name: "baseline",
            bin: BIN.to_string(),
            flags: base_flags,
        });
    }
    builds
}

fn chosen() -> Vec<Scenario> {
    match std::env::var("BENCH_SCENARIOS") {
        Ok(names) => {
            let names: Vec<&str> = names.split(',').map(str::trim).collect();
            for n in &names {
                assert!(
                    Scenario::ALL.iter().any(|s| s.name() == *n),
                    "BENCH_SCENARIOS: no scenario {n:?}"
                );
            }
            Scenario::ALL
                .into_iter()
                .filter(|s| names.contains(&s.name()))
                .collect()
        }
        Err(_) => Scenario::ALL.to_vec(),
    }
}

/// Every scenario on `servers` fresh servers of each build, the builds alternating.
async fn measure(
    builds: &[Build],
    meter: Option<&CpuMeter>,
    pids: &mut Vec<u32>,
) -> Vec<(Scenario, Vec<Figures>)> {
    let servers = env_usize("BENCH_SERVERS", 4);
    let mut out = Vec::new();
    for scenario in chosen() {
        let mut figures: Vec<Figures> = builds.iter().map(|_| Figures::default()).collect();
        for round in 0..servers {
            let mut order: Vec<usize> = (0..builds.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for b in order {
                progress(&format!(
                    "{} on a fresh server of {} ({}/{servers})",
                    scenario.name(),
                    builds[b].name,
                    round + 1
                ));
                let run = one_server(&builds[b], scenario, meter, pids).await;
                figures[b].add(run);
            }
        }
        // As it comes, so that a run stopped later keeps what it measured.
        let done = [(scenario, figures)];
        eprintln!("{}", table(scenario.name(), builds, &done));
        out.extend(done);
    }
    out
}

/// The tables of `results` as markdown.
fn table(load: &str, builds: &[Build], results: &[(Scenario, Vec<Figures>)]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n### {load}: ms, p50 / p90 over the calls after each server's first\n"
    );
    let heads: Vec<&str> = builds.iter().map(|b| b.name).collect();
    let ratio = builds.len() > 1;
    let _ = writeln!(
        out,
        "| path (fresh servers, no warm-up) | {}{} |",
        heads.join(" | "),
        if ratio { " | p50 ratio" } else { "" }
    );
    let _ = writeln!(
        out,
        "|---|{}{}",
        "---:|".repeat(heads.len()),
        if ratio { "---:|" } else { "" }
    );
    for (scenario, figures) in results {
        for (i, row) in scenario.rows().iter().enumerate() {
            let cells: Vec<(String, f64)> = figures.iter().map(|f| f.cell(i)).collect();
            let texts: Vec<&str> = cells.iter().map(|c| c.0.as_str()).collect();
            let extra = match ratio {
                true => format!(" | {:.2}", cells[0].1 / cells[1].1),
                false => String::new(),
            };
            let _ = writeln!(out, "| {row} | {}{extra} |", texts.join(" | "));
        }
    }
    for (scenario, figures) in results {
        for (f, build) in figures.iter().zip(builds) {
            let counts: Vec<String> = (f.starts.iter()).map(|(r, n)| format!("{r} {n}")).collect();
            if !counts.is_empty() {
                let _ = writeln!(
                    out,
                    "\n{}, {}: calls whose container was not ready at once (`start`): {}",
                    scenario.name(),
                    build.name,
                    counts.join(", ")
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "\nCPU per container (ms: containers + engine + server = total), over every container the servers created:\n"
    );
    let _ = writeln!(
        out,
        "| what | build | containers | engine | server | total | created |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|");
    for (scenario, figures) in results {
        for (f, build) in figures.iter().zip(builds) {
            if !f.cpu_measured {
                continue;
            }
            let [c, e, s] = f.cpu.per(f.created);
            let _ = writeln!(
                out,
                "| {} ({}) | {} | {c:.0} | {e:.0} | {s:.0} | {:.0} | {} |",
                scenario.costs(),
                scenario.name(),
                build.name,
                c + e + s,
                f.created
            );
        }
    }
    out
}

/// Mounts a pooled container of a fresh server of `bin` has, and the files the engine keeps
/// for it (its writable layer, its directory, the runtime's bundle).
async fn footprint(build: &Build, pids: &mut Vec<u32>) -> String {
    let server = start(build).await;
    pids.push(server.pid);
    // The first call waits for the start; then the pool is filled.
    code(&server, "print(1)").await;
    server.settle(1).await;
    let label = format!(
        "label={}",
        code_execution_mcp::sandbox::container::spec::LABEL_MANAGED
    );
    let ids = command_stdout("docker", &["ps", "-q", "--no-trunc", "--filter", &label]).await;
    let Some(id) = ids.lines().next().map(str::to_string) else {
        server.fail("no pooled container to count".into());
    };
    let format = "{{.State.Pid}} {{.GraphDriver.Data.UpperDir}}";
    let inspected = command_stdout("docker", &["inspect", "-f", format, &id]).await;
    let (pid, upper) = inspected.split_once(' ').unwrap_or((&inspected, ""));
    let mounts =
        std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).map_or(0, |m| m.lines().count());
    let places = [
        upper.to_string(),
        format!("/var/lib/docker/containers/{id}"),
        format!("/var/run/docker/containerd/daemon/io.containerd.runtime.v2.task/moby/{id}"),
        format!("/run/containerd/io.containerd.runtime.v2.task/moby/{id}"),
    ];
    let files: usize = places
        .iter()
        .map(|p| count_entries(std::path::Path::new(p)))
        .sum();
    server.shutdown().await;
    format!("{mounts} mounts, {files} files and directories kept by the engine")
}

/// Where an installed server keeps its copies of the image's `/usr` (its data home's).
fn shared_trees() -> String {
    let home = match std::env::var("XDG_DATA_HOME") {
        Ok(dir) if !dir.is_empty() => dir,
        _ => format!("{}/.local/share", std::env::var("HOME").unwrap_or_default()),
    };
    format!("{home}/code-execution-mcp/image-trees")
}

/// A fresh server of `build`: all its data new (no sessions of an earlier server), but for the
/// copy of the image's `/usr` an installed server made once (`--image-tree-dir`).
async fn start(build: &Build) -> Server {
    let trees = shared_trees();
    let mut flags: Vec<&str> = vec!["--image-tree-dir", &trees];
    flags.extend(build.flags.iter().map(String::as_str));
    Server::start_binary(&build.bin, Storage::DataDir, &flags).await
}

fn count_entries(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => 1 + count_entries(&e.path()),
            _ => 1,
        })
        .sum()
}

fn main() {
    common::block_on(run());
}

async fn run() {
    let builds = builds();
    for build in &builds {
        progress(&format!(
            "making sure the sandbox image of {} is built",
            build.name
        ));
        command_stdout(&build.bin, &["image", "build"]).await;
    }
    let meter = match CpuMeter::open() {
        Ok(m) => Some(m),
        Err(why) => {
            println!("CPU per container: not measured here: {why}");
            None
        }
    };
    let mut pids = Vec::new();
    println!(
        "\n## Speed as a user meets it (each scenario on fresh servers, no untimed warm-up)\n"
    );
    println!("load average before: {}", loadavg());
    for build in &builds {
        println!("- {}: {} {}", build.name, build.bin, build.flags.join(" "));
    }
    println!();
    for build in &builds {
        let text = footprint(build, &mut pids).await;
        println!("A pooled container of {}: {text}", build.name);
    }
    // Each load's table as soon as it is measured.
    let loads = std::env::var("BENCH_LOADS").unwrap_or_else(|_| "quiet,busy".into());
    for load in loads.split(',').map(str::trim) {
        let core = match load {
            "quiet" => None,
            "busy" => Some(BusyCore::start()),
            other => panic!("BENCH_LOADS: {other:?} is neither quiet nor busy"),
        };
        let label = match load {
            "quiet" => "quiet machine",
            _ => "one core held by a busy loop",
        };
        let results = measure(&builds, meter.as_ref(), &mut pids).await;
        drop(core);
        println!("{}", table(label, &builds, &results));
    }
    drop(meter);
    let left = leftover_containers(&pids).await;
    println!("\nload average after: {}", loadavg());
    report_leftovers(&left, pids.len()).await;
}
