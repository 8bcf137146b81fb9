//! Personal data that cannot flow where it should not (the upstreams' `pii` rules), through the
//! official MCP Python SDK against the real binary (`tests/python/pii_flows.py`), with the rmcp
//! fixture as a CRM, a mail tool, a "web search" and an issue tracker that each record what
//! they receive, and `mcp-server-sqlite` from PyPI as a second source: the CRM's values reach
//! the code as tokens, the mail tool receives them restored, the search as tokens, the tracker
//! not at all (refused); a value the user typed follows the user's rule; forged tokens are
//! never restored; origins survive a move to another server sharing the key and the data;
//! the audit trail counts tokens by type and origin; a bad rule stops the start at its line.
//! Every "received" is read from the upstream's own record, never from the server's words.
//!
//! The refusals at start, through the real binary's exit status and stderr: rules with
//! `--pii-output off`, and a rule naming an origin that does not exist; neither starts the
//! ruled upstream.

use std::process::{Command, ExitStatus, Stdio};

use serde_json::{Value, json};

use super::python_client;
use crate::common::{self, upstreams};

#[test]
fn personal_data_flows_only_where_each_upstreams_rule_allows() {
    let sqlite = upstreams::sqlite_python();
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let recording = |name: &str| {
        let log = logs.join(format!("{name}.jsonl"));
        upstreams::fixture_entry(&["--calls-log", log.to_str().unwrap()])
    };
    let (mut mail, mut search, mut tracker) =
        (recording("mail"), recording("search"), recording("tracker"));
    mail["pii"] = json!({"restore_from": ["crm", "user"]});
    mail["policy"] = json!({"tools": {"echo": "confirm"}});
    search["pii"] = json!({"restore_from": ["user"], "otherwise": "keep"});
    tracker["pii"] = json!({"restore_from": ["user"], "otherwise": "refuse"});
    let db = dir.path().join("contacts.db");
    let servers = json!({"mcpServers": {
        "crm": upstreams::fixture_entry(&[]),
        "mail": mail,
        "search": search,
        "tracker": tracker,
        "sqlite": {"command": sqlite.with_file_name("mcp-server-sqlite"), "args": ["--db-path", db]},
    }});
    // Written as people write it, one key a line, so a refusal's line number means something.
    let file = dir.path().join("upstreams.json");
    std::fs::write(&file, serde_json::to_string_pretty(&servers).unwrap()).unwrap();
    let key = dir.path().join("pii.key");
    std::fs::write(&key, "ab".repeat(32)).unwrap();
    let data = dir.path().join("data");
    python_client("pii_flows.py", &[&data, &file, &logs, &db, &key]);
}

/// `serve` over stdio (stdin closed) with the upstreams file `servers` written as people write
/// it, one key a line, and `args` besides: its exit status, its stderr, the file's text and
/// whether the upstream `tracker` was ever started (it touches a marker before it runs).
fn serve_with(servers: Value, args: &[&str]) -> (ExitStatus, String, String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("tracker-started");
    let mut servers = servers;
    servers["mcpServers"]["tracker"] = json!({
        "command": "sh",
        "args": ["-c", "touch \"$0\" && exec \"$1\"", marker, upstreams::fixture_bin()],
        "pii": servers["mcpServers"]["tracker"]["pii"].clone(),
    });
    let file = dir.path().join("upstreams.json");
    let text = serde_json::to_string_pretty(&servers).unwrap();
    std::fs::write(&file, &text).unwrap();
    let out = Command::new(common::BIN)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--workspace")
        .arg(dir.path().join("ws"))
        .arg("--upstreams")
        .arg(&file)
        .args(args)
        .envs(common::python_client_env())
        // No engine answers there: the refusal must come from the checks made before the
        // engine is asked anything, or the engine's error would be all the user saw.
        .env("DOCKER_HOST", "unix:///nonexistent/cem-no-engine.sock")
        .stdin(Stdio::null())
        .output()
        .expect("run the server");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status, stderr, text, marker.exists())
}

#[test]
fn flow_rules_with_pii_output_off_refuse_to_start_and_say_what_to_do() {
    let servers = json!({"mcpServers": {
        "crm": upstreams::fixture_entry(&[]),
        "tracker": {"pii": {"restore_from": ["user"], "otherwise": "refuse"}},
    }});
    let (status, stderr, _, started) = serve_with(servers, &["--pii-output", "off"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("sets pii rules")
            && stderr.contains("`tracker`")
            && stderr.contains("--pii-output off")
            && stderr.contains("Remove the rules, or run with --pii-output tokenize"),
        "{stderr}"
    );
    assert!(!started, "the ruled upstream was started: {stderr}");
}

#[test]
fn a_rule_naming_an_unknown_origin_refuses_to_start_naming_its_line() {
    let servers = json!({"mcpServers": {
        "crm": upstreams::fixture_entry(&[]),
        "tracker": {"pii": {"restore_from": ["crm", "usr"]}},
    }});
    let (status, stderr, text, started) = serve_with(servers, &[]);
    let line = 1 + text.lines().position(|l| l.contains("\"usr\"")).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("upstreams.json")
            && stderr.contains("upstream `tracker`")
            && stderr.contains(&format!("\"usr\" (line {line})"))
            && stderr.contains("(crm, tracker)")
            && stderr.contains("user, workspace, sandbox, unknown, *")
            && stderr.contains("name the servers and origins"),
        "{stderr}"
    );
    assert!(!started, "an upstream was started: {stderr}");
}
