//! The gateway as clients and tenants meet it: the article's workflow through the official
//! Python SDK, a second code-execution-mcp as a streamable HTTP upstream, and tenants that see
//! and call only their own upstreams (in-process, and end to end over HTTP with tokens).

use std::sync::Arc;

use code_execution_mcp::app::App;
use serde_json::json;

use super::{app_with, python_client, run_ok};
use crate::common::upstreams::{fixture_bin, upstreams_file};
use crate::common::{self, HttpServer, TestApp, call_tool, mcp_client};

#[test]
fn the_article_workflow_keeps_personal_data_out_of_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("crm-received.jsonl");
    let calls = dir.path().join("crm-calls.jsonl");
    let fixture = fixture_bin();
    let upstreams = upstreams_file(
        dir.path(),
        json!({
            "sheet": {"command": fixture, "args": ["--name", "sheet"]},
            "crm": {"command": fixture, "args": ["--name", "crm", "--calls-log", calls],
                    "env": {"FIXTURE_RECORD": record},
                    "policy": {"tools": {"echo": "confirm"}}},
        }),
    );
    let data = dir.path().join("data");
    python_client("gateway_article.py", &[&data, &upstreams, &record, &calls]);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_server_over_streamable_http_is_an_upstream() {
    let inner = TestApp::start().await;
    let http = HttpServer::start(inner.app.clone()).await;
    let t = app_with(json!({"inner": {"type": "http", "url": http.url}}), |_| {}).await;
    let o = run_ok(
        &t,
        r#"
from servers.inner import execute_code, list_skills
nested = execute_code(code="result = 6 * 7")
result = {"nested": nested["result"], "status": nested["status"], "skills": type(list_skills()).__name__}
"#,
    )
    .await;
    assert_eq!(o.outcome.result["nested"], 42, "{}", o.outcome.result);
    assert_eq!(o.outcome.result["status"], "ok");
    assert_eq!(o.tool_calls.len(), 2);
    t.app.shutdown_all().await;
    http.stop().await;
    inner.app.shutdown_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_sees_and_calls_only_its_own_upstreams() {
    let fixture = fixture_bin();
    let t = app_with(
        json!({
            "alices": {"command": fixture, "args": ["--name", "alices"], "tenants": ["alice"]},
            "shared": {"command": fixture, "args": ["--name", "shared"]},
        }),
        |_| {},
    )
    .await;
    let shared = t.app.shared().clone();
    let open = |name: &'static str| {
        let shared = shared.clone();
        async move {
            let dirs = shared.config().storage.tenant_dirs(name);
            Arc::new(
                App::open(shared, dirs, Some(name))
                    .await
                    .expect("tenant opens"),
            )
        }
    };
    let (alice, bob) = (open("alice").await, open("bob").await);
    let probe = r#"
import os
from servers.shared import echo
seen = sorted(os.listdir("/servers"))
try:
    import servers.alices
    imported = True
except ImportError:
    imported = False
try:
    call_tool("alices", "echo", {"value": 1})   # a call frame naming the server directly
    called = "yes"
except ToolError as e:
    called = str(e)
result = {"seen": seen, "imported": imported, "called": called, "shared": echo(value=7)["value"]}
"#;
    let as_tenant = |app: Arc<App>| TestApp {
        app,
        dir: tempfile::tempdir().unwrap(),
    };
    let (a, b) = (as_tenant(alice.clone()), as_tenant(bob.clone()));
    let ra = run_ok(&a, probe).await.outcome.result;
    assert_eq!(
        ra["seen"],
        json!(["__init__.py", "alices", "shared"]),
        "{ra}"
    );
    assert_eq!(ra["imported"], true);
    assert_eq!(ra["called"], "yes");
    let rb = run_ok(&b, probe).await.outcome.result;
    assert_eq!(rb["seen"], json!(["__init__.py", "shared"]), "{rb}");
    assert_eq!(rb["imported"], false, "{rb}");
    let called = rb["called"].as_str().unwrap();
    assert!(
        called.contains("no upstream MCP server named \"alices\""),
        "{called}"
    );
    assert_eq!(rb["shared"], 7);

    // Discovery agrees.
    let client = mcp_client(bob.clone()).await;
    let (_, found) = call_tool(
        &client,
        "search_tools",
        json!({"query": "echo", "callable_only": true}),
    )
    .await;
    let ids: Vec<&str> = found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"shared/echo") && !ids.iter().any(|i| i.starts_with("alices/")),
        "{ids:?}"
    );
    let (is_error, _) = call_tool(
        &client,
        "get_tool_definition",
        json!({"tool_name": "alices/echo"}),
    )
    .await;
    assert!(is_error, "bob cannot read the definition of alice's tool");
    drop(client);

    // Bob's refused calls left his sandbox working.
    assert_eq!(run_ok(&b, "result = 1").await.outcome.result, 1);
    alice.shutdown().await;
    bob.shutdown().await;
    t.app.shutdown_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn over_http_each_token_reaches_only_its_tenants_upstreams() {
    use code_execution_mcp::config::{Secret, Transport};
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    const ALICE: &str = "alice-0123456789abcdef0123456789abcdef";
    const BOB: &str = "bob-fedcba9876543210fedcba9876543210";

    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture_bin();
    let mut c = common::config_in(dir.path());
    c.storage.workspace = None;
    c.storage.skills_dir = None;
    c.transport.transport = Transport::Http;
    c.tenants.tokens = Some(Secret(format!("alice:{ALICE},bob:{BOB}")));
    c.gateway.upstreams = Some(upstreams_file(
        dir.path(),
        json!({
            "alices": {"command": fixture, "args": ["--name", "alices"], "tenants": ["alice"]},
            "shared": {"command": fixture, "args": ["--name", "shared"]},
        }),
    ));
    let access = code_execution_mcp::transport::http_access(c)
        .await
        .expect("the server starts (is the image built?)");
    let http = HttpServer::serve(access).await;
    let probe = r#"
import os
seen = sorted(os.listdir("/servers"))
try:
    from servers.alices import echo
    mine = echo(value="a")["value"]
except ImportError:
    mine = "no module"
try:
    forged = call_tool("alices", "echo", {"value": 1})["value"]
except ToolError as e:
    forged = str(e)
result = {"seen": seen, "mine": mine, "forged": forged}
"#;
    for (token, own) in [(ALICE, true), (BOB, false)] {
        code_execution_mcp::install_tls_provider();
        let config =
            StreamableHttpClientTransportConfig::with_uri(http.url.clone()).auth_header(token);
        let client =
            ().serve(StreamableHttpClientTransport::from_config(config))
                .await
                .expect("MCP handshake over HTTP");
        let (_, categories) = call_tool(&client, "list_tool_categories", json!({})).await;
        let listed: Vec<&String> = categories["upstreams"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        let (is_error, ran) = call_tool(&client, "execute_code", json!({"code": probe})).await;
        assert!(!is_error, "{ran}");
        let r = &ran["result"];
        if own {
            assert_eq!(listed, ["alices", "shared"], "{categories}");
            assert_eq!(r["seen"], json!(["__init__.py", "alices", "shared"]), "{r}");
            assert_eq!(r["mine"], "a");
            assert_eq!(r["forged"], 1);
        } else {
            assert_eq!(listed, ["shared"], "{categories}");
            assert_eq!(r["seen"], json!(["__init__.py", "shared"]), "{r}");
            assert_eq!(r["mine"], "no module");
            let forged = r["forged"].as_str().unwrap_or_default();
            assert!(
                forged.contains("no upstream MCP server named \"alices\""),
                "a forged call frame is refused: {forged}"
            );
        }
        client.cancel().await.unwrap();
    }
    http.stop().await;
    common::assert_no_containers_under(dir.path()).await;
}
