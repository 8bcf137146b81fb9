//! gVisor's runsc against a private engine this test starts (`tests/engines/gvisor.sh`): an
//! execution under `--runtime runsc` works, and a start that fails after runsc created its
//! sandbox leaves no runsc process behind. That failure is made with `runsc-networked`, the
//! script's registration without `--network=none`, under which runsc refuses every start on
//! this kind of kernel ("cannot run with network enabled in root network namespace"); the
//! engine then removes the container and would leave the containerd shim, runsc's sandbox and
//! its gofer running.
//!
//! The security suite, doctor and the execution tests run under runsc in CI's own gVisor step
//! (README, "Running the tests"); this file is what needs the failing registration.

mod common;

use std::path::PathBuf;
use std::process::Command;

use serde_json::json;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/engines/gvisor.sh");

/// A private engine with runsc registered, taken down with everything `up` made when dropped.
struct GvisorEngine {
    dir: PathBuf,
    docker_host: String,
}

impl GvisorEngine {
    fn up() -> Self {
        let dir = PathBuf::from(format!(
            "/tmp/cem-gvisor-test-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        ));
        let out = Command::new("bash")
            .arg(SCRIPT)
            .arg("up")
            .arg(&dir)
            .output()
            .expect("run gvisor.sh");
        // Taken down when dropped, whatever `up` got to.
        let mut engine = Self {
            dir,
            docker_host: String::new(),
        };
        assert!(
            out.status.success(),
            "gvisor.sh up failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        let host = last
            .strip_prefix("DOCKER_HOST=")
            .unwrap_or_else(|| panic!("gvisor.sh up printed no DOCKER_HOST: {stdout}"));
        engine.docker_host = host.to_string();
        engine
    }

    fn docker(&self, args: &[&str]) -> String {
        let out = Command::new("docker")
            .args(args)
            .env("DOCKER_HOST", &self.docker_host)
            .output()
            .expect("docker");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for GvisorEngine {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(SCRIPT)
            .arg("down")
            .arg(&self.dir)
            .status();
    }
}

/// The pids of this host's processes that runsc started (its sandboxes and gofers).
fn runsc_processes() -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let program = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        if program.starts_with(b"runsc-") {
            found.push(format!("{pid} {}", String::from_utf8_lossy(program)));
        }
    }
    found
}

/// [`runsc_processes`] once none is left, or after 10 s (killed processes take a moment).
async fn runsc_processes_after_a_while() -> Vec<String> {
    for _ in 0..50 {
        if runsc_processes().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    runsc_processes()
}

#[tokio::test]
#[ignore = "needs root: starts a private engine with gVisor (tests/engines/gvisor.sh)"]
async fn under_runsc_code_runs_and_a_failed_start_leaves_no_runsc_process() {
    common::require_root("a private engine with gVisor");
    let engine = GvisorEngine::up();
    let host = engine.docker_host.clone();
    let env = [("DOCKER_HOST", host.as_str())];

    // The registration that holds: code runs, under gVisor's kernel.
    let dir = tempfile::tempdir().unwrap();
    let (mut child, client) = common::spawn_server_with(
        dir.path(),
        &env,
        &["--runtime", "runsc", "--image-profile", "minimal"],
    )
    .await;
    let (err, v) = common::call_tool(
        &client,
        "execute_code",
        json!({"code": "import platform\nprint(platform.release())"}),
    )
    .await;
    assert!(!err, "{v}");
    // gVisor's kernel reports a release of its own (4.4.0), not the host's.
    assert_eq!(v["output"], json!(["4.4.0"]), "{v}");
    client.cancel().await.unwrap();
    let _ = child.wait().await;

    // The registration without --network=none: runsc creates the sandbox, the start fails.
    let before = runsc_processes_after_a_while().await;
    assert!(before.is_empty(), "runsc processes before: {before:?}");
    let dir = tempfile::tempdir().unwrap();
    let (mut child, client) = common::spawn_server_with(
        dir.path(),
        &env,
        &[
            "--runtime",
            "runsc-networked",
            "--image-profile",
            "minimal",
            "--pool-size",
            "0",
        ],
    )
    .await;
    let (err, v) = common::call_tool(&client, "execute_code", json!({"code": "print(1)"})).await;
    assert!(err, "the start was expected to fail: {v}");
    let text = v.to_string();
    assert!(
        text.contains("network enabled in root network namespace"),
        "not the failure this test makes: {text}"
    );
    // The server killed the shim, the sandbox and the gofer before answering.
    let left = runsc_processes_after_a_while().await;
    assert!(left.is_empty(), "runsc processes left: {left:?}");
    client.cancel().await.unwrap();
    let _ = child.wait().await;
    let containers = engine.docker(&[
        "ps",
        "-aq",
        "--filter",
        "label=io.code-execution-mcp.managed",
    ]);
    assert!(
        containers.trim().is_empty(),
        "containers left: {containers}"
    );
}
