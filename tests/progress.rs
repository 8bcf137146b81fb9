//! Progress notifications for long executions, over the real binary's stdio with raw JSON-RPC
//! (rmcp's client attaches a progress token to every request, so it cannot show the tokenless
//! case): a call without a token gets only its response; a call with one gets reports with the
//! elapsed time and the latest output (tokenized like every text for the model), all before
//! the response.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout, Command};

const BIN: &str = env!("CARGO_BIN_EXE_code-execution-mcp");

struct Raw {
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Raw {
    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
    }

    /// Messages up to and including the response to `id`.
    async fn until_response(&mut self, id: u64) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
                .await
                .expect("the server answers within a minute")
                .unwrap()
                .expect("the server keeps stdout open");
            let message: Value = serde_json::from_str(&line).expect("one JSON message per line");
            let done = message["id"] == json!(id);
            seen.push(message);
            if done {
                return seen;
            }
        }
    }
}

fn progress_of(messages: &[Value]) -> Vec<&Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| &m["params"])
        .collect()
}

#[tokio::test]
async fn progress_reports_only_when_a_token_is_given_and_only_before_the_response() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--workspace-quota-mb", "0", "--pool-size", "0"])
        .arg("--workspace")
        .arg(dir.path().join("workspace"))
        .arg("--skills-dir")
        .arg(dir.path().join("skills"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the server binary");
    let mut raw = Raw {
        stdin: child.stdin.take().unwrap(),
        lines: BufReader::new(child.stdout.take().unwrap()).lines(),
    };
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"}}}),
    )
    .await;
    raw.until_response(1).await;
    raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

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

    drop(raw);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the server exits when stdin closes")
        .unwrap();
    assert!(status.success(), "{status}");
}
