//! The server end to end: the real binary over stdio (tool list, a call, SIGTERM removing
//! containers, a SIGKILLed server's containers reaped by the next start), and streamable HTTP
//! in-process.

mod common;

use std::process::Stdio;
use std::time::Duration;

use code_execution_mcp::sandbox::Backend;
use code_execution_mcp::sandbox::Engine;
use common::{BIN, TestApp, call_tool, containers_of, spawn_server, spawn_server_with_env};
use rmcp::ServiceExt;
use serde_json::json;
use tokio::process::{Child, Command};

async fn wait_for(mut check: impl AsyncFnMut() -> bool) -> bool {
    for _ in 0..100 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn stdio_binary_lists_tools_and_runs_code() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, client) = spawn_server(dir.path()).await;
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    // The 13 tools of the Python server this one replaces, plus delete_workspace_file and
    // delete_skill.
    assert_eq!(
        names,
        [
            "delete_skill",
            "delete_workspace_file",
            "execute_code",
            "get_execution_stats",
            "get_tool_definition",
            "list_skills",
            "list_tool_categories",
            "list_workspace_files",
            "load_skill",
            "read_workspace_file",
            "restore_pii",
            "sanitize_pii",
            "save_skill",
            "search_tools",
            "write_workspace_file",
        ]
    );
    assert!(
        tools.iter().all(|t| t.output_schema.is_some()),
        "every tool declares its output schema"
    );
    let exec = tools.iter().find(|t| t.name == "execute_code").unwrap();
    assert!(
        exec.output_schema.is_some(),
        "execute_code declares its output schema"
    );

    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "print(1)\nresult = 2"}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["output"], json!(["1"]));
    assert_eq!(v["result"], 2);
    assert!(v["execution_time_ms"].as_u64().is_some());

    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "raise ValueError('bad')"}),
    )
    .await;
    assert!(err);
    assert_eq!(v["status"], "error");
    assert_eq!(v["error"], "bad");

    let (err, v) = call_tool(&client, "execute_code", json!({"code": ""})).await;
    assert!(err);
    assert!(v.as_str().unwrap().contains("empty"), "{v}");

    let (err, v) = call_tool(&client, "get_execution_stats", json!({})).await;
    assert!(!err, "{v}");
    assert_eq!(v["executions"]["executions_by_status"]["ok"], 1);
    assert_eq!(v["executions"]["executions_by_status"]["error"], 1);
    assert!(
        v["engine"]["api_version"]
            .as_str()
            .unwrap()
            .starts_with("1.")
    );
    assert!(v["image"]["id"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(v["limits"]["default_timeout_seconds"], 30);
    assert_eq!(v["executions"]["containers_running"], 0);
    assert!(v["executions"]["latency_ms_p50"].as_f64().unwrap() > 0.0);

    drop(client);
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("server exits when stdin closes")
        .unwrap();
    assert!(status.success());
}

/// Starts a server, and in it an execution that sleeps; returns once its container exists.
async fn server_with_a_running_execution(
    dir: &std::path::Path,
) -> (Child, u32, tokio::task::JoinHandle<()>) {
    let (child, client) = spawn_server(dir).await;
    let pid = child.id().unwrap();
    let call = tokio::spawn(async move {
        let code = json!({"code": "import time\ntime.sleep(120)"});
        let _ = call_tool(&client, "execute_code", code).await;
    });
    assert!(
        wait_for(async || !containers_of(pid).await.is_empty()).await,
        "no container started"
    );
    (child, pid, call)
}

/// A 2026-07-28 client may probe `server/discover` and leave without another request: the
/// server exits cleanly and removes its pool, as when any session ends.
#[tokio::test]
async fn a_client_that_only_probes_ends_the_server_cleanly() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let _starting = common::SERVER_STARTS.read().await;
    let mut child = common::serve_command(dir.path(), &[]).spawn().unwrap();
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    stdin
        .write_all(format!("{discover}\n").as_bytes())
        .await
        .unwrap();
    let mut answer = String::new();
    stdout.read_line(&mut answer).await.unwrap();
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert!(
        answer["result"]["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("2026-07-28"))),
        "{answer}"
    );
    assert!(
        wait_for(async || !containers_of(pid).await.is_empty()).await,
        "the pool started no container"
    );
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the server exits when stdin closes")
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(containers_of(pid).await.is_empty(), "the pool was left");
}

#[tokio::test]
async fn sigterm_during_an_execution_removes_its_container() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, pid, call) = server_with_a_running_execution(dir.path()).await;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("server exits on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(
        containers_of(pid).await.is_empty(),
        "containers left after SIGTERM"
    );
    call.abort();
}

#[tokio::test]
async fn a_sigkilled_servers_containers_are_reaped_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, pid, call) = server_with_a_running_execution(dir.path()).await;
    // No other test's server starts (and reaps) between the kill and the look.
    let no_starts = common::SERVER_STARTS.write().await;
    child.kill().await.unwrap();
    call.abort();
    assert!(
        !containers_of(pid).await.is_empty(),
        "the container outlives its SIGKILLed server"
    );
    drop(no_starts);

    let (mut next, client) = spawn_server(dir.path()).await;
    assert!(
        containers_of(pid).await.is_empty(),
        "the next start did not reap the orphan"
    );
    drop(client);
    let _ = tokio::time::timeout(Duration::from_secs(20), next.wait()).await;
}

#[tokio::test]
async fn streamable_http_serves_the_same_tools() {
    let t = TestApp::start().await;
    let server = common::HttpServer::start(t.app.clone()).await;
    code_execution_mcp::install_tls_provider();
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(server.url.clone());
    let client = ().serve(transport).await.expect("MCP handshake over HTTP");
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "result = sum(range(10))", "timeout_seconds": 9999}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], 45);
    assert_eq!(v["limits"]["timeout_seconds"], 300.0);
    assert!(
        v["limits"]["adjustments"][0]
            .as_str()
            .unwrap()
            .contains("clamped")
    );
    client.cancel().await.unwrap();
    server.stop().await;
    t.finish().await;
}

#[tokio::test]
async fn a_delete_ends_a_legacy_http_session_with_204() {
    let t = TestApp::start().await;
    let server = common::HttpServer::start(t.app.clone()).await;
    code_execution_mcp::install_tls_provider();
    let http = reqwest::Client::new();
    let post = |session: Option<&str>, body: serde_json::Value| {
        let mut request = http
            .post(&server.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18");
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.body(body.to_string()).send()
    };
    let init = post(
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "delete-test", "version": "0"}}}),
    )
    .await
    .unwrap();
    assert_eq!(init.status(), 200);
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = init.text().await;
    let ready = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await
    .unwrap();
    assert_eq!(ready.status(), 202);

    let deleted = http
        .delete(&server.url)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    let status = deleted.status();
    let body = deleted.text().await.unwrap();
    assert_eq!(status, 204, "the DELETE was answered {status}: {body}");
    assert!(body.is_empty(), "a 204 has no body: {body}");
    // The session is gone: a request in it is told to initialize again.
    let after = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    )
    .await
    .unwrap();
    assert_eq!(after.status(), 404, "{}", after.text().await.unwrap());
    server.stop().await;
    t.finish().await;
}

#[tokio::test]
async fn http_refuses_non_loopback_addresses_without_authentication() {
    let t = TestApp::start().await;
    let err = code_execution_mcp::transport::serve_http(
        code_execution_mcp::transport::Access::Open(t.app.clone()),
        "0.0.0.0:0".parse().unwrap(),
        async {},
        None,
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("loopback") && err.to_string().contains("--tokens-file"),
        "{err}"
    );
    t.finish().await;
    // From the configuration, the address is refused before anything starts.
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::config_in(dir.path());
    config.transport.transport = code_execution_mcp::config::Transport::Http;
    config.transport.listen = "0.0.0.0:8080".parse().unwrap();
    let Err(err) = code_execution_mcp::transport::http_access(config).await else {
        panic!("a non-loopback address without tokens was accepted");
    };
    assert!(err.to_string().contains("loopback"), "{err}");
    assert!(!dir.path().join("workspace").exists(), "the server started");
}

#[tokio::test]
async fn notifications_cancelled_kills_the_running_container() {
    // No pool: then the only container of this instance is the execution's own.
    let t = TestApp::start_with(|c| c.pool.pool_size = 0).await;
    let client = common::mcp_client(t.app.clone()).await;
    let instance = t.app.sandbox().instance().id.clone();
    let engine = Engine::connect().await.unwrap();
    let label = format!(
        "{}={instance}",
        code_execution_mcp::sandbox::spec::LABEL_INSTANCE
    );
    {
        // Dropping the call future makes the rmcp client send notifications/cancelled.
        let call = call_tool(
            &client,
            "execute_code",
            json!({"code": "import time\ntime.sleep(60)"}),
        );
        tokio::select! {
            _ = call => panic!("the call finished before it was cancelled"),
            _ = async {
                while engine.list_labelled(std::slice::from_ref(&label)).await.unwrap().is_empty() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            } => {}
        }
    }
    // The server is still running; only the cancelled execution's container must be gone.
    common::assert_no_containers(&instance).await;
    let snapshot = t.app.stats().snapshot();
    assert_eq!(
        snapshot.executions_by_status["cancelled"], 1,
        "{snapshot:?}"
    );
    client.cancel().await.unwrap();
    t.finish().await;
}

#[tokio::test]
async fn the_servers_environment_does_not_reach_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, client) =
        spawn_server_with_env(dir.path(), &[("CEM_TEST_SECRET_TOKEN", "hunter2-canary")]).await;
    let code = r#"
import os
seen = [k for k, v in os.environ.items() if "hunter2" in v or k == "CEM_TEST_SECRET_TOKEN"]
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            if b"hunter2" in open(f"/proc/{pid}/environ", "rb").read():
                seen.append(pid)
        except OSError:
            pass
result = {"seen": seen, "env": sorted(os.environ)}
"#;
    let (err, v) = call_tool(&client, "execute_code", json!({ "code": code })).await;
    assert!(!err, "{v}");
    assert_eq!(v["result"]["seen"], json!([]), "{v}");
    // Only the variables the spec sets, the image's own (the matplotlib backend and its
    // writable config directory, PYTHONPATH for subprocesses; CEM_PRELOAD on pooled containers
    // that preload) and what the engine adds (Docker: PATH, HOSTNAME; Podman also TERM and
    // `container`) are there.
    let env: Vec<String> = serde_json::from_value(v["result"]["env"].clone()).unwrap();
    for name in &env {
        assert!(
            [
                "HOME",
                "LANG",
                "PATH",
                "HOSTNAME",
                "TERM",
                "container",
                "PYTHONDONTWRITEBYTECODE",
                "PYTHONUNBUFFERED",
                "LC_CTYPE",
                "MPLBACKEND",
                "MPLCONFIGDIR",
                "PYTHONPATH",
                "CEM_PRELOAD"
            ]
            .contains(&name.as_str()),
            "unexpected variable {name} in the sandbox"
        );
    }
    drop(client);
    let _ = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
}

/// Runs `serve` expecting it to fail at start; returns its stderr.
async fn failed_start(env: &[(&str, &str)], args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    // It reaps before it fails (the runtime and image checks come after).
    let _starting = common::SERVER_STARTS.read().await;
    let out = Command::new(BIN)
        .arg("serve")
        .args(args)
        .arg("--workspace")
        .arg(dir.path().join("ws"))
        .args(["--workspace-quota-mb", "0"])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{stderr}");
    assert!(out.stdout.is_empty(), "stdout must stay clean for MCP");
    stderr
}

#[tokio::test]
async fn an_unregistered_runtime_fails_start_up_listing_the_registered_ones() {
    let stderr = failed_start(&[], &["--runtime", "no-such-runtime"]).await;
    assert!(
        stderr.contains("--runtime no-such-runtime is not registered") && stderr.contains("runc"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_unreachable_engine_or_a_missing_image_fails_start_up_naming_doctor() {
    let unreachable =
        failed_start(&[("DOCKER_HOST", "unix:///nonexistent/docker.sock")], &[]).await;
    assert!(
        unreachable.contains("cannot reach the Docker engine"),
        "{unreachable}"
    );
    assert!(
        unreachable.contains("code-execution-mcp doctor"),
        "{unreachable}"
    );
    let missing = failed_start(
        &[],
        &["--image", "code-execution-mcp-sandbox:does-not-exist"],
    )
    .await;
    assert!(missing.contains("image build"), "{missing}");
    assert!(missing.contains("code-execution-mcp doctor"), "{missing}");
}

#[tokio::test]
async fn every_output_schema_is_an_object_schema() {
    // MCP requires `"type": "object"` at the root of an outputSchema (the Python SDK rejects
    // a tool list without it).
    let t = TestApp::start().await;
    let client = common::mcp_client(t.app.clone()).await;
    for tool in client.list_all_tools().await.unwrap() {
        let schema = tool.output_schema.as_ref().expect("output schema");
        assert_eq!(schema.get("type"), Some(&json!("object")), "{}", tool.name);
    }
    client.cancel().await.unwrap();
    t.finish().await;
}
