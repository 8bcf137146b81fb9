//! The gateway against real upstream MCP servers and the real engine: sandbox code imports
//! `servers.<server>` and calls tools of `mcp-server-time`, `mcp-server-git` and
//! `mcp-server-sqlite` from PyPI, of the rmcp fixture in `tests/upstream_fixture` (slow,
//! crashing, huge, failing and renamed tools), and of a second code-execution-mcp over
//! streamable HTTP.

#[path = "../common/mod.rs"]
mod common;

mod credentials;
mod edge_cases;
mod flows;
mod over_mcp;
mod plans;
mod pypi;
mod rounds;
mod supervision;

use std::path::Path;
use std::time::Duration;

use code_execution_mcp::app::Executed;
use code_execution_mcp::app::execution::request::ExecuteRequest;
use code_execution_mcp::config::Config;
use code_execution_mcp::sandbox::Status;
use common::TestApp;
use serde_json::Value;

/// Runs `tests/python/SCRIPT BINARY ARGS…` with the official MCP Python SDK's interpreter
/// (and the test harness's settings for the servers it starts); fails unless it passed.
pub fn python_client(script: &str, args: &[&Path]) {
    let python = common::upstreams::sdk_python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let status = std::process::Command::new(&python)
        .args(["-W", "ignore::DeprecationWarning"])
        .arg(script)
        .arg(common::BIN)
        .args(args)
        .envs(common::python_client_env())
        .status()
        .expect("run the Python client (CEM_TEST_PYTHON: an interpreter with the main pins of tests/upstream-pins.txt)");
    assert!(status.success(), "the Python client failed: {status}");
}

/// A server whose upstreams are `servers`, once each of them is connected (a failure panics
/// with their statuses).
pub async fn app_with(servers: Value, adjust: impl FnOnce(&mut Config)) -> TestApp {
    app_with_ready(servers, adjust, None).await
}

/// A server whose upstreams are `servers`, once those named in `ready` are connected (all of
/// them when `None`, failing ones included).
pub async fn app_with_ready(
    servers: Value,
    adjust: impl FnOnce(&mut Config),
    ready: Option<&[&str]>,
) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = common::upstreams::upstreams_file(dir.path(), servers);
    let t = TestApp::start_with(|c| {
        c.gateway.upstreams = Some(file);
        c.gateway.upstream_connect_timeout_secs = 60;
        adjust(c);
    })
    .await;
    let gateway = t.app.shared().gateway().cloned().expect("a gateway");
    let ready_now = |names: &[&str]| {
        gateway
            .upstreams()
            .iter()
            .filter(|u| {
                names.contains(&u.name())
                    && u.status() == code_execution_mcp::gateway::UpstreamStatus::Ready
            })
            .count()
            == names.len()
    };
    match ready {
        None => {
            let all_ready = gateway.settled(Duration::from_secs(90)).await;
            assert!(all_ready, "upstreams not ready: {:?}", statuses(&t));
        }
        Some(names) => {
            for _ in 0..900 {
                if ready_now(names) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(ready_now(names), "upstreams not ready: {:?}", statuses(&t));
        }
    }
    // Keep the upstreams file's directory as long as the app.
    std::mem::forget(dir);
    t
}

/// The metrics endpoint's text for this one application.
pub async fn metrics_of(t: &TestApp) -> String {
    code_execution_mcp::metrics::collect::render(t.app.shared(), std::slice::from_ref(&t.app)).await
}

/// Runs code (with the default limits but a long timeout).
pub async fn run(t: &TestApp, code: &str) -> Executed {
    t.app
        .execute(
            ExecuteRequest {
                code: code.into(),
                timeout_seconds: Some(120.0),
                ..Default::default()
            },
            Default::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("execution could not run: {e}"))
}

/// Runs code and insists that it succeeded.
pub async fn run_ok(t: &TestApp, code: &str) -> Executed {
    let ran = run(t, code).await;
    let o = &ran.outcome;
    assert_eq!(
        o.status,
        Status::Ok,
        "error: {:?}\ntraceback: {:?}\nstdout: {}\nstderr: {}",
        o.error,
        o.traceback,
        o.stdout.as_str(),
        o.stderr.as_str()
    );
    ran
}

/// Whether every upstream is ready; the statuses otherwise.
pub fn statuses(t: &TestApp) -> Vec<(String, String)> {
    t.app
        .shared()
        .gateway()
        .expect("a gateway")
        .upstreams()
        .iter()
        .map(|u| (u.name().to_string(), format!("{:?}", u.status())))
        .collect()
}

/// The status of upstream `name` once it has failed at least once (its status between two
/// attempts, `Down` or `Failed`, which says why), waiting up to 20 s.
pub async fn status_after_failure(t: &TestApp, name: &str) -> String {
    let mut last = String::new();
    for _ in 0..200 {
        last = statuses(t)
            .into_iter()
            .find(|(n, _)| n == name)
            .expect("a configured upstream")
            .1;
        if last.starts_with("Down") || last.starts_with("Failed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    last
}

pub fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
