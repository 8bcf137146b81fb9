//! Personal data that cannot flow where it should not (the upstreams' `pii` rules), through the
//! official MCP Python SDK against the real binary (`tests/python/pii_flows.py`), with the rmcp
//! fixture as a CRM, a mail tool, a "web search" and an issue tracker that each record what
//! they receive, and `mcp-server-sqlite` from PyPI as a second source: the CRM's values reach
//! the code as tokens, the mail tool receives them restored, the search as tokens, the tracker
//! not at all (refused); a value the user typed follows the user's rule; forged tokens are
//! never restored; origins survive a move to another server sharing the key and the data;
//! the audit trail counts tokens by type and origin; a bad rule stops the start at its line.
//! Every "received" is read from the upstream's own record, never from the server's words.

use serde_json::json;

use super::python_client;
use crate::common::upstreams;

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
