//! The server end to end: the real binary over stdio (tool list, a call, SIGTERM removing
//! containers, a SIGKILLed server's containers reaped by the next start), and streamable HTTP
//! in-process.

// A client reads rmcp's answer types (clippy.toml bans them in the server, which makes its
// answers in src/privacy/ only); nothing here answers a model.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use code_execution_mcp::sandbox::Backend;
use code_execution_mcp::sandbox::Engine;
use common::{
    BIN, RawStdio, TestApp, call_tool, containers_of, spawn_server, spawn_server_with_env,
    stop_with_sigterm,
};
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
    // The 13 tools of the Python server this one replaces, plus delete_workspace_file,
    // delete_skill, and the upload and download links.
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
            "request_download",
            "request_upload",
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
    common::assert_exits_when_stdin_closed(&mut child).await;
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
        code_execution_mcp::transport::Access::ready(t.app.clone()),
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
        code_execution_mcp::sandbox::container::spec::LABEL_INSTANCE
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
        unreachable.contains("cannot reach the container engine"),
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

/// The most tokens the tool list of a server without upstreams may take: what every
/// conversation pays before its first call. Later tools and fields keep within it; detail a
/// model needs only now and then goes into the reference the descriptions name.
const TOOL_LIST_BUDGET: u64 = 2_000;

/// The resource `execute_code`'s description names for the detail it leaves out.
const REFERENCE_URI: &str = "docs://tools/execute_code";

/// Tokens of each of `texts` by the tokenizer `benches/count_tokens.py` loads (the
/// `tokenizer.json` of the `anthropic` SDK 0.34, read with `tokenizers`), run by the main test
/// environment's Python (tests/upstream-pins.txt). A tokenizer that cannot load fails the test.
fn count_tokens(texts: &[String]) -> Vec<u64> {
    use std::io::Write;
    let python = common::upstreams::sdk_python();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/count_tokens.py");
    let mut child = std::process::Command::new(&python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let input = serde_json::to_vec(texts).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the tokenizer did not load in {}: install the `main` lines of tests/upstream-pins.txt \
         (anthropic, tokenizers) into it, or unset CEM_TEST_PYTHON for the tests to make it:\n{}",
        python.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("count_tokens.py prints a JSON list")
}

#[tokio::test]
async fn the_tool_list_of_a_server_without_upstreams_keeps_within_its_token_budget() {
    let mut raw = RawStdio::start(&[]).await;
    raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .await;
    let line = raw.until_response_lines(2).await.pop().unwrap();
    // The result as sent: the bytes between the envelope's head and its closing brace.
    let head = r#"{"jsonrpc":"2.0","id":2,"result":"#;
    let sent = line
        .strip_prefix(head)
        .and_then(|rest| rest.strip_suffix('}'))
        .unwrap_or_else(|| panic!("the response does not start with {head}: {line}"));
    let result: serde_json::Value = serde_json::from_str(sent).expect("the result is JSON");
    let tools = result["tools"].as_array().expect("a tool list");
    assert!(tools.len() >= 15, "{} tools", tools.len());
    let mut texts = vec![sent.to_owned()];
    texts.extend(tools.iter().map(|tool| tool.to_string()));
    let counts = count_tokens(&texts);
    println!(
        "tools/list: {} tokens, {} bytes, {} tools (budget {TOOL_LIST_BUDGET})",
        counts[0],
        sent.len(),
        tools.len()
    );
    for (tool, tokens) in tools.iter().zip(&counts[1..]) {
        println!("  {:<24} {tokens:>5}", tool["name"].as_str().unwrap_or("?"));
    }

    // The detail that left the descriptions is one read away, at the URI they name.
    let execute = tools.iter().find(|t| t["name"] == "execute_code").unwrap();
    let described = execute["description"].as_str().unwrap();
    assert!(described.contains(REFERENCE_URI), "{described}");
    raw.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/read",
        "params": {"uri": REFERENCE_URI}}),
    )
    .await;
    let read = raw.until_response(3).await.pop().unwrap();
    // The read waited for the start to end: the started server lists the same.
    raw.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}))
        .await;
    let again = raw.until_response_lines(4).await.pop().unwrap();
    assert_eq!(
        again.replace(r#""id":4"#, r#""id":2"#),
        line,
        "tools/list changed once the server had started"
    );
    let reference = read["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{read}"));
    for detail in [
        "summarize_list(data, limit=10)",
        "HANDLE@N",
        "plan_options(stop_on_error=False)",
        "plan_results()",
        "\"forked_from\"",
    ] {
        assert!(
            reference.contains(detail),
            "the reference lacks {detail}: {reference}"
        );
    }
    raw.finish().await;
    assert!(
        counts[0] <= TOOL_LIST_BUDGET,
        "tools/list takes {} tokens, over its budget of {TOOL_LIST_BUDGET}: move detail a \
         model needs only now and then into {REFERENCE_URI} and name it",
        counts[0]
    );
}

/// Sends `execute_code` with `code` as a request of its own, so that its JSON-RPC id is known:
/// returns the id as the server's log writes it, and the result.
async fn execute_with_id(
    client: &rmcp::Peer<rmcp::RoleClient>,
    code: &str,
) -> (String, rmcp::model::CallToolResult) {
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, ServerResult};
    let params = CallToolRequestParams::new("execute_code")
        .with_arguments(json!({"code": code}).as_object().cloned().unwrap());
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .expect("tools/call sent");
    let id = handle.id.to_string();
    match handle.await_response().await.expect("tools/call answered") {
        ServerResult::CallToolResult(result) => (id, result),
        other => panic!("not a tool result: {other:?}"),
    }
}

/// The server's stderr under `--log-format json`: every line one JSON object with `time`,
/// `level`, `target` and `message`.
fn json_log(log: &str) -> Vec<serde_json::Value> {
    assert!(!log.is_empty(), "the server logged nothing");
    log.lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {line}"));
            for key in ["time", "level", "target", "message"] {
                assert!(value[key].is_string(), "no {key}: {line}");
            }
            value
        })
        .collect()
}

/// Checks that the log has lines of the execution that request `id` ran, each with one
/// execution id, among them its `execution ended` line; returns them.
fn lines_of_the_call<'a>(lines: &'a [serde_json::Value], id: &str) -> Vec<&'a serde_json::Value> {
    let of_call: Vec<_> = lines
        .iter()
        .filter(|l| l["request_id"] == id && l.get("execution_id").is_some())
        .collect();
    let ended = of_call
        .iter()
        .find(|l| l["message"] == "execution ended")
        .unwrap_or_else(|| panic!("no `execution ended` line of request {id}: {lines:#?}"));
    assert_eq!(ended["level"], "DEBUG");
    assert_eq!(ended["fields"]["status"], "ok", "{ended}");
    let execution = ended["execution_id"].as_str().unwrap();
    let hex = execution
        .strip_prefix("exe_")
        .unwrap_or_else(|| panic!("{execution}"));
    assert!(
        hex.len() == 16 && hex.bytes().all(|c| c.is_ascii_hexdigit()),
        "{execution}"
    );
    assert!(
        of_call.iter().all(|l| l["execution_id"] == execution),
        "one call, one execution: {of_call:#?}"
    );
    of_call
}

#[tokio::test]
async fn json_logs_over_stdio_carry_each_calls_request_and_execution_ids() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::LoggedServer::start_with_env(
        dir.path(),
        &["--log-format", "json", "--pool-size", "1"],
        &[("RUST_LOG", "code_execution_mcp=debug".as_ref())],
    )
    .await;
    let (first, result) = execute_with_id(&server.client, "print('a \"quoted\"\\nline')").await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let (second, result) = execute_with_id(&server.client, "result = 2").await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_ne!(first, second);
    let log = server.finish().await;
    let lines = json_log(&log);
    let a = lines_of_the_call(&lines, &first);
    let b = lines_of_the_call(&lines, &second);
    assert_ne!(a[0]["execution_id"], b[0]["execution_id"]);
    assert!(
        lines.iter().all(|l| l.get("tenant").is_none()),
        "the single tenant has no name: {lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l["level"] == "INFO"),
        "the start's lines are JSON too: {lines:#?}"
    );
}

#[tokio::test]
async fn json_logs_over_http_name_the_tenant_of_each_call() {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use std::os::unix::fs::PermissionsExt;
    const TOKEN: &str = "json-logs-alice-0123456789abcdef0123456789";
    code_execution_mcp::install_tls_provider();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("alice:{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let starting = common::SERVER_STARTS.read().await;
    let mut child = Command::new(BIN)
        .args(["serve", "--transport", "http", "--listen", &listen])
        .args([
            "--workspace-quota-mb",
            "0",
            "--pool-size",
            "1",
            "--pool-max",
            "1",
        ])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--tokens-file")
        .arg(&tokens)
        .env("CEM_LOG_FORMAT", "json")
        .env("RUST_LOG", "code_execution_mcp=debug")
        .env("CEM_PRELOAD", "none")
        .env("CEM_IMAGE_TREE_DIR", common::shared_image_trees())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the server binary");
    let log = common::read_stderr(&mut child);
    let health = format!("http://{listen}/health");
    let mut up = false;
    for _ in 0..300 {
        if reqwest::get(&health).await.is_ok_and(|r| r.status() == 200) {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "the server did not answer /health within 30 s");
    drop(starting);
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{listen}/mcp"))
        .auth_header(TOKEN);
    let client =
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("MCP handshake over HTTP");
    let (id, result) = execute_with_id(&client, "print(1)").await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    client.cancel().await.unwrap();
    stop_with_sigterm(&mut child).await;
    let lines = json_log(&log.await.unwrap());
    for line in lines_of_the_call(&lines, &id) {
        assert_eq!(line["tenant"], "alice", "{line}");
    }
    let opening = lines
        .iter()
        .find(|l| {
            l["message"]
                .as_str()
                .unwrap()
                .starts_with("opening tenant alice")
        })
        .unwrap_or_else(|| panic!("no line opening the tenant: {lines:#?}"));
    assert_eq!(opening["tenant"], "alice", "{opening}");
    assert!(opening.get("request_id").is_none(), "{opening}");
    common::assert_no_containers_under(dir.path()).await;
}

#[tokio::test]
async fn a_failed_start_under_json_logs_says_why_in_a_json_line() {
    let stderr = failed_start(
        &[
            ("DOCKER_HOST", "unix:///nonexistent/docker.sock"),
            ("CEM_LOG_FORMAT", "json"),
        ],
        &[],
    )
    .await;
    let lines = json_log(&stderr);
    assert!(
        lines.iter().any(|l| l["level"] == "ERROR"
            && l["message"]
                .as_str()
                .unwrap()
                .contains("cannot reach the container engine")),
        "{stderr}"
    );
}

/// Log lines kept in memory, for a [`JsonLines`] layer in this process.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[tokio::test]
async fn a_detached_execution_logs_under_the_request_that_started_it() {
    use code_execution_mcp::app::execution::detached::Event;
    use code_execution_mcp::app::execution::request::ExecuteRequest;
    use code_execution_mcp::logging::{JsonLines, request_span};
    use tracing_subscriber::layer::SubscriberExt;
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new(
            "code_execution_mcp=debug",
        ))
        .with(JsonLines::new(captured.clone()));
    // This test's runtime runs every task on this thread, so they all log here.
    let logging = tracing::subscriber::set_default(subscriber);
    let t = TestApp::start().await;
    let mut detached = {
        let _request = request_span(&"detached-1", Some("acme")).entered();
        t.app.execute_detached(ExecuteRequest {
            code: "print(1)".into(),
            ..Default::default()
        })
    };
    loop {
        match detached
            .events
            .recv()
            .await
            .expect("the execution reports its end")
        {
            Event::Done(ran) => {
                (*ran).expect("the execution ran");
                break;
            }
            Event::Progress(_) | Event::Question(_) => {}
        }
    }
    t.finish().await;
    drop(logging);
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines = json_log(&log);
    for line in lines_of_the_call(&lines, "detached-1") {
        assert_eq!(line["tenant"], "acme", "{line}");
    }
}

#[tokio::test]
async fn an_unknown_key_in_the_upstreams_file_stops_the_start_naming_it_and_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("upstreams.json");
    std::fs::write(
        &file,
        "{\"mcpServers\": {\n  \"time\": {\"command\": \"uvx\",\n    \"privacy\": {\"mode\": \"off\"}}}}\n",
    )
    .unwrap();
    let stderr = failed_start(&[], &["--upstreams", file.to_str().unwrap()]).await;
    assert!(
        stderr.contains("unknown field `privacy`") && stderr.contains("line 3"),
        "{stderr}"
    );
    assert!(stderr.contains("`command`"), "the accepted keys: {stderr}");
}

#[tokio::test]
async fn other_clients_keys_in_the_upstreams_file_are_named_in_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("upstreams.json");
    // `a` is read (and warned about) first; `b` then stops the start, so the server exits.
    std::fs::write(
        &file,
        r#"{"globalShortcut": "Ctrl+Space", "mcpServers": {
          "a": {"command": "uvx", "disabled": true, "alwaysAllow": ["x"], "timeout": 60},
          "b": {"command": "${CEM_TEST_UNSET_VARIABLE}"}}}"#,
    )
    .unwrap();
    let stderr = failed_start(&[], &["--upstreams", file.to_str().unwrap()]).await;
    assert!(
        stderr.contains("CEM_TEST_UNSET_VARIABLE is not set"),
        "{stderr}"
    );
    for warned in [
        "sets globalShortcut beside mcpServers",
        "sets timeout, alwaysAllow in upstream `a`",
    ] {
        assert!(stderr.contains(warned), "{warned}: {stderr}");
    }
}

#[tokio::test]
async fn an_unknown_line_in_the_tokens_file_stops_the_start_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens");
    std::fs::write(
        &file,
        format!("# tenants\nalice:{}\nmax_concurrency = 4\n", "a".repeat(40)),
    )
    .unwrap();
    let stderr = failed_start(
        &[],
        &[
            "--transport",
            "http",
            "--tokens-file",
            file.to_str().unwrap(),
        ],
    )
    .await;
    assert!(
        stderr.contains("line 3") && stderr.contains("expected TENANT:TOKEN"),
        "{stderr}"
    );
}

/// `serve` over HTTP on `port` with `args` (no pool), its stderr piped.
fn http_serve(dir: &std::path::Path, port: u16, args: &[&str]) -> Command {
    let listen = format!("127.0.0.1:{port}");
    let all = [
        &[
            "--transport",
            "http",
            "--listen",
            &listen,
            "--pool-size",
            "0",
        ],
        args,
    ]
    .concat();
    let mut command = common::serve_command(dir, &all);
    command
        .env("RUST_LOG", "code_execution_mcp=info,warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Asks `/health` on `port` every 50 ms until its JSON body's `status` is `status` (a minute at
/// most); that body. It listens from the start.
async fn health_says(port: u16, status: &str) -> serde_json::Value {
    let url = format!("http://127.0.0.1:{port}/health");
    let mut last = None;
    for _ in 0..1200 {
        if let Ok(r) = reqwest::get(&url).await
            && let Ok(body) = r.json::<serde_json::Value>().await
        {
            if body["status"] == status {
                return body;
            }
            last = Some(body);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("/health never said {status:?}; last: {last:?}");
}

#[tokio::test]
async fn an_http_start_that_fails_after_listening_answers_why_then_exits_non_zero() {
    code_execution_mcp::install_tls_provider();
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let absent = "code-execution-mcp-test-absent:none";
    // It reaps before it fails (the image check comes after).
    let _starting = common::SERVER_STARTS.read().await;
    let mut child = http_serve(dir.path(), port, &["--image", absent])
        .spawn()
        .expect("spawn the server binary");
    let log = common::read_stderr(&mut child);
    let health = health_says(port, "failed").await;
    let reason = health["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("could not start") && reason.contains(absent),
        "{health}"
    );
    // Every request is answered with the cause until it stops.
    let url = format!("http://127.0.0.1:{port}/mcp");
    let client = ().serve(rmcp::transport::StreamableHttpClientTransport::from_uri(
        url,
    ));
    let client = client.await.expect("the handshake is answered");
    let (err, v) = call_tool(&client, "execute_code", json!({"code": "print(1)"})).await;
    assert!(err, "{v}");
    assert!(v.to_string().contains(absent), "{v}");
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the server stops on its own after a failed start")
        .unwrap();
    assert!(!status.success(), "a failed start exits {status}");
    let log = log.await.unwrap();
    assert!(
        log.contains("cannot start") && log.contains(absent),
        "{log}"
    );
}

#[tokio::test]
async fn an_http_server_stopped_while_it_copies_the_image_tree_leaves_no_container() {
    code_execution_mcp::install_tls_provider();
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let _starting = common::SERVER_STARTS.read().await;
    // A data directory of its own and no shared copy: the image's /usr is copied anew.
    let mut child = http_serve(dir.path(), port, &["--image-tree", "host"])
        .env_remove("CEM_IMAGE_TREE_DIR")
        .spawn()
        .expect("spawn the server binary");
    let log = common::read_stderr(&mut child);
    // Until it enters the step (/health fails the test if it starts before).
    let step = "copying the image's /usr for the sandboxes (--image-tree)";
    while health_says(port, "starting").await["step"] != step {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = child.id().unwrap();
    let stopped = std::time::Instant::now();
    stop_with_sigterm(&mut child).await;
    let took = stopped.elapsed();
    assert!(
        containers_of(pid).await.is_empty(),
        "containers of the stopped server are left"
    );
    let log = log.await.unwrap();
    assert!(log.contains("the start stopped"), "{log}");
    // The copy was abandoned, not finished: nothing of it is left but its lock file.
    let trees = dir.path().join("data/image-trees");
    let left: Vec<String> = std::fs::read_dir(&trees)
        .unwrap_or_else(|e| panic!("{}: {e}", trees.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.ends_with(".lock"))
        .collect();
    assert!(left.is_empty(), "left in {}: {left:?}", trees.display());
    eprintln!("stopped during the tree copy in {took:?}");
}
