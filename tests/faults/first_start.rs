//! A fresh offline machine's first `serve`: an engine with no images that reaches no registry
//! (a private engine in a network namespace of its own). The server tries the pinned base,
//! cannot pull it, builds the offline base with debootstrap from Debian's archive, builds the
//! sandbox image on it and runs code: the path a new user takes, where CI's own setup takes the
//! explicit `image build --base` path. The client's handshake is answered before any of that is
//! done: the sandbox image is still missing when it is, and `get_execution_stats` says the image
//! is being built; `execute_code` answers with what is left until the image is there. An HTTP
//! server started beside it on the same engine listens at once: `/health` says it is starting,
//! its handshake is answered before the image exists, and it runs code once it has started.
//! The two build once: whichever takes the build lock first builds, the other waits and reuses
//! (which one is a race, so the build's steps are looked for in the builder's output).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::private_engine::PrivateEngine;
use crate::common::{call_tool, require_root, serve_command, stop_with_sigterm};
use crate::server::{Server, error_text, tee_stderr};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: starts a private Docker engine in a network namespace and runs debootstrap"]
async fn a_fresh_offline_engine_gets_its_image_built_on_the_first_start() {
    require_root("a private Docker engine");
    let engine = PrivateEngine::start().await;
    let client = engine.client().await;
    let images = client
        .list_images(None::<bollard::query_parameters::ListImagesOptions>)
        .await
        .unwrap();
    assert!(
        images.is_empty(),
        "a fresh engine has no images: {images:?}"
    );

    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let host = engine.host();
    let server = Server::spawn_starting(
        dir.path(),
        &[("DOCKER_HOST", host.as_str())],
        &["--pool-size", "0", "--image-profile", "minimal"],
    )
    .await;
    let answered = started.elapsed();
    let http_dir = tempfile::tempdir().unwrap();
    let mut http = HttpBeside::start(http_dir.path(), &host).await;
    let sandbox_images = || async {
        let images = client
            .list_images(None::<bollard::query_parameters::ListImagesOptions>)
            .await
            .unwrap();
        images
            .into_iter()
            .flat_map(|i| i.repo_tags)
            .filter(|t| t.starts_with("code-execution-mcp-sandbox:"))
            .collect::<Vec<_>>()
    };
    assert!(
        sandbox_images().await.is_empty(),
        "the handshake waited for the image"
    );
    http.answers_while_starting().await;
    assert!(
        sandbox_images().await.is_empty(),
        "the HTTP handshake waited for the image"
    );
    let stats = step_reached(&server, "building the sandbox image (first start)").await;
    assert!(
        stats["starting"]["about_seconds_left"].as_u64() > Some(0),
        "{stats}"
    );
    let (err, v) = call_tool(
        &server.client,
        "execute_code",
        json!({"code": "print(6 * 7)", "timeout_seconds": 1}),
    )
    .await;
    assert!(err, "{v}");
    assert!(
        error_text(&v).contains("still starting: building the sandbox image"),
        "{v}"
    );
    let v = run_once_started(&server).await;
    let ready = started.elapsed();
    assert_eq!(v["output"], serde_json::json!(["42"]), "{v}");
    // Whichever server took the build lock first built; the other waited and reused.
    let outputs = [server.stderr(), http.stderr()];
    let built: Vec<&String> = outputs
        .iter()
        .filter(|s| s.contains("not found; building it"))
        .collect();
    assert_eq!(built.len(), 1, "exactly one server builds: {outputs:#?}");
    for step in [
        "cannot pull",
        "building the offline base code-execution-mcp/python-base:3.13-trixie",
        "built code-execution-mcp/python-base:3.13-trixie",
    ] {
        assert!(built[0].contains(step), "no {step:?} in:\n{}", built[0]);
    }
    eprintln!(
        "first start on a fresh offline engine: handshake answered in {answered:?}, code ran after {ready:?}"
    );
    http.runs_code_once_started().await;
    let _ = server.close(Duration::from_secs(60)).await;
    stop_with_sigterm(&mut http.child).await;
    assert!(
        engine.containers().await.is_empty(),
        "no container is left on the engine"
    );
}

/// Runs `print(6 * 7)` once the start is done, asking again while the server says it is still
/// starting (at most 20 minutes: a debootstrap and two image builds on a loaded machine).
async fn run_once_started(server: &Server) -> Value {
    let until = Instant::now() + Duration::from_secs(1200);
    loop {
        let (err, v, _) = server
            .exec("print(6 * 7)", 30.0, Duration::from_secs(300))
            .await;
        if !err {
            return v;
        }
        assert!(
            error_text(&v).contains("still starting") && Instant::now() < until,
            "{v}"
        );
    }
}

/// The start's report once it has reached `step` (it connects to the engine first), asked every
/// 100 ms for at most a minute; panics if the start ends or moves past it before.
async fn step_reached(server: &Server, step: &str) -> Value {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let (err, stats) = call_tool(&server.client, "get_execution_stats", json!({})).await;
        assert!(err, "started already: {stats}");
        if stats["starting"]["step"] == step {
            return stats;
        }
        assert!(
            stats["starting"]["step"] == "connecting to the engine" && Instant::now() < until,
            "not {step:?}: {stats}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An HTTP server on the same fresh engine, started beside the stdio one, its stderr kept.
struct HttpBeside {
    child: tokio::process::Child,
    port: u16,
    began: Instant,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl HttpBeside {
    async fn start(dir: &std::path::Path, host: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let listen = format!("127.0.0.1:{port}");
        let args = ["--transport", "http", "--listen", &listen];
        let mut child = serve_command(dir, &[&args[..], &["--pool-size", "0"]].concat())
            .args(["--image-profile", "minimal"])
            .env("DOCKER_HOST", host)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the HTTP server");
        let (stderr, _tee) = tee_stderr(&mut child);
        Self {
            child,
            port,
            began: Instant::now(),
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// `/health`: its status and JSON body, once it listens (10 s at most from its spawn).
    async fn health(&self) -> (u16, Value) {
        let url = format!("http://127.0.0.1:{}/health", self.port);
        loop {
            if let Ok(r) = reqwest::get(&url).await {
                let status = r.status().as_u16();
                return (status, r.json().await.unwrap_or_default());
            }
            assert!(
                self.began.elapsed() < Duration::from_secs(10),
                "the HTTP server does not listen"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// It listens at once, `/health` says it is starting, and its handshake is answered.
    async fn answers_while_starting(&self) {
        use rmcp::ServiceExt;
        code_execution_mcp::install_tls_provider();
        let (status, body) = self.health().await;
        assert_eq!(
            (status, &body["status"]),
            (503, &json!("starting")),
            "{body}"
        );
        let url = format!("http://127.0.0.1:{}/mcp", self.port);
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url);
        let client = ().serve(transport).await.expect("the HTTP handshake");
        eprintln!(
            "HTTP on a fresh offline engine: handshake answered {:?} after its spawn ({})",
            self.began.elapsed(),
            body["step"]
        );
        let (err, stats) = call_tool(&client, "get_execution_stats", json!({})).await;
        assert!(err && stats["starting"]["step"].is_string(), "{stats}");
        let _ = client.cancel().await;
    }

    /// Once `/health` answers 200 (the build is one server's, then this one's tree and
    /// catalog), `execute_code` over HTTP runs.
    async fn runs_code_once_started(&self) {
        use rmcp::ServiceExt;
        let until = Instant::now() + Duration::from_secs(300);
        while self.health().await.0 != 200 {
            assert!(Instant::now() < until, "{:?}", self.health().await);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let url = format!("http://127.0.0.1:{}/mcp", self.port);
        let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url);
        let client = ().serve(transport).await.expect("the HTTP handshake");
        let (err, v) = call_tool(&client, "execute_code", json!({"code": "print(6 * 7)"})).await;
        assert!(!err && v["output"] == json!(["42"]), "{v}");
        let _ = client.cancel().await;
    }
}
