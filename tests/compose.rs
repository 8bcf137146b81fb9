//! The self-hosted stack as an administrator runs it: `compose.yaml` built and brought up with
//! Docker Compose against the real engine (Docker-out-of-Docker, the data directory on the
//! host), two tenants whose agents run the original examples
//! (`tests/python/original_examples.py`) side by side with the official MCP Python SDK over
//! authenticated streamable HTTP, neither seeing the other's files or skills, and both tenants'
//! data still there (and still apart) after the server container is restarted and after it is
//! recreated. The stack runs with its monitoring (`images/prometheus/compose.yaml`): its
//! Prometheus scrapes the server over the stack's network, sees the examples' executions and
//! loads the alert rules, while the server's metrics port stays unpublished.
//!
//! The server image carries the binary these tests were built with, on the base the sandbox
//! image was built on (the pinned one, or the offline base without a registry).

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use code_execution_mcp::sandbox::Backend;
use code_execution_mcp::sandbox::Engine;
use code_execution_mcp::sandbox::container::spec::{LABEL_MANAGED, LABEL_OWNER};
use tokio::process::Command;

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

#[tokio::test]
async fn compose_stack_serves_two_tenants_apart_and_keeps_their_data_across_restarts() {
    let Some(compose) = compose_command().await else {
        return common::skip(
            "compose_stack_serves_two_tenants_apart_and_keeps_their_data_across_restarts",
            "Docker Compose is missing (install the compose plugin, or `apt-get install docker-compose`)",
        );
    };
    let stack = Stack::up(compose).await;
    let url = stack.url().await;
    stack.wait_healthy(&url).await;

    // No token: a 401 that says what to send.
    code_execution_mcp::install_tls_provider();
    let http = reqwest::Client::new();
    let answer = http
        .post(format!("{url}/mcp"))
        .header("content-type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 401);
    assert!(
        answer
            .text()
            .await
            .unwrap()
            .contains("Authorization: Bearer"),
        "the 401 says what to send"
    );

    stack.python("examples", &url).await;
    stack.prometheus_sees_the_server().await;
    // The server (root in its container) keeps tenant directories 0700: a test run by another
    // user asks the server's container, whose /data is the host directory.
    let tenants = stack.data.path().join("tenants");
    for name in ["alice", "bob"] {
        let report = format!("tenants/{name}/workspace/report.txt");
        if rustix::process::geteuid().is_root() {
            assert!(
                tenants.join(name).join("workspace/report.txt").is_file(),
                "{name}'s workspace is in the host data directory"
            );
        }
        stack
            .compose(&[
                "exec",
                "-T",
                "server",
                "test",
                "-f",
                &format!("/data/{report}"),
            ])
            .await;
    }

    // The published port is chosen anew when the container starts again.
    stack.compose(&["restart", "server"]).await;
    let url = stack.url().await;
    stack.wait_healthy(&url).await;
    stack.python("after-restart", &url).await;

    stack.compose(&["up", "-d", "--force-recreate"]).await;
    let url = stack.url().await;
    stack.wait_healthy(&url).await;
    stack.python("after-restart", &url).await;

    stack.down().await;
}

/// The compose files of the stack: compose.yaml and its monitoring.
const FILES: [&str; 4] = ["-f", "compose.yaml", "-f", "images/prometheus/compose.yaml"];

/// The Prometheus image's tag. Kept between runs: it depends on its Dockerfile and the base
/// alone, and the engine's build cache makes the next build instant.
const PROMETHEUS_IMAGE: &str = "code-execution-mcp-prometheus:test";

/// One compose project with its own image tag, hostname, data directory and tokens; taken
/// down (containers, network, volumes, the server's image) when dropped, even after a failed
/// assertion.
struct Stack {
    project: String,
    image: String,
    data: tempfile::TempDir,
    secrets: tempfile::TempDir,
    tokens: (String, String),
    compose: Vec<String>,
    down: bool,
}

impl Stack {
    async fn up(compose: Vec<String>) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let secrets = tempfile::tempdir().unwrap();
        let tokens = (
            format!("{}{}", id, uuid::Uuid::new_v4().simple()),
            format!("{}{}", uuid::Uuid::new_v4().simple(), id),
        );
        let tokens_file = secrets.path().join("tokens");
        std::fs::write(
            &tokens_file,
            format!("# test tenants\nalice:{}\nbob:{}\n", tokens.0, tokens.1),
        )
        .unwrap();
        std::fs::set_permissions(
            &tokens_file,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        let stack = Self {
            project: format!("cemtest{}", &id[..12]),
            image: format!("code-execution-mcp-server:test-{}", &id[..12]),
            data: tempfile::tempdir().unwrap(),
            secrets,
            tokens,
            compose,
            down: false,
        };
        stack.compose(&["build", "server", "prometheus"]).await;
        stack.compose(&["up", "-d"]).await;
        stack
    }

    /// The environment compose.yaml reads.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("COMPOSE_PROJECT_NAME", self.project.clone()),
            ("CEM_SERVER_IMAGE", self.image.clone()),
            ("CEM_SERVER_BINARY", binary_in_context()),
            ("CEM_SERVER_BASE", common::images::sandbox_base()),
            // The host-built test binary, copied in the offline base (no registry here to pull
            // the Rust image from).
            ("CEM_BUILD_IMAGE", common::images::sandbox_base()),
            ("CEM_HOSTNAME", self.project.clone()),
            ("CEM_PUBLISH", "127.0.0.1:".into()),
            ("CEM_PROMETHEUS_IMAGE", PROMETHEUS_IMAGE.into()),
            ("CEM_PROMETHEUS_PUBLISH", "127.0.0.1:".into()),
            ("CEM_DATA_HOST_DIR", path_str(self.data.path())),
            (
                "CEM_TOKENS_FILE",
                path_str(&self.secrets.path().join("tokens")),
            ),
            ("CEM_POOL_SIZE", "1".into()),
            // The engine the test runs against (Docker's socket, or Podman's through DOCKER_HOST)
            // is the one the server drives.
            ("CEM_ENGINE_SOCKET", engine_socket()),
        ]
    }

    async fn compose(&self, args: &[&str]) -> Output {
        let out = Command::new(&self.compose[0])
            .args(&self.compose[1..])
            .args(FILES)
            .args(args)
            .current_dir(MANIFEST_DIR)
            .envs(self.env())
            .output()
            .await
            .expect("run Docker Compose");
        if !out.status.success() {
            let logs = self.logs().await;
            panic!(
                "compose {args:?} failed: {}\n{logs}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        out
    }

    async fn logs(&self) -> String {
        let out = Command::new(&self.compose[0])
            .args(&self.compose[1..])
            .args(FILES)
            .args(["logs", "--no-color", "--tail", "40"])
            .current_dir(MANIFEST_DIR)
            .envs(self.env())
            .output()
            .await;
        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// `http://127.0.0.1:PORT`, the port the engine published 8080 on.
    async fn url(&self) -> String {
        let out = self.compose(&["port", "server", "8080"]).await;
        let addr = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(addr.starts_with("127.0.0.1:"), "published on {addr:?}");
        format!("http://{addr}")
    }

    async fn wait_healthy(&self, url: &str) {
        code_execution_mcp::install_tls_provider();
        let http = reqwest::Client::new();
        for _ in 0..120 {
            if let Ok(r) = http.get(format!("{url}/health")).send().await
                && r.status() == 200
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("the server never answered /health:\n{}", self.logs().await);
    }

    /// The stack's Prometheus, through the loopback port the test publishes it on: the server's
    /// target up, the executions so far counted, every alert rule loaded and evaluating without
    /// error; and the server's metrics port published nowhere.
    async fn prometheus_sees_the_server(&self) {
        let out = self.compose(&["port", "prometheus", "9090"]).await;
        let addr = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(addr.starts_with("127.0.0.1:"), "published on {addr:?}");
        let id = self.compose(&["ps", "-q", "server"]).await;
        let id = String::from_utf8_lossy(&id.stdout).trim().to_string();
        let published = Command::new("docker")
            .args(["port", &id])
            .output()
            .await
            .expect("docker port");
        let published = String::from_utf8_lossy(&published.stdout).to_string();
        assert!(
            published.contains("8080/tcp") && !published.contains("9464"),
            "the server publishes {published:?}: 8080 only, never the metrics port"
        );
        let http = reqwest::Client::new();
        let api = async |path: &str| -> Option<serde_json::Value> {
            let answer = http
                .get(format!("http://{addr}/api/v1/{path}"))
                .send()
                .await
                .ok()?;
            let body: serde_json::Value = serde_json::from_str(&answer.text().await.ok()?).ok()?;
            (body["status"] == "success").then(|| body["data"].clone())
        };
        let first = |data: &serde_json::Value| -> Option<f64> {
            data["result"][0]["value"][1].as_str()?.parse().ok()
        };
        // Scraped every 15 s: the first scrape after the examples sees both tenants' executions.
        let up = "query?query=up%7Bjob%3D%22code-execution-mcp%22%7D";
        let tenants = "query?query=count(sum%20by%20(tenant)%20(cem_executions_total)%20%3E%200)";
        let mut seen = (None, None);
        for _ in 0..90 {
            seen = (
                api(up).await.as_ref().and_then(first),
                api(tenants).await.as_ref().and_then(first),
            );
            if seen == (Some(1.0), Some(2.0)) {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        assert_eq!(
            seen,
            (Some(1.0), Some(2.0)),
            "Prometheus saw (up, tenants with executions) {seen:?}; targets: {:?}\n{}",
            api("targets").await,
            self.logs().await
        );
        common::assert_rules_healthy(&api("rules").await.expect("the rules API answers"));
    }

    /// Runs tests/python/tenants_over_http.py's `phase` against the stack.
    async fn python(&self, phase: &str, url: &str) {
        let python = common::upstreams::sdk_python();
        let out = Command::new(&python)
            .arg(Path::new(MANIFEST_DIR).join("tests/python/tenants_over_http.py"))
            .arg(format!("{url}/mcp"))
            .args([&self.tokens.0, &self.tokens.1, phase])
            .output()
            .await
            .expect("run the Python client (CEM_TEST_PYTHON: an interpreter with the main pins of tests/upstream-pins.txt)");
        assert!(
            out.status.success(),
            "{phase} failed:\n{}\n{}\nserver:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.logs().await
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("{phase}: ok")));
    }

    /// Stops the stack (the server removes its sandbox containers on SIGTERM) and checks that
    /// none is left.
    async fn down(mut self) {
        self.compose(&["down", "--volumes", "--timeout", "45"])
            .await;
        self.down = true;
        let left = sandboxes_of(&self.project).await;
        assert!(left.is_empty(), "sandbox containers left: {left:?}");
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let mut cleanup = vec![];
        if !self.down {
            let mut down = std::process::Command::new(&self.compose[0]);
            down.args(&self.compose[1..])
                .args(FILES)
                .args(["down", "--volumes", "--timeout", "45"])
                .current_dir(MANIFEST_DIR)
                .envs(self.env());
            cleanup.push(down);
        }
        // Hand the data directory back to a non-root test user, so it can be deleted.
        let euid = rustix::process::geteuid();
        if !euid.is_root() {
            let mut chown = std::process::Command::new("docker");
            chown.args(["run", "--rm", "--network", "none", "--user", "0"]);
            chown
                .arg("-v")
                .arg(format!("{}:/data", path_str(self.data.path())));
            chown.args([&common::images::sandbox_base(), "chown", "-R"]);
            chown.arg(format!(
                "{}:{}",
                euid.as_raw(),
                rustix::process::getegid().as_raw()
            ));
            chown.arg("/data");
            cleanup.push(chown);
        }
        let mut rmi = std::process::Command::new("docker");
        rmi.args(["rmi", "-f", &self.image]);
        cleanup.push(rmi);
        for mut c in cleanup {
            let _ = c.output();
        }
    }
}

/// The sandbox containers of servers whose hostname is `host`.
async fn sandboxes_of(host: &str) -> Vec<String> {
    let engine = Engine::connect().await.expect("engine");
    let all = engine
        .list_labelled(&[LABEL_MANAGED.to_string()])
        .await
        .expect("list containers");
    let prefix = format!("{host}:");
    all.into_iter()
        .filter(|c| {
            c.labels
                .get(LABEL_OWNER)
                .is_some_and(|o| o.starts_with(&prefix))
        })
        .map(|c| c.id)
        .collect()
}

/// `docker compose` (the plugin) where it exists, else `docker-compose`, else none.
async fn compose_command() -> Option<Vec<String>> {
    let plugin = Command::new("docker")
        .args(["compose", "version"])
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    if plugin {
        return Some(vec!["docker".into(), "compose".into()]);
    }
    let standalone = Command::new("docker-compose")
        .arg("version")
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    standalone.then(|| vec!["docker-compose".into()])
}

/// The host path of the engine's socket: DOCKER_HOST's when it names one, else Docker's.
fn engine_socket() -> String {
    std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(str::to_string))
        .unwrap_or_else(|| "/var/run/docker.sock".into())
}

/// The test binary's server, as a path inside the build context (the repository root).
fn binary_in_context() -> String {
    let bin = PathBuf::from(common::BIN);
    let rel = bin.strip_prefix(MANIFEST_DIR).unwrap_or_else(|_| {
        panic!(
            "{} is outside the repository, so the server image cannot carry it: build without CARGO_TARGET_DIR",
            bin.display()
        )
    });
    path_str(rel)
}

fn path_str(p: &Path) -> String {
    p.to_str().expect("test paths are UTF-8").to_string()
}
