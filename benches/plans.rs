//! What a plan costs (policy `plan`): `cargo build --release --example upstream-fixture &&
//! cargo bench --bench plans`.
//!
//! One process, the real Docker engine, the rmcp fixture upstream of `tests/upstream_fixture`
//! over stdio twice: `fx` (policy `allow`) and `planned` (policy `plan`). The server is fresh;
//! one `print(1)` runs before anything is timed. Per round (`BENCH_ROUNDS`, default 3):
//!
//! 1. the baseline: `BENCH_CALLS` (default 1,000) `echo` calls made one by one from the code
//!    with `allow` (harness → server → upstream and back, each), timed around the loop in the
//!    sandbox;
//! 2. the same calls to `planned` from the code: each call's planning time in the sandbox
//!    (`time.perf_counter_ns()` around it; aim ≤ 0.1 ms), then the plan applied on accept (the
//!    user answers at once, in this process): from the answer to the execution's end (aim ≤ 2×
//!    the baseline).
//!
//! Figures on a shared machine are noisy: compare the ratios, within one run.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use code_execution_mcp::app::App;
use code_execution_mcp::app::execution::request::ExecuteRequest;
use code_execution_mcp::gateway::{Answer, AskError, Confirm, Prompt};
use code_execution_mcp::sandbox::stats::percentile;
use common::knobs::env_usize;
use common::upstreams::{app_with, fixture};
use serde_json::json;

/// The user, answering at once; notes when.
struct AcceptAtOnce(Mutex<Option<Instant>>);

#[async_trait::async_trait]
impl Confirm for AcceptAtOnce {
    async fn ask(&self, _prompt: Prompt) -> Result<Answer, AskError> {
        *self.0.lock().unwrap() = Some(Instant::now());
        Ok(Answer::Accept)
    }
}

async fn app(dir: &Path, calls: usize) -> Arc<App> {
    let fx = fixture();
    let servers = json!({
        "fx": {"command": fx},
        "planned": {"command": fx, "args": ["--name", "planned"], "policy": {"default": "plan"}},
    });
    app_with(dir, servers, |c| c.gateway.plan_max_calls = calls.max(1000)).await
}

fn request(code: String, confirm: Option<Arc<dyn Confirm>>) -> ExecuteRequest {
    ExecuteRequest {
        code,
        timeout_seconds: Some(300.0),
        confirm,
        ..Default::default()
    }
}

/// The baseline: `n` calls with `allow`, one by one; the loop's time in the sandbox (ms).
async fn allowed(app: &App, n: usize) -> f64 {
    let code = format!(
        "import time\nfrom servers.fx import echo\nt = time.perf_counter_ns()\nfor i in range({n}):\n    echo(value={{'id': i, 'status': 'won'}})\nresult = (time.perf_counter_ns() - t) / 1e6\n"
    );
    let ran = app.execute(request(code, None), Default::default()).await;
    let ran = ran.expect("execution runs");
    assert!(ran.outcome.success(), "{:?}", ran.outcome.error);
    ran.outcome.result.as_f64().expect("a duration")
}

/// The same calls planned: each call's planning time in the sandbox (ms), and the time from
/// the user's answer to the execution's end (ms).
async fn planned(app: &App, n: usize) -> (Vec<f64>, f64) {
    let code = format!(
        "import time\nfrom servers.planned import echo\nms = []\nfor i in range({n}):\n    t = time.perf_counter_ns()\n    echo(value={{'id': i, 'status': 'won'}})\n    ms.append((time.perf_counter_ns() - t) / 1e6)\nresult = ms\n"
    );
    let user = Arc::new(AcceptAtOnce(Mutex::new(None)));
    let ran = app
        .execute(request(code, Some(user.clone())), Default::default())
        .await;
    let ended = Instant::now();
    let ran = ran.expect("execution runs");
    assert!(ran.outcome.success(), "{:?}", ran.outcome.error);
    let plan = ran.plan.expect("a plan");
    assert_eq!((plan.status.as_str(), plan.ok), ("applied", n), "{plan:?}");
    let answered = user.0.lock().unwrap().expect("asked");
    let planning = (ran.outcome.result.as_array().expect("durations").iter())
        .map(|v| v.as_f64().unwrap())
        .collect();
    (planning, (ended - answered).as_secs_f64() * 1e3)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(v, 0.5).unwrap_or(0.0)
}

fn main() {
    common::block_on(run());
}

async fn run() {
    let n = env_usize("BENCH_CALLS", 1000);
    let rounds = env_usize("BENCH_ROUNDS", 3);
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), n).await;
    let warm = app.execute(request("print(1)".into(), None), Default::default());
    assert!(warm.await.expect("warm-up runs").outcome.success());
    let (mut base, mut apply, mut per_call) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        base.push(allowed(&app, n).await);
        let (planning, applied) = planned(&app, n).await;
        per_call.extend(planning);
        apply.push(applied);
    }
    println!("fresh server, after one print(1); {n} calls per execution, {rounds} rounds");
    let b = median(&mut base);
    let a = median(&mut apply);
    per_call.sort_by(f64::total_cmp);
    let p50 = percentile(&per_call, 0.5).unwrap_or(0.0);
    let p99 = percentile(&per_call, 0.99).unwrap_or(0.0);
    println!("{n} calls one by one with allow (in the sandbox)   median {b:>8.1} ms");
    println!(
        "the same calls planned, applied on accept          median {a:>8.1} ms  ratio {:.2} (aim <= 2.0)",
        a / b
    );
    println!(
        "planning one call (in the sandbox)                 p50 {p50:.4} ms  p99 {p99:.4} ms  (aim p50 <= 0.1 ms)"
    );
    app.shutdown().await;
}
