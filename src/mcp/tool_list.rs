//! `tools/list` as this tenant sees it: the tools sorted by name (rmcp 3.9's router sorts too;
//! sorting here keeps the order ours), with `execute_code`'s description ending in the sentence
//! of [`crate::gateway::listing`] when the tenant has upstreams, and the version of its
//! `servers` package in that tool's `_meta` (`code-execution-mcp/servers-package`), so the
//! listing changes exactly when an upstream's tool list of this tenant does. `get_tool`
//! answers from the same place, so what rmcp validates against is what was listed.
//!
//! The sentence goes through [`crate::privacy::Privacy::text`] like everything else the model
//! reads.

use rmcp::model::{MetaObject, Tool};

use super::CodeExecutionServer;
use crate::gateway::listing::UpstreamListing;

/// The `_meta` key of `execute_code` that holds the `servers` package version.
pub const PACKAGE_META_KEY: &str = "code-execution-mcp/servers-package";

const EXECUTE_CODE: &str = "execute_code";

impl CodeExecutionServer {
    /// Every tool, in name order, as this tenant sees it.
    pub(super) async fn listed_tools(&self) -> Vec<Tool> {
        let listing = match self.app().gateway().cloned() {
            None => None,
            Some(view) => tokio::task::spawn_blocking(move || view.listing())
                .await
                .ok()
                .and_then(|l| {
                    l.inspect_err(|e| tracing::warn!("cannot list the upstreams' tools: {e}"))
                        .ok()
                }),
        };
        let mut tools = self.tool_router.list_all();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        for tool in &mut tools {
            if tool.name == EXECUTE_CODE {
                self.describe_upstreams(tool, listing.as_deref());
            }
        }
        tools
    }

    /// One tool as [`Self::listed_tools`] lists it.
    pub(super) fn listed_tool(&self, name: &str) -> Option<Tool> {
        let mut tool = self.tool_router.get(name).cloned()?;
        if tool.name == EXECUTE_CODE {
            let listing = self
                .app()
                .gateway()
                .and_then(|view| crate::host::blocking_here(|| view.listing()).ok());
            self.describe_upstreams(&mut tool, listing.as_deref());
        }
        Some(tool)
    }

    fn describe_upstreams(&self, tool: &mut Tool, listing: Option<&UpstreamListing>) {
        let Some(listing) = listing else { return };
        if let Some(sentence) = listing.sentence() {
            let base = tool.description.as_deref().unwrap_or_default();
            let sentence = self.app().privacy().text(sentence);
            tool.description = Some(format!("{base} {sentence}").into());
        }
        if let Some(package) = &listing.package {
            tool.meta
                .get_or_insert_with(MetaObject::new)
                .0
                .insert(PACKAGE_META_KEY.into(), package.clone().into());
        }
    }
}
