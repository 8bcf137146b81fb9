//! The baseline of the stdio benches: `docker run --rm` of the sandbox image with the
//! isolation flags of the server's containers, timed from the docker CLI.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use tokio::process::Command;

use super::stdio::ms;

const SECCOMP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/images/python/seccomp.json");

/// A temporary directory holding a `workspace` the sandbox user (10001) can write, to
/// bind-mount; the directory goes when the first is dropped.
pub fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).expect("workspace dir");
    std::fs::set_permissions(
        &workspace,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .expect("chmod workspace");
    (dir, workspace)
}

/// `docker run --rm` with the isolation flags of the server's containers, `extra` flags, and
/// `python3 -c CODE`. Without `--init` when `extra` is not empty: the engine's init is mounted
/// at /sbin/docker-init, under /usr on a merged-/usr image, where a bind of /usr hides it.
pub fn docker_run_args(image: &str, workspace: &Path, extra: &[String], code: &str) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "--rm",
        "-i",
        "--network",
        "none",
        "--read-only",
        "--tmpfs",
        "/tmp:rw,nosuid,nodev,noexec,size=64m",
        "--init",
        "--user",
        "10001:10001",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
    ]
    .map(String::from)
    .into();
    if !extra.is_empty() {
        args.retain(|a| a != "--init");
    }
    args.push("--security-opt".into());
    args.push(format!("seccomp={SECCOMP}"));
    args.extend(
        [
            "--memory",
            "500m",
            "--memory-swap",
            "500m",
            "--pids-limit",
            "128",
            "--log-driver",
            "none",
            "-v",
        ]
        .map(String::from),
    );
    args.push(format!("{}:/workspace", workspace.display()));
    args.extend(extra.iter().cloned());
    args.extend([image, "python3", "-c", code].map(String::from));
    args
}

/// One checked `docker run`; returns its latency in ms and its stdout.
pub async fn docker_run(args: &[String]) -> (f64, String) {
    let t = Instant::now();
    let out = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run the docker CLI");
    let elapsed = ms(t.elapsed());
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success(),
        "docker run failed ({}): stdout {stdout:?}, stderr {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    (elapsed, stdout)
}

/// One checked `docker run` of `print(1)`; returns its latency in ms.
pub async fn docker_print1(args: &[String]) -> f64 {
    let (t, out) = docker_run(args).await;
    assert_eq!(out, "1", "docker run printed {out:?}");
    t
}
