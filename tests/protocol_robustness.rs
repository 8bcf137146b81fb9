//! Malformed JSON-RPC over the binary's stdio: truncated and non-JSON lines, 10,000-deep
//! nesting, wrong types, odd ids, a 20 MiB line. After each, the server must still be alive and
//! answer a ping (no panic, no hang, the session intact); requests that parse but are invalid
//! get JSON-RPC errors or a tool error, never a crash.

mod common;

use common::RawStdio;
use serde_json::{Value, json};

/// Sends `line`, then a ping with `ping_id`; returns what came back up to the ping's answer.
async fn then_ping(raw: &mut RawStdio, line: &str, ping_id: u64) -> Vec<Value> {
    raw.send_line(line).await;
    raw.send(json!({"jsonrpc": "2.0", "id": ping_id, "method": "ping"}))
        .await;
    let seen = raw.until_response(ping_id).await;
    assert_eq!(
        seen.last().unwrap()["result"],
        json!({}),
        "ping after {:.80}",
        line
    );
    seen
}

#[tokio::test]
async fn malformed_json_rpc_gets_errors_and_never_breaks_the_session() {
    let mut raw = RawStdio::start(&[]).await;
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_args = format!(
        r#"{{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{{"name":"execute_code","arguments":{{"code":{}{}}}}}}}"#,
        "[".repeat(5_000),
        "]".repeat(5_000)
    );
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":51,"method":"tools/call","params":{{"name":"sanitize_pii","arguments":{{"text":"{}"}}}}}}"#,
        "a".repeat(20 << 20)
    );
    // Lines that are not a request at all: nothing may break.
    let mut ping = 100;
    for line in [
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/li"#,
        "hello",
        "",
        "\u{feff}{}",
        deep.as_str(),
        deep_args.as_str(),
        huge.as_str(),
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}"#,
        r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#,
        r#"[{"jsonrpc":"2.0","id":4,"method":"ping"}]"#,
    ] {
        ping += 1;
        then_ping(&mut raw, line, ping).await;
    }

    // Requests that parse but are wrong get an error answer under their own id.
    let cases = [
        (6, json!({"jsonrpc":"2.0","id":6,"method":"no/such/method"})),
        (
            7,
            json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":5,"arguments":"x"}}),
        ),
        (
            8,
            json!({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"no_such_tool"}}),
        ),
    ];
    for (id, request) in cases {
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
