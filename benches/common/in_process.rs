//! What the benches that start the server in this process share: one execution, checked and
//! timed as its caller sees it.

use std::time::Instant;

use code_execution_mcp::app::execution::request::ExecuteRequest;
use code_execution_mcp::app::{App, Executed};

use super::stdio::ms;

/// Runs `code` on `app` with the default limits; fails the bench, quoting the error and
/// stderr, unless it succeeded. What it gave, and its latency in ms.
pub async fn timed_execution(app: &App, code: &str) -> (Executed, f64) {
    let started = Instant::now();
    let ran = app
        .execute(ExecuteRequest::code(code), Default::default())
        .await
        .expect("the execution runs");
    let latency = ms(started.elapsed());
    assert!(
        ran.outcome.success(),
        "{code}: {:?}\n{}",
        ran.outcome.error,
        ran.outcome.stderr.as_str()
    );
    (ran, latency)
}

/// [`timed_execution`]'s latency alone.
pub async fn execution_ms(app: &App, code: &str) -> f64 {
    timed_execution(app, code).await.1
}

/// Waits until `app`'s pool holds `size` ready containers (a minute at most).
pub async fn wait_for_pool(app: &App, size: usize) {
    for _ in 0..1200 {
        if app.sandbox().pool_ready() >= size {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the pool did not fill");
}
