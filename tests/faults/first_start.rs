//! A fresh offline machine's first `serve`: an engine with no images that reaches no registry
//! (a private engine in a network namespace of its own). The server tries the pinned base,
//! cannot pull it, builds the offline base with debootstrap from Debian's archive, builds the
//! sandbox image on it and runs code: the path a new user takes, where CI's own setup takes the
//! explicit `image build --base` path.

use std::time::{Duration, Instant};

use crate::common::private_engine::PrivateEngine;
use crate::common::require_root;
use crate::server::Server;

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
    let server = Server::spawn(
        dir.path(),
        &[("DOCKER_HOST", host.as_str())],
        &["--pool-size", "0", "--image-profile", "minimal"],
    )
    .await;
    let ready = started.elapsed();
    let (err, v, _) = server
        .exec("print(6 * 7)", 30.0, Duration::from_secs(120))
        .await;
    assert!(!err, "{v}");
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
    eprintln!("first start on a fresh offline engine: ready in {ready:?}");
    let _ = server.close(Duration::from_secs(60)).await;
    assert!(
        engine.containers().await.is_empty(),
        "no container is left on the engine"
    );
}
