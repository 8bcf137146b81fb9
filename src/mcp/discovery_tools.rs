//! Progressive tool discovery: `search_tools` (ranked, with detail levels name / summary /
//! full), `get_tool_definition` and `list_tool_categories`, with the original's fields. The
//! ranking, the catalog and its reloading live in `crate::discovery`.

use std::collections::BTreeMap;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{Json, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{CodeExecutionServer, text_error};
use crate::discovery::{Hit, ToolEntry};

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
pub struct SearchArgs {
    /// What the tool should do, in your own words (e.g. "send a message to a chat channel").
    pub query: String,
    /// Only tools of this category (see list_tool_categories).
    #[serde(default)]
    pub category: Option<String>,
    /// "name", "summary" (default) or "full" (with the input schema).
    #[serde(default)]
    pub detail_level: DetailLevel,
    /// Results to return, 1 to 50 (default 10).
    #[serde(default = "default_limit")]
    pub limit: usize,
}

fn default_limit() -> usize {
    10
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DefinitionArgs {
    /// The tool's id "server/name" (as search_tools returns it), or its bare name.
    pub tool_name: String,
    /// Category to look in when a bare name is ambiguous.
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
}

fn shape(hit: &Hit<'_>, level: DetailLevel) -> Value {
    let t: &ToolEntry = hit.tool;
    let score = (f64::from(hit.score) * 1000.0).round() / 1000.0;
    match level {
        DetailLevel::Name => json!({"id": t.id, "name": t.name, "score": score}),
        DetailLevel::Summary => json!({
            "id": t.id, "name": t.name, "mcp_server": t.mcp_server, "category": t.category,
            "description": t.description, "score": score,
        }),
        DetailLevel::Full => {
            let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
            v["score"] = json!(score);
            v
        }
    }
}

impl CodeExecutionServer {
    /// The current registry; a reload after a file change (tens of ms) runs off the async
    /// threads.
    pub(crate) async fn registry(&self) -> std::sync::Arc<crate::discovery::Registry> {
        let discovery = self.app.shared.discovery.clone();
        match tokio::task::spawn_blocking(move || discovery.current()).await {
            Ok(registry) => registry,
            Err(_) => self.app.shared.discovery.current(),
        }
    }
}

#[tool_router(router = discovery_router, vis = "pub(crate)")]
impl CodeExecutionServer {
    #[tool(
        description = "Find tools by what they do (ranked search over names, descriptions and parameters of the catalog; tolerant of synonyms and typos). Start with detail_level \"summary\", then call get_tool_definition for the one you need.",
        annotations(title = "Search tools", read_only_hint = true, open_world_hint = false)
    )]
    async fn search_tools(
        &self,
        Parameters(args): Parameters<SearchArgs>,
    ) -> Result<Json<SearchResponse>, CallToolResult> {
        let registry = self.registry().await;
        let results = registry
            .search(&args.query, args.category.as_deref(), args.limit)
            .map_err(|e| text_error(e.to_string()))?;
        let tools: Vec<Value> = results
            .hits
            .iter()
            .map(|h| shape(h, args.detail_level))
            .collect();
        let detail_level = match args.detail_level {
            DetailLevel::Name => "name",
            DetailLevel::Summary => "summary",
            DetailLevel::Full => "full",
        };
        Ok(Json(SearchResponse {
            query: args.query,
            category: args.category,
            detail_level: detail_level.into(),
            count: tools.len(),
            tools,
            suggestions: results.suggestions,
        }))
    }

    #[tool(
        description = "Full definition of one tool (description, server, category, input schema), by its \"server/name\" id from search_tools.",
        annotations(
            title = "Get tool definition",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    async fn get_tool_definition(
        &self,
        Parameters(args): Parameters<DefinitionArgs>,
    ) -> Result<Json<ToolEntry>, CallToolResult> {
        let registry = self.registry().await;
        let tool = registry
            .get(&args.tool_name, args.category.as_deref())
            .map_err(|e| text_error(e.to_string()))?;
        Ok(Json(tool.clone()))
    }

    #[tool(
        description = "The tool categories of the catalog with a description and the number of tools in each.",
        annotations(
            title = "List tool categories",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    async fn list_tool_categories(&self) -> Result<Json<CategoriesResponse>, CallToolResult> {
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
        Ok(Json(CategoriesResponse {
            categories,
            total_tools: registry.total_tools(),
            core_mcps: Vec::new(),
        }))
    }
}
