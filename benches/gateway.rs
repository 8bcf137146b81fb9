//! What a tool call from sandbox code costs, and what the gateway saves in context:
//! `cargo build --release --example upstream-fixture && cargo bench --bench gateway`.
//!
//! One process, the real Docker engine, the rmcp fixture upstream of `tests/upstream_fixture`
//! over stdio:
//!
//! 1. baseline: `echo` called directly by an rmcp client in this process, `BENCH_CALLS` times
//!    (default 1,000): the upstream's own time plus one stdio hop;
//! 2. the same calls from ONE execution's code (`from servers.fx import echo`), each timed in
//!    the sandbox with `time.perf_counter_ns()`: harness → channel frame → server → upstream →
//!    back. The difference of the two is the gateway's overhead per call.
//! 3. context tokens for the article's workflow, a 10,000-row sheet from one upstream into
//!    another: (a) direct tool calls, where the model reads the `rows` result and writes every
//!    row back into a `store_rows` call; (b) one `execute_code`, where the model writes the
//!    code and reads the response. Counted with a real tokenizer (the one the `anthropic`
//!    Python SDK 0.34 ships as `tokenizer.json`) through `benches/count_tokens.py`, run by
//!    `$CEM_BENCH_TOKENIZER_PYTHON` (`python3 -m venv v && v/bin/pip install anthropic==0.34.2
//!    'tokenizers<0.21'`); without it, part 3 is skipped and says so.
//!
//! Figures on a shared machine are noisy: compare the ratios.

// A client reads rmcp's answer types (clippy.toml bans them in the server, which makes its
// answers in src/privacy/ only); nothing here answers a model.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use code_execution_mcp::app::App;
use code_execution_mcp::app::execution::request::ExecuteRequest;
use code_execution_mcp::mcp::CodeExecutionServer;
use code_execution_mcp::sandbox::stats::percentile;
use common::knobs::env_usize;
use common::upstreams::{app_with, fixture};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

fn summary(label: &str, ms: &mut [f64]) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    let p50 = percentile(ms, 0.50).unwrap_or(0.0);
    let p99 = percentile(ms, 0.99).unwrap_or(0.0);
    let mean = ms.iter().sum::<f64>() / ms.len().max(1) as f64;
    println!(
        "{label:<46} n={:<5} p50 {p50:>7.3} ms  p99 {p99:>7.3} ms  mean {mean:>7.3} ms",
        ms.len()
    );
    (p50, p99)
}

async fn direct_calls(n: usize) -> Vec<f64> {
    let mut cmd = tokio::process::Command::new(fixture());
    cmd.stderr(std::process::Stdio::null());
    let transport = rmcp::transport::TokioChildProcess::new(cmd).expect("start the fixture");
    let client = ().serve(transport).await.expect("fixture handshake");
    let mut ms = Vec::with_capacity(n);
    for i in 0..n {
        let args = json!({"value": i}).as_object().cloned().unwrap();
        let started = Instant::now();
        client
            .call_tool(CallToolRequestParams::new("echo").with_arguments(args))
            .await
            .expect("echo answers");
        ms.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let _ = client.cancel().await;
    ms
}

async fn app(dir: &Path) -> Arc<App> {
    let fx = fixture();
    let servers = json!({
        "fx": {"command": fx},
        "sheet": {"command": fx, "args": ["--name", "sheet"]},
        "crm": {"command": fx, "args": ["--name", "crm"], "env": {"FIXTURE_RECORD": dir.join("crm.jsonl")}},
    });
    app_with(dir, servers, |_| {}).await
}

async fn sandbox_calls(app: &App, n: usize) -> Vec<f64> {
    let code = format!(
        "import time\nfrom servers.fx import echo\nms = []\nfor i in range({n}):\n    t = time.perf_counter_ns()\n    echo(value=i)\n    ms.append((time.perf_counter_ns() - t) / 1e6)\nresult = ms\n"
    );
    let ran = app
        .execute(
            ExecuteRequest {
                code,
                timeout_seconds: Some(300.0),
                ..Default::default()
            },
            Default::default(),
        )
        .await
        .expect("execution runs");
    assert!(ran.outcome.success(), "{:?}", ran.outcome.error);
    assert!(!ran.outcome.result_truncated, "raise max_result_bytes");
    ran.outcome
        .result
        .as_array()
        .expect("a list of durations")
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

/// The texts of each way of running the article's workflow, as the model reads and writes them.
async fn workflow_texts(app: &Arc<App>) -> (Vec<String>, Vec<String>) {
    use rmcp::model::CallToolRequestParams as Call;
    let (server_io, client_io) = tokio::io::duplex(64 << 20);
    let server = CodeExecutionServer::new(app.clone());
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let client = ().serve(client_io).await.expect("in-process client");
    // (a) direct: the rows as an MCP client shows the model a tool result (here, a sheet
    // server's result as the fixture gives it), then the model's call carrying every row back.
    // A result is counted as its text content only, on both sides: `structuredContent` is the
    // same data again, and counting both would double every figure.
    let mut cmd = tokio::process::Command::new(fixture());
    cmd.stderr(std::process::Stdio::null());
    let sheet = ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let rows = sheet
        .call_tool(
            Call::new("rows")
                .with_arguments(json!({"count": 10_000}).as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    let rows_json = shown(&rows);
    let rows_value = rows.structured_content.clone().unwrap()["rows"].clone();
    let store_call = json!({"name": "store_rows", "arguments": {"rows": rows_value}}).to_string();
    let _ = sheet.cancel().await;
    let direct = vec![rows_json, store_call];
    // (b) one execute_code: the code the model writes, the response it reads.
    let code = "from servers.sheet import rows\nfrom servers.crm import store_rows\ndata = rows(count=10000)[\"rows\"]\nstored = store_rows(rows=data)\nresult = {\"stored\": stored[\"stored\"], \"first\": data[0]}\n";
    let call = json!({"name": "execute_code", "arguments": {"code": code}}).to_string();
    let response = client
        .call_tool(
            Call::new("execute_code").with_arguments(
                json!({"code": code, "timeout_seconds": 120})
                    .as_object()
                    .cloned()
                    .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_ne!(response.is_error, Some(true), "{response:?}");
    let response = shown(&response);
    let _ = client.cancel().await;
    (direct, vec![call, response])
}

/// A tool result as the model reads it: the text of its text contents.
fn shown(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn count_tokens(texts: &[String]) -> Option<Vec<u64>> {
    let python = std::env::var("CEM_BENCH_TOKENIZER_PYTHON").ok()?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/count_tokens.py");
    let mut child = std::process::Command::new(python)
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the tokenizer");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(texts).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "count_tokens.py failed");
    let counts: Vec<u64> = serde_json::from_slice(&out.stdout).expect("a JSON list of counts");
    Some(counts)
}

#[tokio::main]
async fn main() {
    let n = env_usize("BENCH_CALLS", 1000);
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path()).await;

    println!("\n== one tool call: sandbox -> upstream -> sandbox, {n} calls of `echo` over stdio");
    // Warm both paths once, then measure.
    let _ = direct_calls(20).await;
    let (d50, d99) = summary(
        "baseline: rmcp client -> fixture (direct)",
        &mut direct_calls(n).await,
    );
    let _ = sandbox_calls(&app, 20).await;
    let (s50, s99) = summary(
        "from sandbox code (one execution)",
        &mut sandbox_calls(&app, n).await,
    );
    println!(
        "gateway overhead per call: p50 {:.3} ms (difference of the p50s), difference of the p99s {:.3} ms (x{:.2} / x{:.2} the direct call)",
        s50 - d50,
        s99 - d99,
        s50 / d50.max(1e-9),
        s99 / d99.max(1e-9)
    );

    println!("\n== context tokens: 10,000 rows from one upstream into another");
    let (direct, coded) = workflow_texts(&app).await;
    let bytes = |t: &[String]| t.iter().map(String::len).sum::<usize>();
    println!(
        "bytes through the model: direct tool calls {} B, one execute_code {} B (x{:.0})",
        bytes(&direct),
        bytes(&coded),
        bytes(&direct) as f64 / bytes(&coded) as f64
    );
    let all: Vec<String> = direct.iter().chain(coded.iter()).cloned().collect();
    match count_tokens(&all) {
        None => println!(
            "tokens: skipped (set CEM_BENCH_TOKENIZER_PYTHON to a python with `pip install anthropic==0.34.2 'tokenizers<0.21'`)"
        ),
        Some(c) => {
            let (a, b) = (c[0] + c[1], c[2] + c[3]);
            println!(
                "tokens (anthropic 0.34 tokenizer.json): direct tool calls {a} (result {} + call {}), one execute_code {b} (code {} + response {}): x{:.0} fewer",
                c[0],
                c[1],
                c[2],
                c[3],
                a as f64 / b as f64
            );
        }
    }
    app.shutdown_all().await;
}
