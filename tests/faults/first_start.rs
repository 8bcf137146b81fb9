//! A fresh offline machine's first `serve`: an engine with no images that reaches no registry
//! (a private engine in a network namespace of its own). The server tries the pinned base,
//! cannot pull it, builds the offline base with debootstrap from Debian's archive, builds the
//! sandbox image on it and runs code: the path a new user takes, where CI's own setup takes the
//! explicit `image build --base` path. The client's handshake is answered before any of that is
//! done: the sandbox image is still missing when it is, and `get_execution_stats` says the image
//! is being built; `execute_code` answers with what is left until the image is there.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::private_engine::PrivateEngine;
use crate::common::{call_tool, require_root};
use crate::server::{Server, error_text};

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
    let stderr = server.stderr();
    for step in [
        "not found; building it",
        "cannot pull",
        "building the offline base code-execution-mcp/python-base:3.13-trixie",
        "built code-execution-mcp/python-base:3.13-trixie",
    ] {
        assert!(stderr.contains(step), "no {step:?} in:\n{stderr}");
    }
    eprintln!(
        "first start on a fresh offline engine: handshake answered in {answered:?}, code ran after {ready:?}"
    );
    let _ = server.close(Duration::from_secs(60)).await;
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
