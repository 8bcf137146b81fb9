//! The gateway: sandbox code calls the user's own MCP servers ("upstreams") as Python
//! functions, and the data flows between tools inside the sandbox instead of through the
//! model's context.
//!
//! ```text
//! upstreams_file.rs  the upstreams file (Claude Desktop's mcpServers, ${VAR} expansion, policy)
//! upstreams_egress.rs  its `egress` object, read into the rules of `egress/`
//! secrets.rs   what of an entry is secret, in every form it may come back in
//! upstream.rs  one upstream kept connected: stdio child or streamable HTTP, relist, restart
//! child.rs     a stdio upstream's process group and bounded stderr lines
//! client.rs    the client side of a connection, and the HTTP connect
//! tools.rs     an upstream tool as kept here (from the wire JSON, bounded)
//! names.rs     Python identifiers for any server or tool name
//! stubs.rs     the generated package: servers/<server>/<tool>.py
//! tree.rs      its versions on disk, mounted read-only into sandboxes
//! view.rs      one tenant's upstreams, package and discovery index
//! listing.rs   what tools/list says of a tenant's upstreams, and when that changed
//! upstream_calls.rs  one execution's calls: checks, policy, limits, token restore, records
//! results.rs   a tool result as a Python value
//! policy.rs    allow, deny, confirm, plan
//! confirm.rs   asking the user (a prompt, its answer), implemented by the tool layer
//! plan.rs      a plan as data: the draft, its bounds, the question, the report
//! planning.rs  one execution's plan: calls recorded, then asked once and applied in order
//! redact.rs    an upstream's credentials kept out of all it sends back
//! call_stats.rs  calls, failures and latency per upstream, for get_execution_stats
//! egress/      guarded egress: the `egress` entries (hosts, methods, paths, policy), the
//!              addresses a request may reach, and the proxy sandbox HTTP goes through
//! ```
//!
//! A call travels harness → channel `call` frame (`call_tool`) → `execute::calls::ServerCalls`
//! → [`UpstreamCalls::call`] → the upstream's `tools/call`, and back the same way. Credentials
//! (an entry's `env` and `headers`) stay in this process: the sandbox gets generated stubs
//! that name servers and tools, nothing else.

pub mod call_record;
pub mod call_stats;
mod child;
mod client;
pub mod confirm;
pub mod egress;
pub mod flow;
pub mod listing;
pub mod names;
pub mod plan;
mod planning;
pub mod policy;
pub mod redact;
pub mod restoring;
pub mod results;
pub mod secrets;
pub mod stubs;
pub mod tools;
pub mod tree;
pub mod upstream;
pub mod upstream_calls;
mod upstreams_egress;
pub mod upstreams_file;
pub mod view;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::discovery::semantic::Ranking;

pub use call_record::ToolCallRecord;
pub use confirm::{Answer, AskError, Confirm, Prompt};
pub use flow::FlowRules;
pub use upstream::{Upstream, UpstreamLimits, UpstreamStatus};
pub use upstream_calls::{CallLimits, UpstreamCalls};
pub use upstreams_file::{UpstreamConfig, UpstreamsError, UpstreamsFile};
pub use view::GatewayView;

/// Every upstream of this server, each kept connected by its own task.
pub struct Gateway {
    upstreams: Vec<Arc<Upstream>>,
    /// Every upstream's flow rule, to tell whose results enter the sandbox tokenized.
    flow: FlowRules,
    /// Bumped whenever an upstream's tool list changes (or it connects or goes down); views
    /// rebuild their package and index when it moved.
    generation: AtomicU64,
    /// The generation again, for those who wait for it to move (tenants' tool-list
    /// listeners); a watch keeps only the latest value, so a burst of changes is one wake.
    changes: watch::Sender<u64>,
    cancel: CancellationToken,
    tasks: TaskTracker,
    /// How the live tools are ranked in `search_tools` (as the catalog is).
    ranking: Ranking,
}

impl Gateway {
    /// Starts connecting to every upstream of `file`; returns at once (an upstream that is
    /// slow or broken never delays or fails the server's start). The flow rules are the
    /// servers' and the `egress` entries' together.
    pub fn start(file: UpstreamsFile, limits: UpstreamLimits, ranking: Ranking) -> Arc<Gateway> {
        // HTTPS upstreams: rustls with ring (already built for the engine client); roots
        // come from the system's store.
        crate::install_tls_provider();
        let servers = file.servers.iter().map(|c| c.pii.clone());
        let entries = file.egress.entries().iter().map(|e| e.pii.clone());
        let gateway = Arc::new(Gateway {
            flow: FlowRules::new(servers.chain(entries)),
            upstreams: file
                .servers
                .into_iter()
                .map(|c| Upstream::new(c, limits))
                .collect(),
            generation: AtomicU64::new(1),
            changes: watch::Sender::new(1),
            cancel: CancellationToken::new(),
            ranking,
            tasks: TaskTracker::new(),
        });
        for upstream in &gateway.upstreams {
            let weak = Arc::downgrade(&gateway);
            let changed: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
                if let Some(g) = weak.upgrade() {
                    let now = g.generation.fetch_add(1, Ordering::AcqRel) + 1;
                    g.changes.send_replace(now);
                }
            });
            gateway
                .tasks
                .spawn(upstream.clone().supervise(gateway.cancel.clone(), changed));
        }
        gateway
    }

    pub fn upstreams(&self) -> &[Arc<Upstream>] {
        &self.upstreams
    }

    /// The upstreams' flow rules, together.
    pub fn flow(&self) -> &FlowRules {
        &self.flow
    }

    /// Marks the value seen now; `changed()` resolves once an upstream's tool list (or whether
    /// it has one) changed after that.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The view of a tenant (`None`: the only tenant): the upstreams whose `tenants` include
    /// it (or do not restrict), with its package under `tree_root`.
    pub fn view(
        self: &Arc<Self>,
        tenant: Option<&str>,
        tree_root: &Path,
    ) -> std::io::Result<Arc<GatewayView>> {
        let upstreams = self
            .upstreams
            .iter()
            .filter(|u| match (&u.config.tenants, tenant) {
                (None, _) | (Some(_), None) => true,
                (Some(list), Some(t)) => list.iter().any(|x| x == t),
            })
            .cloned()
            .collect();
        Ok(Arc::new(GatewayView::new(
            self.clone(),
            upstreams,
            tree_root,
        )?))
    }

    /// Waits until every upstream is ready or has failed for good, or `limit` passed; whether
    /// all are ready. For tests, `doctor` and a start that wants its tools listed first.
    pub async fn settled(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let statuses: Vec<UpstreamStatus> = self.upstreams.iter().map(|u| u.status()).collect();
            if statuses
                .iter()
                .all(|s| matches!(s, UpstreamStatus::Ready | UpstreamStatus::Failed { .. }))
            {
                return statuses.iter().all(|s| *s == UpstreamStatus::Ready);
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stops every connection (stdio upstreams are killed) and waits for the tasks.
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        self.tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.tasks.wait()).await;
    }
}
