//! Real upstream MCP servers for the gateway tests, and the official MCP Python SDK for the
//! client tests: Python packages from PyPI in virtual environments the tests make themselves
//! (once per target directory, `python3 -m venv`), and the rmcp fixture of
//! `tests/upstream_fixture` (built by `cargo test` as an example).
//!
//! `CEM_TEST_PYTHON`, `CEM_TEST_UPSTREAMS_PYTHON` and `CEM_TEST_SQLITE_PYTHON` may point at interpreters that
//! already have the packages (CI prepares them); otherwise they are installed from PyPI here,
//! and a failed install fails the test with pip's output (never a silent pass).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncBufReadExt;

/// `tests/upstream-pins.txt`, which `.ci/run` reads too: `ENVIRONMENT REQUIREMENT` lines.
const PINS: &str = include_str!("../upstream-pins.txt");

/// The pinned requirements of one environment of [`PINS`].
pub fn pins(environment: &str) -> Vec<&'static str> {
    let pins: Vec<&str> = PINS
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once(' '))
        .filter(|(env, _)| *env == environment)
        .map(|(_, requirement)| requirement.trim())
        .collect();
    assert!(
        !pins.is_empty(),
        "tests/upstream-pins.txt has no {environment} lines"
    );
    pins
}

static INSTALL: Mutex<()> = Mutex::new(());

/// `target/<profile>`: the test binary is `target/<profile>/deps/<name>`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary is in target/<profile>/deps")
        .to_path_buf()
}

/// An interpreter with `packages` installed, from `env_var` or a venv named `name`.
pub fn python_with(env_var: &str, name: &str, packages: &[&str]) -> PathBuf {
    if let Ok(p) = std::env::var(env_var) {
        return PathBuf::from(p);
    }
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let venv = profile_dir().join("test-venvs").join(name);
    let python = venv.join("bin/python");
    let stamp = venv.join(".installed");
    let wanted = packages.join(" ");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return python;
    }
    let run = |cmd: &mut Command, what: &str| {
        let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            out.status.success(),
            "{what} failed (set {env_var} to an interpreter with {wanted} to skip the install):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    if !python.exists() {
        run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv",
        );
    }
    run(
        Command::new(&python)
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .args(packages),
        "pip install",
    );
    std::fs::write(&stamp, &wanted).expect("write the install stamp");
    python
}

pub fn main_python() -> PathBuf {
    python_with("CEM_TEST_UPSTREAMS_PYTHON", "upstreams", &pins("main"))
}

/// The interpreter of the official MCP Python SDK the client tests drive: `$CEM_TEST_PYTHON`,
/// else the same virtual environment as [`main_python`] (made on first use).
pub fn sdk_python() -> PathBuf {
    python_with("CEM_TEST_PYTHON", "upstreams", &pins("main"))
}

pub fn sqlite_python() -> PathBuf {
    python_with("CEM_TEST_SQLITE_PYTHON", "sqlite", &pins("sqlite"))
}

/// The rmcp fixture upstream (`tests/upstream_fixture`), which `cargo test` builds.
pub fn fixture_bin() -> PathBuf {
    let bin = profile_dir().join("examples/upstream-fixture");
    assert!(
        bin.exists(),
        "{} is missing: `cargo test` builds it (or `cargo build --example upstream-fixture`)",
        bin.display()
    );
    bin
}

/// Writes an upstreams file `{"mcpServers": servers}` into `dir`.
pub fn upstreams_file(dir: &Path, servers: Value) -> PathBuf {
    let path = dir.join("upstreams.json");
    std::fs::write(
        &path,
        serde_json::json!({ "mcpServers": servers }).to_string(),
    )
    .expect("write the upstreams file");
    path
}

/// A stdio entry running the fixture with `args`.
pub fn fixture_entry(args: &[&str]) -> Value {
    serde_json::json!({"command": fixture_bin(), "args": args})
}

/// The fixture serving streamable HTTP on a free loopback port; killed when dropped.
pub struct HttpFixture {
    _child: tokio::process::Child,
    pub url: String,
}

pub async fn http_fixture() -> HttpFixture {
    let mut child = tokio::process::Command::new(fixture_bin())
        .args(["--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        // Its stderr quotes the key (`leak` "stderr"): not for the test log.
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the fixture over HTTP");
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the fixture says where it listens")
        .unwrap()
        .expect("a first line");
    let url = first
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    HttpFixture { _child: child, url }
}
