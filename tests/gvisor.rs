//! gVisor's runsc against a private engine each test starts (`tests/engines/gvisor.sh`): an
//! execution under `--runtime runsc` works; a start that fails after runsc created its sandbox
//! leaves neither the containerd shim that ran the container nor a runsc process behind; and
//! `serve` refuses a registration without `--oci-seccomp`.
//!
//! The failed start is made with `runsc-networked`, the script's registration without
//! `--network=none`, under which runsc refuses every start on this kind of kernel ("cannot run
//! with network enabled in root network namespace"); the engine then removes the container and
//! would leave the containerd shim, runsc's sandbox and its gofer running. The refusal is made
//! with `runsc-no-seccomp`, the script's registration without `--oci-seccomp`, under which runsc
//! would ignore the sandbox's seccomp profile.
//!
//! The security suite, doctor and the execution tests run under runsc in CI's own gVisor step
//! (README, "Running the tests"); this file is what needs the faulty registrations.

mod common;

use std::path::PathBuf;
use std::process::Command;

use serde_json::json;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/engines/gvisor.sh");

/// One private engine at a time: `gvisor.sh up` and `down` change how `/tmp` is mounted.
static ENGINES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
        common::docker::docker_at(&self.docker_host, args)
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

/// What a failed start may leave on this host: the processes runsc started (its sandboxes and
/// gofers, `runsc-…`) and the containerd shims (`containerd-shim…`) of the containers `ids`,
/// which carry the id as `-id ID`.
fn leftovers(ids: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<String> = (cmdline.split(|b| *b == 0))
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let program = args.first().cloned().unwrap_or_default();
        let name = program.rsplit('/').next().unwrap_or_default();
        let shim_of_ours = name.starts_with("containerd-shim")
            && args
                .windows(2)
                .any(|w| w[0] == "-id" && ids.contains(&w[1]));
        if program.starts_with("runsc-") || shim_of_ours {
            found.push(format!("{pid} {}", args.join(" ")));
        }
    }
    found
}

/// [`leftovers`] once none is left, or after 10 s (killed processes take a moment).
async fn leftovers_after_a_while(ids: &[String]) -> Vec<String> {
    for _ in 0..50 {
        if leftovers(ids).is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    leftovers(ids)
}

#[tokio::test]
#[ignore = "needs root: starts a private engine with gVisor (tests/engines/gvisor.sh)"]
async fn under_runsc_code_runs_and_a_failed_start_leaves_no_runsc_process() {
    common::require_root("a private engine with gVisor");
    let _one_engine = ENGINES.lock().await;
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
    let before = leftovers_after_a_while(&[]).await;
    assert!(before.is_empty(), "runsc processes before: {before:?}");
    // Whole seconds, a second before the start and after the query: the CLI gives `--until`
    // in whole seconds, and a `--since` with nanoseconds inside the same second is refused.
    let since = (unix_seconds() - 1).to_string();
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
    // The server killed the shim, the sandbox and the gofer before answering. The engine's
    // events name the container the start made (the engine has removed it since).
    let created: Vec<String> = engine
        .docker(&[
            "events",
            "--since",
            &since,
            "--until",
            &(unix_seconds() + 1).to_string(),
            "--filter",
            "type=container",
            "--filter",
            "event=create",
            "--format",
            "{{.Actor.ID}}",
        ])
        .lines()
        .map(str::to_string)
        .collect();
    assert!(!created.is_empty(), "the engine created no container");
    let left = leftovers_after_a_while(&created).await;
    assert!(left.is_empty(), "shims or runsc processes left: {left:?}");
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

/// Seconds since the epoch, on the clock the private engine shares with this host.
fn unix_seconds() -> u64 {
    (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH))
        .expect("a clock after 1970")
        .as_secs()
}

/// `serve` with a runsc registration that lacks `--oci-seccomp` (runsc would ignore the
/// sandbox's seccomp profile) exits at once, non-zero, saying so and giving the registration to
/// use, and makes no container.
#[tokio::test]
#[ignore = "needs root: starts a private engine with gVisor (tests/engines/gvisor.sh)"]
async fn serve_refuses_a_runsc_registration_without_oci_seccomp() {
    common::require_root("a private engine with gVisor");
    let _one_engine = ENGINES.lock().await;
    let engine = GvisorEngine::up();
    let dir = tempfile::tempdir().unwrap();
    let mut serve = common::serve_command(
        dir.path(),
        &[
            "--runtime",
            "runsc-no-seccomp",
            "--image-profile",
            "minimal",
        ],
    );
    serve
        .env("DOCKER_HOST", &engine.docker_host)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), serve.output())
        .await
        .expect("serve exits within 120 s")
        .expect("run serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "serve started: {stderr}");
    assert!(
        stderr.contains(
            "runtime runsc-no-seccomp (gVisor) is registered without --oci-seccomp, so it ignores the sandbox's seccomp profile"
        ),
        "not the refusal: {stderr}"
    );
    assert!(
        stderr.contains(code_execution_mcp::sandbox::container::runtime::GVISOR_REGISTRATION),
        "no registration to use: {stderr}"
    );
    let containers = engine.docker(&["ps", "-aq"]);
    assert!(
        containers.trim().is_empty(),
        "containers made: {containers}"
    );
}
