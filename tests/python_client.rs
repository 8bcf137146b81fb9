//! The official MCP Python SDK (`mcp` from PyPI) as an out-of-tree client: it runs the README
//! examples of the Python server this one replaces (the original examples,
//! `tests/python/original_examples.py`) against the real binary over stdio and streamable HTTP.
//! The interpreter is `$CEM_TEST_PYTHON` (CI points it at a venv with `mcp` installed), else
//! `python3`.

use std::process::Command;

#[test]
fn official_python_client_runs_the_original_examples() {
    let python = std::env::var("CEM_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_sdk = Command::new(&python)
        .args(["-c", "import mcp"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_sdk,
        "the official MCP Python SDK is missing for {python}: `python3 -m pip install mcp==2.3.0`, or set CEM_TEST_PYTHON to an interpreter that has it"
    );
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/original_examples.py"
    );
    let status = Command::new(&python)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_code-execution-mcp"))
        .arg(dir.path())
        .status()
        .expect("run the Python client");
    assert!(status.success(), "the Python client failed: {status}");
}
