//! The rmcp fixture upstream's edge cases: a slow tool past the call timeout, a crash
//! mid-call (and the restart after it), a 50 MiB result, an error result, a tool list that
//! changes, names Python cannot spell, contents that are images and resources, threads calling
//! at once, the call budget, an upstream that never answers `initialize`, one that floods
//! stderr, a policy that denies, and an upstream still starting when the first execution comes.

use code_execution_mcp::app::execution::request::ExecuteRequest;
use serde_json::{Value, json};

use super::{app_with, app_with_ready, run, run_ok, status_after_failure, statuses};
use crate::common::upstreams::fixture_entry;
use crate::common::{call_tool, mcp_client};

#[tokio::test(flavor = "multi_thread")]
async fn edge_cases_raise_tool_errors_that_say_why() {
    let t = app_with(json!({"fx": fixture_entry(&["--filler", "25"])}), |c| {
        c.gateway.tool_call_timeout_secs = 8;
        c.gateway.max_tool_calls = 40;
        c.gateway.max_concurrent_tool_calls = 4;
    })
    .await;
    let o = run_ok(
        &t,
        r#"
import os, threading
import servers.fx as fx
from servers.fx import echo, slow, big, fail, image, repr_text, json_text

def error_of(f, **kw):
    try:
        f(**kw)
        return None
    except ToolError as e:
        return str(e)

files = sorted(os.listdir("/servers/fx"))
out = {
    "echo": echo(value={"a": [1, 2]}),
    "slow": error_of(slow, seconds=30),
    "big": error_of(big, megabytes=50),
    "fail": error_of(fail, message="row 7 is missing"),
    "repr": repr_text(),
    "json": json_text(),
    "names": [fx.weird_name_v2(), fx.class_(), fx._2fast(), fx.Mixed_Case()],
    "fillers": len([f for f in files if f.startswith("filler_")]),
}
img = image()
out["image_saved"] = img[0].save("pixel.png")
out["image_type"] = img[0]["type"]
out["note"] = img[1]["text"]
replies = []
threads = [threading.Thread(target=lambda i=i: replies.append(echo(value=i)["value"])) for i in range(4)]
for th in threads: th.start()
for th in threads: th.join()
out["threads"] = sorted(replies)
outcomes = []
def slow_call():
    try:
        outcomes.append(slow(seconds=3))
    except ToolError as e:
        outcomes.append(str(e))
threads = [threading.Thread(target=slow_call) for _ in range(8)]
for th in threads: th.start()
for th in threads: th.join()
out["crowd"] = sorted(outcomes)
result = out
"#,
    )
    .await;
    let r = &o.outcome.result;
    assert_eq!(r["echo"], json!({"value": {"a": [1, 2]}}));
    let slow = r["slow"].as_str().unwrap();
    assert!(slow.contains("did not answer `slow` within 8 s"), "{slow}");
    let big = r["big"].as_str().unwrap();
    assert!(
        big.contains("over the 4.0 MiB limit") && big.contains("--max-tool-result-mb"),
        "{big}"
    );
    assert_eq!(r["fail"], "`fx/fail` failed: row 7 is missing");
    assert_eq!(r["repr"], "[{'a': 1}]");
    assert_eq!(r["json"], json!({"a": [1, 2]}));
    assert_eq!(
        r["names"],
        json!(["weird-name.v2", "class", "2fast", "Mixed Case"])
    );
    assert_eq!(r["fillers"], 25, "every page of tools/list was read");
    assert_eq!(r["image_type"], "image");
    assert_eq!(r["note"], "a note");
    assert_eq!(r["threads"], json!([0, 1, 2, 3]));
    // Eight threads, four at once: four answered, four refused saying why.
    let crowd: Vec<&str> = r["crowd"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let refused = crowd
        .iter()
        .filter(|c| c.contains("--max-concurrent-tool-calls"))
        .count();
    assert_eq!(
        crowd.iter().filter(|c| **c == "slept 3").count(),
        4,
        "{crowd:?}"
    );
    assert_eq!(refused, 4, "{crowd:?}");
    let png = std::fs::read(t.workspace().join("pixel.png")).unwrap();
    assert_eq!(r["image_saved"], png.len());
    assert!(png.starts_with(b"\x89PNG"), "the image's bytes were saved");
    let failed: Vec<&str> = o
        .tool_calls
        .iter()
        .filter(|c| !c.ok)
        .map(|c| c.tool.as_str())
        .collect();
    assert_eq!(failed[..3], ["slow", "big", "fail"]);
    assert_eq!(failed.len(), 7, "three errors and four refused: {failed:?}");
    // The same calls as the metrics count them, by tool and outcome.
    let metrics = crate::metrics_of(&t).await;
    for (tool, outcome, n) in [
        ("echo", "ok", 5),
        ("slow", "timeout", 1),
        ("slow", "ok", 4),
        ("slow", "refused", 4),
        ("big", "error", 1),
        ("fail", "error", 1),
    ] {
        let series = format!(
            "cem_upstream_calls_total{{tenant=\"\",server=\"fx\",tool=\"{tool}\",outcome=\"{outcome}\"}} {n}\n"
        );
        assert!(metrics.contains(&series), "{series} in {metrics}");
    }

    // The call budget: 40 per execution.
    let o = run(
        &t,
        "for i in range(41):\n    call_tool('fx', 'echo', {'value': i})",
    )
    .await;
    let error = o.outcome.error.unwrap_or_default();
    assert!(
        error.contains("40 tool calls") && error.contains("--max-tool-calls"),
        "{error}"
    );

    // A tool list that changes: an execution that is running keeps the package it started
    // with, while one that starts after the upstream listed its new tool sees it.
    let app = t.app.clone();
    let first = tokio::spawn(async move {
        app.execute(
            ExecuteRequest {
                code: "from servers.fx import add_tool\nadd_tool()\nimport os, time\n\
                       while not os.path.exists('/workspace/go'):\n    time.sleep(0.05)\n\
                       result = sorted(os.listdir('/servers/fx'))"
                    .into(),
                timeout_seconds: Some(120.0),
                ..Default::default()
            },
            Default::default(),
        )
        .await
    });
    let fx = t.app.shared().gateway().cloned().unwrap().upstreams()[0].clone();
    for _ in 0..200 {
        if fx.tools().iter().any(|tool| tool.name == "added_later") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let o = run_ok(
        &t,
        "from servers.fx import added_later\nresult = added_later()",
    )
    .await;
    assert_eq!(
        o.outcome.result, "added",
        "a new execution sees the new tool"
    );
    std::fs::write(t.workspace().join("go"), "1").unwrap();
    let first = first.await.unwrap().unwrap().outcome;
    let listed = first.result.as_array().expect("a listing");
    assert!(listed.contains(&json!("echo.py")), "{listed:?}");
    assert!(
        !listed.contains(&json!("added_later.py")),
        "the running execution kept the package it started with: {listed:?}"
    );

    // A crash mid-call: a clear error, then the upstream is back for the next execution.
    let o = run(&t, "from servers.fx import crash\ncrash()").await;
    let error = o.outcome.error.unwrap_or_default();
    assert!(
        error.contains("upstream `fx` failed on `crash`") && error.contains("closed"),
        "the error says which upstream and that its connection closed: {error}"
    );
    let mut back = false;
    for _ in 0..40 {
        let o = run(
            &t,
            "from servers.fx import echo\nresult = echo(value='back')",
        )
        .await;
        if o.outcome.result == json!({"value": "back"}) {
            back = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert!(
        back,
        "the crashed upstream was restarted: {:?}",
        statuses(&t)
    );

    // The upstream's own elicitation is refused, with a reason the code can read.
    let o = run(
        &t,
        "from servers.fx import ask_user\nresult = ask_user(question='sure?')",
    )
    .await;
    let error = o.outcome.error.unwrap_or_default();
    assert!(
        error.contains("does not relay an upstream's questions"),
        "the gateway's refusal reached the upstream and came back in its error: {error}"
    );
    t.app.shutdown_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn broken_upstreams_never_take_the_server_down() {
    let t = app_with_ready(
        json!({
            "hangs": fixture_entry(&["--hang-initialize"]),
            "noisy": fixture_entry(&["--stderr-flood-at-start", "20"]),
            "gone": {"command": "/nonexistent/mcp-server"},
            "tls": {"url": "https://127.0.0.1:9/mcp"},
            "ok": fixture_entry(&[]),
            "guarded": {"command": crate::common::upstreams::fixture_bin(),
                        "policy": {"default": "allow", "tools": {"echo": "deny", "delete_*": "allow"}}},
        }),
        |c| c.gateway.upstream_connect_timeout_secs = 3,
        Some(&["noisy", "ok", "guarded"]),
    )
    .await;
    let o = run_ok(
        &t,
        r#"
import os
from servers.ok import echo
from servers.noisy import echo as noisy_echo
from servers.guarded import delete_everything
def error_of(f, *a, **kw):
    try:
        f(*a, **kw)
    except ToolError as e:
        return str(e)
result = {
    "ok": echo(value=1)["value"],
    "noisy": noisy_echo(value=2)["value"],
    "servers": sorted(os.listdir("/servers")),
    "hangs": error_of(call_tool, "hangs", "echo", {}),
    "denied": error_of(call_tool, "guarded", "echo", {"value": 3}),
    "allowed": delete_everything(),
}
"#,
    )
    .await;
    let r = &o.outcome.result;
    assert_eq!(r["ok"], 1);
    assert_eq!(r["noisy"], 2, "20 MiB of stderr did not stop the upstream");
    assert_eq!(
        r["servers"],
        json!([
            "__init__.py",
            "gone",
            "guarded",
            "hangs",
            "noisy",
            "ok",
            "tls"
        ]),
        "every upstream has a module, also those without tools now"
    );
    let hangs = r["hangs"].as_str().unwrap();
    assert!(
        hangs.contains("`hangs` is not connected") && hangs.contains("initialize"),
        "{hangs}"
    );
    assert!(
        r["denied"].as_str().unwrap().contains("denies `echo`"),
        "{r}"
    );
    assert_eq!(r["allowed"], "deleted", "a rule beats the destructive hint");
    // The metrics: connections, calls by outcome (a tool its upstream does not list is never a
    // label), and the policy's decisions.
    let metrics = crate::metrics_of(&t).await;
    for series in [
        "cem_upstream_up{server=\"ok\"} 1",
        "cem_upstream_up{server=\"gone\"} 0",
        "cem_upstream_calls_total{tenant=\"\",server=\"ok\",tool=\"echo\",outcome=\"ok\"} 1",
        "cem_upstream_calls_total{tenant=\"\",server=\"guarded\",tool=\"echo\",outcome=\"denied\"} 1",
        "cem_upstream_calls_total{tenant=\"\",server=\"hangs\",tool=\"(other)\",outcome=\"refused\"} 1",
        "cem_policy_decisions_total{tenant=\"\",server=\"guarded\",decision=\"deny\"} 1",
        "cem_policy_decisions_total{tenant=\"\",server=\"guarded\",decision=\"allow\"} 1",
        "cem_upstream_call_duration_seconds_count{tenant=\"\",server=\"guarded\"} 2",
    ] {
        assert!(
            metrics.contains(&format!("{series}\n")),
            "{series} in {metrics}"
        );
    }
    // The audit record of the execution: each call with its outcome, decision and the digest of
    // its arguments, never their values.
    let trail = t.dir.path().join("data/audit/_default");
    let file = std::fs::read_dir(&trail)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(file).unwrap();
    let record: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let denied = (record["calls"].as_array().unwrap().iter())
        .find(|c| c["server"] == "guarded" && c["tool"] == "echo")
        .unwrap_or_else(|| panic!("{record}"));
    assert_eq!(denied["outcome"], "denied");
    assert_eq!(denied["policy"], "deny");
    assert_eq!(denied["arguments_sha256"].as_str().unwrap().len(), 64);
    assert!(!denied.to_string().contains("\"value\""), "{denied}");
    assert_eq!(record["status"], "ok");

    let gone = status_after_failure(&t, "gone").await;
    assert!(
        gone.contains("cannot start") && gone.contains("/nonexistent/mcp-server"),
        "{gone}"
    );
    // HTTPS is supported: the failure is the closed port, not the scheme.
    let tls = status_after_failure(&t, "tls").await;
    assert!(
        tls.contains("https://127.0.0.1:9/mcp") && !tls.contains("scheme"),
        "{tls}"
    );
    t.app.shutdown_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_first_execution_waits_for_an_upstream_still_starting() {
    // Nothing waits for the upstream here: the execution and the search come while it is
    // still starting, as when a client calls execute_code right after starting the server.
    let t = app_with_ready(
        json!({"late": fixture_entry(&["--start-delay-ms", "3000"])}),
        |_| {},
        Some(&[]),
    )
    .await;
    assert_eq!(
        statuses(&t),
        [("late".to_string(), "Connecting".to_string())],
        "the upstream is still starting when the execution begins"
    );
    let client = mcp_client(t.app.clone()).await;
    let (_, found) = call_tool(
        &client,
        "search_tools",
        json!({"query": "echo", "callable_only": true}),
    )
    .await;
    assert_eq!(found["tools"][0]["id"], "late/echo", "{found}");
    drop(client);
    let o = run_ok(
        &t,
        "from servers.late import echo\nresult = echo(value=5)['value']",
    )
    .await;
    assert_eq!(o.outcome.result, 5);
    t.app.shutdown_all().await;

    // One that never answers delays the first execution by the connect timeout at most, and
    // the code is told why the module is missing.
    let t = app_with_ready(
        json!({"hangs": fixture_entry(&["--hang-initialize"])}),
        |c| c.gateway.upstream_connect_timeout_secs = 2,
        Some(&[]),
    )
    .await;
    for code in [
        "call_tool('hangs', 'echo', {'value': 1})",
        "from servers.hangs import echo",
    ] {
        let o = run(&t, code).await;
        assert_eq!(o.outcome.error_type.as_deref(), Some("ToolError"), "{code}");
        let error = o.outcome.error.unwrap_or_default();
        assert!(
            error.contains("`hangs` is not connected") && error.contains("initialize"),
            "{code}: {error}"
        );
    }
    t.app.shutdown_all().await;
}
