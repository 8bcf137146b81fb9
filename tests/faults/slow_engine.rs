//! A slow or stalled engine (a proxy in front of its socket): deadlines still hold, a call to a
//! stalled engine answers within a minute, and the shutdown is bounded.

use std::time::{Duration, Instant};

use code_execution_mcp::sandbox::Backend;
use serde_json::json;

use crate::common::private_engine::EngineProxy;
use crate::common::{self, call_tool};
use crate::server::{Server, error_text, wait_for_pool};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_stalled_engine_never_holds_a_call_or_the_shutdown() {
    let proxy = EngineProxy::start();
    let host = proxy.host();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::spawn(
        dir.path(),
        &[("DOCKER_HOST", host.as_str())],
        &["--pool-size", "1", "--start-timeout-secs", "5"],
    )
    .await;
    let pid = server.pid();
    let (err, v, _) = server
        .exec("result = 0", 10.0, Duration::from_secs(60))
        .await;
    assert!(!err, "{v}");

    // Slow: every chunk to and from the engine waits 200 ms. Deadlines still hold.
    proxy.set_delay(Duration::from_millis(200));
    let (err, v, took) = server
        .exec("import time\ntime.sleep(60)", 3.0, Duration::from_secs(60))
        .await;
    eprintln!("slow engine, 3 s timeout: {took:?}");
    assert!(err, "{v}");
    assert_eq!(v["status"], "timeout", "{v}");
    assert!(
        error_text(&v).contains("timed out after 3 seconds: the container was killed"),
        "{v}"
    );
    assert!(took < Duration::from_secs(3 + 20), "{took:?}");
    let (err, v, took) = server
        .exec("result = 1", 20.0, Duration::from_secs(60))
        .await;
    eprintln!("slow engine, a short execution: {took:?}");
    assert!(!err, "{v}");
    assert_eq!(v["result"], 1);

    // Stalled: nothing reaches the engine any more. One call takes the pooled container and
    // runs out of time (its kill unconfirmed); one finds the pool empty and gives up at the
    // start limit. Neither hangs.
    proxy.set_delay(Duration::ZERO);
    wait_for_pool(&server, 1, Duration::from_secs(30)).await;
    proxy.stall();
    let calls: Vec<_> = (0..2)
        .map(|i| {
            let client = server.client.clone();
            tokio::spawn(async move {
                let t = Instant::now();
                let args = json!({"code": format!("result = {i}"), "timeout_seconds": 2});
                let r = tokio::time::timeout(
                    Duration::from_secs(60),
                    call_tool(&client, "execute_code", args),
                )
                .await
                .expect("a call to a stalled engine answers within a minute");
                (r, t.elapsed())
            })
        })
        .collect();
    let mut texts = Vec::new();
    for call in calls {
        let ((err, v), took) = call.await.unwrap();
        eprintln!("stalled engine: {took:?} {v}");
        assert!(err, "{v}");
        assert!(took < Duration::from_secs(2 + 30), "{took:?}");
        texts.push(error_text(&v));
    }
    texts.sort();
    assert!(
        texts[0]
            .contains("timed out after 2 seconds, and the Docker engine did not confirm killing"),
        "{texts:?}"
    );
    assert!(
        texts[1]
            .contains("the container engine did not start a sandbox container within 5 seconds"),
        "{texts:?}"
    );

    // Shutdown with the engine still stalled: bounded, leaving the containers to the reaper.
    let started = Instant::now();
    let stderr = server.close(Duration::from_secs(60)).await;
    eprintln!("shutdown with a stalled engine: {:?}", started.elapsed());
    assert!(stderr.contains("the next start removes"), "{stderr}");

    // Nothing it held reaches the engine once the proxy is gone; remove what it left.
    drop(proxy);
    let engine = code_execution_mcp::sandbox::Engine::connect()
        .await
        .unwrap();
    for id in common::containers_owned_by(&engine, pid).await.unwrap() {
        engine.remove(&id).await.unwrap();
    }
    assert!(common::containers_of(pid).await.is_empty());
}
