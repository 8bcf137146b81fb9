//! The MCP handler of a server that may still be starting ([`crate::app::Starting`]). A
//! client's handshake (`initialize`, `server/discover`, `ping`) and `tools/list` need nothing
//! the start makes, so they are answered at once; every other request waits for the
//! [`CodeExecutionServer`] of the started [`crate::app::App`] a bounded time, then goes to it.
//! A request that cannot wait longer is answered with the step the start is in and about how
//! long is left, or with why the start failed and what to change; `get_execution_stats` says
//! so at once.
//!
//! Stdio has one session; over HTTP each MCP session has a `Front` of its own, and the sessions
//! of one start (the one app's, or a tenant's: the shared start, then the tenant's opening)
//! share its [`Lobby`].
//!
//! Before the start ends there is no tenant's PII engine, so what this module says (the start's
//! own words: steps, durations, paths of a failure) goes through an engine of its own.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CancelTaskParams, CustomRequest,
    CustomResult, ErrorCode, GetSkillRequestParams, GetSkillResult, GetTaskParams, GetTaskResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{RoleServer, ServerHandler};
use serde_json::json;

use super::CodeExecutionServer;
use crate::app::starting::Step;
use crate::app::{StartError, StartState, Starting};
use crate::pii::PiiEngine;
use crate::privacy::{Privacy, Refusal};

/// How long a request other than `execute_code` waits for the start to end.
const WAIT: Duration = Duration::from_secs(20);
/// How long `execute_code` waits at most, whatever its `timeout_seconds`.
const MAX_EXECUTE_WAIT: Duration = Duration::from_secs(120);
/// The tokens a start's messages could mint: a handful.
const START_VAULT: usize = 64;

/// What every session of one start shares (the one app of stdio or of HTTP without tokens,
/// or one tenant's): the start, the listing it answers with before it ends, and the PII engine
/// of its own messages, which also reads what the transport answers before the app is ready.
pub struct Lobby {
    starting: Starting,
    /// Every tool, in name order, as a server without upstreams lists them.
    tools: Vec<Tool>,
    /// The door for the start's own messages.
    privacy: Privacy,
    /// Whether the server serves tenants: then even the fixed listing is cached privately
    /// (`cache_hints`).
    tenants: bool,
}

impl Lobby {
    /// The lobby of `starting`, on a server with tenants (bearer tokens) or without.
    pub fn new(starting: Starting, tenants: bool) -> Self {
        // Listed short, as the started server lists them (`tool_list::listed`).
        let mut tools: Vec<Tool> = (CodeExecutionServer::tool_router().list_all().iter())
            .map(super::tool_list::listed)
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        // The secret only keys tokens nobody restores: a fixed one serves if the random source
        // fails.
        let pii = PiiEngine::with_random_secret(START_VAULT)
            .unwrap_or_else(|_| PiiEngine::new([7; 32], START_VAULT));
        Self {
            starting,
            tools,
            privacy: Privacy::new(Arc::new(pii), true),
            tenants,
        }
    }

    pub fn starting(&self) -> &Starting {
        &self.starting
    }

    /// The privacy layer of what is told now: the started app's, or the start's own before.
    pub fn privacy(&self) -> Privacy {
        match self.starting.now() {
            StartState::Ready(app) => app.privacy().clone(),
            _ => self.privacy.clone(),
        }
    }
}

/// One MCP session: a [`CodeExecutionServer`] once the start has made its app; the start's
/// state before.
#[derive(Clone)]
pub struct Front {
    lobby: Arc<Lobby>,
    server: Arc<OnceLock<CodeExecutionServer>>,
}

impl Front {
    /// The one session of stdio.
    pub fn new(starting: Starting) -> Self {
        Self::in_lobby(Arc::new(Lobby::new(starting, false)))
    }

    /// A session of an HTTP server, over the lobby its start's sessions share.
    pub fn in_lobby(lobby: Arc<Lobby>) -> Self {
        Self {
            lobby,
            server: Arc::default(),
        }
    }

    /// The privacy layer of what this session is told now: the started server's, or the
    /// start's own before it has one.
    pub fn privacy(&self) -> Privacy {
        match self.ready() {
            Some(server) => server.app().privacy().clone(),
            None => self.lobby.privacy.clone(),
        }
    }

    /// The server, if the start has ended with one.
    fn ready(&self) -> Option<&CodeExecutionServer> {
        if let Some(server) = self.server.get() {
            return Some(server);
        }
        match self.lobby.starting.now() {
            StartState::Ready(app) => Some(self.server_of(app)),
            _ => None,
        }
    }

    fn server_of(&self, app: Arc<crate::app::App>) -> &CodeExecutionServer {
        self.server.get_or_init(|| CodeExecutionServer::new(app))
    }

    /// The server within `limit`, or what to tell the client instead.
    async fn server(&self, limit: Duration) -> Result<&CodeExecutionServer, String> {
        if let Some(server) = self.ready() {
            return Ok(server);
        }
        match self.lobby.starting.wait(limit).await {
            StartState::Ready(app) => Ok(self.server_of(app)),
            StartState::Failed(e) => Err(failed(&e)),
            StartState::Working(step) => Err(still_starting(&step)),
        }
    }

    /// [`Front::server`] for a request answered with a JSON-RPC error.
    async fn server_or_error(&self, limit: Duration) -> Result<&CodeExecutionServer, Refusal> {
        self.server(limit).await.map_err(|message| {
            self.lobby
                .privacy
                .refusal(ErrorCode::INTERNAL_ERROR, message)
        })
    }

    /// `get_execution_stats` before the start has ended: where it is, as an error result (the
    /// statistics' schema has nothing to fill yet).
    fn start_report(&self) -> CallToolResponse {
        let (message, step) = match self.lobby.starting.now() {
            StartState::Working(step) => (still_starting(&step), Some(step)),
            StartState::Failed(e) => (failed(&e), None),
            StartState::Ready(_) => ("the server has started: ask again".to_string(), None),
        };
        let starting = step.map(|step| {
            json!({
                "step": step.what,
                "step_seconds": step.since.elapsed().as_secs(),
                "seconds_since_start": self.lobby.starting.began().elapsed().as_secs(),
                "about_seconds_left": step.left().as_secs(),
            })
        });
        let value = json!({"success": false, "error": message, "starting": starting});
        self.lobby
            .privacy
            .structured(&value, true, Vec::new())
            .into_response()
    }
}

/// What a request that cannot wait longer is told while the start runs.
fn still_starting(step: &Step) -> String {
    format!(
        "the server is still starting: {} ({} s so far, about {} s left). Call again then; get_execution_stats shows the progress",
        step.what,
        step.since.elapsed().as_secs(),
        step.left().as_secs()
    )
}

/// What every request is told after the start failed (a tenant is told no cause: it names
/// the server's paths).
fn failed(error: &StartError) -> String {
    match error {
        StartError::TenantUnavailable | StartError::ServerUnavailable => error.to_string(),
        StartError::Cancelled => format!("{error}; call again once it runs again"),
        _ => format!(
            "the server could not start: {error}. Its operator fixes this and restarts it; nothing can run until then"
        ),
    }
}

/// How long `execute_code` may wait: its own `timeout_seconds` (the default's 30 s without
/// one), at most [`MAX_EXECUTE_WAIT`].
fn execute_wait(request: &CallToolRequestParams) -> Duration {
    let asked = request
        .arguments
        .as_ref()
        .and_then(|a| a.get("timeout_seconds"))
        .and_then(serde_json::Value::as_f64)
        .filter(|s| s.is_finite() && *s > 0.0)
        .unwrap_or(30.0);
    Duration::from_secs_f64(asked).min(MAX_EXECUTE_WAIT)
}

impl ServerHandler for Front {
    fn get_info(&self) -> ServerConfig {
        CodeExecutionServer::server_config()
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, Refusal> {
        if let Some(server) = self.ready() {
            return server.list_tools(request, context).await;
        }
        let mut result = ListToolsResult::with_all_items(self.lobby.tools.clone());
        if super::cache_hints::wanted(&context) {
            // Upstreams may add to the listing once the start ends: then ask again soon.
            // Without them it is the fixed listing, for every client alike, but cached
            // privately on a server with tenants, as the started server's.
            let (ttl, scope) = if self.lobby.starting.upstreams() {
                (super::cache_hints::UPSTREAM_TTL_MS, CacheScope::Private)
            } else if self.lobby.tenants {
                (super::cache_hints::STATIC_TTL_MS, CacheScope::Private)
            } else {
                (super::cache_hints::STATIC_TTL_MS, CacheScope::Public)
            };
            result = result.with_ttl_ms(ttl).with_cache_scope(scope);
        }
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        match self.ready() {
            Some(server) => server.get_tool(name),
            None => self.lobby.tools.iter().find(|t| t.name == name).cloned(),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Refusal> {
        let limit = match request.name.as_ref() {
            "get_execution_stats" if self.ready().is_none() => return Ok(self.start_report()),
            "execute_code" => execute_wait(&request),
            _ => WAIT,
        };
        match self.server(limit).await {
            Ok(server) => server.call_tool(request, context).await,
            Err(message) => self.lobby.privacy.error(message).into_call_tool_result(),
        }
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, Refusal> {
        let server = self.server_or_error(WAIT).await?;
        server.list_resources(request, context).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, Refusal> {
        let server = self.server_or_error(WAIT).await?;
        server.list_resource_templates(request, context).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, Refusal> {
        let server = self.server_or_error(WAIT).await?;
        server.read_resource(request, context).await
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, Refusal> {
        let server = self.server_or_error(WAIT).await?;
        server.list_skills(request, context).await
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, Refusal> {
        let server = self.server_or_error(WAIT).await?;
        server.get_skill(request, context).await
    }

    /// A method this server does not serve, refused in words the PII engine has read
    /// (rmcp's own answer is the method's name as sent).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _: RequestContext<RoleServer>,
    ) -> Result<CustomResult, Refusal> {
        Err(super::not_served(&self.privacy(), &request.method))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(super::listen::accepted(requested))
    }

    /// A listen stream lasts as long as the client keeps it: it waits for the start however
    /// long it takes.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), Refusal> {
        let server = match self.lobby.starting.finished().await {
            Ok(app) => self.server_of(app),
            Err(e) => {
                return Err(self
                    .lobby
                    .privacy
                    .refusal(ErrorCode::INTERNAL_ERROR, failed(&e)));
            }
        };
        server.listen(context).await
    }

    /// Once the start ends, the session is told of its tools' changes from then on, and that
    /// the listing changed if the upstreams added to it.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(server) = self.ready() {
            return server.on_initialized(context).await;
        }
        let front = self.clone();
        tokio::spawn(async move {
            let Ok(app) = front.lobby.starting.finished().await else {
                return;
            };
            let peer = context.peer.clone();
            let upstreams = super::has_upstreams(&app);
            front.server_of(app).on_initialized(context).await;
            if upstreams {
                let _ = peer.notify_tool_list_changed().await;
            }
        });
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), Refusal> {
        let server = self.server_or_error(WAIT).await?;
        #[allow(deprecated)]
        server.subscribe(request, context).await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), Refusal> {
        let server = self.server_or_error(WAIT).await?;
        #[allow(deprecated)]
        server.unsubscribe(request, context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, Refusal> {
        let server = self.server_or_error(WAIT).await?;
        server.get_task(request, context).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), Refusal> {
        let server = self.server_or_error(WAIT).await?;
        server.update_task(request, context).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), Refusal> {
        let server = self.server_or_error(WAIT).await?;
        server.cancel_task(request, context).await
    }
}
