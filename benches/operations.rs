//! What the metrics and the audit trail cost: `cargo bench --bench operations`.
//!
//! One process, the real engine, two in-process servers on the minimal image (pool of 2, no
//! preloading, data in temporary directories):
//!
//! - **baseline**: `--audit false`, no metrics endpoint;
//! - **operations**: the audit trail on with `--audit-code` (the costlier record: the code is
//!   tokenized too), and a metrics endpoint scraped every second in the background, as a
//!   Prometheus would.
//!
//! Rows:
//!
//! 1. paced `execute_code("print(1)")`, `BENCH_N` samples each (default 100), one call every
//!    `BENCH_PACE_MS` (default 500) so the pool is full each time, the two servers alternating
//!    sample by sample: p50 and p90, and the operations row's ratio to the baseline (a shorter
//!    pace lets some calls find the pool refilling and start cold, and the cold share, not the
//!    audit, then decides the p50);
//! 2. one audit record's append on its own (the write before the tool answers), p50 over 1,000;
//! 3. a `/metrics` scrape over HTTP once the operations server has recorded 1,000 executions
//!    (`BENCH_SCRAPE_EXECUTIONS`), p50 and p90 over 100 scrapes, and the body's size.
//!
//! Figures are noisy on a shared machine: compare within one run.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use code_execution_mcp::app::App;
use code_execution_mcp::audit::{AuditLog, AuditRecord, AuditSettings};
use code_execution_mcp::config::{Config, ImageProfile};
use code_execution_mcp::sandbox::stats::percentile;
use common::config::defaults_in;
use common::in_process::execution_ms;
use common::knobs::env_usize;

fn config(dir: &Path, operations: bool) -> Config {
    let mut c = defaults_in(dir);
    c.pool.pool_size = 2;
    c.pool.pool_max = 2;
    c.sandbox.image_profile = ImageProfile::Minimal;
    c.sandbox.preload = Some(vec!["none".into()]);
    c.operations.audit = operations;
    c.operations.audit_code = operations;
    c
}

fn row(name: &str, mut ms: Vec<f64>, base: Option<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    let (p50, p90) = (percentile(&ms, 0.5).unwrap(), percentile(&ms, 0.9).unwrap());
    let ratio = base.map_or(String::new(), |b| format!("  ×{:.3} of baseline", p50 / b));
    println!(
        "{name:<44} n={:<5} p50 {p50:>9.3} ms  p90 {p90:>9.3} ms{ratio}",
        ms.len()
    );
    p50
}

async fn scrape(client: &reqwest::Client, url: &str) -> (f64, usize) {
    let started = Instant::now();
    let body = client
        .get(url)
        .send()
        .await
        .expect("the endpoint answers")
        .text()
        .await
        .expect("a body");
    (started.elapsed().as_secs_f64() * 1000.0, body.len())
}

#[tokio::main]
async fn main() {
    code_execution_mcp::install_tls_provider();
    let n = env_usize("BENCH_N", 100);
    let pace = Duration::from_millis(env_usize("BENCH_PACE_MS", 500) as u64);
    let (base_dir, ops_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let base = Arc::new(App::start(config(base_dir.path(), false)).await.unwrap());
    let ops = Arc::new(App::start(config(ops_dir.path(), true)).await.unwrap());
    let one = ops.clone();
    let metrics = code_execution_mcp::metrics::serve(
        "127.0.0.1:0".parse().unwrap(),
        ops.shared().clone(),
        Arc::new(move || vec![one.clone()]),
    )
    .await
    .unwrap();
    let url = format!("http://{}/metrics", metrics.addr);
    let client = reqwest::Client::new();
    let scraper = {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                scrape(&client, &url).await;
            }
        })
    };
    // Warm both: images' pages, pools full.
    for _ in 0..5 {
        execution_ms(&base, "print(1)").await;
        execution_ms(&ops, "print(1)").await;
    }
    println!("paced print(1), {n} samples each, one call every {pace:?}, alternating:");
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..n {
        tokio::time::sleep(pace).await;
        off.push(execution_ms(&base, "print(1)").await);
        tokio::time::sleep(pace).await;
        on.push(execution_ms(&ops, "print(1)").await);
    }
    let b = row("  baseline (no audit, no metrics)", off, None);
    row("  audit trail (--audit-code) + metrics", on, Some(b));

    // One record's append on its own.
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::new(
        dir.path(),
        "_default",
        "bench",
        AuditSettings {
            max_file_bytes: 64 << 20,
            keep_rotated: 2,
            include_code: false,
            required: false,
        },
    );
    let record: AuditRecord = serde_json::from_value(serde_json::json!({
        "time": "2026-11-26T10:15:02.114Z", "node": "bench", "execution_id": "exe_3f9c2a1b7d4e8f60",
        "client": "claude-code", "code_sha256": "d287bb7f9d15abdc5b6e98536263815744b6ef21c8f3c839fc434ca70d8efe99",
        "status": "ok", "duration_ms": 231.4,
        "calls": [{"server": "crm", "tool": "update_contact", "outcome": "ok", "policy": "allow",
                   "arguments_sha256": "9a0c9a0c9a0c9a0c9a0c9a0c9a0c9a0c9a0c9a0c9a0c9a0c9a0c9a0c9a0c9a0c",
                   "duration_ms": 84.2}],
        "files_changed": ["report.txt"]
    }))
    .unwrap();
    let appends: Vec<f64> = (0..1000)
        .map(|_| {
            let started = Instant::now();
            log.append(&record).unwrap();
            started.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    row("one audit record appended", appends, None);

    // Scrapes after many executions.
    let target = env_usize("BENCH_SCRAPE_EXECUTIONS", 1000) as u64;
    let recorded = || ops.execution_stats().executions_total;
    while recorded() < target {
        let left = (target - recorded()).min(2);
        let runs = (0..left).map(|_| execution_ms(&ops, "print(1)"));
        futures::future::join_all(runs).await;
    }
    scraper.abort();
    let mut size = 0;
    let mut scrapes = Vec::new();
    for _ in 0..100 {
        let (ms, bytes) = scrape(&client, &url).await;
        scrapes.push(ms);
        size = bytes;
    }
    row(
        &format!("/metrics after {} executions ({size} B)", recorded()),
        scrapes,
        None,
    );
    drop(metrics);
    base.shutdown_all().await;
    ops.shutdown_all().await;
}
