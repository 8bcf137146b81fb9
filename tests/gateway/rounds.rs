//! Confirmation of upstream calls on both protocol eras, and long executions as tasks, through
//! the official MCP Python SDK against the real binary over stdio and HTTP with two tenants
//! (`tests/python/confirm_rounds.py`): on 2026-07-28 the question travels as an
//! `InputRequiredResult` and the retry resumes the execution that asked; forged, replayed,
//! other tenants', other servers' and expired request states run nothing (read from the `stamp`
//! upstream's own log of the calls it received); a paused execution nobody answers and a
//! cancelled task leave no container.

use serde_json::json;

use crate::common::upstreams;

#[test]
fn confirmations_pause_and_resume_the_execution_that_asked() {
    let python = upstreams::sdk_python();
    let dir = tempfile::tempdir().unwrap();
    let stamp = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/stamp_server.py");
    // The script finds the log through this file.
    let log = dir.path().join("stamp-calls.jsonl");
    let file = upstreams::upstreams_file(
        dir.path(),
        json!({
            "stamp": {"command": python, "args": [stamp], "env": {"STAMP_LOG": log},
                      "policy": {"tools": {"stamp": "confirm"}}},
            "time": {"command": upstreams::main_python(),
                     "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                     "policy": {"default": "confirm"}},
        }),
    );
    let data = dir.path().join("data");
    super::python_client("confirm_rounds.py", &[&data, &file]);
}
