//! What the cases share: a case run on a fresh server under a [`HostWatch`], running sandbox
//! code for its verdict, unique names for paths a case must not create, the text of a refused
//! tool call, the lock for cases that measure this process's memory, and the Python prelude that
//! reads the sandbox's cgroup limits. Apart from the family files so each of those holds only
//! its cases.

use code_execution_mcp::config::Config;
use serde_json::Value;

use crate::common::host_watch::HostWatch;
use crate::common::{TestApp, assert_ok};

/// Runs `case` on a freshly started [`TestApp`] watched by a [`HostWatch`] taken before it, and
/// returns what `case` returns. Afterwards [`HostWatch::finish`] checks that the server still
/// runs `print(1)` and the host is unchanged outside the workspace and skills directories, then
/// shuts the app down and asserts that it left no container.
pub(crate) async fn watched<R>(case: impl AsyncFnOnce(&TestApp, &HostWatch) -> R) -> R {
    watched_with(|_| {}, case).await
}

/// [`watched`] on an app whose configuration `adjust` changes before it starts.
pub(crate) async fn watched_with<R>(
    adjust: impl FnOnce(&mut Config),
    case: impl AsyncFnOnce(&TestApp, &HostWatch) -> R,
) -> R {
    let t = TestApp::start_with(adjust).await;
    let watch = HostWatch::for_app(&t);
    let out = case(&t, &watch).await;
    watch.finish(t).await;
    out
}

/// Runs `code` with `ctx` as its context variables and returns its `result`, asserting it ran.
pub(crate) async fn verdict(t: &TestApp, code: &str, ctx: Value) -> Value {
    let o = t.run_with(code, Some(ctx), Some(120.0), None).await;
    assert_ok(&o);
    o.result
}

/// A unique name for paths a case must not create.
pub(crate) fn token(case: &str) -> String {
    format!("cem-{case}-{}", uuid::Uuid::new_v4().simple())
}

/// The error text of a refused tool call (`{success: false, error}`).
#[track_caller]
pub(crate) fn refusal(is_error: bool, answer: &Value, what: &str) -> String {
    assert!(is_error, "{what} was accepted: {answer}");
    assert_eq!(answer["success"], false, "{what}: {answer}");
    answer["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no error text in {answer}"))
        .to_string()
}

/// Tests that measure this process's memory, or allocate a lot of it, run one at a time.
pub(crate) static MEMORY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Python: the sandbox's own cgroup file `name` (v1 or v2 layout) as text.
pub(crate) const CGROUP: &str = include_str!("probes/cgroup.py");

/// Whether `t`'s sandboxes run under gVisor (`CEM_RUNTIME` naming runsc): its kernel answers
/// some attempts differently from the host's (another errno, a file it does not have), and a
/// case then asserts what gVisor guarantees instead, never less.
pub(crate) fn gvisor(t: &TestApp) -> bool {
    t.app.shared().runtime_kind()
        == code_execution_mcp::sandbox::container::runtime::RuntimeKind::Gvisor
}
