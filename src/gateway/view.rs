//! What one tenant sees of the gateway: the upstreams it may use (all of them without
//! tenants), their tools for discovery, and its own generated package, regenerated when a
//! tool list changed since the last execution started.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::Gateway;
use super::call_stats::CallStats;
use super::listing::UpstreamListing;
use super::stubs::{self, PythonNames, ServerStubs};
use super::tools::LiveTool;
use super::tree::{Tree, TreeVersion};
use super::upstream::Upstream;
use crate::discovery::{Registry, ToolEntry};

pub struct GatewayView {
    gateway: Arc<Gateway>,
    upstreams: Vec<Arc<Upstream>>,
    tree: Tree,
    /// This tenant's calls per upstream.
    pub stats: CallStats,
    /// The gateway generation the package and the index below were made at.
    built: Mutex<Option<Built>>,
}

struct Built {
    generation: u64,
    registry: Arc<Registry>,
    names: Arc<PythonNames>,
    version: Option<Arc<TreeVersion>>,
    listing: Arc<UpstreamListing>,
}

/// One tool of the view, for discovery.
pub struct CallableTool {
    pub server: String,
    pub tool: LiveTool,
    pub python: Option<String>,
}

impl GatewayView {
    pub(super) fn new(
        gateway: Arc<Gateway>,
        upstreams: Vec<Arc<Upstream>>,
        tree_root: &Path,
    ) -> std::io::Result<Self> {
        Ok(Self {
            gateway,
            upstreams,
            tree: Tree::open(tree_root)?,
            stats: CallStats::default(),
            built: Mutex::new(None),
        })
    }

    /// The host directory mounted read-only into this tenant's sandboxes.
    pub fn tree_root(&self) -> &Path {
        self.tree.root()
    }

    pub fn upstream(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.upstreams.iter().find(|u| u.name() == name)
    }

    pub fn server_names(&self) -> Vec<String> {
        self.upstreams
            .iter()
            .map(|u| u.name().to_string())
            .collect()
    }

    pub fn upstreams(&self) -> &[Arc<Upstream>] {
        &self.upstreams
    }

    /// Whether `server`'s results enter the sandbox tokenized (`flow.rs`).
    pub fn tokenizes_results_of(&self, server: &str) -> bool {
        self.gateway.flow().tokenizes_results_of(server)
    }

    /// Waits for this view's upstreams that are still making their first connection, at most
    /// `--upstream-connect-timeout-secs`: an execution or a search right after the server
    /// started sees their tools instead of an empty package. Returns at once when every
    /// upstream has connected or failed once (a reconnect later never makes anyone wait).
    pub async fn first_connections(&self) {
        let Some(limit) = self.upstreams.iter().map(|u| u.connect_timeout()).max() else {
            return;
        };
        let deadline = tokio::time::Instant::now() + limit;
        while self.upstreams.iter().any(|u| u.first_connection_pending())
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The package version an execution starting now imports from (regenerated first if a
    /// tool list changed); `None` when this tenant has no upstreams.
    pub fn current_tree(&self) -> std::io::Result<Option<Arc<TreeVersion>>> {
        self.refresh().map(|b| b.version)
    }

    /// The index of this view's live tools, for `search_tools`.
    pub fn registry(&self) -> std::io::Result<Arc<Registry>> {
        self.refresh().map(|b| b.registry)
    }

    /// What `tools/list` says of these upstreams now (the package regenerated first if a
    /// tool list changed).
    pub fn listing(&self) -> std::io::Result<Arc<UpstreamListing>> {
        self.refresh().map(|b| b.listing)
    }

    /// Changes whenever an upstream's tool list may have changed, any tenant's: compare
    /// [`Self::listing`] to know whether this view's did.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.gateway.watch()
    }

    /// A callable tool by server and name, with the Python call that invokes it.
    pub fn tool(&self, server: &str, name: &str) -> Option<CallableTool> {
        let upstream = self.upstream(server)?;
        let tool = upstream.tools().iter().find(|t| t.name == name)?.clone();
        let names = self.refresh().ok()?.names;
        Some(CallableTool {
            server: server.to_string(),
            python: names.python_call(server, &tool),
            tool,
        })
    }

    /// The module of `server` in the package.
    pub fn module_name(&self, server: &str) -> Option<String> {
        let names = self.refresh().ok()?.names;
        names.modules.get(server).map(|(module, _)| module.clone())
    }

    /// Frees package versions that finished executions held.
    pub fn collect_unused(&self) {
        self.tree.collect_unused();
    }

    fn refresh(&self) -> std::io::Result<BuiltRef> {
        let generation = self.gateway.generation.load(Ordering::Acquire);
        let mut built = self.built.lock().expect("view lock");
        if let Some(b) = built.as_ref().filter(|b| b.generation == generation) {
            return Ok(BuiltRef::of(b));
        }
        let tools: Vec<(String, Arc<Vec<LiveTool>>)> = self
            .upstreams
            .iter()
            .map(|u| (u.name().to_string(), u.tools()))
            .collect();
        // Every upstream of the view has a module; one without tools says why on import.
        let stubs_input: Vec<ServerStubs<'_>> = tools
            .iter()
            .map(|(name, t)| ServerStubs { name, tools: t })
            .collect();
        let names = Arc::new(PythonNames::of(&stubs_input));
        let version = if stubs_input.is_empty() {
            None
        } else {
            Some(self.tree.publish(&stubs::generate(&stubs_input))?)
        };
        let entries: Vec<ToolEntry> = tools
            .iter()
            .flat_map(|(server, ts)| ts.iter().map(move |t| entry(server, t)))
            .collect();
        let registry =
            Arc::new(Registry::from_tools(entries).ranked_by(self.gateway.ranking.clone()));
        let listing = Arc::new(UpstreamListing::of(
            &names,
            version.as_ref().map(|v| v.id.clone()),
        ));
        let b = Built {
            generation,
            registry,
            names,
            version,
            listing,
        };
        let r = BuiltRef::of(&b);
        *built = Some(b);
        Ok(r)
    }
}

struct BuiltRef {
    registry: Arc<Registry>,
    names: Arc<PythonNames>,
    version: Option<Arc<TreeVersion>>,
    listing: Arc<UpstreamListing>,
}

impl BuiltRef {
    fn of(b: &Built) -> Self {
        Self {
            registry: b.registry.clone(),
            names: b.names.clone(),
            version: b.version.clone(),
            listing: b.listing.clone(),
        }
    }
}

/// A live tool as a discovery entry: `server/name`, category `server`.
fn entry(server: &str, t: &LiveTool) -> ToolEntry {
    let functions = t
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    ToolEntry {
        id: format!("{server}/{}", t.name),
        name: t.name.clone(),
        mcp_server: server.to_string(),
        category: server.to_string(),
        description: t.description.clone(),
        functions,
        use_cases: t.title.iter().cloned().collect(),
        input_schema: Some(t.input_schema.clone()),
        source_file: Default::default(),
    }
}
