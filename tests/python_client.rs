//! The official MCP Python SDK (`mcp` from PyPI) as an out-of-tree client: it runs the README
//! examples of the Python server this one replaces (the original examples,
//! `tests/python/original_examples.py`) against the real binary over stdio and streamable HTTP.
//! The interpreter is `$CEM_TEST_PYTHON` (CI points it at a venv with `mcp` installed), else a
//! venv the tests make with the pinned SDK (`common::upstreams::sdk_python`).

mod common;

#[test]
fn official_python_client_runs_the_original_examples() {
    common::run_python_client("original_examples.py");
}
