//! `subscriptions/listen` and the `tools/list` that follows the upstreams, against the real
//! engine: the official MCP Python SDK's `Client` on 2026-07-28 over HTTP with two tenants and
//! over stdio, and in the handshake era (`tests/python/listen_tenants.py`), with an upstream
//! written with the same SDK whose tool list grows (`tests/python/growing_upstream.py`); and,
//! in process, each tenant's event bus fed by the MCP tools and by the gateway, never by another
//! tenant's.

mod common;

use std::sync::Arc;
use std::time::Duration;

use code_execution_mcp::app::App;
use code_execution_mcp::app::events::{Interest, Listener, Notice};
use common::upstreams::{sdk_python, upstreams_file};
use common::{TestApp, call_tool, mcp_client};
use serde_json::{Value, json};

/// How long one expected notice may take before the test fails instead of hanging.
const WAIT: Duration = Duration::from_secs(120);

fn growing_upstream() -> Value {
    json!({
        "command": sdk_python(),
        "args": [concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/growing_upstream.py")],
    })
}

#[test]
fn the_python_sdk_listens_per_tenant_over_http_and_stdio_in_both_eras() {
    let python = sdk_python();
    let dir = tempfile::tempdir().unwrap();
    let upstreams = upstreams_file(
        dir.path(),
        json!({"growing": {
            "command": python,
            "args": [concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/growing_upstream.py")],
            "tenants": ["alice"],
        }}),
    );
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/listen_tenants.py"
    );
    let status = std::process::Command::new(&python)
        .args(["-W", "ignore::DeprecationWarning"])
        .arg(script)
        .arg(common::BIN)
        .arg(dir.path().join("data"))
        .arg(&upstreams)
        // As in `common::serve_command`: a small fixed pool (the HTTP server inherits these;
        // the script passes the stdio servers theirs), the shared image tree, no preloading.
        .env("CEM_POOL_SIZE", "1")
        .env("CEM_POOL_MAX", "1")
        .envs(common::python_client_env())
        .status()
        .expect("run the Python client (CEM_TEST_PYTHON: an interpreter with the main pins of tests/upstream-pins.txt)");
    assert!(status.success(), "the Python client failed: {status}");
}

/// Opens tenant `name` on `t`'s shared state.
async fn tenant(t: &TestApp, name: &str) -> Arc<App> {
    let shared = t.app.shared().clone();
    let dirs = shared.config().storage.tenant_dirs(name);
    Arc::new(
        App::open(shared, dirs, Some(name))
            .await
            .expect("tenant opens"),
    )
}

fn everything(uris: &[&str]) -> Interest {
    Interest {
        resources_list: true,
        tools_list: true,
        uris: uris.iter().map(|u| u.to_string()).collect(),
    }
}

/// Reads notices until `wanted` is among them; returns all read.
async fn until(l: &mut Listener, wanted: Notice) -> Vec<Notice> {
    let mut heard = Vec::new();
    let found = tokio::time::timeout(WAIT, async {
        while let Some(n) = l.next().await {
            let done = n == wanted;
            heard.push(n);
            if done {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(found, Ok(true)),
        "no {wanted:?} within {WAIT:?}; heard {heard:?}"
    );
    heard
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenants_tools_and_code_reach_its_own_bus_only() {
    let t = TestApp::start().await;
    let (alice, bob) = (tenant(&t, "alice").await, tenant(&t, "bob").await);
    let watched = [
        "workspace:///same.txt",
        "workspace:///code.txt",
        "workspace:///bob.txt",
    ];
    let mut on_alice = alice.events().listen(everything(&watched)).unwrap();
    let mut on_bob = bob.events().listen(everything(&watched)).unwrap();

    let a = mcp_client(alice.clone()).await;
    let (is_error, v) = call_tool(
        &a,
        "write_workspace_file",
        json!({"filename": "same.txt", "content": "alice"}),
    )
    .await;
    assert!(!is_error, "{v}");
    let heard = until(
        &mut on_alice,
        Notice::ResourceUpdated("workspace:///same.txt".into()),
    )
    .await;
    assert_eq!(
        heard,
        [Notice::ResourceUpdated("workspace:///same.txt".into())]
    );
    assert_eq!(
        until(&mut on_alice, Notice::ResourcesListChanged).await,
        [Notice::ResourcesListChanged],
        "a new file changes the listing"
    );
    let (is_error, v) = call_tool(
        &a,
        "execute_code",
        json!({"code": "write_file('code.txt', 'x')"}),
    )
    .await;
    assert!(!is_error, "{v}");
    until(
        &mut on_alice,
        Notice::ResourceUpdated("workspace:///code.txt".into()),
    )
    .await;

    // Bob's own write is the first thing his bus carries: alice's never got there.
    let b = mcp_client(bob.clone()).await;
    let (is_error, v) = call_tool(
        &b,
        "write_workspace_file",
        json!({"filename": "bob.txt", "content": "bob"}),
    )
    .await;
    assert!(!is_error, "{v}");
    let heard = until(
        &mut on_bob,
        Notice::ResourceUpdated("workspace:///bob.txt".into()),
    )
    .await;
    assert_eq!(
        heard,
        [Notice::ResourceUpdated("workspace:///bob.txt".into())],
        "bob heard only his own write"
    );
    drop((a, b));
    alice.shutdown().await;
    bob.shutdown().await;
    t.finish().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_that_grows_changes_only_its_tenants_tools_list() {
    let dir = tempfile::tempdir().unwrap();
    let mut entry = growing_upstream();
    entry["tenants"] = json!(["alice"]);
    let file = upstreams_file(dir.path(), json!({"growing": entry}));
    let t = TestApp::start_with(|c| {
        c.gateway.upstreams = Some(file);
        c.gateway.upstream_connect_timeout_secs = 60;
    })
    .await;
    let gateway = t.app.shared().gateway().cloned().expect("a gateway");
    assert!(
        gateway.settled(Duration::from_secs(90)).await,
        "the growing upstream did not connect: {:?}",
        gateway.upstreams()[0].status()
    );
    let (alice, bob) = (tenant(&t, "alice").await, tenant(&t, "bob").await);
    let mut on_alice = alice.events().listen(everything(&[])).unwrap();
    let mut on_bob = bob.events().listen(everything(&[])).unwrap();
    let a = mcp_client(alice.clone()).await;
    let b = mcp_client(bob.clone()).await;
    let described = |client: &rmcp::service::RunningService<rmcp::RoleClient, ()>| {
        let peer = client.peer().clone();
        async move {
            let tools = peer.list_all_tools().await.expect("tools/list");
            let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
            let mut sorted = names.clone();
            sorted.sort();
            assert_eq!(names, sorted, "tools/list is in name order");
            let execute = tools
                .into_iter()
                .find(|t| t.name == "execute_code")
                .unwrap();
            let package = execute
                .meta
                .as_ref()
                .and_then(|m| m.0.get(code_execution_mcp::mcp::PACKAGE_META_KEY).cloned());
            (execute.description.unwrap_or_default().to_string(), package)
        }
    };
    let (before, package_before) = described(&a).await;
    assert!(
        before.contains("`from servers import growing` (2 tools)"),
        "{before}"
    );
    assert!(package_before.is_some());
    let (bobs, bobs_package) = described(&b).await;
    assert!(!bobs.contains("from servers import"), "{bobs}");
    assert_eq!(bobs_package, None);

    let (is_error, v) = call_tool(
        &a,
        "execute_code",
        json!({"code": "from servers.growing import grow\nresult = grow()"}),
    )
    .await;
    assert!(!is_error, "{v}");
    // The SDK wraps a tool's `int` as `{"result": N}`.
    assert_eq!(v["result"], json!({"result": 1}), "{v}");
    until(&mut on_alice, Notice::ToolsListChanged).await;
    let (after, package_after) = described(&a).await;
    assert!(
        after.contains("`from servers import growing` (3 tools)"),
        "{after}"
    );
    assert_ne!(package_after, package_before);

    // Bob's bus carries his own write first: alice's upstream never reached it.
    let (is_error, v) = call_tool(
        &b,
        "write_workspace_file",
        json!({"filename": "b.txt", "content": "b"}),
    )
    .await;
    assert!(!is_error, "{v}");
    assert_eq!(
        until(&mut on_bob, Notice::ResourcesListChanged).await,
        [Notice::ResourcesListChanged]
    );
    assert_eq!(described(&b).await, (bobs, None));
    drop((a, b));
    alice.shutdown().await;
    bob.shutdown().await;
    t.app.shutdown_all().await;
}
