//! The official MCP Python SDK (`mcp` from PyPI) as an out-of-tree client: it runs the README
//! examples of the Python server this one replaces (the original examples,
//! `tests/python/original_examples.py`) and reads the saved skills through the Skills extension
//! (`tests/python/skill_resources.py`), against the real binary over stdio and streamable HTTP,
//! each on a legacy session and on a 2026-07-28 one; and a first start that answers its client
//! before it is done, over stdio and over HTTP (`tests/python/first_answer.py`).
//! The interpreter is `$CEM_TEST_PYTHON` (CI points it at a venv with `mcp` installed), else a
//! venv the tests make with the pinned SDK (`common::upstreams::sdk_python`).

mod common;

#[test]
fn official_python_client_runs_the_original_examples() {
    common::run_python_client("original_examples.py");
}

#[test]
fn official_python_client_reads_saved_skills_as_mcp_skills() {
    common::run_python_client("skill_resources.py");
}

#[test]
fn the_first_start_answers_the_handshake_before_it_is_done() {
    common::run_python_client("first_answer.py");
}

/// The same over streamable HTTP, with and without a tenant's token: the server listens from
/// the start, and `/health` says it is starting until it has.
#[test]
fn the_first_start_over_http_answers_the_handshake_before_it_is_done() {
    common::run_python_client_with("first_answer.py", &[("FIRST_ANSWER_OVER", "http")]);
}
