//! Helpers the stdio benches share (`execution`, `notebook`, `runtimes`): samples and
//! percentiles, the machine's load and engine, commands that must succeed, concurrent loops, a
//! failed call's text and the server's stderr tail, and the containers a run left behind.

// A client reads rmcp's answer types (clippy.toml bans them in the server, which makes its
// answers in src/privacy/ only); nothing here answers a model.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use code_execution_mcp::sandbox::Backend;
use code_execution_mcp::sandbox::Engine;
use code_execution_mcp::sandbox::container::spec::{LABEL_MANAGED, LABEL_OWNER};
use code_execution_mcp::sandbox::stats::percentile;
use futures::future::join_all;
use rmcp::model::CallToolResult;
use tokio::process::Command;

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn sorted(samples: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut s: Vec<f64> = samples.collect();
    s.sort_by(f64::total_cmp);
    s
}

pub fn p(sorted: &[f64], q: f64) -> f64 {
    percentile(sorted, q).expect("at least one sample")
}

pub fn describe(result: &CallToolResult) -> String {
    match &result.structured_content {
        Some(v) => v.to_string(),
        None => result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// The last lines of a server's stderr, for failure messages.
pub fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(30);
    format!(
        "--- server stderr (tail) ---\n{}",
        lines[start..].join("\n")
    )
}

/// The 1-minute load average, a hint of how much else ran on the machine.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// Output of a command that must succeed.
pub async fn command_stdout(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        out.status
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Wall time of `loops` concurrent loops of `calls` calls each.
pub async fn concurrent<T, F: AsyncFn() -> T>(loops: usize, calls: usize, one: F) -> Duration {
    let t = Instant::now();
    join_all((0..loops).map(|_| async {
        for _ in 0..calls {
            one().await;
        }
    }))
    .await;
    t.elapsed()
}

/// Managed containers whose owner label names one of `pids`, waiting up to 10 s for none.
pub async fn leftover_containers(pids: &[u32]) -> Vec<String> {
    let engine = Engine::connect()
        .await
        .expect("connect to the Docker engine");
    let mut left = Vec::new();
    for _ in 0..50 {
        left = engine
            .list_labelled(&[LABEL_MANAGED.to_string()])
            .await
            .expect("list containers")
            .into_iter()
            .filter(|c| {
                c.labels
                    .get(LABEL_OWNER)
                    .and_then(|o| o.rsplit(':').nth(1)?.parse::<u32>().ok())
                    .is_some_and(|pid| pids.contains(&pid))
            })
            .map(|c| c.id)
            .collect();
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    left
}

/// The engine's version, storage driver and default runtime, for a report's header.
pub async fn docker_version() -> String {
    command_stdout(
        "docker",
        &[
            "info",
            "--format",
            "{{.ServerVersion}}, storage {{.Driver}}, runtime {{.DefaultRuntime}}",
        ],
    )
    .await
}

/// Reports that the run's `servers` left no container behind; else removes those `left` and
/// fails the bench naming them.
pub async fn report_leftovers(left: &[String], servers: usize) {
    if left.is_empty() {
        println!("containers left behind by this run's {servers} servers: none");
    } else {
        let mut rm = vec!["rm", "-f"];
        rm.extend(left.iter().map(String::as_str));
        let _ = command_stdout("docker", &rm).await;
        panic!("containers left behind by this run's servers (now removed): {left:?}");
    }
}
