//! `execute_code`: the original's arguments and response fields, plus a machine-readable
//! `status`, stderr, truncation flags and the limits actually applied.

use rmcp::handler::server::tool::{InputResponses as ToolInputResponses, RequestState};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResponse;
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::CodeExecutionServer;
use crate::app::execution::paused::Parked;
use crate::app::execution::produced::ProducedFile;
use crate::app::execution::progress::{self, LatestLine, Progress};
use crate::app::execution::request::ExecuteRequest;
use crate::gateway::{Answer, AskError, Confirm, Prompt, ToolCallRecord};
use crate::privacy::{Attachment, Link, Reply};
use crate::sandbox::Status;
use std::sync::Arc;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteCodeArgs {
    /// Python source.
    pub code: String,
    /// Extra globals.
    #[serde(default)]
    pub context_vars: Option<Map<String, Value>>,
    /// Default 30.
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
    /// Default 500.
    #[serde(default)]
    pub memory_mb: Option<f64>,
    /// "new", or a result's `session` to keep its variables ("HANDLE@N": its revision N).
    #[serde(default)]
    pub session: Option<String>,
    /// Branch `session` into a new one.
    #[serde(default)]
    pub fork: Option<bool>,
    /// Pip requirements, e.g. "orjson==3.*".
    #[serde(default)]
    pub packages: Option<Vec<String>>,
}

/// The limits an execution ran under, after clamping.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct AppliedLimits {
    pub timeout_seconds: f64,
    pub memory_mb: u64,
    /// What was changed from the request to fit the server's bounds, if anything.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub adjustments: Vec<String>,
    /// Limits this server's engine does not enforce (`memory_mb`, `pids_limit`), so the code
    /// ran without them: only on a server started with --allow-unenforced-limits (a rootless
    /// engine without cgroups). `notes` says why.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub not_enforced: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ExecuteCodeResponse {
    /// True when the code ran to the end without an exception.
    pub success: bool,
    /// How the execution ended: ok, error, timeout, memory_limit, output_limit or cancelled.
    pub status: String,
    /// The code's `result` variable (JSON; other values as their str()).
    pub result: Value,
    /// True when `result` was too large and is cut (then it is a string prefix of its JSON).
    pub result_truncated: bool,
    /// Printed lines (standard output, subprocesses included).
    pub output: Vec<String>,
    pub output_truncated: bool,
    /// Standard error text (warnings, subprocess errors).
    pub stderr: String,
    pub stderr_truncated: bool,
    pub execution_time_ms: u64,
    /// Only when the call's container was not ready at once: whether a pooled one served it,
    /// how long the call waited for it, and why (pool_empty, preload_skipped, packages,
    /// memory_limit, pool_off).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub start: Option<crate::sandbox::StartNote>,
    pub error: Option<String>,
    /// The exception's type name, e.g. "ZeroDivisionError".
    pub error_type: Option<String>,
    pub traceback: Option<String>,
    pub limits: AppliedLimits,
    /// The upstream MCP tool calls the code made (server, tool, duration, ok), in order.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub tool_calls: Vec<ToolCallRecord>,
    /// Images the code returned (show_image, matplotlib figures), in the order of the image
    /// content that follows this JSON.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub images: Vec<ImageInfo>,
    /// Workspace files the code created or changed (read them with resources/read or
    /// read_workspace_file), and those it returned with resource_link().
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub files: Vec<FileInfo>,
    /// More files changed than are listed.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub files_truncated: bool,
    /// What was not returned, and why (images past the limit, links to missing files).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub notes: Vec<String>,
    /// The session's handle (with `session`): pass it as `session` to continue.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub session: Option<String>,
    /// What the session carries to its next call (with `session`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub state: Option<crate::sandbox::run::carry::StateReport>,
    /// The installed packages the code ran with (with `packages`, or a session that has some).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub packages: Option<crate::app::execution::packages::PackagesReport>,
    /// The calls the code planned (tools whose policy is `plan`): whether the user approved
    /// them and how each went.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub plan: Option<crate::gateway::plan::PlanReport>,
    /// The HTTP requests the code made through the server (egress), the first 50 in order.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub http_requests: Vec<crate::gateway::egress::record::HttpRecord>,
    /// How many more it made than are listed.
    #[serde(skip_serializing_if = "is_zero", default)]
    pub http_requests_more: u64,
}

/// Most egress requests an `execute_code` response lists (the audit record keeps more).
const MAX_SHOWN_HTTP: usize = 50;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One returned image.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ImageInfo {
    /// "figure 1", a file name, or the code's `source` argument.
    pub source: String,
    pub width: u32,
    pub height: u32,
    /// Bytes of PNG.
    pub bytes: usize,
    /// [width, height] as the code made it, when the image was scaled down to the limits.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scaled_from: Option<[u32; 2]>,
}

/// A workspace file, as an MCP resource.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct FileInfo {
    pub path: String,
    /// The resource URI (workspace:///...).
    pub uri: String,
    pub size: u64,
    pub mime_type: String,
    /// created, modified, or linked (returned with resource_link()).
    pub change: String,
}

/// Confirms an upstream call by asking the client's user with the server's own elicitation
/// request (legacy connections, which negotiated with `initialize`).
struct ElicitConfirm {
    peer: rmcp::Peer<RoleServer>,
    /// How long the user may take (`--confirm-wait-secs`).
    limit: std::time::Duration,
}

#[async_trait::async_trait]
impl Confirm for ElicitConfirm {
    async fn ask(&self, prompt: Prompt) -> Result<Answer, AskError> {
        use rmcp::model::{ElicitRequestParams, ElicitationAction};
        let schema =
            serde_json::from_value(serde_json::json!({"type": "object", "properties": {}}))
                .map_err(|e| AskError::Failed(format!("internal error: {e}")))?;
        let request = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: prompt.message,
            requested_schema: schema,
        };
        match tokio::time::timeout(self.limit, self.peer.create_elicitation(request)).await {
            Err(_) => Err(AskError::Expired(format!(
                "no answer within {} s (--confirm-wait-secs)",
                self.limit.as_secs()
            ))),
            Ok(Err(e)) => Err(AskError::Failed(e.to_string())),
            Ok(Ok(answer)) => Ok(match answer.action {
                ElicitationAction::Accept => Answer::Accept,
                ElicitationAction::Decline => Answer::Decline,
                _ => Answer::Cancel,
            }),
        }
    }
}

/// How a request's client speaks: which era, and whether it can answer questions and run
/// tasks (2026-07-28 declares both per request, in `_meta`).
struct ClientKind {
    /// 2026-07-28 or later: no server-initiated requests.
    modern: bool,
    elicits: bool,
    tasks: bool,
}

impl ClientKind {
    fn of(ctx: &RequestContext<RoleServer>) -> Self {
        // ISO dates compare as strings in time order.
        let modern = ctx
            .protocol_version()
            .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str());
        let capabilities = ctx.client_capabilities();
        Self {
            modern,
            elicits: capabilities
                .as_ref()
                .is_some_and(|c| c.elicitation.is_some()),
            tasks: modern && capabilities.as_ref().is_some_and(|c| c.supports_tasks()),
        }
    }
}

impl CodeExecutionServer {
    /// A produced file as the model sees it: its path (and so its URI) with personal data
    /// tokenized like every listed path.
    fn file_info(&self, file: &ProducedFile) -> FileInfo {
        let path = self.app.privacy().text(file.path.clone()).into_string();
        FileInfo {
            uri: crate::workspace::uri::uri_for(&path),
            path,
            size: file.size,
            mime_type: file.mime_type.clone(),
            change: file.change.to_string(),
        }
    }
}

#[tool_router(router = execute_router, vis = "pub(crate)")]
impl CodeExecutionServer {
    #[tool(
        description = "Run Python 3.13 in a fresh sandbox (no network; time and memory limits); set `result` or print to return a small summary. Preloaded: read_file, write_file, list_files, delete_file (in /workspace, kept between calls), filter_by_field, summarize_list, aggregate_stats, format_output, show_image, resource_link; numpy, pandas, matplotlib with the data image. More (sessions, packages, plans, response fields): docs://tools/execute_code.",
        output_schema = rmcp::handler::server::tool::schema_for_output::<ExecuteCodeResponse>(),
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            open_world_hint = false
        )
    )]
    async fn execute_code(
        &self,
        Parameters(args): Parameters<ExecuteCodeArgs>,
        RequestState(state): RequestState,
        ToolInputResponses(responses): ToolInputResponses,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Reply> {
        if let Some(state) = state {
            // A retry that answers questions: it resumes the paused execution.
            let session = args.session.as_deref();
            let responses = responses.unwrap_or_default();
            return self
                .resume(&args.code, session, &state, responses, &ctx)
                .await;
        }
        let client = ClientKind::of(&ctx);
        let detach =
            client.tasks || (client.modern && client.elicits && self.app.gateway().is_some());
        if detach {
            let (code, session) = (args.code.clone(), args.session.clone());
            let detached = self.app.execute_detached(request_of(args, &ctx));
            if client.tasks {
                return self.run_as_task(detached, &ctx).await;
            }
            let parked = Parked::new(detached, &code, session.as_deref());
            return self.drive_rounds(parked, &ctx).await;
        }
        self.run_inline(args, ctx).await.map(Reply::into_response)
    }
}

/// The request `args` make within `ctx`, without a way to ask or to report progress yet.
fn request_of(args: ExecuteCodeArgs, ctx: &RequestContext<RoleServer>) -> ExecuteRequest {
    ExecuteRequest {
        client: ctx
            .client_info()
            .map(|c| crate::text::prefix_chars(&c.name, 100).to_owned()),
        oauth: oauth_identity(ctx),
        code: args.code,
        context_vars: args.context_vars.map(Value::Object),
        timeout_seconds: args.timeout_seconds,
        memory_mb: args.memory_mb,
        session: args.session,
        fork: args.fork.unwrap_or(false),
        tap: None,
        confirm: None,
        packages: args.packages.unwrap_or_default(),
    }
}

/// The OAuth user of the HTTP request `ctx` came in (the transport puts it there).
pub(crate) fn oauth_identity(ctx: &RequestContext<RoleServer>) -> Option<crate::oauth::Identity> {
    let parts = ctx.extensions.get::<http::request::Parts>()?;
    parts.extensions.get::<crate::oauth::Identity>().cloned()
}

impl CodeExecutionServer {
    /// The execution within this request (legacy connections, and modern ones with nothing
    /// to ask): progress reports to the request's token, questions by server-initiated
    /// elicitation where the client supports it.
    async fn run_inline(
        &self,
        args: ExecuteCodeArgs,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Reply, Reply> {
        let token = ctx.meta.get_progress_token();
        let (tap, latest) = LatestLine::new();
        let mut request = request_of(args, &ctx);
        request.tap = token.is_some().then(|| Arc::new(tap) as _);
        let legacy_elicits =
            !ClientKind::of(&ctx).modern && !ctx.peer.supported_elicitation_modes().is_empty();
        request.confirm = legacy_elicits.then(|| {
            Arc::new(ElicitConfirm {
                peer: ctx.peer.clone(),
                limit: self.app.config().gateway.confirm_wait(),
            }) as _
        });
        let run = self.app.execute(request, ctx.ct.clone());
        let ran = match token {
            None => run.await,
            Some(token) => {
                let report = |p: Progress| {
                    let (peer, token) = (ctx.peer.clone(), token.clone());
                    let note =
                        crate::privacy::progress_note(token, p.elapsed.as_secs_f64(), p.message);
                    // A client that went away stops getting reports; the execution goes on.
                    async move {
                        let _ = peer.notify_progress(note).await;
                    }
                };
                let shown = |line| self.app.privacy().text_cut(line, progress::MAX_LINE_CHARS);
                progress::with_progress(run, latest, shown, report).await
            }
        };
        self.respond(ran, &ctx.peer).await
    }

    /// The answer to an execution that ended, and the announcement of the files it changed to
    /// `peer`'s subscriptions.
    pub(super) async fn respond(
        &self,
        ran: Result<crate::app::Executed, crate::app::ExecuteError>,
        peer: &rmcp::Peer<RoleServer>,
    ) -> Result<Reply, Reply> {
        // Bad input, busy, a full workspace or an engine failure: a message saying what to do.
        let ran = ran.map_err(|e| self.error(e.to_string()))?;
        let produced = &ran.produced;
        let changed: Vec<String> = produced.files.iter().map(|f| f.path.clone()).collect();
        let more = produced.files_truncated;
        self.announce_changes(peer, &changed, produced.listing_changed, more)
            .await;
        let ok = ran.outcome.status == Status::Ok;
        let (response, attachments) = self.response(ran);
        let reply = self.app.privacy().structured(&response, !ok, attachments);
        if ok { Ok(reply) } else { Err(reply) }
    }

    /// An ended execution as `execute_code` answers it: the structured response, and the
    /// images and links that follow it.
    fn response(&self, ran: crate::app::Executed) -> (ExecuteCodeResponse, Vec<Attachment>) {
        let (outcome, limits, produced) = (ran.outcome, ran.limits, ran.produced);
        let tool_calls = self.shown_calls(ran.tool_calls);
        let plan = ran.plan.map(|plan| self.shown_plan(plan));
        let (mut http_requests, mut http_requests_more) = ran.http_requests;
        if http_requests.len() > MAX_SHOWN_HTTP {
            http_requests_more += (http_requests.len() - MAX_SHOWN_HTTP) as u64;
            http_requests.truncate(MAX_SHOWN_HTTP);
        }
        let response = ExecuteCodeResponse {
            success: outcome.success(),
            status: outcome.status.as_str().to_string(),
            result: outcome.result,
            result_truncated: outcome.result_truncated,
            output: outcome.stdout.lines(),
            output_truncated: outcome.stdout.truncated(),
            stderr_truncated: outcome.stderr.truncated(),
            stderr: outcome.stderr.into_string(),
            execution_time_ms: outcome.elapsed.as_millis() as u64,
            start: outcome.start,
            error: outcome.error,
            error_type: outcome.error_type,
            traceback: outcome.traceback,
            limits: AppliedLimits {
                timeout_seconds: limits.timeout.as_secs_f64(),
                memory_mb: (limits.memory_bytes / (1024 * 1024)) as u64,
                adjustments: limits.adjustments,
                not_enforced: self.app.engine_limits().not_enforced(),
            },
            tool_calls,
            images: produced
                .images
                .iter()
                .map(|i| ImageInfo {
                    source: i.source.clone(),
                    width: i.png.width,
                    height: i.png.height,
                    bytes: i.png.bytes.len(),
                    scaled_from: i.png.scaled_from.map(|(w, h)| [w, h]),
                })
                .collect(),
            // A linked file that the code also created is listed once, as created.
            files: produced
                .files
                .iter()
                .chain(
                    produced
                        .links
                        .iter()
                        .filter(|l| !produced.files.iter().any(|f| f.path == l.path)),
                )
                .map(|f| self.file_info(f))
                .collect(),
            files_truncated: produced.files_truncated,
            notes: (self.app.engine_limits().note().into_iter())
                .chain(produced.notes)
                .collect(),
            session: ran.session,
            state: ran.state,
            packages: ran.packages,
            plan,
            http_requests,
            http_requests_more,
        };
        let mut attachments = self.attachments(produced.images, &produced.links);
        // The session's manifest, to read what it holds without running code.
        if let Some(handle) = &response.session {
            attachments.push(Attachment::Link(Link {
                uri: crate::sessions::view::uri(handle),
                name: format!("session {handle}"),
                mime_type: "application/json".into(),
                size: response.state.as_ref().map_or(0, |s| s.bytes),
                description: Some("What the session holds: variables, revisions, packages".into()),
            }));
        }
        (response, attachments)
    }

    /// The upstream calls as the response lists them.
    fn shown_calls(
        &self,
        calls: Vec<crate::gateway::ToolCallRecord>,
    ) -> Vec<crate::gateway::ToolCallRecord> {
        calls
            .into_iter()
            .map(|mut call| {
                // An upstream's error text may quote the data it was given.
                call.error = call.error.map(|e| {
                    let max = crate::gateway::call_record::MAX_RECORD_ERROR_CHARS;
                    self.app.privacy().text_cut(e, max).into_string()
                });
                call
            })
            .collect()
    }

    /// The plan as the response reports it: its failures' messages cut as calls' are.
    fn shown_plan(
        &self,
        mut plan: crate::gateway::plan::PlanReport,
    ) -> crate::gateway::plan::PlanReport {
        let max = crate::gateway::call_record::MAX_RECORD_ERROR_CHARS;
        for failure in &mut plan.failures {
            let error = std::mem::take(&mut failure.error);
            failure.error = self.app.privacy().text_cut(error, max).into_string();
        }
        plan
    }

    /// Images and links follow the JSON, in the order `images` and `files` list them.
    fn attachments(
        &self,
        images: Vec<crate::app::execution::produced::ReadyImage>,
        links: &[crate::app::execution::produced::ProducedFile],
    ) -> Vec<Attachment> {
        (images.into_iter())
            .map(|i| Attachment::Png(i.png.bytes))
            .chain(links.iter().map(|link| {
                let info = self.file_info(link);
                Attachment::Link(Link {
                    uri: info.uri,
                    name: info.path,
                    mime_type: info.mime_type,
                    size: info.size,
                    description: link.description.clone(),
                })
            }))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::ServiceExt;
    use rmcp::model::{
        ClientCapabilities, ElicitRequestParams, ElicitResult, Implementation,
        InitializeRequestParams,
    };
    use rmcp::service::{RequestContext, RoleClient};

    /// A client that supports elicitation and never answers.
    struct Silent;

    impl rmcp::ClientHandler for Silent {
        // A test client's handler: rmcp's error type in its signature, and it never answers.
        #[allow(clippy::disallowed_types)]
        async fn create_elicitation(
            &self,
            _request: ElicitRequestParams,
            _context: RequestContext<RoleClient>,
        ) -> Result<ElicitResult, rmcp::ErrorData> {
            std::future::pending().await
        }

        fn get_info(&self) -> InitializeRequestParams {
            let mut capabilities = ClientCapabilities::default();
            capabilities.elicitation = Some(Default::default());
            InitializeRequestParams::new(capabilities, Implementation::new("silent", "1"))
        }
    }

    /// A server with nothing but its peer.
    struct Bare;

    impl rmcp::ServerHandler for Bare {}

    #[tokio::test(start_paused = true)]
    async fn a_confirmation_nobody_answers_ends_at_its_limit() {
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(Bare.serve(server_io));
        let _client = Silent.serve(client_io).await.expect("client connects");
        let server = server.await.unwrap().expect("server starts");
        let started = tokio::time::Instant::now();
        let limit = std::time::Duration::from_secs(300);
        let confirm = ElicitConfirm {
            peer: server.peer().clone(),
            limit,
        };
        let answer = confirm.ask(Prompt::new("Allow this call?")).await;
        assert_eq!(
            answer,
            Err(AskError::Expired(
                "no answer within 300 s (--confirm-wait-secs)".to_string()
            ))
        );
        assert!(started.elapsed() >= limit);
    }
}
