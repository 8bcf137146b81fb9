//! The server binary over stdio as the fault tests drive it, with its stderr kept for
//! assertions, and the waits they share. Apart from the tests so each fault's file holds only
//! what that fault needs.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use tokio::process::Child;

use crate::common::{call_tool, serve_command};

/// A server binary over stdio whose stderr is kept (and echoed) for assertions.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) client: RunningService<RoleClient, ()>,
    stderr: Arc<Mutex<String>>,
    tee: tokio::task::JoinHandle<()>,
}

impl Server {
    /// The server once it has started (see `common::wait_started`).
    pub(crate) async fn spawn(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Self {
        let server = Self::spawn_starting(dir, env, args).await;
        crate::common::wait_started(&server.client).await;
        server
    }

    /// The server as soon as it has answered its handshake, its start going on behind it.
    pub(crate) async fn spawn_starting(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Self {
        use rmcp::ServiceExt;
        let mut child = serve_command(dir, args)
            .envs(env.iter().copied())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the server binary");
        let (stderr, tee) = tee_stderr(&mut child);
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let client = ().serve((stdout, stdin)).await.expect("MCP handshake");
        Self {
            child,
            client,
            stderr,
            tee,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Runs `code`; returns (is_error, response, how long the call took). Panics if the call
    /// does not answer within `limit`.
    pub(crate) async fn exec(
        &self,
        code: &str,
        timeout: f64,
        limit: Duration,
    ) -> (bool, Value, Duration) {
        let started = Instant::now();
        let call = call_tool(
            &self.client,
            "execute_code",
            json!({"code": code, "timeout_seconds": timeout}),
        );
        let (err, v) = tokio::time::timeout(limit, call)
            .await
            .unwrap_or_else(|_| panic!("execute_code did not answer within {limit:?}"));
        (err, v, started.elapsed())
    }

    /// Closes the session and waits for the process to exit (panics after `limit`).
    pub(crate) async fn close(self, limit: Duration) -> String {
        let Self {
            mut child,
            client,
            stderr,
            tee,
        } = self;
        let _ = client.cancel().await;
        let status = tokio::time::timeout(limit, child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!("the server did not exit within {limit:?} of its stdin closing")
            })
            .unwrap();
        // Everything it wrote, up to the end of its stderr.
        let _ = tokio::time::timeout(Duration::from_secs(10), tee).await;
        let stderr = stderr.lock().unwrap().clone();
        assert!(status.success(), "server exit: {status}\n{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        stderr
    }
}

/// Copies the child's stderr to the test's, keeping it; the task ends with the stderr.
pub(crate) fn tee_stderr(child: &mut Child) -> (Arc<Mutex<String>>, tokio::task::JoinHandle<()>) {
    use tokio::io::AsyncBufReadExt;
    let kept = Arc::new(Mutex::new(String::new()));
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let sink = kept.clone();
    let task = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("  server: {line}");
            let mut s = sink.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
    (kept, task)
}

/// The text of an execute_code error: the `error` field, or the plain text of a failure.
pub(crate) fn error_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v["error"].as_str().unwrap_or_default().to_string(),
    }
}

pub(crate) async fn wait_for_file(path: &Path, limit: Duration) {
    let until = Instant::now() + limit;
    while !path.exists() {
        assert!(Instant::now() < until, "{} did not appear", path.display());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls the stats tool until the pool holds `n` ready containers.
pub(crate) async fn wait_for_pool(server: &Server, n: u64, limit: Duration) {
    let until = Instant::now() + limit;
    loop {
        let (_, v) = call_tool(&server.client, "get_execution_stats", json!({})).await;
        if v["executions"]["pool_ready"] == json!(n) {
            return;
        }
        assert!(
            Instant::now() < until,
            "the pool did not refill to {n} within {limit:?}: {}",
            v["executions"]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
