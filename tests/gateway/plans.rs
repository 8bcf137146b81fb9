//! Writes approved as one plan (policy `plan`), through the official MCP Python SDK against the
//! real binary over stdio and HTTP with two tenants, on both protocol eras
//! (`tests/python/plan_rounds.py`), with `mcp-server-sqlite` from PyPI and the rmcp fixture as
//! upstreams: 40 planned updates asked once and applied exactly on accept; nothing sent on
//! decline, cancel, expiry, a forged, altered, replayed or other tenant's request state, or a
//! plan past its bounds (read from the database and the fixture's record file, never from the
//! server's words); stop on error; personal data restored for the user and the upstream only;
//! the outcomes in a session's next call and the plan in the audit trail.

use serde_json::json;

use super::python_client;
use crate::common::upstreams;

#[test]
fn plans_are_asked_once_and_applied_exactly_as_approved() {
    let sqlite = upstreams::sqlite_python();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crm.db");
    let record = dir.path().join("fixture-rows.jsonl");
    let mut fixture = upstreams::fixture_entry(&[]);
    fixture["env"] = json!({"FIXTURE_RECORD": record});
    fixture["policy"] = json!({"default": "plan"});
    let file = upstreams::upstreams_file(
        dir.path(),
        json!({
            "sqlite": {"command": sqlite.with_file_name("mcp-server-sqlite"),
                       "args": ["--db-path", db],
                       "policy": {"tools": {"write_query": "plan"}}},
            "fixture": fixture,
        }),
    );
    let data = dir.path().join("data");
    python_client("plan_rounds.py", &[&data, &file, &db, &record]);
}
