//! What personal data's flow rules cost (`pii` rules in the upstreams file):
//! `cargo build --release --example upstream-fixture && cargo bench --bench flows`.
//!
//! One process, the real Docker engine, the rmcp fixture over stdio four times: `crm` (its
//! results withheld from `ruled`, so they enter the sandbox tokenized), `crm_open` (the same
//! tool, allowed by every rule, so its results enter as they are), `open` (no rule) and `ruled`
//! (`restore_from: ["sandbox", "crm_open"]`). The server is fresh; one `print(1)` runs before
//! anything is timed. Per round (`BENCH_ROUNDS`, default 3; each pair in alternating order),
//! timed in the sandbox:
//!
//! 1. `BENCH_CALLS` (default 1,000) `echo` calls to `open` with three tokens in the arguments
//!    (the baseline: every token restored, no rule), then the same calls to `ruled` (each token
//!    looked up, its origins checked, two withheld and one restored);
//! 2. `rows(count=BENCH_ROWS)` (default 2,000 people: an email and a phone each) from
//!    `crm_open` (the baseline: results as they are) and from `crm` (tokenized on the way in).
//!
//! Figures on a shared machine are noisy: compare the ratios, within one run.

mod common;

use std::path::Path;
use std::sync::Arc;

use code_execution_mcp::app::App;
use code_execution_mcp::app::execution::request::ExecuteRequest;
use common::knobs::env_usize;
use common::stdio::{p, sorted};
use common::upstreams::{app_with, fixture};
use serde_json::json;

async fn app(dir: &Path) -> Arc<App> {
    let fx = fixture();
    let servers = json!({
        "crm": {"command": fx},
        "crm_open": {"command": fx, "args": ["--name", "crm_open"]},
        "open": {"command": fx, "args": ["--name", "open"]},
        "ruled": {"command": fx, "args": ["--name", "ruled"],
                  "pii": {"restore_from": ["sandbox", "crm_open"], "otherwise": "keep"}},
    });
    app_with(dir, servers, |c| c.gateway.max_tool_calls = 10_000).await
}

/// Runs `code`; its result as a duration in ms.
async fn timed(app: &App, code: String) -> f64 {
    let request = ExecuteRequest {
        code,
        timeout_seconds: Some(300.0),
        ..Default::default()
    };
    let ran = app.execute(request, Default::default()).await;
    let ran = ran.expect("execution runs");
    assert!(ran.outcome.success(), "{:?}", ran.outcome.error);
    ran.outcome.result.as_f64().expect("a duration")
}

/// `n` echo calls to `server` with three tokens in the arguments: one the code tokenized
/// itself, two the CRM returned.
fn calls(server: &str, n: usize) -> String {
    format!(
        "import time\nfrom servers.crm import rows\nfrom servers.{server} import echo\n\
         crm = [r['email'] for r in rows(count=2)['rows']]\n\
         typed = tokenize_pii('typed@example.com')[0]\n\
         t = time.perf_counter_ns()\nfor i in range({n}):\n    echo(value={{'id': i, 'to': [typed, *crm]}})\n\
         result = (time.perf_counter_ns() - t) / 1e6\n"
    )
}

/// One `rows` call of `count` people to `server`.
fn rows(server: &str, count: usize) -> String {
    format!(
        "import time\nfrom servers.{server} import rows\nt = time.perf_counter_ns()\n\
         r = rows(count={count})\nassert len(r['rows']) == {count}\n\
         result = (time.perf_counter_ns() - t) / 1e6\n"
    )
}

fn median(v: &[f64]) -> f64 {
    p(&sorted(v.iter().copied()), 0.5)
}

fn main() {
    common::block_on(run());
}

async fn run() {
    let n = env_usize("BENCH_CALLS", 1000);
    let people = env_usize("BENCH_ROWS", 2000);
    let rounds = env_usize("BENCH_ROUNDS", 3);
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path()).await;
    let warm = app.execute(
        ExecuteRequest {
            code: "print(1)".into(),
            ..Default::default()
        },
        Default::default(),
    );
    assert!(warm.await.expect("warm-up runs").outcome.success());
    let mut ms: [Vec<f64>; 4] = Default::default();
    for round in 0..rounds {
        // Alternately first, so neither side always meets a colder server.
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let server = ["open", "ruled"][i];
            ms[i].push(timed(&app, calls(server, n)).await);
        }
        for i in order {
            let server = ["crm_open", "crm"][i];
            ms[2 + i].push(timed(&app, rows(server, people)).await);
        }
    }
    let [open, ruled, clear, tokenized] = ms.map(|v| median(&v));
    println!("fresh server, after one print(1); {rounds} rounds, medians, timed in the sandbox");
    let line = |what: String, ms: f64, base: Option<f64>| {
        let ratio = base.map_or(String::new(), |b| format!("  ratio {:.2}", ms / b));
        println!("{what:<52} {ms:>8.1} ms{ratio}");
    };
    line(format!("{n} calls, 3 tokens each, no rule"), open, None);
    line(
        "the same calls under a rule (2 of 3 withheld)".into(),
        ruled,
        Some(open),
    );
    line(
        format!("rows({people}) from an upstream every rule allows"),
        clear,
        None,
    );
    line(
        format!("rows({people}) tokenized on the way in"),
        tokenized,
        Some(clear),
    );
    app.shutdown().await;
}
