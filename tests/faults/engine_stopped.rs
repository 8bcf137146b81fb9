//! Catalogue case 48: the Docker engine stopped or restarted under a running server, on a private
//! daemon of the test's own (`common::private_engine`): a running execution answers at once with
//! a clear error, calls while it is down fail fast, and the same server process serves again
//! once the engine is back.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::private_engine::{EngineProxy, PrivateEngine};
use crate::common::{self, call_tool, require_root, try_call_tool};
use crate::server::{Server, error_text, wait_for_file, wait_for_pool};

/// Starts `code` (which must create `/workspace/<marker>` first) in the background and waits
/// until it runs; the handle gives the call's result and how long it took.
async fn start_long(
    server: &Server,
    ws: &Path,
    marker: &str,
) -> tokio::task::JoinHandle<(Result<(bool, Value), rmcp::service::ServiceError>, Duration)> {
    let code = format!("import time\nopen('/workspace/{marker}', 'w').close()\ntime.sleep(60)");
    let client = server.client.clone();
    let call = tokio::spawn(async move {
        let t = Instant::now();
        let r = try_call_tool(
            &client,
            "execute_code",
            json!({"code": code, "timeout_seconds": 120}),
        )
        .await;
        (r, t.elapsed())
    });
    wait_for_file(&ws.join(marker), Duration::from_secs(60)).await;
    call
}

/// The stats tool's execution counters.
async fn executions(server: &Server) -> Value {
    call_tool(&server.client, "get_execution_stats", json!({}))
        .await
        .1["executions"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: starts a private Docker engine in a network namespace"]
async fn engine_stopped_or_restarted_under_a_running_server() {
    require_root("a private Docker engine");
    let started = Instant::now();
    // The main engine's bridge: the private engine must leave it alone.
    let bridge = Path::new("/sys/class/net/docker0");
    let had_bridge = bridge.exists();
    let mut engine = PrivateEngine::start().await;
    // The minimal image: it is copied into the private engine, and the data image is large.
    use code_execution_mcp::sandbox::image::{self as sandbox_image, ImageProfile};
    let image = sandbox_image::default_tag(ImageProfile::Minimal);
    let main = code_execution_mcp::sandbox::Engine::connect()
        .await
        .unwrap();
    sandbox_image::ensure(&main, &image, None, ImageProfile::Minimal)
        .await
        .expect("the sandbox image on the main engine");
    engine.load_image(&image);
    eprintln!(
        "private engine ({}) up with the image in {:?}",
        engine.driver(),
        started.elapsed()
    );

    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    let host = engine.host();
    let server = Server::spawn(
        dir.path(),
        &[("DOCKER_HOST", host.as_str())],
        &["--pool-size", "1", "--image-profile", "minimal"],
    )
    .await;
    let (err, v, _) = server
        .exec("result = 1", 10.0, Duration::from_secs(60))
        .await;
    assert!(!err, "{v}");

    // The engine stops under a running execution: the call answers at once, saying so.
    let running = start_long(&server, &ws, "started-1").await;
    engine.stop();
    let (r, took) = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("the running execution answers once the engine is gone")
        .unwrap();
    let (err, v) = r.expect("a tool result, not a protocol error");
    eprintln!("running when the engine stopped: {took:?} {v}");
    assert!(err, "{v}");
    let text = error_text(&v);
    assert!(
        text.contains("the container engine went away") && text.contains("Retry once the engine"),
        "{v}"
    );

    // While it is down: a clear error, not a wait for the execution's timeout (how soon it
    // comes is printed, not asserted: these machines are shared).
    let (err, v, took) = server
        .exec("result = 2", 10.0, Duration::from_secs(20))
        .await;
    eprintln!("while down: {took:?} {v}");
    assert!(err, "{v}");
    let text = error_text(&v);
    assert!(
        text.contains("cannot reach the container engine") && text.contains("needs no restart"),
        "{v}"
    );

    // Back: the pool refills by itself, and the same server process serves from it.
    engine.restart().await;
    wait_for_pool(&server, 1, Duration::from_secs(60)).await;
    let pooled = executions(&server).await["executions_pooled"]
        .as_u64()
        .unwrap();
    let (err, v, took) = server
        .exec("result = 3", 10.0, Duration::from_secs(60))
        .await;
    eprintln!("after the restart: {took:?}");
    assert!(!err, "{v}");
    assert_eq!(v["result"], 3);
    let now_pooled = executions(&server).await["executions_pooled"]
        .as_u64()
        .unwrap();
    assert_eq!(
        now_pooled,
        pooled + 1,
        "the execution ran in a pooled container"
    );

    // A restart (stop, start at once) under a running execution: an error saying so, then
    // service as before.
    let running = start_long(&server, &ws, "started-2").await;
    engine.stop();
    engine.restart().await;
    let (r, took) = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("the running execution answers after an engine restart")
        .unwrap();
    let (err, v) = r.expect("a tool result, not a protocol error");
    eprintln!("running across a restart: {took:?} {v}");
    assert!(err, "{v}");
    assert!(
        error_text(&v).contains("the container engine went away"),
        "{v}"
    );
    let (err, v, _) = server
        .exec("result = 4", 10.0, Duration::from_secs(60))
        .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], 4);

    drop(server.close(Duration::from_secs(60)).await);

    // Restarted behind a socket that holds connections while the daemon is down (as systemd's
    // docker.socket does): the engine answers again at once, reporting the container stopped
    // by SIGTERM, and the broken event stream tells the server that the engine did it.
    let proxy = EngineProxy::to(engine.socket());
    let proxied = proxy.host();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    let server = Server::spawn(
        dir.path(),
        &[("DOCKER_HOST", proxied.as_str())],
        // The image the private engine holds: without it the server would build the data
        // image there, minutes of debootstrap that say nothing about a restart.
        &["--pool-size", "0", "--image-profile", "minimal"],
    )
    .await;
    let running = start_long(&server, &ws, "started-3").await;
    engine.stop();
    engine.restart().await;
    let (r, took) = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("the running execution answers after an engine restart behind a held socket")
        .unwrap();
    let (err, v) = r.expect("a tool result, not a protocol error");
    eprintln!("running across a restart behind a held socket: {took:?} {v}");
    assert!(err, "{v}");
    assert!(
        error_text(&v).contains("the container engine went away"),
        "{v}"
    );
    let (err, v, _) = server
        .exec("result = 5", 10.0, Duration::from_secs(60))
        .await;
    assert!(!err, "{v}");

    // Shutdown removes every container of the servers from the engine.
    drop(server.close(Duration::from_secs(60)).await);
    drop(proxy);
    let left = engine.containers().await;
    assert!(
        left.is_empty(),
        "containers left on the private engine: {left:?}"
    );
    let root = engine.root().to_path_buf();
    drop(engine);
    assert_eq!(
        bridge.exists(),
        had_bridge,
        "the main engine's docker0 bridge was changed"
    );
    assert!(
        common::private_engine::mounts_below(&root).is_empty() && !root.exists(),
        "the private engine left {} behind",
        root.display()
    );
    eprintln!("engine fault test took {:?}", started.elapsed());
}
