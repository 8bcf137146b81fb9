//! Malformed JSON-RPC over the binary's stdio and over streamable HTTP (catalogue case 42):
//! truncated and non-JSON messages, 10,000-deep nesting, wrong types, odd ids, 20 MiB and
//! over-limit messages. Each gets its JSON-RPC error (-32700, -32600 or -32602, under its own id
//! when it has a usable one), and afterwards the server still answers a ping and runs code: no
//! panic, no hang, the session intact. And a tool argument the tool does not take: -32602
//! naming it, nothing run. And a malformed request that carries an email is not answered with
//! it: serde's words quote the value they could not read, and every error road passes the PII
//! engine (read in the raw bytes of each answer, over both transports).

mod common;

use std::time::Duration;

use common::{RawStdio, TestApp};
use serde_json::{Value, json};

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// A malformed message and the error it must get: (code, id), where `Value::Null` means the
/// error carries no id (it could not be read).
struct Case {
    body: String,
    code: i64,
    id: Value,
}

fn case(body: impl Into<String>, code: i64, id: Value) -> Case {
    Case {
        body: body.into(),
        code,
        id,
    }
}

/// One more byte than the server reads in one message.
const OVER_LIMIT: usize = code_execution_mcp::transport::jsonrpc_input::MAX_MESSAGE_BYTES + 1;

fn malformed() -> Vec<Case> {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_args = format!(
        r#"{{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{{"name":"execute_code","arguments":{{"code":{}{}}}}}}}"#,
        "[".repeat(5_000),
        "]".repeat(5_000)
    );
    vec![
        case(
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/li"#,
            PARSE_ERROR,
            Value::Null,
        ),
        case("hello", PARSE_ERROR, Value::Null),
        case(deep, PARSE_ERROR, Value::Null),
        case(deep_args, PARSE_ERROR, Value::Null),
        case("\u{feff}{}", INVALID_REQUEST, Value::Null),
        case(
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            INVALID_REQUEST,
            Value::Null,
        ),
        case(
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            INVALID_REQUEST,
            Value::Null,
        ),
        case(
            r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}"#,
            INVALID_REQUEST,
            Value::Null,
        ),
        case(
            r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#,
            INVALID_REQUEST,
            json!(3),
        ),
        case(
            r#"[{"jsonrpc":"2.0","id":4,"method":"ping"}]"#,
            INVALID_REQUEST,
            Value::Null,
        ),
        case(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":5,"arguments":"x"}}"#,
            INVALID_PARAMS,
            json!(7),
        ),
        case(
            r#"{"jsonrpc":"2.0","id":"s8","method":"tools/call","params":{"arguments":{}}}"#,
            INVALID_PARAMS,
            json!("s8"),
        ),
        case(
            format!(
                r#"{{"jsonrpc":"2.0","id":52,"method":"ping","params":{{"pad":"{}"}}}}"#,
                "a".repeat(OVER_LIMIT)
            ),
            INVALID_REQUEST,
            Value::Null,
        ),
    ]
}

/// A 20 MiB request, under the limit: it is served like any other.
fn huge_but_allowed(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sanitize_pii","arguments":{{"text":"{}"}}}}}}"#,
        "a".repeat(20 << 20)
    )
}

fn assert_error(answer: &Value, expected: &Case) {
    assert_eq!(
        answer["error"]["code"], expected.code,
        "for {:.80}: {answer:.300}",
        expected.body
    );
    assert_eq!(
        answer.get("id").cloned().unwrap_or(Value::Null),
        expected.id,
        "for {:.80}: {answer:.300}",
        expected.body
    );
    assert!(
        answer["error"]["message"].as_str().unwrap_or("").len() > 20,
        "the error says why: {answer:.300}"
    );
}

#[tokio::test]
async fn malformed_json_rpc_over_stdio_gets_errors_and_never_breaks_the_session() {
    let mut raw = RawStdio::start(&[]).await;
    let mut ping = 100;
    for expected in malformed() {
        raw.send_line(&expected.body).await;
        ping += 1;
        raw.send(json!({"jsonrpc": "2.0", "id": ping, "method": "ping"}))
            .await;
        let seen = raw.until_response(ping).await;
        assert_eq!(seen.len(), 2, "one answer, then the ping's: {seen:.300?}");
        assert_error(&seen[0], &expected);
        assert_eq!(seen[1]["result"], json!({}), "{:.300}", seen[1]);
    }

    // Blank lines are not messages: no answer, and the session goes on.
    raw.send_line("").await;
    raw.send_line("   ").await;
    raw.send(json!({"jsonrpc": "2.0", "id": 90, "method": "ping"}))
        .await;
    let seen = raw.until_response(90).await;
    assert_eq!(seen.len(), 1, "{seen:?}");

    raw.send_line(&huge_but_allowed(51)).await;
    let answer = raw.until_response(51).await.pop().unwrap();
    assert_eq!(answer["result"]["isError"], false, "{answer:.300}");

    // A request that parses but is wrong gets an error under its own id.
    for (id, request) in [
        (6, json!({"jsonrpc":"2.0","id":6,"method":"no/such/method"})),
        (
            8,
            json!({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"no_such_tool"}}),
        ),
    ] {
        raw.send(request).await;
        let answer = raw.until_response(id).await.pop().unwrap();
        assert!(answer["error"]["code"].is_i64(), "{answer}");
    }
    // Wrong argument types reach the tool layer and come back as a tool error that says why.
    raw.send(json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":123}}}))
        .await;
    let answer = raw.until_response(9).await.pop().unwrap();
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(text.contains("expected a string"), "{answer}");

    // The session still works for real calls.
    raw.send(json!({"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"result = 6 * 7"}}}))
        .await;
    let answer = raw.until_response(10).await.pop().unwrap();
    assert_eq!(
        answer["result"]["structuredContent"]["result"], 42,
        "{answer}"
    );
    raw.finish().await;
}

/// A raw streamable HTTP session: POSTs JSON bodies with the session id it was given.
struct RawHttp {
    http: reqwest::Client,
    url: String,
    session: String,
}

impl RawHttp {
    async fn start(url: String) -> Self {
        code_execution_mcp::install_tls_provider();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap();
        let mut raw = Self {
            http,
            url,
            session: String::new(),
        };
        let init = raw
            .post(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "0"}}})
                .to_string(),
            )
            .await;
        assert_eq!(init.status(), 200);
        raw.session = init.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        let _ = init.text().await;
        let ready = raw
            .post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into())
            .await;
        assert_eq!(ready.status(), 202);
        raw
    }

    async fn post(&self, body: String) -> reqwest::Response {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if !self.session.is_empty() {
            request = request.header("mcp-session-id", &self.session);
        }
        request.body(body).send().await.expect("the server answers")
    }

    /// POSTs a request and returns the JSON-RPC message answering `id` (JSON or SSE body).
    async fn call(&self, body: String, id: &Value) -> Value {
        let response = self.post(body).await;
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| &m["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {id} in {text:.300}"))
    }

    async fn ping(&self, id: u64) {
        let answer = self
            .call(
                json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string(),
                &json!(id),
            )
            .await;
        assert_eq!(answer["result"], json!({}), "{answer}");
    }
}

#[tokio::test]
async fn malformed_json_rpc_over_http_gets_errors_and_never_breaks_the_session() {
    let t = TestApp::start().await;
    let server = common::HttpServer::start(t.app.clone()).await;
    let raw = RawHttp::start(server.url.clone()).await;

    let mut ping = 100;
    for expected in malformed().into_iter().chain([
        case("", INVALID_REQUEST, Value::Null),
        case(
            r#"{"jsonrpc":"1.0","method":"notifications/initialized"}"#,
            INVALID_REQUEST,
            Value::Null,
        ),
    ]) {
        let response = raw.post(expected.body.clone()).await;
        let status = response.status().as_u16();
        let want = if expected.body.len() >= OVER_LIMIT {
            413
        } else {
            400
        };
        assert_eq!(status, want, "for {:.80}", expected.body);
        let answer: Value = response.json().await.expect("a JSON-RPC error body");
        assert_error(&answer, &expected);
        ping += 1;
        raw.ping(ping).await;
    }

    let answer = raw.call(huge_but_allowed(51), &json!(51)).await;
    assert_eq!(answer["result"]["isError"], false, "{answer:.300}");

    // Bodies that are not JSON at all still get rmcp's own answer, and the session goes on.
    let not_json = raw
        .http
        .post(&raw.url)
        .header("content-type", "text/plain")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &raw.session)
        .body("hello")
        .send()
        .await
        .unwrap();
    assert!(not_json.status().is_client_error(), "{}", not_json.status());

    let answer = raw
        .call(
            json!({"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"result = 6 * 7"}}}).to_string(),
            &json!(10),
        )
        .await;
    assert_eq!(
        answer["result"]["structuredContent"]["result"], 42,
        "{answer}"
    );
    server.stop().await;
    t.finish().await;
}

/// Unknown tool arguments are refused, never dropped: `execute_code` with a `branch` it does
/// not have, or `sesion` for `session`, gets -32602 naming the field and the accepted ones, runs
/// nothing and leaves the session as it was; a tool without arguments refuses one too; and
/// every listed schema says so (`additionalProperties: false`).
#[tokio::test]
async fn unknown_tool_arguments_are_refused_naming_them() {
    let t = TestApp::start().await;
    let client = common::mcp_client(t.app.clone()).await;
    let (err, first) = common::call_tool(
        &client,
        "execute_code",
        json!({"code": "x = 1", "session": "new"}),
    )
    .await;
    assert!(!err, "{first}");
    let session = first["session"]
        .as_str()
        .expect("a session handle")
        .to_string();
    let ran = "open('/workspace/ran.txt', 'w').write('ran'); x = 2";
    for (args, unknown) in [
        (
            json!({"code": ran, "session": session, "branch": true}),
            "branch",
        ),
        (json!({"code": ran, "sesion": session}), "sesion"),
    ] {
        let refused = common::try_call_tool(&client, "execute_code", args.clone()).await;
        let Err(rmcp::ServiceError::McpError(e)) = refused else {
            panic!("{args} was not refused: {refused:?}");
        };
        assert_eq!(i64::from(e.code.0), INVALID_PARAMS, "{e:?}");
        for named in [unknown, "session", "code"] {
            assert!(e.message.contains(&format!("`{named}`")), "{named}: {e:?}");
        }
    }
    assert!(
        !t.workspace().join("ran.txt").exists(),
        "a refused call ran"
    );
    let (err, after) = common::call_tool(
        &client,
        "execute_code",
        json!({"code": "result = x", "session": session}),
    )
    .await;
    assert!(!err, "{after}");
    assert_eq!(after["result"], 1, "the session changed: {after}");

    let refused = common::try_call_tool(&client, "list_skills", json!({"all": true})).await;
    let Err(rmcp::ServiceError::McpError(e)) = refused else {
        panic!("list_skills took an argument: {refused:?}");
    };
    assert_eq!(i64::from(e.code.0), INVALID_PARAMS, "{e:?}");
    assert!(e.message.contains("`all`"), "{e:?}");

    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.len() >= 10, "{} tools", tools.len());
    for tool in tools {
        assert_eq!(
            tool.input_schema.get("additionalProperties"),
            Some(&json!(false)),
            "{}: {:?}",
            tool.name,
            tool.input_schema
        );
    }
    client.cancel().await.unwrap();
    t.finish().await;
}

/// Personal data that each request below puts where serde cannot read it.
const EMAIL: &str = "margarethe.vonstrelitz@example-mail.org";

/// Requests (from id `first` on) whose answers would quote [`EMAIL`]: an argument of the wrong
/// type (rmcp's tool error), `tools/call` params that do not parse (the transport's -32602), a
/// method this server does not serve (-32601, which names it).
fn carrying_an_email(first: u64) -> Vec<(u64, Value)> {
    let (a, b, c) = (first, first + 1, first + 2);
    vec![
        (
            a,
            json!({"jsonrpc": "2.0", "id": a, "method": "tools/call", "params": {
                "name": "execute_code", "arguments": {"code": "x = 1", "timeout_seconds": EMAIL}}}),
        ),
        (
            b,
            json!({"jsonrpc": "2.0", "id": b, "method": "tools/call", "params": {
                "name": "execute_code", "arguments": EMAIL}}),
        ),
        (c, json!({"jsonrpc": "2.0", "id": c, "method": EMAIL})),
    ]
}

/// What is wrong with the answer to `request`, if anything: it must say what went wrong (its
/// code, or a tool error), with the value as a token.
fn leak(raw: &str, answer: &Value, request: &Value) -> Option<String> {
    let said = match answer.get("error") {
        Some(error) => error["code"].as_i64().is_some_and(|c| c < 0),
        None => answer["result"]["isError"] == true,
    };
    if raw.contains(EMAIL) || raw.contains("vonstrelitz") {
        Some(format!(
            "the answer to {request} quotes the email in clear: {raw}"
        ))
    } else if !raw.contains("[EMAIL_") {
        Some(format!("no token in the answer to {request}: {raw}"))
    } else if !said {
        Some(format!("the answer to {request} is no error: {raw}"))
    } else {
        None
    }
}

/// Over stdio, the server answers while it starts (the transport's answers and an unknown
/// method, with the start's own engine) and once it has started (the tenant's).
#[tokio::test]
async fn an_email_in_a_malformed_request_is_answered_as_a_token_over_stdio() {
    let mut raw = RawStdio::start(&[]).await;
    let mut leaks = Vec::new();
    let exchange = async |raw: &mut RawStdio, id: u64, request: &Value| {
        raw.send(request.clone()).await;
        let line = raw.until_response_lines(id).await.pop().unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        leak(&line, &answer, request)
    };
    for (id, request) in carrying_an_email(10).into_iter().skip(1) {
        leaks.extend(exchange(&mut raw, id, &request).await);
    }
    started(&mut raw).await;
    for (id, request) in carrying_an_email(20) {
        leaks.extend(exchange(&mut raw, id, &request).await);
    }
    raw.finish().await;
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
}

/// Waits until the server behind `raw` has started (`get_execution_stats` answers without an
/// error), at most ten minutes.
async fn started(raw: &mut RawStdio) {
    let until = std::time::Instant::now() + Duration::from_secs(600);
    for id in 1000.. {
        raw.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "get_execution_stats", "arguments": {}}}),
        )
        .await;
        let answer = raw.until_response(id).await.pop().unwrap();
        if answer["result"]["isError"] == false {
            return;
        }
        assert!(std::time::Instant::now() < until, "no start: {answer}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn an_email_in_a_malformed_request_is_answered_as_a_token_over_http() {
    let t = TestApp::start().await;
    let server = common::HttpServer::start(t.app.clone()).await;
    let raw = RawHttp::start(server.url.clone()).await;
    let mut leaks = Vec::new();
    for (id, request) in carrying_an_email(20) {
        let response = raw.post(request.to_string()).await;
        let body = response.text().await.unwrap();
        // A JSON body (the transport's own answers), or SSE events (rmcp's).
        let answer = std::iter::once(body.as_str())
            .chain(body.lines().filter_map(|l| l.strip_prefix("data:")))
            .filter_map(|m| serde_json::from_str::<Value>(m.trim()).ok())
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {request} in {body}"));
        leaks.extend(leak(&body, &answer, &request));
    }
    server.stop().await;
    t.finish().await;
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
}
