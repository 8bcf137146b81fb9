//! An upstream's credentials (its entry's `env` and `headers`, its URL's query) stay on the
//! host: never in the sandbox's files or environment, and never in what comes back when the
//! upstream quotes them: an error result, a text, a nested structured field, an embedded
//! resource's text and URI, a stderr line logged or quoted in an error. Each check looks inside
//! the sandbox (where the PII detectors have not run yet), so it fails if the gateway let the
//! value through, whatever the detectors would make of it later.

use serde_json::json;

use super::{app_with, app_with_ready, run_ok, status_after_failure};
use crate::common::upstreams::{fixture_bin, http_fixture, upstreams_file};
use crate::common::{LoggedServer, TestApp, execute_code, mcp_client};

/// Calls the fixture's `leak` in every place it can quote its credential; the code reports
/// what it got and which of those values still hold the canary (`CANARY` is replaced).
const LEAK_CODE: &str = r#"
import json, sys
from servers.SERVER import leak

def error_of(place):
    try:
        leak(place=place)
        return None
    except ToolError as e:
        return str(e)

resource = leak(place="resource")
out = {
    "error": error_of("error"),
    "text": leak(place="text"),
    "structured": leak(place="structured"),
    "resource": {"uri": resource["uri"], "text": resource["text"]},
    "stderr": leak(place="stderr"),
}
print(out["text"])
print(out["error"], file=sys.stderr)
out["holding_the_key"] = [k for k, v in out.items() if "CANARY" in json.dumps(v)]
result = out
"#;

/// Runs [`LEAK_CODE`] against `server` both in-process and through an MCP client, and checks
/// that the canary reached neither the code nor the client while the rest of each reply is
/// intact.
async fn assert_redacted_everywhere(t: &TestApp, server: &str, canary: &str) {
    let code = LEAK_CODE
        .replace("SERVER", server)
        .replace("CANARY", canary);
    let o = run_ok(t, &code).await;
    let r = &o.outcome.result;
    assert_eq!(
        r["holding_the_key"],
        json!([]),
        "the key reached sandbox code: {r}"
    );
    assert_eq!(
        r["error"],
        format!("`{server}/leak` failed: invalid key [redacted]: not allowed for project alpha")
    );
    assert_eq!(r["text"], "authenticated with [redacted] as project alpha");
    assert_eq!(
        r["structured"],
        json!({"project": "alpha",
               "auth": {"keys": ["[redacted]", "public-key-0"], "note": "key [redacted] is active",
                        "by_key": {"[redacted]": "alpha"}}}),
        "every nested string and key is redacted, nothing else changed"
    );
    assert_eq!(
        r["resource"],
        json!({"uri": "fixture://keys/[redacted]", "text": "key=[redacted]; project=alpha"})
    );
    assert_eq!(r["stderr"], "logged");
    let records = serde_json::to_string(&o.tool_calls).unwrap();
    assert!(!records.contains(canary), "{records}");

    // What a client gets back: the whole result, content and structured content.
    let client = mcp_client(t.app.clone()).await;
    let reply = execute_code(&client, &code).await;
    let reply = serde_json::to_string(&reply).unwrap();
    assert!(!reply.contains(canary), "the client got the key: {reply}");
    assert!(
        reply.contains("authenticated with [redacted] as project alpha"),
        "{reply}"
    );
    drop(client);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stdio_upstream_quoting_its_key_gets_it_redacted_everywhere() {
    let canary = "sk-cem-canary-4b9e1a77f0";
    let t = app_with(
        json!({"fx": {"command": fixture_bin(),
                      "env": {"FIXTURE_SECRET": canary, "TZ": "Europe/Berlin"}}}),
        |_| {},
    )
    .await;
    assert_redacted_everywhere(&t, "fx", canary).await;

    // The upstream's environment: what docs/gateway.md lists, plus its entry's `env`; never this
    // process's own settings (the test runner's CARGO_* and CEM_* among them).
    let o = run_ok(&t, "from servers.fx import env_names\nresult = env_names()").await;
    let names: Vec<&str> = o.outcome.result["names"]
        .as_array()
        .expect("names")
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let allowed = [
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "LANG",
        "LC_ALL",
        "TZ",
        "TMPDIR",
        "FIXTURE_SECRET",
    ];
    assert!(names.contains(&"FIXTURE_SECRET"), "{names:?}");
    let extra: Vec<&&str> = names.iter().filter(|n| !allowed.contains(n)).collect();
    assert!(
        extra.is_empty(),
        "the upstream inherited variables it must not: {extra:?}"
    );
    t.app.shutdown_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_http_upstream_quoting_its_header_gets_it_redacted_everywhere() {
    let canary = "cem-bearer-canary-93c1d5e0aa";
    let fixture = http_fixture().await;
    let t = app_with(
        json!({"web": {"type": "http", "url": fixture.url,
                       "headers": {"Authorization": format!("Bearer {canary}"),
                                   "X-Trace": "gateway-test"}}}),
        |_| {},
    )
    .await;
    // The fixture quotes the Authorization header it received: the header was sent, and
    // what it quotes comes back redacted.
    assert_redacted_everywhere(&t, "web", canary).await;
    // Every header of the entry arrives (compared in the fixture: a header's value is one of
    // the entry's secrets, so it would come back redacted).
    let o = run_ok(
        &t,
        "from servers.web import has_header\n\
         result = [has_header(name='x-trace', value='gateway-test')['present'],\n\
                   has_header(name='x-trace', value='other')['present']]",
    )
    .await;
    assert_eq!(o.outcome.result, json!([true, false]));
    t.app.shutdown_all().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstreams_stderr_is_logged_and_quoted_redacted() {
    let canary = "cem-stderr-canary-51f0e2";
    let dir = tempfile::tempdir().unwrap();
    let file = upstreams_file(
        dir.path(),
        json!({"fx": {"command": fixture_bin(), "env": {"FIXTURE_SECRET": canary}}}),
    );
    let server = LoggedServer::start(dir.path(), &["--upstreams", file.to_str().unwrap()]).await;
    let code = r#"
from servers.fx import leak
logged = leak(place="stderr")
try:
    leak(place="exit")
    quoted = None
except ToolError as e:
    quoted = str(e)
result = {"logged": logged, "quoted": quoted, "holding_the_key": "CANARY" in str(quoted)}
"#
    .replace("CANARY", canary);
    let reply = execute_code(&server.client, &code).await;
    let r = reply.structured_content.expect("structured content");
    assert_eq!(r["status"], "ok", "{r}");
    let result = &r["result"];
    assert_eq!(result["logged"], "logged", "{result}");
    assert_eq!(result["holding_the_key"], false, "{result}");
    let quoted = result["quoted"].as_str().expect("the exit is a ToolError");
    assert!(
        quoted.contains("its last stderr line: fixture: key [redacted] rejected, exiting"),
        "the error quotes the upstream's last stderr line, redacted: {quoted}"
    );
    let logs = server.finish().await;
    assert!(
        logs.contains("stderr: fixture: authenticating with key [redacted] for project alpha"),
        "the upstream's stderr line is logged, redacted: {logs}"
    );
    assert!(
        !logs.contains(canary),
        "the server's log holds the key: {logs}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn credentials_stay_on_the_host() {
    let canary = "cem-canary-7d1f0c2e9b";
    let t = app_with_ready(
        json!({
            "fx": {"command": fixture_bin(),
                   "env": {"FIXTURE_SECRET": canary}},
            "web": {"url": format!("http://127.0.0.1:9/mcp?key={canary}"),
                    "headers": {"Authorization": format!("Bearer {canary}")}},
        }),
        |c| c.gateway.upstream_connect_timeout_secs = 3,
        Some(&["fx"]),
    )
    .await;
    let o = run_ok(
        &t,
        &format!(
            r#"
import os
from servers.fx import secret_present, stderr_flood
found = []
for top, dirs, files in os.walk("/mnt/servers"):
    for name in files:
        with open(os.path.join(top, name), "rb") as f:
            if b"{canary}" in f.read():
                found.append(os.path.join(top, name))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open(f"/proc/{{pid}}/environ", "rb") as f:
                if b"{canary}" in f.read():
                    found.append("environ of " + pid)
        except OSError:
            pass
flooded = stderr_flood(megabytes=8)
result = {{"found": found, "upstream_has_it": secret_present()["present"], "flooded": flooded}}
"#
        ),
    )
    .await;
    let r = &o.outcome.result;
    assert_eq!(r["found"], json!([]), "the canary reached the sandbox: {r}");
    assert_eq!(r["upstream_has_it"], true, "the env reached the upstream");
    assert_eq!(
        r["flooded"], "flooded",
        "8 MiB of stderr mid-call did not break the call"
    );
    // Nor does a message about the HTTP upstream quote its key.
    let web = status_after_failure(&t, "web").await;
    assert!(
        web.contains("127.0.0.1:9/mcp") && !web.contains(canary),
        "{web}"
    );
    t.app.shutdown_all().await;
}
