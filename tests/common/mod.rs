//! Shared test helpers: a server configuration in a temporary directory, an `App` started
//! against the real Docker engine, and checks that no container is left behind.

// A client reads rmcp's answer types (clippy.toml bans them in the server, which makes its
// answers in src/privacy/ only); nothing here answers a model.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]
#![allow(dead_code)]

pub mod config;
pub mod docker;
pub mod host_watch;
pub mod images;
pub mod placement;
pub mod private_engine;
pub mod recording;
pub mod upstreams;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use code_execution_mcp::app::execution::request::ExecuteRequest;
use code_execution_mcp::app::{App, ExecuteError};
use code_execution_mcp::config::Config;
use code_execution_mcp::sandbox::container::spec::{LABEL_INSTANCE, LABEL_MANAGED, LABEL_OWNER};
use code_execution_mcp::sandbox::engine::backend::Labelled;
use code_execution_mcp::sandbox::{Backend, Engine, Outcome, Status};
use rmcp::RoleClient;
use rmcp::service::{Peer, RunningService, ServiceError};
use serde_json::Value;
use tokio::process::{Child, Command};

pub use config::{config_in, shared_image_trees};

/// The server binary built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_code-execution-mcp");

/// A started server state plus its temp dir (kept alive as long as the harness).
pub struct TestApp {
    pub app: Arc<App>,
    pub dir: tempfile::TempDir,
}

/// Every server start reaps the containers of servers that died, whichever test killed them.
/// Starts in a test binary hold this for reading; a test that needs a killed server's containers
/// to stay until it has looked holds it for writing meanwhile.
pub static SERVER_STARTS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

impl TestApp {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(adjust: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = config_in(dir.path());
        let fixed_pool = config.pool.pool_max == config.pool.pool_size;
        adjust(&mut config);
        if fixed_pool {
            config.pool.pool_max = config.pool.pool_max.max(config.pool.pool_size);
        }
        let starting = SERVER_STARTS.read().await;
        let app = App::start(config)
            .await
            .expect("server starts (is the image built?)");
        drop(starting);
        Self {
            app: Arc::new(app),
            dir,
        }
    }

    pub fn workspace(&self) -> PathBuf {
        self.app.workspace_path().to_path_buf()
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
            .execute(
                ExecuteRequest {
                    code: code.into(),
                    context_vars: context,
                    timeout_seconds: timeout,
                    memory_mb,
                    ..Default::default()
                },
                Default::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("execution could not run: {e}"))
            .outcome
    }

    /// Runs code with default limits and returns all it gave: outcome, images, files.
    pub async fn run_full(&self, code: &str) -> code_execution_mcp::app::Executed {
        self.app
            .execute(
                ExecuteRequest {
                    code: code.into(),
                    ..Default::default()
                },
                Default::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("execution could not run: {e}"))
    }

    /// Starts `code` with `context` (timeout 120 s) in the background and waits up to a minute
    /// for it to create `marker` in the workspace, its sign that it runs; else panics saying
    /// that `what` did not start.
    pub async fn start_in_background(
        &self,
        code: &'static str,
        context: Value,
        marker: &str,
        what: &str,
    ) -> tokio::task::JoinHandle<Result<code_execution_mcp::app::Executed, ExecuteError>> {
        let app = self.app.clone();
        let running = tokio::spawn(async move {
            app.execute(
                ExecuteRequest {
                    code: code.into(),
                    context_vars: Some(context),
                    timeout_seconds: Some(120.0),
                    memory_mb: None,
                    ..Default::default()
                },
                Default::default(),
            )
            .await
        });
        let marker = self.workspace().join(marker);
        for _ in 0..600 {
            if marker.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(marker.exists(), "{what} did not start");
        running
    }

    /// Shuts down and asserts that this instance left no container on the engine.
    pub async fn finish(self) {
        self.app.shutdown().await;
        assert_no_containers(self.app.sandbox().instance().id.as_str()).await;
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

/// Waits up to 10 s for the engine to hold no managed container with a mount whose source is
/// under `dir`, then asserts it. For servers whose data is in `dir` (their instance id is not at
/// hand, e.g. the tenants of an HTTP server); other tests' containers are not looked at.
pub async fn assert_no_containers_under(dir: &Path) {
    let engine = Engine::connect().await.expect("engine");
    let dirs = [
        dir.to_path_buf(),
        dir.canonicalize().expect("the dir exists"),
    ];
    let mut left = Vec::new();
    for _ in 0..50 {
        left.clear();
        let managed = engine
            .list_labelled(&[LABEL_MANAGED.to_string()])
            .await
            .expect("list");
        for Labelled { id, .. } in managed {
            let sources = match engine.client().inspect_container(&id, None).await {
                Ok(c) => c
                    .mounts
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|m| m.source),
                // Removed since the listing.
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) => continue,
                Err(e) => panic!("inspect {id}: {e}"),
            };
            if sources
                .map(PathBuf::from)
                .any(|source| dirs.iter().any(|d| source.starts_with(d)))
            {
                left.push(id);
            }
        }
        if left.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "containers with mounts under {} left behind: {left:?}",
        dir.display()
    );
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

/// What the error of a memory kill says when the engine lost its OOM notice.
pub const LOST_OOM_NOTICE: &str = "the engine reported no OOM kill for it";

/// Asserts the execution was killed at its memory limit of `mb` MB, as the engine can tell it:
/// `memory_limit` where the engine reports OOM kills, else (Podman before 5.0, or a Docker
/// engine that lost its OOM notice under load) an error naming the memory limit as the likely
/// cause and why the engine could not tell. Returns the status MCP reports for it.
#[track_caller]
pub fn assert_memory_killed(app: &App, o: &Outcome, mb: u32) -> &'static str {
    let error = o.error.as_deref().unwrap_or_default();
    let lost_notice = error.contains(LOST_OOM_NOTICE);
    if app.engine_info().reports_oom_kills() && !lost_notice {
        assert_eq!(o.status, Status::MemoryLimit, "{error}");
        assert!(
            error.contains("Memory limit exceeded") && error.contains(&format!("{mb} MB")),
            "{error}"
        );
        "memory_limit"
    } else {
        assert_eq!(o.status, Status::Error, "{error}");
        assert!(
            error.contains(&format!("most likely at its memory limit of {mb} MB")),
            "{error}"
        );
        "error"
    }
}

/// An rmcp client connected in-process (over a duplex pipe) to a server for `app`.
pub async fn mcp_client(app: Arc<App>) -> RunningService<RoleClient, ()> {
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
/// Takes the client's peer, so clones of it can call concurrently; `&client` works too.
pub async fn call_tool(
    client: &Peer<RoleClient>,
    name: &'static str,
    args: Value,
) -> (bool, Value) {
    try_call_tool(client, name, args)
        .await
        .expect("tools/call answered")
}

/// [`call_tool`], returning a protocol or transport failure instead of panicking.
pub async fn try_call_tool(
    client: &Peer<RoleClient>,
    name: &'static str,
    args: Value,
) -> Result<(bool, Value), ServiceError> {
    let params = rmcp::model::CallToolRequestParams::new(name)
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    let result = client.call_tool(params).await?;
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
    Ok((is_error, value))
}

/// Starts `code-execution-mcp serve` over stdio with its data in `dir`.
pub async fn spawn_server(dir: &Path) -> (Child, RunningService<RoleClient, ()>) {
    spawn_server_with(dir, &[], &[]).await
}

pub async fn spawn_server_with_env(
    dir: &Path,
    env: &[(&str, &str)],
) -> (Child, RunningService<RoleClient, ()>) {
    spawn_server_with(dir, env, &[]).await
}

/// Starts `code-execution-mcp serve` over stdio (workspace and skills in `dir`, no quota) with
/// extra environment variables and arguments, and connects an rmcp client to it. The child is
/// killed if dropped; its stderr goes to the test's.
pub async fn spawn_server_with(
    dir: &Path,
    env: &[(&str, &str)],
    args: &[&str],
) -> (Child, RunningService<RoleClient, ()>) {
    use rmcp::ServiceExt;
    // The server has reaped by the time it has started.
    let _starting = SERVER_STARTS.read().await;
    let mut child = serve_command(dir, args)
        .envs(env.iter().copied())
        .spawn()
        .expect("spawn the server binary");
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let client = ().serve((stdout, stdin)).await.expect("MCP handshake over stdio");
    wait_started(&client).await;
    (child, client)
}

/// Waits until a server that has answered its handshake has also started (the handshake comes
/// first: the start goes on behind it), so the test meets the server a user meets once it is
/// ready. Panics with what the server said if its start failed or took over 10 minutes.
pub async fn wait_started(client: &Peer<RoleClient>) {
    let until = std::time::Instant::now() + Duration::from_secs(600);
    loop {
        let (err, v) = call_tool(client, "get_execution_stats", serde_json::json!({})).await;
        if !err {
            return;
        }
        let starting = v.get("starting").is_some_and(|s| !s.is_null());
        assert!(
            starting && std::time::Instant::now() < until,
            "the server did not start: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The server binary over stdio with its log captured, for tests that read what it logged.
pub struct LoggedServer {
    pub child: Child,
    pub client: RunningService<RoleClient, ()>,
    log: tokio::task::JoinHandle<String>,
}

impl LoggedServer {
    /// Starts `serve` (see [`serve_command`]) logging at its default level, and connects.
    pub async fn start(dir: &Path, args: &[&str]) -> Self {
        Self::start_with_env(dir, args, &[]).await
    }

    /// [`LoggedServer::start`] with these environment variables besides.
    pub async fn start_with_env(
        dir: &Path,
        args: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Self {
        use rmcp::ServiceExt;
        let _starting = SERVER_STARTS.read().await;
        let mut child = serve_command(dir, args)
            .env("RUST_LOG", "code_execution_mcp=info,warn")
            .envs(env.iter().copied())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the server binary");
        let log = read_stderr(&mut child);
        let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let client = ().serve(io).await.expect("MCP handshake over stdio");
        wait_started(&client).await;
        Self { child, client, log }
    }

    /// Closes the session, insists that the server exits cleanly, and returns its log.
    pub async fn finish(mut self) -> String {
        self.client.cancel().await.expect("the client closes");
        let status = tokio::time::timeout(std::time::Duration::from_secs(60), self.child.wait())
            .await
            .expect("the server exits within 60 s of its client leaving")
            .expect("the server's exit status");
        assert!(status.success(), "the server exited with {status}");
        self.log.await.expect("the log reader")
    }
}

/// Reads `child`'s piped stderr to its end in the background: the text, once it closes.
pub fn read_stderr(child: &mut Child) -> tokio::task::JoinHandle<String> {
    use tokio::io::AsyncReadExt;
    let mut stderr = child.stderr.take().expect("stderr piped");
    tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    })
}

/// Waits up to 30 s for `child`, a server whose stdin the test has closed, to exit, and asserts
/// that it exited cleanly.
pub async fn assert_exits_when_stdin_closed(child: &mut Child) {
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the server exits when stdin closes")
        .unwrap();
    assert!(status.success(), "{status}");
}

/// Sends `child` (a server) SIGTERM and asserts that it exits cleanly within 60 s.
pub async fn stop_with_sigterm(child: &mut Child) {
    let pid = rustix::process::Pid::from_raw(child.id().unwrap() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the server stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");
}

/// Calls `execute_code` with `code`; the whole result (content and structured content).
pub async fn execute_code(client: &Peer<RoleClient>, code: &str) -> rmcp::model::CallToolResult {
    let params = rmcp::model::CallToolRequestParams::new("execute_code").with_arguments(
        serde_json::json!({"code": code})
            .as_object()
            .cloned()
            .unwrap(),
    );
    client
        .call_tool(params)
        .await
        .expect("execute_code answered")
}

/// `serve` over stdio (piped; stderr inherited) with its data in `dir`, no quota, plus `args`;
/// killed if dropped.
pub fn serve_command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--workspace-quota-mb", "0"])
        // As in `config_in`: no preloading unless a test asks (a flag beats the variable).
        .env("CEM_PRELOAD", "none")
        // The server's data (the audit trail among it) in the test's directory, not the
        // user's data home (a test's --data-dir beats the variable).
        .env("CEM_DATA_DIR", dir.join("data"))
        .env("CEM_IMAGE_TREE_DIR", shared_image_trees())
        .arg("--workspace")
        .arg(dir.join("workspace"))
        .arg("--skills-dir")
        .arg(dir.join("skills"))
        .args(args)
        .args(fixed_pool(args))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    command
}

/// As in `config_in`: a fixed pool (`--pool-max` at the pool size) unless the test sets one.
fn fixed_pool(args: &[&str]) -> Vec<String> {
    if args.contains(&"--pool-max") {
        return Vec::new();
    }
    let size = args
        .iter()
        .position(|a| *a == "--pool-size")
        .and_then(|i| args.get(i + 1))
        .map_or_else(
            || Config::defaults().pool.pool_size.to_string(),
            |s| s.to_string(),
        );
    vec!["--pool-max".into(), size]
}

/// Managed containers owned by process `pid` of this host.
pub async fn containers_of(pid: u32) -> Vec<String> {
    let engine = Engine::connect().await.unwrap();
    containers_owned_by(&engine, pid).await.unwrap()
}

/// Managed containers (running or not) whose owner label names process `pid`.
pub async fn containers_owned_by(
    engine: &Engine,
    pid: u32,
) -> Result<Vec<String>, code_execution_mcp::sandbox::EngineError> {
    let all = engine.list_labelled(&[LABEL_MANAGED.to_string()]).await?;
    // The owner label is `host:pid:start_time`.
    let pid = pid.to_string();
    Ok(all
        .into_iter()
        .filter(|c| {
            c.labels
                .get(LABEL_OWNER)
                .is_some_and(|o| o.rsplit(':').nth(1) == Some(pid.as_str()))
        })
        .map(|c| c.id)
        .collect())
}

/// For a test marked `#[ignore = "needs root: …"]`, which `cargo test` lists as ignored with
/// that reason unless asked for (`-- --include-ignored`, as root, the command .ci/run uses):
/// asked for without root, it fails saying so instead of passing.
pub fn require_root(what: &str) {
    assert!(
        rustix::process::geteuid().is_root(),
        "{what} needs root: run the tests that need it as root with `cargo test -- --include-ignored`"
    );
}

/// Skips a test that cannot run on this machine, visibly: the reason goes straight to the
/// terminal (libtest captures only `print!`/`eprint!` output, and shows it only on failure). In
/// CI, which provides everything, a skip would hide a failure, so it fails instead.
pub fn skip(test: &str, reason: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} cannot run: {reason}; CI must provide what it needs"
    );
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
}

/// The server binary over stdio, spoken to in raw JSON-RPC lines (rmcp's client always sends
/// well-formed requests with a progress token, so it cannot send what these tests need).
pub struct RawStdio {
    pub child: Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    _dir: tempfile::TempDir,
}

impl RawStdio {
    /// Spawns `serve` (no pool unless `args` says so) and completes the MCP handshake.
    pub async fn start(args: &[&str]) -> Self {
        use tokio::io::AsyncBufReadExt;
        let dir = tempfile::tempdir().unwrap();
        let mut child = serve_command(dir.path(), &[&["--pool-size", "0"], args].concat())
            .spawn()
            .expect("spawn the server binary");
        let mut raw = Self {
            stdin: child.stdin.take().unwrap(),
            lines: tokio::io::BufReader::new(child.stdout.take().unwrap()).lines(),
            child,
            _dir: dir,
        };
        raw.send_line(
            &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"}}})
            .to_string(),
        )
        .await;
        raw.until_response(1).await;
        raw.send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        raw
    }

    pub async fn send_line(&mut self, line: &str) {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
    }

    pub async fn send(&mut self, message: Value) {
        self.send_line(&message.to_string()).await;
    }

    /// Messages up to and including the response to `id` (panics after a minute).
    pub async fn until_response(&mut self, id: u64) -> Vec<Value> {
        let lines = self.until_response_lines(id).await;
        lines
            .iter()
            .map(|line| serde_json::from_str(line).expect("one JSON message per line"))
            .collect()
    }

    /// [`Self::until_response`] as the lines the server wrote, byte for byte.
    pub async fn until_response_lines(&mut self, id: u64) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
                .await
                .expect("the server answers within a minute")
                .unwrap()
                .expect("the server keeps stdout open");
            let message: Value = serde_json::from_str(&line).expect("one JSON message per line");
            let done = message["id"] == serde_json::json!(id);
            seen.push(line);
            if done {
                return seen;
            }
        }
    }

    /// Closes stdin and asserts a clean exit.
    pub async fn finish(self) {
        let Self {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        assert_exits_when_stdin_closed(&mut child).await;
    }
}

/// `serve_http` on a free loopback port, in this process, for `app`.
pub struct HttpServer {
    pub url: String,
    /// The address it bound.
    pub addr: std::net::SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), code_execution_mcp::transport::ServeError>>,
}

impl HttpServer {
    pub async fn start(app: Arc<App>) -> Self {
        Self::serve(code_execution_mcp::transport::Access::ready(app)).await
    }

    /// `serve_http` for `access` (e.g. tenants with tokens) on a free loopback port.
    pub async fn serve(access: code_execution_mcp::transport::Access) -> Self {
        Self::serve_on(access, "127.0.0.1:0".parse().unwrap()).await
    }

    /// `serve_http` for `access` on `listen`, once it has started (it listens from the start:
    /// see [`HttpServer::serve_starting`]); `url` names the loopback address of its port.
    pub async fn serve_on(
        access: code_execution_mcp::transport::Access,
        listen: std::net::SocketAddr,
    ) -> Self {
        let started = access.started();
        let server = Self::serve_starting(access, listen).await;
        started
            .await
            .unwrap_or_else(|e| panic!("the server starts (is the image built?): {e}"));
        server
    }

    /// `serve_http` for `access` on `listen` as soon as it listens, its start going on.
    pub async fn serve_starting(
        access: code_execution_mcp::transport::Access,
        listen: std::net::SocketAddr,
    ) -> Self {
        let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(code_execution_mcp::transport::serve_http(
            access,
            listen,
            async move {
                let _ = stop_rx.await;
            },
            Some(bound_tx),
        ));
        let addr = bound_rx.await.expect("the HTTP server binds");
        Self {
            url: format!("http://127.0.0.1:{}/mcp", addr.port()),
            addr,
            stop,
            task,
        }
    }

    /// Stops the server and asserts it ended cleanly.
    pub async fn stop(self) {
        self.stop.send(()).unwrap();
        self.task.await.unwrap().unwrap();
    }
}

/// An MCP client of the streamable HTTP endpoint `url`, sending the bearer `token` if given.
pub async fn http_client(url: &str, token: Option<&str>) -> RunningService<RoleClient, ()> {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    code_execution_mcp::install_tls_provider();
    let transport = StreamableHttpClientTransport::from_config(config);
    ().serve(transport).await.expect("MCP handshake over HTTP")
}

/// A free loopback port (bound, then released for the server to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until `app`'s pool holds `size` ready containers (panics after 10 s).
pub async fn wait_for_full_pool(app: &App, size: usize) {
    for _ in 0..200 {
        if app.sandbox().pool_ready() == size {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the pool did not fill to {size}");
}

/// The engine's view of the one container in `app`'s full pool of size 1.
pub async fn inspect_pooled(app: &App) -> bollard::models::ContainerInspectResponse {
    wait_for_full_pool(app, 1).await;
    let engine = Engine::connect().await.expect("engine");
    let label = format!("{LABEL_INSTANCE}={}", app.sandbox().instance().id);
    let pooled = engine.list_labelled(&[label]).await.unwrap().remove(0).id;
    engine
        .client()
        .inspect_container(&pooled, None)
        .await
        .unwrap()
}

/// What a Python client's servers inherit: the shared image-tree copy (a server with a fresh
/// data directory would otherwise copy the image's `/usr` before it answers, past the SDK's
/// 10 s `server/discover` probe, which then falls back to the legacy handshake), and no preload.
pub fn python_client_env() -> [(&'static str, std::ffi::OsString); 2] {
    [
        ("CEM_IMAGE_TREE_DIR", shared_image_trees().into_os_string()),
        ("CEM_PRELOAD", "none".into()),
    ]
}

/// Runs `tests/python/SCRIPT BINARY DATA_DIR` with the interpreter of the official MCP Python
/// SDK ([`upstreams::sdk_python`]), asserting the SDK is there and the script passed.
pub fn run_python_client(script: &str) {
    run_python_client_with(script, &[]);
}

/// What a Python client script printed, and the data directory its servers used
/// (`CEM_DATA_DIR`), kept until this is dropped.
pub struct PythonRun {
    pub stdout: String,
    pub data: PathBuf,
    _dir: tempfile::TempDir,
}

/// [`run_python_client`] with these environment variables besides (its servers inherit them).
pub fn run_python_client_with(script: &str, env: &[(&str, &str)]) -> PythonRun {
    let python = upstreams::sdk_python();
    let has_sdk = std::process::Command::new(&python)
        .args(["-c", "import mcp, yaml"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_sdk,
        "the official MCP Python SDK or PyYAML is missing for {}: unset CEM_TEST_PYTHON to let the tests make a venv, or point it at an interpreter with the main pins of tests/upstream-pins.txt",
        python.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let data = dir.path().join("data");
    let out = std::process::Command::new(&python)
        .args(["-W", "ignore::DeprecationWarning"])
        .arg(script)
        .arg(BIN)
        .arg(dir.path())
        .envs(python_client_env())
        .env("CEM_DATA_DIR", &data)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    // Shown as the script printed it (libtest shows it for a failing test).
    print!("{stdout}");
    assert!(
        out.status.success(),
        "the Python client failed: {}",
        out.status
    );
    PythonRun {
        stdout,
        data,
        _dir: dir,
    }
}

/// Asserts that a Prometheus `/api/v1/rules` answer (its `data`) holds the alert rules of
/// images/prometheus/rules/, each evaluating without error on the series it sees.
pub fn assert_rules_healthy(answer: &Value) {
    let rules: Vec<&Value> = answer["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .collect();
    assert!(rules.len() >= 6, "rules loaded: {rules:?}");
    for rule in rules {
        assert_eq!(rule["health"], "ok", "{rule}");
    }
}
