//! Guarded egress against real HTTPS servers on loopback (Python's, with a CA this test makes),
//! each recording every request it receives: what was refused or not sent is read from those
//! records, never from the proxy's words. The sandbox keeps network none throughout.

mod common;

use std::path::Path;

use serde_json::Value;

use common::TestApp;
use common::recording::{Api, TestCa, test_ca};

/// The secret the upstreams file gives the API's entry.
const SECRET: &str = "egress-secret-4f9a2c81d7";

/// The test's CA and two recording APIs signed by it, `api` and `other`.
fn two_apis(dir: &Path) -> (TestCa, Api, Api) {
    let ca = test_ca(dir);
    let (api, other) = (Api::start(&ca, dir, "api"), Api::start(&ca, dir, "other"));
    (ca, api, other)
}

/// A server whose upstreams file holds `egress`, trusting the test's CA.
async fn server_with(dir: &Path, ca: &TestCa, egress: Value) -> TestApp {
    let upstreams = dir.join("upstreams.json");
    std::fs::write(
        &upstreams,
        serde_json::json!({"egress": egress}).to_string(),
    )
    .unwrap();
    let (ca_file, sockets) = (ca.ca.clone(), dir.join("sockets"));
    TestApp::start_with(move |c| {
        c.gateway.upstreams = Some(upstreams);
        c.egress.egress_ca_file = Some(ca_file);
        c.egress.egress_socket_dir = Some(sockets);
    })
    .await
}

/// The servers of this file run under the runtime and read `/usr` from where CI's step asked.
#[tokio::test]
async fn the_servers_run_under_the_runtime_and_image_tree_asked_for() {
    common::placement::assert_runs_where_asked().await;
}

#[tokio::test]
async fn code_reads_a_listed_api_through_the_server_and_never_holds_its_secret() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, api, other) = two_apis(dir.path());
    let t = server_with(
        dir.path(),
        &ca,
        serde_json::json!({
            "127.0.0.1": {"ports": [api.port], "private": true,
                          "headers": {"Authorization": format!("Bearer {SECRET}")}},
            "localhost": {"ports": [api.port]}
        }),
    )
    .await;
    let code = r#"
import json, os, socket, urllib.error, urllib.request
import pandas as pd

API, OTHER = "https://127.0.0.1:%d" % PORT, "https://127.0.0.1:%d" % OTHER_PORT

def status(url, **kw):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, **kw), timeout=20) as r:
            return [r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode()]

df = pd.read_csv(API + "/data.csv")
try:
    socket.create_connection(("1.1.1.1", 443), timeout=3)
    direct = "connected"
except OSError as e:
    direct = type(e).__name__
files = {n: open(os.path.join("/mnt/egress", n), errors="replace").read()
         for n in os.listdir("/mnt/egress") if n != "proxy.sock"}
result = {
    "rows": len(df), "total": int(df.amount.sum()),
    "echo": status(API + "/echo"),
    "post": status(API + "/post-me", data=b"x", method="POST"),
    "other_port": status(OTHER + "/other"),
    "redirected": status(API + "/redirect?to=" + OTHER + "/after-redirect"),
    "private": status("https://localhost:%d/private" % PORT),
    "plain": status("http://127.0.0.1:%d/plain" % PORT),
    "echo_header": urllib.request.urlopen(API + "/echo-header", timeout=20).headers.get("X-Echo"),
    "net": sorted(os.listdir("/sys/class/net")),
    "direct": direct,
    "secret_in_env": SECRET in json.dumps(dict(os.environ)),
    "secret_in_files": any(SECRET in v for v in files.values()),
}
"#;
    let code = code
        .replace("OTHER_PORT", &other.port.to_string())
        .replace("PORT", &api.port.to_string())
        .replace("SECRET", &format!("{SECRET:?}"));
    let ran = t.run_full(&code).await;
    let outcome = &ran.outcome;
    common::assert_ok(outcome);
    let r = &outcome.result;
    assert_eq!(
        (r["rows"].as_u64(), r["total"].as_u64()),
        (Some(3), Some(6)),
        "{r}"
    );
    assert_eq!(r["net"], serde_json::json!(["lo"]), "no interface but lo");
    assert_ne!(r["direct"], "connected", "no route out: {r}");
    assert_eq!(
        (r["secret_in_env"].as_bool(), r["secret_in_files"].as_bool()),
        (Some(false), Some(false))
    );
    // The API echoed the header it received: the code sees it redacted.
    let echo = r["echo"][1].as_str().unwrap();
    assert_eq!(r["echo"][0], 200);
    assert!(
        echo.contains("[redacted]") && !echo.contains(SECRET),
        "{echo}"
    );
    assert_eq!(
        r["echo_header"], "[redacted]",
        "a secret echoed in a header"
    );
    // Refusals are the proxy's own 403s, naming what to change.
    for (what, rule) in [
        ("post", "methods"),
        ("other_port", "port"),
        ("redirected", "port"),
        ("private", "private"),
        ("plain", "\"http\": true"),
    ] {
        assert_eq!(r[what][0], 403, "{what}: {r}");
        assert!(
            r[what][1].as_str().unwrap().contains(rule),
            "{what} names {rule}: {r}"
        );
    }
    // The API's own record: the allowed requests with the secret added, nothing refused.
    let got = api.requests();
    assert_eq!(
        api.paths(),
        [
            "GET /data.csv",
            "GET /echo",
            &format!(
                "GET /redirect?to=https://127.0.0.1:{}/after-redirect",
                other.port
            ),
            "GET /echo-header",
        ],
        "only allowed requests reached the API"
    );
    for request in &got {
        assert_eq!(
            request["headers"]["authorization"],
            format!("Bearer {SECRET}")
        );
    }
    assert_eq!(
        other.paths(),
        Vec::<String>::new(),
        "nothing reached the unlisted port"
    );
    // The response lists every request with its decision.
    let (records, more) = &ran.http_requests;
    assert_eq!(*more, 0);
    let decisions: Vec<(&str, u16)> = (records.iter())
        .map(|h| (h.decision.as_str(), h.status))
        .collect();
    assert_eq!(
        decisions,
        [
            ("sent", 200),
            ("sent", 200),
            ("refused", 403),
            ("refused", 403),
            ("sent", 302),
            ("refused", 403),
            ("refused", 403),
            ("refused", 403),
            ("sent", 200)
        ],
        "{records:?}"
    );
    assert_eq!(records[0].headers_added, ["authorization"]);
    t.finish().await;
}

#[tokio::test]
async fn a_tenant_without_entries_has_no_proxy_and_no_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let ca = test_ca(dir.path());
    let api = Api::start(&ca, dir.path(), "api");
    let t = server_with(dir.path(), &ca, serde_json::json!({})).await;
    let code = format!(
        r#"
import os, urllib.request
try:
    urllib.request.urlopen("https://127.0.0.1:{}/x", timeout=5)
    reached = True
except OSError:
    reached = False
result = {{"reached": reached, "proxy": os.environ.get("HTTPS_PROXY"), "dir": os.path.exists("/mnt/egress")}}
"#,
        api.port
    );
    let outcome = t.run(&code).await;
    common::assert_ok(&outcome);
    assert_eq!(
        outcome.result,
        serde_json::json!({"reached": false, "proxy": null, "dir": false})
    );
    assert!(api.requests().is_empty());
    t.finish().await;
}

#[tokio::test]
async fn a_connection_over_the_bound_is_refused_while_a_tunnel_holds_its_slot() {
    let dir = tempfile::tempdir().unwrap();
    let ca = test_ca(dir.path());
    let api = Api::start(&ca, dir.path(), "api");
    let upstreams = dir.path().join("upstreams.json");
    let entry = serde_json::json!({"127.0.0.1": {"ports": [api.port], "private": true}});
    std::fs::write(&upstreams, serde_json::json!({"egress": entry}).to_string()).unwrap();
    let (ca_file, sockets) = (ca.ca.clone(), dir.path().join("sockets"));
    let t = TestApp::start_with(move |c| {
        c.gateway.upstreams = Some(upstreams);
        c.egress.egress_ca_file = Some(ca_file);
        c.egress.egress_socket_dir = Some(sockets);
        c.egress.egress_max_connections = 1;
    })
    .await;
    // One tunnel opened by hand and held; the next connection finds no slot, and its CONNECT
    // is refused at once (a tunnel would cost what the bound is there to limit).
    let code = r#"
import os, socket, urllib.error, urllib.request
port = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
held = socket.create_connection(("127.0.0.1", port))
held.sendall(b"CONNECT 127.0.0.1:API HTTP/1.1\r\nHost: 127.0.0.1:API\r\n\r\n")
opened = held.recv(200).decode()
try:
    urllib.request.urlopen("https://127.0.0.1:API/data.csv", timeout=20)
    second = "reached"
except OSError as e:
    second = str(e)
result = {"opened": opened.split("\r\n")[0], "second": second}
"#
    .replace("API", &api.port.to_string());
    let ran = t.run_full(&code).await;
    common::assert_ok(&ran.outcome);
    let r = &ran.outcome.result;
    assert!(r["opened"].as_str().unwrap().contains("200"), "{r}");
    assert!(r["second"].as_str().unwrap().contains("403"), "{r}");
    let refused: Vec<_> = (ran.http_requests.0.iter())
        .map(|h| (h.method.as_str(), h.rule.as_deref()))
        .collect();
    assert_eq!(refused, [("CONNECT", Some("bounds"))], "{r}");
    assert_eq!(api.paths(), Vec::<String>::new(), "nothing reached the API");
    t.finish().await;
}

/// What the code that reads the people API and passes its values on returns.
const PEOPLE_CODE: &str = r#"
import json, urllib.error, urllib.parse, urllib.request
API, OTHER = "https://127.0.0.1:%d" % PORT, "https://localhost:%d" % OTHER_PORT

def call(url, data=None, headers={}):
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=20) as r:
            return [r.status, r.read().decode(), dict(r.headers)]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode(), dict(e.headers)]

people = call(API + "/people.json")
person = json.loads(people[1])["people"][0]
email, q = person["email"], urllib.parse.quote
result = {
    "people": people, "email": email, "visits": person["visits"],
    "detokenized": detokenize_pii(email),
    "binary": call(API + "/people.bin"),
    "compressed": call(API + "/people.gz"),
    "user_lookup": call(API + "/lookup?email=" + q(USER), headers={"X-Customer": USER}),
    "api_lookup": call(API + "/lookup?email=" + q(email)),
    "notify": call(OTHER + "/notify", data=json.dumps({"to": email, "cc": USER}).encode(),
                   headers={"Content-Type": "application/json"}),
}
"#;

#[tokio::test]
async fn personal_data_from_a_listed_api_enters_as_tokens_and_leaves_only_where_a_rule_allows() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, api, other) = two_apis(dir.path());
    // The API receives only the user's values, and its own are withheld from it: its
    // responses enter tokenized. The other API may receive the first API's values.
    let t = server_with(
        dir.path(),
        &ca,
        serde_json::json!({
            "127.0.0.1": {"ports": [api.port], "private": true,
                          "pii": {"restore_from": ["user"], "otherwise": "refuse"}},
            "localhost": {"ports": [other.port], "private": true, "methods": ["POST"],
                          "pii": {"restore_from": ["http:127.0.0.1"], "otherwise": "keep"}}
        }),
    )
    .await;
    let client = common::mcp_client(t.app.clone()).await;
    let (_, typed) = common::call_tool(
        &client,
        "sanitize_pii",
        serde_json::json!({"text": "bo.user@example.com"}),
    )
    .await;
    let user = typed["sanitized_text"].as_str().unwrap().to_string();
    assert!(user.starts_with("[EMAIL_"), "{typed}");
    let code = PEOPLE_CODE
        .replace("OTHER_PORT", &other.port.to_string())
        .replace("PORT", &api.port.to_string())
        .replace("USER", &format!("{user:?}"));
    let ran = t.run_full(&code).await;
    common::assert_ok(&ran.outcome);
    let r = &ran.outcome.result;
    // In: the API's values reach the code as tokens the code cannot undo.
    assert_eq!(r["people"][0], 200, "{r}");
    let email = r["email"].as_str().unwrap();
    assert!(
        email.starts_with("[EMAIL_") && !r["people"][1].as_str().unwrap().contains('@'),
        "{r}"
    );
    assert_eq!(
        r["people"][2]["x-owner"].as_str(),
        Some(email),
        "a header too: {r}"
    );
    assert_eq!(
        (r["visits"].as_u64(), r["detokenized"].as_str()),
        (Some(12), Some(email))
    );
    assert_eq!(r["binary"][0], 502, "{r}");
    assert!(r["binary"][1].as_str().unwrap().contains("binary"), "{r}");
    assert_eq!(r["compressed"][0], 502, "{r}");
    assert!(
        r["compressed"][1]
            .as_str()
            .unwrap()
            .contains("compressed (gzip)"),
        "{r}"
    );
    // Out: the user's value restored into the query and a header; the API's own value in a
    // request to the API refused (absent from its record); passed to the other API restored,
    // the user's value beside it kept as its token.
    assert_eq!(r["user_lookup"][0], 200, "{r}");
    assert_eq!(r["api_lookup"][0], 403, "{r}");
    assert!(
        r["api_lookup"][1].as_str().unwrap().contains("\"pii\""),
        "{r}"
    );
    assert_eq!(
        api.paths(),
        [
            "GET /people.json",
            "GET /people.bin",
            "GET /people.gz",
            "GET /lookup?email=bo.user%40example.com"
        ]
    );
    let got = api.requests();
    assert_eq!(got[0]["headers"]["accept-encoding"], "identity");
    assert_eq!(got[3]["headers"]["x-customer"], "bo.user@example.com");
    assert_eq!(r["notify"][0], 200, "{r}");
    let sent: Value = serde_json::from_str(other.requests()[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        sent,
        serde_json::json!({"to": "ann.lee@example.com", "cc": user})
    );
    // The records: what was tokenized, restored, withheld; never a value.
    let records = &ran.http_requests.0;
    assert!(records[0].tokenized, "{records:?}");
    assert_eq!(records[1].rule.as_deref(), Some("pii"));
    assert_eq!(records[3].tokens.restored[0].origin, "user");
    assert_eq!(records[4].tokens.withheld[0].origin, "http:127.0.0.1");
    assert_eq!(records[5].tokens.restored[0].origin, "http:127.0.0.1");
    assert!(!format!("{records:?}").contains('@'), "{records:?}");
    drop(client);
    t.finish().await;
}

/// The official MCP Python SDK against the real binary (`tests/python/egress_client.py`): both
/// protocol eras over stdio (a `confirm` POST accepted reaches the API, declined it does not),
/// and two HTTP tenants of which only the one an entry names reaches its API. What arrived is
/// read from the APIs' own records.
#[test]
fn python_clients_of_both_eras_and_http_tenants_reach_only_what_their_entries_allow() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, api, other) = two_apis(dir.path());
    let upstreams = dir.path().join("upstreams.json");
    let egress = serde_json::json!({
        "127.0.0.1": {"ports": [api.port], "private": true, "methods": ["GET", "POST"],
                      "policy": {"default": "allow", "methods": {"POST": "confirm"}}},
        "localhost": {"ports": [other.port], "private": true, "tenants": ["sales"]}
    });
    std::fs::write(
        &upstreams,
        serde_json::json!({"egress": egress}).to_string(),
    )
    .unwrap();
    let python = common::upstreams::sdk_python();
    let status = std::process::Command::new(&python)
        .args(["-W", "ignore::DeprecationWarning"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/python/egress_client.py"
        ))
        .arg(common::BIN)
        .arg(dir.path().join("data"))
        .args([&upstreams, &ca.ca, &api.log, &other.log])
        .args([api.port.to_string(), other.port.to_string()])
        .envs(common::python_client_env())
        .status()
        .expect("run the Python client (CEM_TEST_PYTHON: an interpreter with the main pins of tests/upstream-pins.txt)");
    assert!(status.success(), "the Python client failed: {status}");
}
