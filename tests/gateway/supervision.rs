//! How the gateway keeps an upstream: restarts after 1, 2, 4, 8 and 16 s and then gives up,
//! logs at most 50 of its stderr lines per 10 s, and kills its whole process group when its
//! connection ends and when the server stops.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::{app_with, app_with_ready, run, statuses};
use crate::common::upstreams::{fixture_bin, upstreams_file};
use crate::common::{LoggedServer, execute_code};

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_upstream_is_restarted_after_1_2_4_8_16_s_then_given_up() {
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    // Writes when it started, then exits before `initialize`.
    let script = format!("date +%s.%N >> {}; exit 1", starts.display());
    let t = app_with_ready(
        json!({"flaky": {"command": "sh", "args": ["-c", script]}}),
        |c| c.gateway.upstream_connect_timeout_secs = 5,
        Some(&[]),
    )
    .await;
    let mut status = String::new();
    for _ in 0..900 {
        status = statuses(&t)[0].1.clone();
        if status.starts_with("Failed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        status.contains("given up: 5 restarts in a row failed"),
        "{status}"
    );
    // Given up: no start after that.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let times: Vec<f64> = std::fs::read_to_string(&starts)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(
        times.len(),
        6,
        "the first start and five restarts: {times:?}"
    );
    // Each wait is at least its backoff (how much longer it took is the machine's business).
    for (i, pair) in times.windows(2).enumerate() {
        let backoff = f64::from(1u32 << i);
        assert!(
            pair[1] - pair[0] >= backoff - 0.05,
            "restart {} came {:.2} s after the previous start, before its {backoff} s backoff: {times:?}",
            i + 1,
            pair[1] - pair[0]
        );
    }
    t.app.shutdown_all().await;
}

/// The pids of processes whose command line (arguments joined by spaces) holds `marker`.
fn pids_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
        })
        .collect()
}

async fn gone(pid: u32) -> bool {
    for _ in 0..100 {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstreams_process_group_dies_with_its_connection_and_with_the_server() {
    // A wrapper (as uvx or npx are) that leaves a child behind, then becomes the server.
    let marker = format!("{}.{}", 900 + std::process::id() % 100, std::process::id());
    let script = format!("sleep {marker} & exec {}", fixture_bin().display());
    let t = app_with(
        json!({"wrapped": {"command": "sh", "args": ["-c", script]}}),
        |_| {},
    )
    .await;
    let first = pids_with(&format!("sleep {marker}"));
    assert_eq!(first.len(), 1, "the wrapper's child runs: {first:?}");

    // The connection ends (the server process crashes): its group goes with it.
    let o = run(&t, "from servers.wrapped import crash\ncrash()").await;
    assert!(o.outcome.error.unwrap_or_default().contains("closed"));
    assert!(
        gone(first[0]).await,
        "the child of a crashed upstream was left running"
    );

    // Restarted, with a new child; the server stops: that group goes too.
    let mut second = Vec::new();
    for _ in 0..100 {
        second = pids_with(&format!("sleep {marker}"));
        if !second.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(second.len(), 1, "restarted with a new child: {second:?}");
    t.app.shutdown_all().await;
    assert!(
        gone(second[0]).await,
        "the server stopped and left the upstream's child running"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstreams_stderr_flood_is_logged_at_most_50_lines_per_10_s() {
    let dir = tempfile::tempdir().unwrap();
    // 2 MiB in lines of 100 bytes: about 21,000 lines, written in well under 10 s.
    let file = upstreams_file(
        dir.path(),
        json!({"noisy": {"command": fixture_bin(), "args": ["--stderr-flood-at-start", "2"]}}),
    );
    let server = LoggedServer::start(dir.path(), &["--upstreams", file.to_str().unwrap()]).await;
    // The first execution waits for the upstream, which floods before it serves.
    let reply = execute_code(
        &server.client,
        "from servers.noisy import echo\nresult = echo(value=1)['value']",
    )
    .await;
    let r = reply.structured_content.expect("structured content");
    assert_eq!(r["result"], 1, "{r}");
    let logs = server.finish().await;
    let logged = logs
        .lines()
        .filter(|l| l.contains("stderr: eeeeeeeeee"))
        .count();
    // 50 in the first window; a flood that crossed into a second or third window (a slow
    // machine) may add 50 each, never thousands.
    assert!(
        (50..=150).contains(&logged),
        "{logged} of about 21,000 stderr lines were logged"
    );
}
