//! The docker CLI for tests and benches that look at or prepare the engine from outside the
//! server: one checked call, its stdout back. benches/common includes this file too.

use std::io::Write;
use std::process::{Command, Stdio};

/// `docker ARGS` against the engine of this process's environment (`DOCKER_HOST`); panics
/// with the CLI's stderr unless it succeeds. Its stdout, trimmed.
pub fn docker(args: &[&str]) -> String {
    checked(Command::new("docker").args(args), args, "")
}

/// [`docker`] against the engine at `host` (`docker -H HOST`), e.g. a private engine.
pub fn docker_at(host: &str, args: &[&str]) -> String {
    checked(
        Command::new("docker").args(["-H", host]).args(args),
        args,
        "",
    )
}

/// [`docker`] with `input` on its stdin (e.g. the Dockerfile of `docker build -`).
pub fn docker_with_input(args: &[&str], input: &str) -> String {
    checked(Command::new("docker").args(args), args, input)
}

/// Runs `command` with `input` on its stdin; its stdout, trimmed, or a panic naming `args`
/// and quoting stderr. `docker build` uses the classic builder (`DOCKER_BUILDKIT=0`), which
/// prints only the image id under `--quiet` and builds `FROM` a local image id.
fn checked(command: &mut Command, args: &[&str], input: &str) -> String {
    let mut child = command
        .env("DOCKER_BUILDKIT", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the docker CLI");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().expect("the docker CLI's output");
    assert!(
        out.status.success(),
        "docker {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
