//! One upstream MCP server, kept connected: a supervisor task connects (a child process over
//! stdio, or streamable HTTP), lists every tool (all pages), lists again when the upstream
//! says `notifications/tools/list_changed`, and when the connection ends (the process died,
//! the server went away) connects again after a backoff of 1, 2, 4, 8, 16 s, at most
//! [`MAX_RESTARTS`] times in a row before it gives up and says why.
//!
//! One client session per upstream, shared by every call: a session per call would break
//! upstreams that keep a login or open handles. Nothing an upstream does can take the server
//! down: its output is read with a line limit, its stderr is logged at a bounded rate (the
//! last lines kept for error messages), each request has a deadline, and a child process is
//! started in a process group of its own, killed as a group when the connection is dropped and
//! when the process exits (a child it left behind may hold the pipes open).
//!
//! A child gets a small environment: PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG, LC_ALL,
//! TZ and TMPDIR of the server's, plus the entry's `env` (the MCP Python SDK's default, so
//! an entry copied from Claude Desktop works). The server's own settings (tokens among them)
//! are never passed on.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, PaginatedRequestParams};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use serde_json::Value;
use tokio::io::AsyncRead;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::child::{ChildGuard, read_bounded_line};
use super::client::{UpstreamClient, connect_http};
use super::redact::Redactor;
use super::tools::LiveTool;
use super::upstreams_file::{UpstreamConfig, UpstreamTransport};

/// Restarts in a row after which a failing upstream is given up (until the server restarts):
/// with the first attempt, six connections in a row that failed or did not last.
pub const MAX_RESTARTS: u32 = 5;
/// A connection that stayed up this long resets the count of attempts.
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// Lines of an upstream's stderr kept for error messages, each cut to this many characters.
const STDERR_TAIL_LINES: usize = 20;
const STDERR_LINE_CHARS: usize = 500;
/// Stderr lines logged per 10 s window; the rest are counted, not logged.
const STDERR_LOG_BUDGET: u32 = 50;
/// Most tools kept of one upstream, and most pages of its list read: each tool is a file in
/// every sandbox's package and an entry in discovery.
pub const MAX_TOOLS: usize = 1000;
const MAX_PAGES: usize = 100;
/// Variables of the server's environment a stdio upstream inherits.
const INHERITED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "TZ", "TMPDIR",
];

/// How the gateway bounds its upstreams.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamLimits {
    /// Longest wait for `initialize` and for the tool list.
    pub connect_timeout: Duration,
    /// Longest message read from an upstream (a larger one is dropped, and the call it
    /// answers times out); results over the result limit but under this get a clear error.
    pub max_message_bytes: usize,
}

/// Where an upstream is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamStatus {
    Connecting,
    Ready,
    /// Down, connecting again after a backoff.
    Down {
        reason: String,
    },
    /// Given up after [`MAX_RESTARTS`] attempts in a row.
    Failed {
        reason: String,
    },
}

struct Live {
    peer: Peer<RoleClient>,
    tools: Arc<Vec<LiveTool>>,
}

/// One upstream and its connection.
pub struct Upstream {
    pub config: UpstreamConfig,
    /// The entry's credentials, replaced in everything the upstream sends back.
    redactor: Redactor,
    limits: UpstreamLimits,
    status: RwLock<UpstreamStatus>,
    live: RwLock<Option<Live>>,
    stderr_tail: Mutex<VecDeque<String>>,
    /// Why the last connection failed or ended, while a new one is being made.
    last_failure: Mutex<Option<String>>,
}

/// Why a call to an upstream failed before it had a result.
#[derive(Debug, thiserror::Error)]
pub enum CallFailure {
    #[error("upstream `{server}` is not connected: {reason}")]
    Unavailable { server: String, reason: String },
    #[error(
        "upstream `{server}` did not answer `{tool}` within {secs} s (--tool-call-timeout-secs)"
    )]
    Timeout {
        server: String,
        tool: String,
        secs: u64,
    },
    #[error("upstream `{server}` failed on `{tool}`: {message}")]
    Protocol {
        server: String,
        tool: String,
        message: String,
    },
}

impl Upstream {
    pub fn new(config: UpstreamConfig, limits: UpstreamLimits) -> Arc<Self> {
        Arc::new(Self {
            redactor: config.redactor(),
            config,
            limits,
            status: RwLock::new(UpstreamStatus::Connecting),
            live: RwLock::new(None),
            stderr_tail: Mutex::new(VecDeque::new()),
            last_failure: Mutex::new(None),
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    pub fn status(&self) -> UpstreamStatus {
        self.status.read().expect("status lock").clone()
    }

    /// The tools of the current connection (empty while it is down).
    pub fn tools(&self) -> Arc<Vec<LiveTool>> {
        self.live
            .read()
            .expect("live lock")
            .as_ref()
            .map(|l| l.tools.clone())
            .unwrap_or_default()
    }

    /// The last lines the upstream wrote to stderr, oldest first.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr_tail
            .lock()
            .expect("stderr lock")
            .iter()
            .cloned()
            .collect()
    }

    /// Whether the first connection is still being made: the upstream has neither listed its
    /// tools nor failed yet.
    pub fn first_connection_pending(&self) -> bool {
        self.status() == UpstreamStatus::Connecting
            && self.last_failure.lock().expect("failure lock").is_none()
    }

    /// Why the last connection failed or ended, if one did.
    pub fn last_failure(&self) -> Option<String> {
        self.last_failure.lock().expect("failure lock").clone()
    }

    /// Longest wait for `initialize` (and again for the tool list).
    pub fn connect_timeout(&self) -> Duration {
        self.limits.connect_timeout
    }

    fn set_status(&self, status: UpstreamStatus) {
        *self.status.write().expect("status lock") = status;
    }

    /// Calls `tool` with `arguments` and returns the result as the wire JSON
    /// (`content`, `structuredContent`, `isError`).
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        timeout: Duration,
    ) -> Result<Value, CallFailure> {
        let peer = self
            .live
            .read()
            .expect("live lock")
            .as_ref()
            .map(|l| l.peer.clone());
        let Some(peer) = peer else {
            return Err(CallFailure::Unavailable {
                server: self.name().to_string(),
                reason: self.unavailable_reason(),
            });
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => Err(CallFailure::Timeout {
                server: self.name().to_string(),
                tool: tool.to_string(),
                secs: timeout.as_secs().max(1),
            }),
            Ok(Err(e)) => Err(CallFailure::Protocol {
                server: self.name().to_string(),
                tool: tool.to_string(),
                message: self.explain(&e),
            }),
            // The one way a result comes in: the entry's credentials go here, before the
            // result is measured, turned into a Python value or recorded.
            Ok(Ok(result)) => Ok(self
                .redactor
                .value(serde_json::to_value(result).unwrap_or(Value::Null))),
        }
    }

    /// `text` from or about the upstream with the entry's credentials replaced (see
    /// `redact.rs`): for every error, status and stderr line that may reach code, the model
    /// or the logs.
    fn scrub(&self, text: &str) -> String {
        self.redactor.text(text).into_owned()
    }

    /// Why the upstream cannot take a call now, and what happens next.
    pub fn unavailable_reason(&self) -> String {
        match self.status() {
            UpstreamStatus::Connecting => match self
                .last_failure
                .lock()
                .expect("failure lock")
                .clone()
            {
                Some(reason) => format!("connecting again after: {reason}"),
                None => {
                    "it is still connecting (`initialize` not answered yet); try again in a moment"
                        .into()
                }
            },
            UpstreamStatus::Ready => "its connection just ended; it is reconnecting".into(),
            UpstreamStatus::Down { reason } => format!("{reason}; reconnecting"),
            UpstreamStatus::Failed { reason } => {
                format!("{reason}; fix the upstream and restart code-execution-mcp")
            }
        }
    }

    /// A service error in words, with the upstream's last stderr line when the transport
    /// closed (a crashed process usually says why there).
    fn explain(&self, e: &ServiceError) -> String {
        self.scrub(&self.explain_raw(e))
    }

    fn explain_raw(&self, e: &ServiceError) -> String {
        match e {
            ServiceError::McpError(data) => data.message.to_string(),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                let last = self.stderr_tail().pop();
                match last {
                    Some(line) => format!("the connection closed (its last stderr line: {line})"),
                    None => "the connection closed".into(),
                }
            }
            other => other.to_string(),
        }
    }

    /// Keeps the upstream connected until `cancel`; `changed` is called whenever its tool
    /// list (or whether it has one) changes.
    pub async fn supervise(
        self: Arc<Self>,
        cancel: CancellationToken,
        changed: Arc<dyn Fn() + Send + Sync>,
    ) {
        let mut failures: u32 = 0;
        loop {
            self.set_status(UpstreamStatus::Connecting);
            let started = Instant::now();
            let ended = self.connect_and_serve(&cancel, &changed).await;
            let was_live = self.live.write().expect("live lock").take().is_some();
            if was_live {
                changed();
            }
            if cancel.is_cancelled() {
                return;
            }
            if started.elapsed() >= STABLE_AFTER {
                failures = 0;
            }
            failures += 1;
            let reason = self.scrub(&self.with_stderr(ended));
            if failures > MAX_RESTARTS {
                tracing::error!(upstream = %self.name(), %reason, "upstream given up: {MAX_RESTARTS} restarts in a row failed");
                self.set_status(UpstreamStatus::Failed {
                    reason: format!("{reason} (given up: {MAX_RESTARTS} restarts in a row failed)"),
                });
                return;
            }
            let backoff = Duration::from_secs(1 << (failures - 1).min(4));
            tracing::warn!(upstream = %self.name(), %reason, retry_in_secs = backoff.as_secs(), "upstream down");
            *self.last_failure.lock().expect("failure lock") = Some(reason.clone());
            self.set_status(UpstreamStatus::Down { reason });
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
        }
    }

    fn with_stderr(&self, reason: String) -> String {
        match self.stderr_tail().last() {
            Some(line) if !reason.contains(line.as_str()) => {
                format!("{reason} (its last stderr line: {line})")
            }
            _ => reason,
        }
    }

    /// Connects within the connect timeout, with the child's guard for a stdio upstream; or
    /// says why not.
    async fn connect(
        self: &Arc<Self>,
        handler: UpstreamClient,
        cancel: &CancellationToken,
    ) -> Result<
        (
            RunningService<RoleClient, UpstreamClient>,
            Option<ChildGuard>,
        ),
        String,
    > {
        let connect = async {
            match &self.config.transport {
                UpstreamTransport::Stdio { .. } => self
                    .connect_stdio(handler)
                    .await
                    .map(|(service, child)| (service, Some(child))),
                UpstreamTransport::Http { url, headers } => {
                    connect_http(handler, url, headers, self.limits)
                        .await
                        .map(|service| (service, None))
                        .map_err(|e| self.scrub(&e))
                }
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => Err("stopped".into()),
            r = tokio::time::timeout(self.limits.connect_timeout, connect) => match r {
                Err(_) => Err(format!(
                    "{} did not answer `initialize` within {} s",
                    self.config.describe(),
                    self.limits.connect_timeout.as_secs()
                )),
                Ok(connected) => connected,
            },
        }
    }

    /// Takes a listing (redacted) as the upstream's live tools, and says it is ready.
    fn publish(
        &self,
        tools: &[rmcp::model::Tool],
        peer: &Peer<RoleClient>,
        changed: &Arc<dyn Fn() + Send + Sync>,
    ) {
        let tools: Vec<LiveTool> = tools
            .iter()
            .filter_map(|t| {
                LiveTool::from_wire(&self.redactor.value(serde_json::to_value(t).ok()?))
            })
            .collect();
        tracing::info!(upstream = %self.name(), tools = tools.len(), "upstream tools listed");
        *self.live.write().expect("live lock") = Some(Live {
            peer: peer.clone(),
            tools: Arc::new(tools),
        });
        self.set_status(UpstreamStatus::Ready);
        changed();
    }

    /// One connection, from connect to its end; returns why it ended.
    async fn connect_and_serve(
        self: &Arc<Self>,
        cancel: &CancellationToken,
        changed: &Arc<dyn Fn() + Send + Sync>,
    ) -> String {
        let (relist_tx, mut relist_rx) = mpsc::channel(1);
        let handler = UpstreamClient {
            name: self.name().to_string(),
            relist: relist_tx,
        };
        // Held to the end of this connection: dropping it kills the child's process group.
        let (service, _child) = match self.connect(handler, cancel).await {
            Ok(connected) => connected,
            Err(why) => return why,
        };
        let peer = service.peer().clone();
        let stop = service.cancellation_token();
        let mut waiting = Box::pin(service.waiting());
        let mut listed = false;
        // List first, then again after each `tools/list_changed`, until the connection ends.
        let mut list_now = true;
        loop {
            let step = async {
                if list_now {
                    Some(
                        tokio::time::timeout(
                            self.limits.connect_timeout,
                            list_tools(&peer, self.name()),
                        )
                        .await,
                    )
                } else {
                    if relist_rx.recv().await.is_none() {
                        std::future::pending::<()>().await;
                    }
                    None
                }
            };
            let tools = tokio::select! {
                _ = cancel.cancelled() => {
                    stop.cancel();
                    let _ = waiting.await;
                    return "stopped".into();
                }
                _ = &mut waiting => {
                    return format!(
                        "{} ended its connection (the process exited or the server closed the session)",
                        self.config.describe()
                    );
                }
                step = step => step,
            };
            let Some(tools) = tools else {
                list_now = true;
                continue;
            };
            list_now = false;
            match tools {
                Ok(Ok(tools)) => {
                    self.publish(&tools, &peer, changed);
                    listed = true;
                }
                Ok(Err(e)) if !listed => {
                    stop.cancel();
                    return format!("listing its tools failed: {}", self.explain(&e));
                }
                Err(_) if !listed => {
                    stop.cancel();
                    return format!(
                        "listing its tools took over {} s",
                        self.limits.connect_timeout.as_secs()
                    );
                }
                // A failed relist keeps the last list; the next notification tries again.
                Ok(Err(e)) => {
                    tracing::warn!(upstream = %self.name(), error = %self.explain(&e), "listing tools again failed")
                }
                Err(_) => tracing::warn!(upstream = %self.name(), "listing tools again timed out"),
            }
        }
    }

    async fn connect_stdio(
        self: &Arc<Self>,
        handler: UpstreamClient,
    ) -> Result<(RunningService<RoleClient, UpstreamClient>, ChildGuard), String> {
        let UpstreamTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } = &self.config.transport
        else {
            unreachable!("connect_stdio is called for stdio upstreams")
        };
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(args)
            .env_clear()
            .envs(
                INHERITED_ENV
                    .iter()
                    .filter_map(|k| Some((*k, std::env::var_os(k)?))),
            )
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.config.describe()))?;
        let group = child.id();
        let stdout = child.stdout.take().expect("stdout is piped");
        let stdin = child.stdin.take().expect("stdin is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let guard = ChildGuard::watch(child, group);
        tokio::spawn(self.clone().read_stderr(stderr));
        let transport =
            rmcp::transport::async_rw::AsyncRwTransport::<RoleClient, _, _>::new(stdout, stdin)
                .with_max_line_length(self.limits.max_message_bytes);
        let service = handler
            .serve(transport)
            .await
            .map_err(|e| format!("{} failed to initialize: {e}", self.config.describe()))?;
        Ok((service, guard))
    }

    /// Logs the upstream's stderr at a bounded rate and keeps its last lines.
    async fn read_stderr(self: Arc<Self>, stderr: impl AsyncRead + Unpin) {
        let mut reader = tokio::io::BufReader::new(stderr);
        let mut line = Vec::new();
        let mut window = Instant::now();
        let (mut logged, mut suppressed) = (0u32, 0u64);
        loop {
            line.clear();
            match read_bounded_line(&mut reader, &mut line, 4 * STDERR_LINE_CHARS).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            // Cut where no value is left half-shown: the line reaches code and the model.
            let text = crate::text::cut_clean(
                String::from_utf8_lossy(&line).trim_end(),
                STDERR_LINE_CHARS,
            );
            if text.is_empty() {
                continue;
            }
            // Its lines are quoted in errors that reach code and the model: no secret of the
            // entry goes with them.
            let text = self.scrub(&text);
            if window.elapsed() > Duration::from_secs(10) {
                if suppressed > 0 {
                    tracing::info!(upstream = %self.name(), suppressed, "upstream stderr lines not logged");
                }
                window = Instant::now();
                logged = 0;
                suppressed = 0;
            }
            if logged < STDERR_LOG_BUDGET {
                logged += 1;
                tracing::info!(upstream = %self.name(), "stderr: {text}");
            } else {
                suppressed += 1;
            }
            let mut tail = self.stderr_tail.lock().expect("stderr lock");
            if tail.len() == STDERR_TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(text);
        }
    }
}

/// Every page of an upstream's tools, up to [`MAX_TOOLS`] tools and [`MAX_PAGES`] pages (an
/// upstream that lists more is cut there, with a warning, rather than grow the server without
/// bound).
async fn list_tools(
    peer: &Peer<RoleClient>,
    upstream: &str,
) -> Result<Vec<rmcp::model::Tool>, ServiceError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await?;
        tools.extend(page.tools);
        if tools.len() >= MAX_TOOLS {
            tools.truncate(MAX_TOOLS);
            tracing::warn!(%upstream, "the upstream lists over {MAX_TOOLS} tools: the first {MAX_TOOLS} are kept");
            return Ok(tools);
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            return Ok(tools);
        }
    }
    tracing::warn!(%upstream, "the upstream lists over {MAX_PAGES} pages of tools: the first {MAX_PAGES} are kept");
    Ok(tools)
}
