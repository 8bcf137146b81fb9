//! `get_execution_stats`: the original's fields (workspace, skills, tool_registry, capabilities,
//! limits) plus the engine, the image, the user sandboxes run as, executions by status with
//! latency percentiles, and the containers running now, and with upstreams the tool calls made
//! from code per upstream.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CodeExecutionServer, NoArgs};
use crate::privacy::{Json, Reply};
use std::collections::BTreeMap;

use crate::gateway::call_stats::UpstreamCallStats;
use crate::sandbox::stats::StatsSnapshot;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct WorkspaceStats {
    pub path: String,
    pub file_count: u64,
    pub bytes_used: u64,
    pub quota_bytes: u64,
    /// "loop_mount" (hard quota: writes past it fail with ENOSPC) or "soft" (checked between
    /// executions).
    pub quota_mode: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct DirStats {
    pub path: String,
    pub count: usize,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct RegistryStats {
    pub path: String,
    pub categories: Vec<String>,
    pub total_tools: usize,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct LimitStats {
    pub default_timeout_seconds: u64,
    pub max_timeout_seconds: u64,
    pub default_memory_mb: u64,
    pub max_memory_mb: u64,
    pub max_concurrency: usize,
    pub max_queue: usize,
    pub max_code_bytes: usize,
    pub max_output_bytes: usize,
    pub max_result_bytes: usize,
    pub pids_limit: i64,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct EngineStats {
    /// `Docker` or `Podman`.
    pub kind: String,
    pub version: String,
    pub api_version: String,
}

/// The node that served this call: with several servers behind a proxy (a swarm), which one.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct NodeStats {
    /// `--node-name` (CEM_NODE_NAME), else the engine's host name.
    pub name: String,
    /// The engine's swarm node ID, when it is a node of a swarm.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub swarm_node_id: Option<String>,
}

/// Who the sandbox's code runs as on the host.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct SandboxUserStats {
    pub uid: u32,
    pub gid: u32,
    /// "tenant": this tenant's own uid, derived from its name (--tenant-uid-range), which
    /// alone owns its workspace; "workspace_owner": the owner of the workspace directory;
    /// "default": the image's sandbox user, 10001.
    pub source: String,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ImageStats {
    pub name: String,
    pub id: String,
}

/// The PII vault file of `--pii-key-file`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct PiiVaultStats {
    pub path: String,
    /// Tokens the vault remembers.
    pub tokens: usize,
    /// Whether new tokens are written to the file (false: it was written with another key).
    pub persisting: bool,
    /// Appends and rewrites that failed (those tokens restore on this server only).
    pub write_failures: u64,
    /// Records skipped because they did not authenticate (damaged, another key or tenant).
    pub records_rejected: u64,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ExecutionStatsResponse {
    pub workspace: WorkspaceStats,
    pub skills: DirStats,
    pub tool_registry: RegistryStats,
    pub capabilities: Vec<String>,
    pub limits: LimitStats,
    pub engine: EngineStats,
    pub node: NodeStats,
    pub image: ImageStats,
    pub sandbox_user: SandboxUserStats,
    pub executions: StatsSnapshot,
    /// Sessions (`execute_code`'s `session`): how many this tenant holds, their state's size,
    /// the containers prepared for their next calls, and the bounds.
    pub sessions: crate::sessions::SessionCounts,
    /// Upstream MCP tool calls made from code, per upstream (with `--upstreams`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub tool_calls: BTreeMap<String, UpstreamCallStats>,
    /// The encrypted PII vault file (with `--pii-key-file`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pii_vault: Option<PiiVaultStats>,
    /// Executions paused on a `confirm` question, waiting for a 2026-07-28 client's retry.
    pub executions_paused: usize,
    /// Executions running as tasks (the tasks extension).
    pub tasks_running: usize,
    /// The audit trail of this tenant on this node (absent with `--audit false`): whether its
    /// writes succeed, records written and failed since the server started.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub audit: Option<crate::audit::AuditHealth>,
}

#[tool_router(router = stats_router, vis = "pub(crate)")]
impl CodeExecutionServer {
    #[tool(
        description = "Statistics of the execution environment: workspace use and quota, skills, tool registry, limits, Docker engine and image, executions by status with latency p50/p99, containers running, sessions, the node that served, the pool (ready, target, refill rate) and where execution time goes (engine phases).",
        annotations(
            title = "Execution statistics",
            read_only_hint = true,
            open_world_hint = false
        )
    )]
    async fn get_execution_stats(
        &self,
        Parameters(_): Parameters<NoArgs>,
    ) -> Result<Json<ExecutionStatsResponse>, Reply> {
        let app = self.app.clone();
        let usage = app
            .with_workspace(|ws| ws.usage())
            .await
            .map_err(|e| self.error(format!("cannot measure the workspace: {e}")))?;
        let skills = app.skills().clone();
        let skill_count = tokio::task::spawn_blocking(move || skills.list().map(|l| l.len()))
            .await
            .map_err(|e| self.error(e.to_string()))?
            .map_err(|e| self.error(e.to_string()))?;
        let registry = self.registry().await;
        let categories = registry.categories().into_iter().map(|c| c.name).collect();
        let c = app.config();
        Ok(self.app.privacy().json(ExecutionStatsResponse {
            workspace: WorkspaceStats {
                path: app.workspace_path().display().to_string(),
                file_count: usage.files,
                bytes_used: usage.bytes,
                quota_bytes: c.storage.workspace_quota_bytes(),
                quota_mode: app.quota().kind().into(),
            },
            skills: DirStats {
                path: app.skills_dir().display().to_string(),
                count: skill_count,
            },
            tool_registry: RegistryStats {
                path: app.registry_dir().display().to_string(),
                categories,
                total_tools: registry.total_tools(),
            },
            capabilities: vec![
                "sandboxed_execution".into(),
                "container_per_execution".into(),
                "progressive_tool_discovery".into(),
                "pii_tokenization".into(),
                "skills_persistence".into(),
                "workspace_files".into(),
                "sessions".into(),
            ]
            .into_iter()
            .chain(
                app.gateway()
                    .is_some()
                    .then(|| "upstream_tools_as_code".to_string()),
            )
            .collect(),
            limits: LimitStats {
                default_timeout_seconds: c.limits.default_timeout_secs,
                max_timeout_seconds: c.limits.max_timeout_secs,
                default_memory_mb: c.limits.default_memory_mb,
                max_memory_mb: c.limits.max_memory_mb,
                // This tenant's limit (the whole server's when there are no tenants).
                max_concurrency: app.sandbox().settings().max_concurrency,
                max_queue: c.pool.max_queue,
                max_code_bytes: c.limits.max_code_bytes,
                max_output_bytes: c.limits.max_output_bytes,
                max_result_bytes: c.limits.max_result_bytes,
                pids_limit: c.sandbox.pids_limit,
            },
            engine: EngineStats {
                kind: app.engine_info().kind.clone(),
                version: app.engine_info().version.clone(),
                api_version: app.engine_info().api_version.clone(),
            },
            node: NodeStats {
                name: app.node_name().to_string(),
                swarm_node_id: app.engine_info().swarm.as_ref().map(|s| s.node_id.clone()),
            },
            image: ImageStats {
                name: app.image().0.to_string(),
                id: app.image().1.to_string(),
            },
            sandbox_user: {
                let settings = app.sandbox().settings();
                SandboxUserStats {
                    uid: settings.uid,
                    gid: settings.gid,
                    source: if app.has_own_uid() {
                        "tenant"
                    } else if settings.uid == crate::config::SANDBOX_UID {
                        "default"
                    } else {
                        "workspace_owner"
                    }
                    .into(),
                }
            },
            executions: app.execution_stats(),
            // Reads each session's meta file: off the async worker.
            sessions: crate::host::blocking_here(|| app.session_counts()),
            tool_calls: app
                .gateway()
                .map(|view| view.stats.snapshot())
                .unwrap_or_default(),
            // The vault's lock is held across file I/O: off the async worker.
            pii_vault: crate::host::blocking_here(|| app.pii().persistence()).map(|p| {
                PiiVaultStats {
                    path: p.path.display().to_string(),
                    tokens: app.pii().vault_len(),
                    persisting: p.persisting,
                    write_failures: p.write_failures,
                    records_rejected: p.records_rejected,
                }
            }),
            executions_paused: app.paused().len(),
            tasks_running: app.tasks().running_task_count(),
            audit: app.audit().map(|log| log.health()),
        }))
    }
}
