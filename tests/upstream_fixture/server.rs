//! The fixture's `ServerHandler`, written by hand rather than with `#[tool_handler]` because
//! the listing is paginated (pages of 10, cursor = offset), `added_later` stays hidden until
//! `add_tool` is called, and `--exit-after-calls` and `--calls-log` must see every `tools/call`
//! before it is routed.

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    Implementation, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ResultType,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::Flags;

/// Tools per `tools/list` page, whatever the flags.
pub const PAGE_SIZE: usize = 10;

/// The tool `add_tool` reveals.
pub const ADDED_LATER: &str = "added_later";

#[derive(Clone)]
pub struct Fixture {
    pub(crate) tool_router: ToolRouter<Self>,
    pub(crate) state: Arc<State>,
}

/// What changes while serving, shared by the clones rmcp makes of the handler.
pub struct State {
    name: String,
    /// `added_later` is listed and callable once this is set.
    pub added: AtomicBool,
    calls: AtomicU64,
    exit_after_calls: Option<u64>,
    calls_log: Option<PathBuf>,
}

impl Fixture {
    pub fn new(flags: &Flags) -> Self {
        let mut tool_router = Self::tools();
        tool_router.add_route(text_tool(ADDED_LATER, "added".into()));
        for i in 0..flags.filler {
            tool_router.add_route(text_tool(format!("filler_{i}"), format!("filler {i}")));
        }
        Self {
            tool_router,
            state: Arc::new(State {
                name: flags.name.clone(),
                added: AtomicBool::new(false),
                calls: AtomicU64::new(0),
                exit_after_calls: flags.exit_after_calls,
                calls_log: flags.calls_log.clone(),
            }),
        }
    }

    fn visible(&self, name: &str) -> bool {
        name != ADDED_LATER || self.state.added.load(Ordering::SeqCst)
    }
}

/// A tool without arguments that answers `text`.
fn text_tool(name: impl Into<Cow<'static, str>>, text: String) -> ToolRoute<Fixture> {
    let tool = Tool::new(
        name,
        format!("Returns the text \"{text}\"."),
        rmcp::handler::server::common::schema_for_empty_input(),
    );
    ToolRoute::new_dyn(tool, move |_ctx| {
        let result = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
        Box::pin(async move { Ok(CallToolResponse::from(result)) })
    })
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            self.state.name.clone(),
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Tool> = self
            .tool_router
            .list_all()
            .into_iter()
            .filter(|t| self.visible(&t.name))
            .collect();
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|&offset| offset <= tools.len())
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("unknown cursor {cursor:?}"), None)
                })?,
        };
        let end = (start + PAGE_SIZE).min(tools.len());
        let supports_cache_hints = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        Ok(ListToolsResult {
            result_type: Some(ResultType::COMPLETE),
            meta: None,
            next_cursor: (end < tools.len()).then(|| end.to_string()),
            ttl_ms: supports_cache_hints.then_some(0),
            cache_scope: supports_cache_hints.then_some(CacheScope::Public),
            tools: tools[start..end].to_vec(),
        })
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        if !self.visible(name) {
            return None;
        }
        self.tool_router.get(name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let n = self.state.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.state.exit_after_calls == Some(n) {
            eprintln!("fixture: exiting on purpose at tools/call number {n}");
            std::process::exit(4);
        }
        if !self.visible(&request.name) {
            return Err(ErrorData::invalid_params("tool not found", None));
        }
        if let Some(path) = &self.state.calls_log {
            log_call(path, &request)?;
        }
        let call = ToolCallContext::new(self, request, context);
        self.tool_router.call(call).await
    }
}

/// Appends `request` to the calls log as one JSON line (one `write` call, so concurrent calls
/// never interleave within a line).
fn log_call(path: &Path, request: &CallToolRequestParams) -> Result<(), ErrorData> {
    let line = serde_json::json!({"tool": request.name, "arguments": request.arguments});
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()))
        .map_err(|e| {
            ErrorData::internal_error(format!("cannot append to {}: {e}", path.display()), None)
        })
}
