//! Load and soak: the real binary over stdio (`serve --max-concurrency 8`, the default pool), driven by one rmcp client with 8 calls in flight at all times, for 512 executions of a
//! fixed mix: 70% successes (printed output and a `result`, checked exactly), 15% exceptions,
//! 10% one-second timeouts of a busy loop, and 5% memory kills (64 MB limit, 300 MB
//! allocated).
//!
//! It proves, under sustained concurrent load:
//! - every execution gets exactly its expected outcome: no "busy" refusal (8 callers never
//!   exceed 8 slots), no lost or mixed-up response, no engine error, and the server's own
//!   counts by status match the client's; every mismatch is collected and the test fails
//!   with the whole list at the end;
//! - the server's memory does not grow per execution (VmRSS after a warm-up vs at the end);
//! - the pool does not run away: sampled every 500 ms, this server's containers never exceed
//!   max-concurrency + pool size + a margin for containers still being removed, and once the
//!   load stops only the pool's ready containers remain;
//! - nothing leaks: once the client closes, the server exits cleanly and no container carries
//!   its owner label.
//!
//! It runs by default: 100-165 s on the 2-core machine this was written on (with other builds
//! competing for the CPU), under the 3 minutes CI can spend on it. The engine is the bottleneck
//! (3-5 containers created, started and removed per second here), not the server (4 s of CPU
//! per run). It needs the Docker engine and the sandbox image, like the other tests.
//!
//! Two engine races it caught are handled by the server: on Docker 20.10 a memory kill whose
//! OOM notice reaches dockerd after the exit is recorded as `OOMKilled: false` (the server waits
//! briefly for the engine's `oom` event instead), and a create abandoned at a deadline could
//! land after its removal ran (the removal is repeated).
//!
//! To see its progress and summary:
//!
//! ```sh
//! cargo test --test soak -- --nocapture
//! ```

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use code_execution_mcp::sandbox::Backend;
use code_execution_mcp::sandbox::Engine;
use common::{spawn_server_with, try_call_tool};
use futures::StreamExt;
use serde_json::{Value, json};

/// Executions in the run.
const EXECUTIONS: usize = 512;
/// Calls in flight at once, and the server's --max-concurrency: equal, so a "busy" refusal
/// is a bug.
const CONCURRENCY: usize = 8;
/// The server's default --pool-size (read from the configuration, which the binary shares).
fn pool_size() -> usize {
    code_execution_mcp::config::Config::defaults()
        .pool
        .pool_size
}
/// Executions before the first memory sample: the allocator, the runtime's worker threads,
/// the PII engine and the HTTP client to the engine reach their steady size by then.
const WARM_UP: usize = 64;
/// Containers allowed on top of max-concurrency + pool: ones whose execution has ended and
/// whose removal, which the server runs in the background after answering, has not completed
/// yet. Under this load the engine
/// takes 0.5-1.5 s to start a container and up to ~1 s to kill and remove one, so removals
/// overlap the next executions: measured here, above 10 containers in half the samples, and
/// up to 18 when the first 8 executions ended together (8 in removal, 8 starting, 2 pool
/// refills). The margin lets every container that may be alive (an execution's or the
/// pool's) have one predecessor still being removed. A pool that runs away or removals that
/// never finish pass it within seconds; the settling check after the run catches a slower
/// leak.
fn removal_margin() -> usize {
    CONCURRENCY
        + pool_size()
        + code_execution_mcp::config::Config::defaults()
            .pool
            .removal_backlog
}
/// How long the server is given, once the load stops, to be back at exactly its pool. Not a
/// speed check (the time it took is printed; these machines are shared): a leaked container or
/// a backlog that never drains never settles, however long the wait.
const SETTLE_LIMIT: Duration = Duration::from_secs(120);
/// Largest VmRSS growth accepted from the end of the warm-up to the end of the run (448
/// executions). Measured here: +0.4 to +0.7 MiB in 8 runs (61 MiB after the warm-up). 16 MiB is
/// 36 KiB per execution: a leaked attach stream or HTTP connection to the engine (buffers of
/// 8-64 KiB each), a leaked task per container or kept outputs would pass it, while the
/// allocator's noise stays far below it.
const RSS_GROWTH_LIMIT_KIB: u64 = 16 * 1024;
/// Longest a single call may take before it counts as unanswered (the slowest measured: a
/// memory kill, 7 s).
const CALL_LIMIT: Duration = Duration::from_secs(60);

/// Memory kills (of 25) whose OOM notice the engine may lose: Docker 20.10 lost 1 in a run
/// with both cores busy. A server that stopped following the engine's events loses them all.
const LOST_OOM_NOTICES: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Success,
    Exception,
    Timeout,
    Memory,
}

/// The deterministic mix: 14 successes, 3 exceptions, 2 timeouts and 1 memory kill in every
/// 20 executions.
fn kind(i: usize) -> Kind {
    match i % 20 {
        0..=13 => Kind::Success,
        14..=16 => Kind::Exception,
        17 | 18 => Kind::Timeout,
        _ => Kind::Memory,
    }
}

/// The `execute_code` arguments of execution `i`.
fn arguments(i: usize) -> Value {
    match kind(i) {
        // Half receive the case number through context_vars, half in the code.
        Kind::Success if i.is_multiple_of(2) => json!({
            "code": "total = sum(range(n))\nprint(f'case {n}: {total}')\nresult = {'case': n, 'total': total, 'squares': [k * k for k in range(n % 5)]}",
            "context_vars": {"n": i},
        }),
        Kind::Success => json!({
            "code": format!("n = {i}\ntotal = sum(range(n))\nprint(f'case {{n}}: {{total}}')\nresult = {{'case': n, 'total': total, 'squares': [k * k for k in range(n % 5)]}}"),
        }),
        Kind::Exception => json!({
            "code": format!("print('case {i} raises')\nraise ValueError('case {i}')"),
        }),
        Kind::Timeout => json!({
            "code": "while True:\n    pass",
            "timeout_seconds": 1,
        }),
        Kind::Memory => json!({
            // bytearray(n) zero-fills, so every page is touched: the kernel kills it at 64 MB.
            "code": "b = bytearray(300 * 2**20)\nresult = len(b)",
            "memory_mb": 64,
        }),
    }
}

/// Checks a response against execution `i`'s expected outcome; returns what differs.
/// `oom_reported`: whether the engine reports OOM kills (Podman before 5.0 does not, and a
/// memory kill then ends as an error that names the memory limit as the likely cause).
fn check(i: usize, is_error: bool, v: &Value, oom_reported: bool) -> Result<(), String> {
    let mut wrong = Vec::new();
    let mut expect = |what: &str, ok: bool| {
        if !ok {
            wrong.push(what.to_string());
        }
    };
    if !v.is_object() {
        return Err(format!("not a structured execution result: {v}"));
    }
    let status = v["status"].as_str().unwrap_or("");
    let error = v["error"].as_str().unwrap_or("");
    match kind(i) {
        Kind::Success => {
            let total: usize = (0..i).sum();
            let squares: Vec<usize> = (0..i % 5).map(|k| k * k).collect();
            expect("isError false", !is_error);
            expect("status ok", status == "ok");
            expect("success true", v["success"] == true);
            expect(
                "the printed line",
                v["output"] == json!([format!("case {i}: {total}")]),
            );
            expect(
                "the result",
                v["result"] == json!({"case": i, "total": total, "squares": squares}),
            );
            expect("no stderr", v["stderr"] == "");
            expect("no error", v["error"].is_null());
        }
        Kind::Exception => {
            expect("isError true", is_error);
            expect("status error", status == "error");
            expect("success false", v["success"] == false);
            expect("error_type ValueError", v["error_type"] == "ValueError");
            expect(
                "the message names the case",
                error.contains(&format!("case {i}")),
            );
            expect(
                "the output before the raise",
                v["output"] == json!([format!("case {i} raises")]),
            );
        }
        Kind::Timeout => {
            expect("isError true", is_error);
            expect("status timeout", status == "timeout");
            expect("success false", v["success"] == false);
            expect("error says timed out", error.contains("timed out"));
            expect(
                "limits.timeout_seconds 1",
                v["limits"]["timeout_seconds"] == 1.0,
            );
        }
        Kind::Memory => {
            expect("isError true", is_error);
            // Docker can lose its OOM notice under load: the error says so, and names the
            // memory limit as the likely cause (counted; see LOST_OOM_NOTICES).
            if oom_reported && !error.contains(common::LOST_OOM_NOTICE) {
                expect("status memory_limit", status == "memory_limit");
            } else {
                expect("status error", status == "error");
            }
            expect("success false", v["success"] == false);
            expect(
                "error names the memory limit",
                error.to_lowercase().contains("memory limit"),
            );
            expect("limits.memory_mb 64", v["limits"]["memory_mb"] == 64);
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        let mut shown = v.clone();
        if let Some(tb) = shown.get_mut("traceback") {
            *tb = json!("(omitted)");
        }
        Err(format!("expected {}; got {shown}", wrong.join(", ")))
    }
}

/// VmRSS of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("server status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// CPU time (user + system) process `pid` has used, in seconds; 0 when it is gone.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start at field 3 (state);
    // utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')').map_or(0, |p| p + 2)..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 =
        fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0);
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1);
    ticks as f64 / hz as f64
}

/// CPU seconds used so far by the engine's daemons (dockerd, containerd).
fn engine_cpu_seconds() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| matches!(c.trim(), "dockerd" | "containerd"))
        })
        .map(cpu_seconds)
        .sum()
}

/// (busy, total) CPU time of the whole machine so far, in clock ticks (from /proc/stat).
fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = cpu.iter().take(8).sum();
    // idle and iowait are the 4th and 5th.
    let idle = cpu.get(3).copied().unwrap_or(0) + cpu.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// What the container sampler saw.
#[derive(Debug, Default)]
struct ContainerSamples {
    samples: usize,
    max: usize,
    /// Containers per engine state in the sample with the most.
    at_max: BTreeMap<String, usize>,
    /// Samples with more containers than max-concurrency + pool (some awaiting removal).
    over_slots: usize,
    /// Number of samples per container count.
    histogram: BTreeMap<usize, usize>,
}

/// (name, engine state) of the managed containers whose owner label names process `pid`.
async fn container_states(engine: &Engine, pid: u32) -> Result<Vec<(String, String)>, String> {
    use bollard::query_parameters::ListContainersOptionsBuilder;
    use code_execution_mcp::sandbox::container::spec::LABEL_OWNER;
    let filters = std::collections::HashMap::from([("label", vec![LABEL_OWNER])]);
    let opts = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let list = engine
        .client()
        .list_containers(Some(opts))
        .await
        .map_err(|e| e.to_string())?;
    // The owner label is `host:pid:start_time`.
    let pid = pid.to_string();
    Ok(list
        .into_iter()
        .filter(|c| {
            c.labels
                .as_ref()
                .and_then(|l| l.get(LABEL_OWNER))
                .is_some_and(|o| o.rsplit(':').nth(1) == Some(pid.as_str()))
        })
        .map(|c| {
            let name = c
                .names
                .and_then(|n| n.into_iter().next())
                .unwrap_or_default();
            let state = c.state.map_or_else(|| "unknown".into(), |s| s.to_string());
            (name.trim_start_matches('/').to_string(), state)
        })
        .collect())
}

/// Samples the containers owned by `pid` every 500 ms until `stop` is set.
async fn watch_containers(pid: u32, stop: Arc<AtomicBool>) -> ContainerSamples {
    let engine = Engine::connect().await.expect("engine");
    let mut seen = ContainerSamples::default();
    while !stop.load(Ordering::SeqCst) {
        match container_states(&engine, pid).await {
            Ok(states) => {
                seen.samples += 1;
                *seen.histogram.entry(states.len()).or_default() += 1;
                if states.len() > CONCURRENCY + pool_size() {
                    seen.over_slots += 1;
                }
                if states.len() > seen.max {
                    seen.max = states.len();
                    seen.at_max.clear();
                    for (_, state) in states {
                        *seen.at_max.entry(state).or_default() += 1;
                    }
                }
            }
            Err(e) => eprintln!("soak: could not list containers: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    seen
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sustained_concurrent_executions_keep_outcomes_memory_and_containers_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, client) = spawn_server_with(
        dir.path(),
        &[],
        &["--max-concurrency", &CONCURRENCY.to_string()],
    )
    .await;
    let pid = child.id().expect("server pid");

    let engine = code_execution_mcp::sandbox::Engine::connect()
        .await
        .unwrap();
    let oom_reported = engine.info().await.unwrap().reports_oom_kills();
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = tokio::spawn(watch_containers(pid, stop.clone()));

    let started = Instant::now();
    let (server_cpu_start, engine_cpu_start) = (cpu_seconds(pid), engine_cpu_seconds());
    let machine_start = machine_ticks();
    let peer = client.peer().clone();
    let mut results = futures::stream::iter(0..EXECUTIONS)
        .map(|i| {
            let peer = peer.clone();
            async move {
                let t = Instant::now();
                let answer = tokio::time::timeout(
                    CALL_LIMIT,
                    try_call_tool(&peer, "execute_code", arguments(i)),
                )
                .await;
                (i, t.elapsed(), answer)
            }
        })
        .buffer_unordered(CONCURRENCY);

    let mut mismatches: Vec<String> = Vec::new();
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    let mut latency: BTreeMap<Kind, Vec<Duration>> = BTreeMap::new();
    let mut rss_warm = None;
    let mut done = 0;
    let mut lost_oom_notices = 0;
    while let Some((i, took, answer)) = results.next().await {
        latency.entry(kind(i)).or_default().push(took);
        let status = match answer {
            Err(_) => {
                mismatches.push(format!(
                    "#{i} ({:?}): no answer within {CALL_LIMIT:?}",
                    kind(i)
                ));
                "no answer".to_string()
            }
            Ok(Err(e)) => {
                mismatches.push(format!("#{i} ({:?}): the call failed: {e}", kind(i)));
                "call failed".to_string()
            }
            Ok(Ok((is_error, v))) => {
                let error = v["error"].as_str().unwrap_or_default();
                if oom_reported && error.contains(common::LOST_OOM_NOTICE) {
                    lost_oom_notices += 1;
                }
                if let Err(e) = check(i, is_error, &v, oom_reported) {
                    mismatches.push(format!("#{i} ({:?}): {e}", kind(i)));
                }
                match v["status"].as_str() {
                    Some(s) => s.to_string(),
                    // A tool error without an execution result: busy, bad input, engine.
                    None => "tool error".to_string(),
                }
            }
        };
        *by_status.entry(status).or_default() += 1;
        done += 1;
        if done == WARM_UP {
            rss_warm = Some(rss_kib(pid));
        }
        if done.is_multiple_of(64) {
            eprintln!(
                "soak: {done}/{EXECUTIONS} done in {:.1} s, {} unexpected",
                started.elapsed().as_secs_f64(),
                mismatches.len()
            );
        }
    }
    let wall = started.elapsed();
    let rss_end = rss_kib(pid);
    let server_cpu = cpu_seconds(pid) - server_cpu_start;
    let engine_cpu = engine_cpu_seconds() - engine_cpu_start;
    let machine_end = machine_ticks();
    let machine_busy =
        (machine_end.0 - machine_start.0) as f64 / (machine_end.1 - machine_start.1).max(1) as f64;
    let rss_warm = rss_warm.expect("sampled after the warm-up");
    stop.store(true, Ordering::SeqCst);
    let containers = watcher.await.unwrap();

    // With no load the backlog drains and only the pool's ready containers remain.
    let engine = Engine::connect().await.expect("engine");
    let settling = Instant::now();
    let mut idle_states = Vec::new();
    while settling.elapsed() < SETTLE_LIMIT {
        idle_states = container_states(&engine, pid).await.unwrap_or_default();
        if idle_states.len() == pool_size() && idle_states.iter().all(|(_, s)| s == "running") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let settled_in = settling.elapsed();

    let (stats_error, stats) = try_call_tool(&client, "get_execution_stats", json!({}))
        .await
        .expect("get_execution_stats answered");
    eprintln!(
        "soak: get_execution_stats (isError {stats_error}): {}",
        serde_json::to_string_pretty(&stats["executions"]).unwrap()
    );

    // The server counted the same outcomes.
    let mut failures = Vec::new();
    if stats_error {
        failures.push(format!("get_execution_stats failed: {stats}"));
    }
    // By the server's statuses: a call that got no execution result (a tool error, no answer)
    // has none, and is already among the mismatches.
    let counted = stats["executions"]["executions_by_status"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    if counted.is_empty() {
        failures.push(format!("get_execution_stats counted no statuses: {stats}"));
    }
    for (status, counted) in &counted {
        let n = by_status.get(status).copied().unwrap_or(0);
        if counted != n {
            failures.push(format!(
                "the server counted {counted} executions with status {status}, the client {n}"
            ));
        }
    }

    // Closing the client closes the server's stdin: it shuts down, removing its containers.
    client.cancel().await.unwrap();
    let exit = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the server exits within 60 s of its stdin closing")
        .unwrap();
    let left = common::containers_of(pid).await;
    if !left.is_empty() {
        // Fail below, but leave nothing on the engine.
        let engine = Engine::connect().await.unwrap();
        for id in &left {
            let _ = engine.remove(id).await;
        }
    }

    eprintln!(
        "soak: {EXECUTIONS} executions at concurrency {CONCURRENCY} in {:.1} s ({:.2} executions/s)",
        wall.as_secs_f64(),
        EXECUTIONS as f64 / wall.as_secs_f64()
    );
    eprintln!("soak: by status {by_status:?}");
    for (k, mut times) in latency {
        times.sort();
        eprintln!(
            "soak: {k:?}: n={}, latency p50 {:?}, p99 {:?}, max {:?}",
            times.len(),
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            times.last().copied().unwrap_or_default()
        );
    }
    eprintln!(
        "soak: server VmRSS {:.1} MiB after {WARM_UP} executions, {:.1} MiB at the end ({:+.1} MiB)",
        mib(rss_warm),
        mib(rss_end),
        mib(rss_end) - mib(rss_warm)
    );
    eprintln!(
        "soak: CPU over the run: server {server_cpu:.1} s, dockerd + containerd {engine_cpu:.1} s \
         (of {:.0} s on 2 cores); the machine was {:.0}% busy",
        2.0 * wall.as_secs_f64(),
        100.0 * machine_busy
    );
    eprintln!(
        "soak: at most {} containers at once ({:?}) over {} samples, {} samples above \
         max-concurrency + pool; bound {}",
        containers.max,
        containers.at_max,
        containers.samples,
        containers.over_slots,
        CONCURRENCY + pool_size() + removal_margin()
    );
    eprintln!(
        "soak: samples per container count {:?}; after the run {} containers ({:?}) in {:.1} s",
        containers.histogram,
        idle_states.len(),
        idle_states,
        settled_in.as_secs_f64()
    );
    eprintln!("soak: server exit {exit}, {} containers left", left.len());

    // Every check, so one run shows every problem.
    if !mismatches.is_empty() {
        failures.push(format!(
            "{} of {EXECUTIONS} executions did not end as expected:\n  {}",
            mismatches.len(),
            mismatches.join("\n  ")
        ));
    }
    if lost_oom_notices > LOST_OOM_NOTICES {
        failures.push(format!(
            "{lost_oom_notices} memory kills were reported without the engine's OOM notice \
             (at most {LOST_OOM_NOTICES} may lose it under load): is the event stream followed?"
        ));
    }
    if !exit.success() {
        failures.push(format!("the server exited with {exit}"));
    }
    if !left.is_empty() {
        failures.push(format!(
            "containers left behind after the server exited: {left:?}"
        ));
    }
    if rss_end.saturating_sub(rss_warm) >= RSS_GROWTH_LIMIT_KIB {
        failures.push(format!(
            "server VmRSS grew from {:.1} MiB to {:.1} MiB over {} executions (limit +{} MiB): \
             a per-execution leak?",
            mib(rss_warm),
            mib(rss_end),
            EXECUTIONS - WARM_UP,
            RSS_GROWTH_LIMIT_KIB / 1024
        ));
    }
    if !(idle_states.len() == pool_size() && idle_states.iter().all(|(_, s)| s == "running")) {
        failures.push(format!(
            "{SETTLE_LIMIT:?} after the load stopped the server still had {idle_states:?}, not \
             just its pool of {} ready containers",
            pool_size()
        ));
    }
    if containers.samples == 0 {
        failures.push("the container count was never sampled".into());
    }
    if containers.max > CONCURRENCY + pool_size() + removal_margin() {
        failures.push(format!(
            "{} containers at once ({:?}): more than max-concurrency {CONCURRENCY} + pool \
             {} + {} being removed",
            containers.max,
            containers.at_max,
            pool_size(),
            removal_margin()
        ));
    }
    assert!(
        failures.is_empty(),
        "the soak run failed {} checks:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
