//! Progressive tool discovery: `search_tools` (ranked, with detail levels name / summary /
//! full), `get_tool_definition` and `list_tool_categories`, with the original's fields. The
//! ranking, the catalog and its reloading live in `crate::discovery`.
//!
//! With upstreams (`--upstreams`), their live tools are searched beside the catalog, in an
//! index of their own (`gateway::GatewayView::registry`). Every result says whether code can
//! call it (`callable`); callable tools come first, since they are the ones code can use now,
//! and a search can be limited to them. `get_tool_definition` of a callable tool adds the
//! Python call that invokes it.

use std::collections::BTreeMap;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{CodeExecutionServer, NoArgs};
use crate::discovery::semantic::CALLABLE_BONUS;
use crate::discovery::{Hit, Registry, ToolEntry};
use crate::privacy::{Json, Reply};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DetailLevel {
    /// Tool ids and scores only.
    Name,
    /// Name, server, category, description.
    #[default]
    Summary,
    /// Everything, including the input schema.
    Full,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// E.g. "send a chat message".
    pub query: String,
    /// See list_tool_categories.
    #[serde(default)]
    pub category: Option<String>,
    /// "full" adds input schemas.
    #[serde(default)]
    pub detail_level: DetailLevel,
    /// 1 to 50.
    #[serde(default = "default_limit")]
    pub limit: usize,
    /// Only tools code can call now.
    #[serde(default)]
    pub callable_only: bool,
}

fn default_limit() -> usize {
    10
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DefinitionArgs {
    /// "server/name", or a bare name.
    pub tool_name: String,
    /// For an ambiguous bare name.
    #[serde(default)]
    pub category: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct SearchResponse {
    pub query: String,
    pub category: Option<String>,
    pub detail_level: String,
    pub count: usize,
    /// Best first; each has `id`, `name` and `score`, plus the fields of the detail level.
    pub tools: Vec<Value>,
    /// What to try when nothing matched.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub suggestions: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct CategoriesResponse {
    /// Category name → {description, tool_count}.
    pub categories: BTreeMap<String, Value>,
    pub total_tools: usize,
    /// Kept for compatibility with the original project: always empty.
    pub core_mcps: Vec<String>,
    /// The upstream MCP servers code can call, by name: {status, tool_count, module, error}.
    /// `status` is connecting, ready, down (reconnecting) or failed; `error` says why.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub upstreams: BTreeMap<String, Value>,
}

/// A tool's definition: the catalog's fields, whether code can call it, and how.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ToolDefinition {
    #[serde(flatten)]
    pub tool: ToolEntry,
    /// Whether code in execute_code can call it now (a tool of a connected upstream).
    pub callable: bool,
    /// For a callable tool: the import and call that invoke it from code.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub python: Option<String>,
    /// For a callable tool that declares one: the JSON Schema of its structured result.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub output_schema: Option<Value>,
}

fn shape(hit: &Hit<'_>, level: DetailLevel, callable: bool) -> Value {
    let t: &ToolEntry = hit.tool;
    let score = (f64::from(hit.score) * 1000.0).round() / 1000.0;
    match level {
        DetailLevel::Name => {
            json!({"id": t.id, "name": t.name, "score": score, "callable": callable})
        }
        DetailLevel::Summary => json!({
            "id": t.id, "name": t.name, "mcp_server": t.mcp_server, "category": t.category,
            "description": t.description, "score": score, "callable": callable,
        }),
        DetailLevel::Full => {
            let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
            v["score"] = json!(score);
            v["callable"] = json!(callable);
            v
        }
    }
}

/// The live tools' hits (callable, first) then the catalog's, at most `limit` in all, shaped
/// at `level`; what to try instead when there are none.
fn search_both(
    live: Option<&Registry>,
    catalog: &Registry,
    query: &str,
    category: Option<&str>,
    limit: usize,
    level: DetailLevel,
    callable_only: bool,
) -> Result<(Vec<Value>, Vec<String>), crate::discovery::DiscoveryError> {
    let limit = limit.clamp(1, crate::discovery::MAX_LIMIT);
    let live_knows = |r: &Registry| {
        category.is_none_or(|c| {
            r.categories()
                .iter()
                .any(|k| k.name.eq_ignore_ascii_case(c))
        })
    };
    let live_results = match live {
        Some(r) if live_knows(r) => Some(r.search(query, category, limit)?),
        _ => None,
    };
    let catalog_results = if callable_only || (live_results.is_some() && category.is_some()) {
        None
    } else {
        Some(catalog.search(query, category, limit)?)
    };
    // Ranked by meaning, scores of the two registries compare: a callable tool comes first
    // unless a catalog tool matches clearly better. Lexical scores do not compare across
    // registries, so callable tools simply come first.
    let by_meaning = live.is_some_and(Registry::ranks_by_meaning) && catalog.ranks_by_meaning();
    let bonus = if by_meaning {
        CALLABLE_BONUS
    } else {
        f32::INFINITY
    };
    let mut hits: Vec<(f32, Value)> = Vec::new();
    for (results, callable) in [(&live_results, true), (&catalog_results, false)] {
        if let Some(results) = results {
            hits.extend(results.hits.iter().map(|h| {
                let rank = if callable { h.score + bonus } else { h.score };
                (rank, shape(h, level, callable))
            }));
        }
    }
    // Stable: callable tools stay ahead on ties, and each list keeps its order.
    hits.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut tools: Vec<Value> = hits.into_iter().map(|(_, v)| v).collect();
    tools.truncate(limit);
    let suggestions = if tools.is_empty() {
        catalog_results
            .or(live_results)
            .map(|r| r.suggestions)
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    Ok((tools, suggestions))
}

impl CodeExecutionServer {
    /// The index of this tenant's live upstream tools (rebuilt off the async threads when a
    /// tool list changed; right after start, once the upstreams made their first connection);
    /// `None` without upstreams.
    async fn live_registry(
        &self,
    ) -> Result<Option<std::sync::Arc<crate::discovery::Registry>>, Reply> {
        if let Some(view) = &self.app.gateway() {
            view.first_connections().await;
        }
        self.live_registry_now().await
    }

    /// [`Self::live_registry`] without waiting for first connections.
    async fn live_registry_now(
        &self,
    ) -> Result<Option<std::sync::Arc<crate::discovery::Registry>>, Reply> {
        let Some(view) = self.app.gateway().cloned() else {
            return Ok(None);
        };
        tokio::task::spawn_blocking(move || view.registry())
            .await
            .map_err(|e| self.error(format!("internal error: {e}")))?
            .map(Some)
            .map_err(|e| self.error(format!("cannot prepare the upstream tools: {e}")))
    }

    /// The current registry ([`crate::app::App::registry`]).
    pub(crate) async fn registry(&self) -> std::sync::Arc<crate::discovery::Registry> {
        self.app.registry().await
    }
}

#[tool_router(router = discovery_router, vis = "pub(crate)")]
impl CodeExecutionServer {
    #[tool(
        description = "Find tools by what they do, in your own words; then get_tool_definition.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search_tools(
        &self,
        Parameters(args): Parameters<SearchArgs>,
    ) -> Result<Json<SearchResponse>, Reply> {
        let live = self.live_registry().await?;
        let registry = self.registry().await;
        let query = args.query.clone();
        let (category, level, callable_only) =
            (args.category.clone(), args.detail_level, args.callable_only);
        let limit = args.limit;
        // Off the async threads: the sentence model reads the query (milliseconds), and may
        // still be loading.
        let (tools, suggestions) = tokio::task::spawn_blocking(move || {
            let category = category.as_deref();
            search_both(
                live.as_deref(),
                &registry,
                &query,
                category,
                limit,
                level,
                callable_only,
            )
        })
        .await
        .map_err(|e| self.error(format!("internal error: {e}")))?
        .map_err(|e| self.error(e.to_string()))?;
        let detail_level = match args.detail_level {
            DetailLevel::Name => "name",
            DetailLevel::Summary => "summary",
            DetailLevel::Full => "full",
        };
        Ok(self.app.privacy().json(SearchResponse {
            query: args.query,
            category: args.category,
            detail_level: detail_level.into(),
            count: tools.len(),
            tools,
            suggestions,
        }))
    }

    #[tool(
        description = "A tool's full definition by its search_tools id, with the Python call when code can call it.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn get_tool_definition(
        &self,
        Parameters(args): Parameters<DefinitionArgs>,
    ) -> Result<Json<ToolDefinition>, Reply> {
        if let Some(live) = self.live_registry().await?
            && let Ok(entry) = live.get(&args.tool_name, args.category.as_deref())
        {
            let callable = self
                .app
                .gateway()
                .and_then(|view| view.tool(&entry.mcp_server, &entry.name));
            return Ok(self.app.privacy().json(ToolDefinition {
                tool: entry.clone(),
                callable: callable.is_some(),
                output_schema: callable.as_ref().and_then(|c| c.tool.output_schema.clone()),
                python: callable.and_then(|c| c.python),
            }));
        }
        let registry = self.registry().await;
        let tool = registry
            .get(&args.tool_name, args.category.as_deref())
            .map_err(|e| self.error(e.to_string()))?;
        Ok(self.app.privacy().json(ToolDefinition {
            tool: tool.clone(),
            callable: false,
            python: None,
            output_schema: None,
        }))
    }

    #[tool(
        description = "The catalog's tool categories with descriptions and tool counts.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_tool_categories(
        &self,
        Parameters(_): Parameters<NoArgs>,
    ) -> Result<Json<CategoriesResponse>, Reply> {
        // Brings the upstreams' package and index up to date off the async threads, so the
        // module names below come from that cache; no wait: this is where `connecting` shows.
        self.live_registry_now().await?;
        let registry = self.registry().await;
        let categories = registry
            .categories()
            .into_iter()
            .map(|c| {
                (
                    c.name,
                    json!({"description": c.description, "tool_count": c.tool_count}),
                )
            })
            .collect();
        let upstreams = self
            .app
            .gateway()
            .map(|view| {
                view.upstreams()
                    .iter()
                    .map(|u| {
                        let mut summary = upstream_summary(view, u);
                        // An upstream's error may quote what it was given or logged.
                        if let Some(error) = summary.get("error").and_then(Value::as_str) {
                            summary["error"] = json!(error.to_string());
                        }
                        (u.name().to_string(), summary)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(self.app.privacy().json(CategoriesResponse {
            categories,
            total_tools: registry.total_tools(),
            core_mcps: Vec::new(),
            upstreams,
        }))
    }
}

/// An upstream's state for `list_tool_categories`.
fn upstream_summary(view: &crate::gateway::GatewayView, u: &crate::gateway::Upstream) -> Value {
    use crate::gateway::UpstreamStatus;
    let (status, error) = match u.status() {
        // Connecting again: why the last connection failed or ended.
        UpstreamStatus::Connecting => ("connecting", u.last_failure()),
        UpstreamStatus::Ready => ("ready", None),
        UpstreamStatus::Down { reason } => ("down", Some(reason)),
        UpstreamStatus::Failed { reason } => ("failed", Some(reason)),
    };
    let mut v = json!({
        "status": status,
        "tool_count": u.tools().len(),
    });
    if let Some(module) = view.module_name(u.name()) {
        v["module"] = json!(format!("servers.{module}"));
    }
    if let Some(error) = error {
        v["error"] = json!(error);
    }
    v
}
