//! What tenants cost over streamable HTTP: `cargo bench --bench tenants`.
//!
//! One process, the real Docker engine, two in-process HTTP servers with the same settings
//! (pool of 2, data in temporary directories), driven by rmcp clients:
//!
//! 1. baseline: `execute_code("print(1)")` on a server without tokens (one application),
//!    sequential, paced by a think time so the pool has refilled before each call;
//! 2. the same on a server with bearer tokens, through a tenant's session (token check, tenant
//!    lookup, the tenant's own pool);
//! 3. a new session's handshake and first call on a tenant already open;
//! 4. the same for a tenant not yet open: the handshake opens it (directories, skills, PII
//!    engine, its pool starting) and the call waits for its pool's first container; fresh
//!    tenants one after another.
//!
//! It prints the percentiles of each row and their ratios to row 1. Knobs: `BENCH_N` samples
//! of rows 1 and 2 (default 40), `BENCH_TENANTS` samples of rows 3 and 4 (default 5),
//! `BENCH_THINK_MS` (default 400). Figures on a shared machine are noisy: compare the ratios.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use code_execution_mcp::config::{Config, Secret, Transport};
use code_execution_mcp::sandbox::stats::percentile;
use code_execution_mcp::transport::{Access, http_access, serve_http};
use common::knobs::env_usize;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

fn config(dir: &Path) -> Config {
    let mut c = Config::defaults();
    c.transport.transport = Transport::Http;
    c.storage.data_dir = Some(dir.to_path_buf());
    c.storage.workspace_quota_mb = 0;
    c.pool.pool_size = 2;
    c
}

type Served = tokio::task::JoinHandle<Result<(), code_execution_mcp::transport::ServeError>>;

/// A server on a free loopback port, once it has started: its URL, what stops it, and its
/// task.
async fn start(access: Access) -> (String, tokio::sync::oneshot::Sender<()>, Served) {
    let started = access.started();
    let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve_http(
        access,
        "127.0.0.1:0".parse().unwrap(),
        async move {
            let _ = stopped.await;
        },
        Some(bound_tx),
    ));
    let addr = bound_rx.await.expect("the server binds");
    started
        .await
        .unwrap_or_else(|e| panic!("the server starts (is the sandbox image built?): {e}"));
    (format!("http://{addr}/mcp"), stop, task)
}

async fn client(url: &str, token: Option<&str>) -> RunningService<RoleClient, ()> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("MCP handshake over HTTP")
}

/// One `execute_code("print(1)")`, in milliseconds; panics unless it succeeded.
async fn print_one(client: &RunningService<RoleClient, ()>) -> f64 {
    let args = json!({"code": "print(1)"}).as_object().unwrap().clone();
    let started = Instant::now();
    let result = client
        .call_tool(CallToolRequestParams::new("execute_code").with_arguments(args))
        .await
        .expect("the call is answered");
    let elapsed = started.elapsed().as_secs_f64() * 1000.0;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    elapsed
}

async fn paced(client: &RunningService<RoleClient, ()>, n: usize, think: Duration) -> Vec<f64> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        tokio::time::sleep(think).await;
        samples.push(print_one(client).await);
    }
    samples
}

fn row(name: &str, samples: &mut [f64], baseline: Option<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    let p50 = percentile(samples, 0.5).unwrap_or_default();
    let ratio = baseline.map_or(String::new(), |b| {
        format!("   {:.2}x baseline p50", p50 / b)
    });
    println!(
        "{name:<44} n={:<3} p50 {p50:>7.1} ms  p90 {:>7.1} ms  max {:>7.1} ms{ratio}",
        samples.len(),
        percentile(samples, 0.9).unwrap_or_default(),
        samples.last().copied().unwrap_or_default(),
    );
    p50
}

#[tokio::main]
async fn main() {
    let n = env_usize("BENCH_N", 40);
    let fresh = env_usize("BENCH_TENANTS", 5);
    let think = Duration::from_millis(env_usize("BENCH_THINK_MS", 400) as u64);
    let open_dir = tempfile::tempdir().unwrap();
    let tenants_dir = tempfile::tempdir().unwrap();

    let access = http_access(config(open_dir.path()))
        .await
        .expect("the server starts (is the sandbox image built?)");
    let (open_url, stop_open, open_task) = start(access).await;
    let open = client(&open_url, None).await;
    print_one(&open).await; // warm-up
    let mut baseline = paced(&open, n, think).await;

    let tokens: Vec<(String, String)> = (0..=fresh)
        .map(|i| (format!("t{i}"), format!("{:0>40}", format!("bench{i}"))))
        .collect();
    let mut c = config(tenants_dir.path());
    let table: Vec<String> = tokens.iter().map(|(t, k)| format!("{t}:{k}")).collect();
    c.tenants.tokens = Some(Secret(table.join(",")));
    let access = http_access(c).await.expect("the tenant server starts");
    let (tenant_url, stop_tenants, tenants_task) = start(access).await;
    let first = client(&tenant_url, Some(&tokens[0].1)).await;
    print_one(&first).await; // opens tenant t0
    let mut tenant = paced(&first, n, think).await;

    // A new session's handshake and first call, on an open tenant and on fresh ones (the
    // handshake opens a fresh tenant; its first call waits for its pool's first container).
    let session_and_call = async |token: &str| {
        tokio::time::sleep(think).await;
        let started = Instant::now();
        let c = client(&tenant_url, Some(token)).await;
        print_one(&c).await;
        let elapsed = started.elapsed().as_secs_f64() * 1000.0;
        c.cancel().await.unwrap();
        elapsed
    };
    let mut reopening = Vec::new();
    for _ in 1..=fresh {
        reopening.push(session_and_call(&tokens[0].1).await);
    }
    let mut opening = Vec::new();
    for (_, token) in &tokens[1..] {
        opening.push(session_and_call(token).await);
    }

    println!("\nexecute_code(\"print(1)\") over streamable HTTP, think time {think:?}, pool 2");
    let b = row("1. no tokens (baseline)", &mut baseline, None);
    row("2. a tenant, with its bearer token", &mut tenant, Some(b));
    row(
        "3. new session + call, tenant open",
        &mut reopening,
        Some(b),
    );
    row(
        "4. new session + call, new tenant (opens it)",
        &mut opening,
        Some(b),
    );

    open.cancel().await.unwrap();
    first.cancel().await.unwrap();
    // Shutdown removes every container the servers started.
    let _ = stop_open.send(());
    let _ = stop_tenants.send(());
    open_task.await.unwrap().expect("the server stops cleanly");
    tenants_task
        .await
        .unwrap()
        .expect("the tenant server stops cleanly");
}
