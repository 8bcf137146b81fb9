//! Shared test helpers: a server configuration in a temporary directory, an `App` started
//! against the real Docker engine, and checks that no container is left behind.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use code_execution_mcp::app::App;
use code_execution_mcp::config::Config;
use code_execution_mcp::sandbox::spec::LABEL_INSTANCE;
use code_execution_mcp::sandbox::{Engine, Outcome};
use serde_json::Value;

/// A configuration whose workspace and skills live in `dir` (no quota unless asked).
pub fn config_in(dir: &Path) -> Config {
    let mut c = Config::defaults();
    c.workspace = Some(dir.join("workspace"));
    c.skills_dir = Some(dir.join("skills"));
    c.workspace_quota_mb = 0;
    c
}

/// A started server state plus its temp dir (kept alive as long as the harness).
pub struct TestApp {
    pub app: Arc<App>,
    pub dir: tempfile::TempDir,
}

impl TestApp {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(adjust: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = config_in(dir.path());
        adjust(&mut config);
        let app = App::start(config)
            .await
            .expect("server starts (is the image built?)");
        Self {
            app: Arc::new(app),
            dir,
        }
    }

    pub fn workspace(&self) -> PathBuf {
        self.app.workspace_path.clone()
    }

    /// Runs code with default limits; panics if it could not run at all.
    pub async fn run(&self, code: &str) -> Outcome {
        self.run_with(code, None, None, None).await
    }

    pub async fn run_with(
        &self,
        code: &str,
        context: Option<Value>,
        timeout: Option<f64>,
        memory_mb: Option<f64>,
    ) -> Outcome {
        self.app
            .execute(code.into(), context, timeout, memory_mb, Default::default())
            .await
            .unwrap_or_else(|e| panic!("execution could not run: {e}"))
            .0
    }

    /// Shuts down and asserts that this instance left no container on the engine.
    pub async fn finish(self) {
        self.app.shutdown().await;
        assert_no_containers(self.app.sandbox.instance().id.as_str()).await;
    }
}

/// Waits up to 10 s for the engine to hold no container of `instance`, then asserts it.
pub async fn assert_no_containers(instance: &str) {
    let engine = Engine::connect().await.expect("engine");
    let label = format!("{LABEL_INSTANCE}={instance}");
    let mut left = Vec::new();
    for _ in 0..50 {
        left = engine
            .list_labelled(std::slice::from_ref(&label))
            .await
            .expect("list");
        if left.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("containers left behind: {left:?}");
}

/// The stdout text of an outcome.
pub fn stdout(o: &Outcome) -> &str {
    o.stdout.as_str()
}

/// Asserts the execution succeeded, printing everything it produced if not.
#[track_caller]
pub fn assert_ok(o: &Outcome) {
    assert!(
        o.success(),
        "execution failed: status {:?}, error {:?}\ntraceback {:?}\nstdout {}\nstderr {}",
        o.status,
        o.error,
        o.traceback,
        o.stdout.as_str(),
        o.stderr.as_str()
    );
}

/// An rmcp client connected in-process (over a duplex pipe) to a server for `app`.
pub async fn mcp_client(app: Arc<App>) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    use rmcp::ServiceExt;
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let server = code_execution_mcp::mcp::CodeExecutionServer::new(app);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.expect("client connects")
}

/// Calls a tool and returns (is_error, structured content or the text content as a string).
pub async fn call_tool(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &'static str,
    args: Value,
) -> (bool, Value) {
    let params = rmcp::model::CallToolRequestParams::new(name)
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    let result = client.call_tool(params).await.expect("tools/call answered");
    let is_error = result.is_error.unwrap_or(false);
    let value = match result.structured_content {
        Some(v) => v,
        None => Value::String(
            result
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    };
    (is_error, value)
}

/// Whether a root-only test can run. Outside CI it is skipped with a message when not root;
/// in CI (which runs as root) being unable to run it is a failure, not a skip.
pub fn root_or_skip(what: &str) -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{what} needs root, and CI runs as root"
    );
    eprintln!("skipped: {what} needs root");
    false
}
