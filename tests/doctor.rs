//! `code-execution-mcp doctor` as a user runs it: every check passes on this machine's engine
//! and names it, and each check, made to fail, prints FAIL with its fix. An unreachable engine
//! and a missing image fail for real; what this machine's engine cannot be made to lack (a
//! recent API, memory and swap limits, seccomp, a working container list) is reported by a fake
//! engine on a unix socket that answers the few Docker API calls the checks make (the memory
//! check itself, which runs a container, is covered by a unit test in src/cli/doctor/mod.rs).

mod common;

use std::path::PathBuf;
use std::process::Output;

use axum::Router;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::process::Command;

/// Runs doctor with `env` besides this process's (a variable given as empty is removed).
async fn doctor(env: &[(&str, &str)], args: &[&str]) -> (bool, String) {
    let mut command = Command::new(common::BIN);
    command.arg("doctor").args(args);
    for (name, value) in env {
        match value {
            &"" => command.env_remove(name),
            value => command.env(name, value),
        };
    }
    let out: Output = command.output().await.expect("run doctor");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.success(), stdout)
}

/// The line of check `name` and the fix line after it, if any.
fn check<'a>(stdout: &'a str, name: &str) -> (&'a str, Option<&'a str>) {
    let lines: Vec<&str> = stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.get(5..).is_some_and(|rest| rest.starts_with(name)))
        .unwrap_or_else(|| panic!("no {name} check in:\n{stdout}"));
    let fix = lines
        .get(at + 1)
        .filter(|l| l.trim_start().starts_with("fix:"));
    (lines[at], fix.copied())
}

fn assert_fails(stdout: &str, name: &str, fix_says: &str) {
    let (line, fix) = check(stdout, name);
    assert!(line.starts_with("FAIL"), "{name} should fail:\n{stdout}");
    let fix = fix.unwrap_or_else(|| panic!("{name} has no fix:\n{stdout}"));
    assert!(fix.contains(fix_says), "{name}'s fix: {fix}");
}

#[tokio::test]
async fn every_check_passes_on_this_engine_and_names_it() {
    let (ok, out) = doctor(&[], &["--image-profile", "minimal"]).await;
    assert!(ok, "{out}");
    for name in [
        "discovery",
        "engine",
        "cgroup limits",
        "seccomp",
        "storage",
        "image",
        "containers",
        "runtime",
        "memory limit",
        "setuid",
        "threads",
    ] {
        let (line, fix) = check(&out, name);
        assert!(line.starts_with("ok"), "{line}");
        assert!(fix.is_none(), "{out}");
    }
    // Under `CEM_RUNTIME` (CI runs this file under gVisor too), the checks that ran code ran
    // under it.
    let (runtime, _) = check(&out, "runtime");
    match std::env::var("CEM_RUNTIME").ok().filter(|r| !r.is_empty()) {
        Some(name) => assert!(runtime.contains(&format!("{name}: ")), "{runtime}"),
        None => assert!(runtime.contains("the engine's default"), "{runtime}"),
    }
    let (engine, _) = check(&out, "engine");
    let kind = if std::env::var("DOCKER_HOST").is_ok_and(|h| h.contains("podman")) {
        "Podman"
    } else {
        "Docker"
    };
    assert!(engine.contains(kind), "{engine}");
}

/// The storage check: a data directory not made yet passes on a fresh install; with
/// `--shared-data` a directory on this machine's own disk fails with how to mount the shared
/// volume, and a missing one fails too.
#[tokio::test]
async fn storage_passes_on_a_fresh_install_and_fails_local_data_that_must_be_shared() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let (_, out) = doctor(&[], &["--image-profile", "minimal", "--data-dir", data_arg]).await;
    let (line, fix) = check(&out, "storage");
    assert!(
        line.starts_with("ok") && line.contains("does not exist yet") && fix.is_none(),
        "{out}"
    );
    assert!(!data.exists(), "doctor created the data directory");

    let (ok, out) = doctor(&[], &["--data-dir", data_arg, "--shared-data"]).await;
    assert!(!ok, "{out}");
    assert_fails(&out, "storage", "create the data directory");

    std::fs::create_dir(&data).unwrap();
    let (ok, out) = doctor(&[], &["--data-dir", data_arg, "--shared-data"]).await;
    assert!(!ok, "{out}");
    assert!(
        check(&out, "storage").0.contains("local to this node"),
        "{out}"
    );
    assert_fails(&out, "storage", "mount the volume every node shares");
    let (_, out) = doctor(&[], &["--image-profile", "minimal", "--data-dir", data_arg]).await;
    let (line, _) = check(&out, "storage");
    assert!(line.starts_with("ok") && line.contains("writable"), "{out}");
}

/// The discovery check: the built-in model loads; a model file that is missing or damaged
/// fails with what to do (before the engine is asked anything: here there is none).
#[tokio::test]
async fn the_discovery_check_names_the_model_or_what_is_wrong_with_it() {
    let no_engine = [("DOCKER_HOST", "unix:///nonexistent/docker.sock")];
    let (_, out) = doctor(&no_engine, &[]).await;
    let (line, _) = check(&out, "discovery");
    assert!(
        line.starts_with("ok") && line.contains("semantic: sentence-transformers/all-MiniLM-L6-v2"),
        "{out}"
    );
    let dir = tempfile::tempdir().unwrap();
    let damaged = dir.path().join("model.q8");
    std::fs::write(&damaged, b"CEMSENT1 not a model").unwrap();
    for (path, says) in [
        (dir.path().join("absent.q8"), "cannot read"),
        (damaged, "damaged"),
    ] {
        let path = path.to_str().unwrap().to_owned();
        let (ok, out) = doctor(&no_engine, &["--discovery-model", &path]).await;
        assert!(!ok, "{out}");
        assert!(check(&out, "discovery").0.contains(says), "{out}");
        assert_fails(&out, "discovery", "leave out --discovery-model");
    }
    let (_, out) = doctor(&no_engine, &["--discovery", "lexical"]).await;
    let (line, _) = check(&out, "discovery");
    assert!(
        line.starts_with("ok") && line.contains("lexical (--discovery lexical)"),
        "{out}"
    );
}

#[tokio::test]
async fn an_unreachable_engine_fails_with_how_to_start_one() {
    let (ok, out) = doctor(&[("DOCKER_HOST", "unix:///nonexistent/docker.sock")], &[]).await;
    assert!(!ok, "{out}");
    assert_fails(&out, "engine", "start the Docker engine");
}

#[tokio::test]
async fn a_missing_image_fails_with_how_to_build_it() {
    let (ok, out) = doctor(&[], &["--image", "code-execution-mcp-sandbox:no-such-tag"]).await;
    assert!(!ok, "{out}");
    assert_fails(&out, "image", "code-execution-mcp image build");
}

#[tokio::test]
async fn an_old_api_missing_limits_and_seccomp_and_a_failing_list_each_fail_with_their_fix() {
    let engine = FakeEngine::start(Fake {
        api_version: "1.40",
        limits: false,
        seccomp: false,
        podman: true,
    })
    .await;
    let (ok, out) = doctor(&[("DOCKER_HOST", &engine.host())], &[]).await;
    assert!(!ok, "{out}");
    assert!(check(&out, "engine").0.contains("Podman 4.9.9"), "{out}");
    assert_fails(&out, "engine", "API 1.41");
    assert_fails(&out, "cgroup limits", "cgroup_enable=memory swapaccount=1");
    assert_fails(&out, "seccomp", "built with seccomp");
    assert_fails(&out, "image", "image build");
    assert_fails(&out, "containers", "check the engine");
}

/// `--runtime`: one the engine does not have fails with the registration to add; gVisor
/// registered without `--oci-seccomp` (which would ignore the seccomp profile) fails with the
/// registration that keeps it.
#[tokio::test]
async fn a_runtime_missing_or_registered_to_ignore_seccomp_fails_with_its_registration() {
    let engine = FakeEngine::start(Fake {
        api_version: "1.41",
        limits: true,
        seccomp: true,
        podman: false,
    })
    .await;
    let env = [
        ("DOCKER_HOST", engine.host()),
        ("CEM_RUNTIME", String::new()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (ok, out) = doctor(&env, &["--runtime", "kata-runtime"]).await;
    assert!(!ok, "{out}");
    assert!(
        check(&out, "runtime").0.contains("registered: runc, runsc"),
        "{out}"
    );
    assert_fails(&out, "runtime", r#""--oci-seccomp""#);
    let (ok, out) = doctor(&env, &["--runtime", "runsc"]).await;
    assert!(!ok, "{out}");
    assert!(
        check(&out, "runtime").0.contains("without --oci-seccomp"),
        "{out}"
    );
    assert_fails(
        &out,
        "runtime",
        r#""runtimeArgs": ["--network=none", "--oci-seccomp", "--host-uds=open"]"#,
    );
    let (_, out) = doctor(&env, &[]).await;
    let (line, fix) = check(&out, "runtime");
    assert!(line.starts_with("ok") && fix.is_none(), "{out}");
}

/// What the fake engine reports.
#[derive(Clone, Copy)]
struct Fake {
    api_version: &'static str,
    limits: bool,
    seccomp: bool,
    podman: bool,
}

/// A Docker API of a few answers on a unix socket in a temp directory; stops when dropped.
struct FakeEngine {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl FakeEngine {
    async fn start(fake: Fake) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("docker.sock");
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let app = Router::new().fallback(move |uri: Uri| answer(fake, uri));
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            _dir: dir,
            socket,
            task,
        }
    }

    fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }
}

impl Drop for FakeEngine {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers by path, with or without the `/vX.Y` prefix bollard adds.
async fn answer(fake: Fake, uri: Uri) -> Response {
    let path = uri.path();
    let path = match path.strip_prefix("/v") {
        Some(rest) => rest.find('/').map_or(path, |i| &rest[i..]),
        None => path,
    };
    let (name, version) = if fake.podman {
        ("Podman Engine", "4.9.9")
    } else {
        ("Engine", "20.10.99")
    };
    match path {
        "/_ping" => "OK".into_response(),
        "/version" => axum::Json(json!({
            "Version": version,
            "ApiVersion": fake.api_version,
            "MinAPIVersion": "1.24",
            "Os": "linux",
            "Arch": "amd64",
            "KernelVersion": "6.1.0-fake",
            "Components": [{"Name": name, "Version": version}],
        }))
        .into_response(),
        "/info" => axum::Json(json!({
            "MemoryLimit": fake.limits,
            "SwapLimit": fake.limits,
            "SecurityOptions": if fake.seccomp { vec!["name=seccomp,profile=default"] } else { vec![] },
            "CgroupVersion": "2",
            "Runtimes": {
                "runc": {"path": "runc"},
                "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]},
            },
        }))
        .into_response(),
        p if p.starts_with("/images/") => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"message": "No such image"})),
        )
            .into_response(),
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"message": "the fake engine does not do this"})),
        )
            .into_response(),
    }
}
