//! The MCP tool surface: an rmcp `ServerHandler` whose tools are thin adapters over [`App`].
//! One file per tool group; a tool parses its arguments, calls the library, and shapes the
//! response in the original project's field names. Logic lives in the library modules.
//!
//! A tool returns `privacy::Json<T>` or `privacy::Reply`, which only [`crate::privacy::Privacy`]
//! makes: what a tool answers has been through the PII engine, whatever fields it has. rmcp's
//! own answer to arguments that do not deserialize (serde's message, which quotes the value)
//! goes through it too ([`crate::privacy::Privacy::screen_tool_response`]).

mod arguments;
mod cache_hints;
mod discovery_tools;
mod execute;
mod front;
mod link_tools;
mod listen;
mod pii_tools;
mod reference;
mod resources;
mod rounds;
mod session_resources;
mod skill_resources;
mod skills_tools;
mod stats_tool;
mod tasks;
#[cfg(test)]
mod tests;
mod tool_list;
mod workspace_tools;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CustomRequest, CustomResult,
    ErrorCode, GetSkillRequestParams, GetSkillResult, GetTaskParams, GetTaskResult, Implementation,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams,
    UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{Peer, RoleServer, ServerHandler, tool_handler};
use serde::Serialize;
use tracing::Instrument;

use crate::app::App;
use crate::privacy::{Refusal, Reply, Shown};

pub use execute::{ExecuteCodeArgs, ExecuteCodeResponse};
pub use front::{Front, Lobby};
pub use tool_list::PACKAGE_META_KEY;

/// The argument types of every tool, as the MCP layer deserializes them from a `tools/call`.
/// Exposed for the fuzz targets in `tests/fuzz`; not a stable API.
#[doc(hidden)]
pub mod args {
    pub use super::discovery_tools::{DefinitionArgs, DetailLevel, SearchArgs};
    pub use super::execute::ExecuteCodeArgs;
    pub use super::link_tools::{DownloadArgs, UploadArgs};
    pub use super::pii_tools::TextArgs;
    pub use super::skills_tools::{SaveSkillArgs, SkillNameArgs};
    pub use super::workspace_tools::{FileArgs, ListArgs, WriteArgs};
}

const INSTRUCTIONS: &str = "Runs Python in a fresh, locked-down container per call (no network, read-only root, memory/time limits). \
Process data inside execute_code and return only a small summary: set `result` or print. \
Files persist in /workspace between calls (read_file, write_file, list_files, delete_file in code; \
the *_workspace_file tools or the workspace:/// resources from outside); each result lists the files the code \
created or changed. Data helpers: filter_by_field, summarize_list, aggregate_stats, format_output (they take DataFrames too). \
With the data image, numpy, pandas, scipy, matplotlib and openpyxl are installed; plt.show() and show_image(...) \
return images, resource_link(path) returns a file by reference. \
Find tools of the catalog with search_tools, then get_tool_definition. Save reusable code with save_skill; \
in code, `from skills import NAME`. Personal data in what execute_code returns is replaced by tokens like \
[EMAIL_ab12cd34]; restore_pii turns them back into values where a tool call needs them. \
Each tool's whole reference (every argument and response field) is the resource docs://tools/NAME.";

#[derive(Clone)]
pub struct CodeExecutionServer {
    app: Arc<App>,
    tool_router: ToolRouter<Self>,
    /// The workspace resources this session subscribed to.
    subscriptions: resources::Subscriptions,
    /// Counts this session in the tenant's open MCP sessions while any clone of it lives.
    _session: Arc<crate::app::McpSessionGuard>,
}

impl CodeExecutionServer {
    pub fn new(app: Arc<App>) -> Self {
        Self {
            _session: Arc::new(app.mcp_session()),
            app,
            tool_router: Self::tool_router(),
            subscriptions: resources::Subscriptions::default(),
        }
    }

    /// Every tool of the server (the routers of the tool groups together).
    fn tool_router() -> ToolRouter<Self> {
        Self::execute_router()
            + Self::discovery_router()
            + Self::skills_router()
            + Self::pii_router()
            + Self::workspace_router()
            + Self::link_router()
            + Self::stats_router()
    }

    /// What `initialize` and `server/discover` answer: the same whatever the tenant, and
    /// before the server has started ([`Front`]).
    fn server_config() -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_tasks()
            .enable_skills()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "code-execution-mcp",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    pub fn app(&self) -> &Arc<App> {
        &self.app
    }

    /// A workspace error (or another failure) as the original's `{success: false, error}`.
    pub(crate) fn failure(&self, error: impl std::fmt::Display) -> Reply {
        self.app.privacy().failure(error)
    }

    /// A plain tool error the model can act on.
    pub(crate) fn error(&self, message: impl std::fmt::Display) -> Reply {
        self.app.privacy().error(message)
    }

    /// Tells the tenant's listen streams, and this session's client if it subscribed the
    /// handshake-era way, about workspace files a tool of the session changed. With `more`,
    /// `paths` is not the whole story (an execution lists at most `MAX_FILES_LISTED`, and a
    /// workspace too large to compare whole tells nothing of its files): then any subscribed
    /// file may have changed.
    async fn announce_changes(
        &self,
        peer: &Peer<RoleServer>,
        paths: &[String],
        listing_changed: bool,
        more: bool,
    ) {
        let uris: Vec<Shown> = paths
            .iter()
            .map(|p| {
                let path = self.app.privacy().text(p.clone());
                path.framed(crate::workspace::uri::uri_for)
            })
            .collect();
        // The bus matches them against the URIs listen streams subscribed to, and sends those.
        let plain = uris.iter().map(|u| u.as_str().to_owned()).collect();
        self.app
            .events()
            .resources_changed(plain, listing_changed, more);
        self.subscriptions
            .announce(peer, &uris, listing_changed)
            .await;
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CodeExecutionServer {
    fn get_info(&self) -> ServerConfig {
        Self::server_config()
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, Refusal> {
        let mut result = ListToolsResult::with_all_items(self.listed_tools().await);
        if cache_hints::wanted(&context) {
            let hint = cache_hints::tools(&self.app);
            result = result.with_ttl_ms(hint.ttl_ms).with_cache_scope(hint.scope);
        }
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.listed_tool(name)
    }

    /// Every tool call runs in a span naming its JSON-RPC request and the tenant, so that
    /// what it logs, and what the work it starts logs, says which call it was.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, Refusal> {
        let span = crate::logging::request_span(&context.id, self.app.tenant());
        if let Some(tool) = self.tool_router.get(&request.name) {
            // The refusal quotes the arguments' names: through the PII engine like every error.
            arguments::check(tool, request.arguments.as_ref())
                .map_err(|e| self.app.privacy().refusal(e.code, e.message))?;
        }
        let call = ToolCallContext::new(self, request, context);
        let response = self.tool_router.call(call).instrument(span).await?;
        // rmcp answers arguments that do not deserialize with serde's words, which quote the
        // value ("invalid type: string \"ann@example.com\""): through the engine too.
        Ok(self.app.privacy().screen_tool_response(response))
    }

    /// A method this server does not serve. rmcp's own answer is the method's name as sent:
    /// through the PII engine like every error.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _: RequestContext<RoleServer>,
    ) -> Result<CustomResult, Refusal> {
        Err(not_served(self.app.privacy(), &request.method))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, Refusal> {
        let mut result = resources::list(&self.app, request.and_then(|r| r.cursor)).await?;
        if cache_hints::wanted(&context) {
            let hint = cache_hints::workspace();
            result = result.with_ttl_ms(hint.ttl_ms).with_cache_scope(hint.scope);
        }
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, Refusal> {
        let mut result = resources::templates();
        if cache_hints::wanted(&context) {
            let hint = cache_hints::templates(&self.app);
            result = result.with_ttl_ms(hint.ttl_ms).with_cache_scope(hint.scope);
        }
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, Refusal> {
        let uri = request.uri;
        let (mut result, hint) = match uri.strip_prefix(reference::PREFIX) {
            Some(name) => {
                let tool = self.tool_router.get(name);
                let read = reference::read(&self.app, uri.clone(), tool)?;
                (read, cache_hints::reference(&self.app))
            }
            None => (
                resources::read(&self.app, uri).await?,
                cache_hints::workspace(),
            ),
        };
        if cache_hints::wanted(&context) {
            result = result.with_ttl_ms(hint.ttl_ms).with_cache_scope(hint.scope);
        }
        Ok(result.into())
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, Refusal> {
        skill_resources::list(&self.app, request.and_then(|r| r.cursor)).await
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, Refusal> {
        skill_resources::get(&self.app, request.uri).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(listen::accepted(requested))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), Refusal> {
        listen::listen(&self.app, context).await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        listen::forward_tool_changes(&self.app, context.peer.clone());
        listen::forward_arrivals(&self.app, self.subscriptions.clone(), context.peer);
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), Refusal> {
        self.subscriptions
            .subscribe(self.app.privacy(), request.uri)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), Refusal> {
        self.subscriptions.unsubscribe(&request.uri);
        Ok(())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, Refusal> {
        self.app
            .tasks()
            .get_task(&request.task_id)
            .map(GetTaskResult::new)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), Refusal> {
        self.app
            .tasks()
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), Refusal> {
        self.app.tasks().cancel_task(&request.task_id)
    }
}

/// The refusal of a method this server does not serve. rmcp's own is the method's name as
/// sent, which may carry anything: through the PII engine like every error.
fn not_served(privacy: &crate::privacy::Privacy, method: &str) -> Refusal {
    privacy.refusal(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "method not found: {method}; this server serves the MCP methods its capabilities name"
        ),
    )
}

/// Whether this tenant has upstreams, so its `tools/list` names them and changes with them (a
/// view's upstreams are fixed when it opens).
fn has_upstreams(app: &App) -> bool {
    app.gateway().is_some_and(|v| !v.upstreams().is_empty())
}

/// The original's `{success, message}` / `{success: false, error}` response.
#[derive(Debug, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct MessageResponse {
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The arguments of a tool that takes none: an argument is refused like an unknown argument of
/// any tool (-32602 naming it), and the schema says so (`additionalProperties: false`).
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

impl MessageResponse {
    pub fn ok(message: impl Into<String>) -> Self {
        Self {
            success: true,
            message: Some(message.into()),
            error: None,
        }
    }
}
