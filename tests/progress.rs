//! Progress notifications for long executions, over the real binary's stdio with raw JSON-RPC
//! (rmcp's client attaches a progress token to every request, so it cannot show the tokenless
//! case): a call without a token gets only its response; a call with one gets reports with the
//! elapsed time and the latest output (tokenized like every text for the model), all before
//! the response.

mod common;

use std::time::Duration;

use common::RawStdio;
use serde_json::{Value, json};

fn progress_of(messages: &[Value]) -> Vec<&Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| &m["params"])
        .collect()
}

#[tokio::test]
async fn progress_reports_only_when_a_token_is_given_and_only_before_the_response() {
    let mut raw = RawStdio::start(&[]).await;

    let code = "import time\nfor i in range(3):\n    print(f'step {i} of 3, mail ada@example.com', flush=True)\n    time.sleep(1)\nresult = 'done'";
    let call = |id: u64, meta: Option<Value>| {
        let mut params = json!({"name": "execute_code", "arguments": {"code": code}});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    };

    raw.send(call(2, None)).await;
    let plain = raw.until_response(2).await;
    let response = plain.last().unwrap();
    assert_eq!(
        response["result"]["structuredContent"]["result"], "done",
        "{response}"
    );
    assert!(
        progress_of(&plain).is_empty(),
        "no token, no progress: {plain:?}"
    );

    raw.send(call(3, Some(json!({"progressToken": "tok-3"}))))
        .await;
    let tracked = raw.until_response(3).await;
    assert_eq!(
        tracked.last().unwrap()["result"]["structuredContent"]["result"],
        "done"
    );
    let reports = progress_of(&tracked);
    assert!(
        reports.len() >= 2,
        "a 3-second execution reports about every second: {tracked:?}"
    );
    let mut last = 0.0;
    for report in &reports {
        assert_eq!(report["progressToken"], "tok-3");
        let progress = report["progress"].as_f64().unwrap();
        assert!(progress > last, "progress grows: {reports:?}");
        last = progress;
    }
    let messages: Vec<&str> = reports
        .iter()
        .map(|r| r["message"].as_str().unwrap())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("latest output: step ") && m.contains("of 3, mail [EMAIL_")),
        "reports carry the latest line, tokenized: {messages:?}"
    );
    assert!(
        messages.iter().all(|m| !m.contains("ada@example.com")),
        "{messages:?}"
    );

    // Nothing about call 3 follows its response.
    raw.send(json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}))
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = raw.until_response(4).await;
    assert!(progress_of(&after).is_empty(), "{after:?}");

    raw.finish().await;
}
