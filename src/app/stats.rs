//! What `get_execution_stats` reports of a tenant, assembled here so the tool only hands it
//! to the privacy layer: the original server's fields (workspace, skills, tool_registry,
//! capabilities, limits) plus the engine, the image, the user sandboxes run as, executions by
//! status with latency percentiles, and the containers running now, and with upstreams the
//! tool calls made from code per upstream. Each part is read from what its subsystem keeps.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::discovery::Registry;
use crate::gateway::call_stats::UpstreamCallStats;
use crate::sandbox::stats::StatsSnapshot;
use crate::skills::SkillError;
use crate::workspace::{Usage, WorkspaceError};

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
    /// How `search_tools` ranks (`--discovery`): `semantic` or `lexical`, the model, and why
    /// it is lexical when a model could not be loaded.
    pub ranking: crate::discovery::semantic::RankingStatus,
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

/// What `get_execution_stats` answers: [`App::stats_report`].
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
    /// The package cache every tenant shares (absent with `--packages off`): installs by
    /// outcome and cache hits since the server started, the sets and bytes it holds.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub packages: Option<crate::packages::PackageStats>,
}

/// Why the report could not be made: a part that had to be measured failed.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    #[error("cannot measure the workspace: {0}")]
    Workspace(WorkspaceError),
    #[error(transparent)]
    Skills(#[from] SkillError),
    /// The skills listing did not finish (it panicked or the runtime is stopping).
    #[error(transparent)]
    Interrupted(#[from] tokio::task::JoinError),
}

/// What every server can do, before what its configuration adds.
const CAPABILITIES: [&str; 7] = [
    "sandboxed_execution",
    "container_per_execution",
    "progressive_tool_discovery",
    "pii_tokenization",
    "skills_persistence",
    "workspace_files",
    "sessions",
];

impl App {
    /// What `get_execution_stats` reports of this tenant. Measures the workspace and lists
    /// the skills (off the async workers), then reads every other part from what its
    /// subsystem keeps.
    pub async fn stats_report(&self) -> Result<ExecutionStatsResponse, StatsError> {
        let usage = self
            .with_workspace(|ws| ws.usage())
            .await
            .map_err(StatsError::Workspace)?;
        let skills = self.skill_count().await?;
        let registry = self.registry().await;
        Ok(ExecutionStatsResponse {
            workspace: self.workspace_stats(&usage),
            skills: DirStats {
                path: self.skills_dir().display().to_string(),
                count: skills,
            },
            tool_registry: self.registry_stats(&registry),
            capabilities: self.capabilities(),
            limits: self.limit_stats(),
            engine: self.engine_stats(),
            node: self.node_stats(),
            image: ImageStats {
                name: self.image().0.to_string(),
                id: self.image().1.to_string(),
            },
            sandbox_user: self.sandbox_user_stats(),
            executions: self.execution_stats(),
            // Reads each session's meta file: off the async worker.
            sessions: crate::host::blocking_here(|| self.session_counts()),
            tool_calls: (self.gateway())
                .map(|view| view.stats.snapshot())
                .unwrap_or_default(),
            pii_vault: self.pii_vault_stats(),
            executions_paused: self.paused().len(),
            tasks_running: self.tasks().running_task_count(),
            audit: self.audit().map(|log| log.health()),
            // Lists the cache's meta files: off the async worker.
            packages: crate::host::blocking_here(|| self.shared.package_stats()),
        })
    }

    /// The number of saved skills, listed off the async workers.
    async fn skill_count(&self) -> Result<usize, StatsError> {
        let skills = self.skills().clone();
        let listed = tokio::task::spawn_blocking(move || skills.list()).await??;
        Ok(listed.len())
    }

    fn workspace_stats(&self, usage: &Usage) -> WorkspaceStats {
        WorkspaceStats {
            path: self.workspace_path().display().to_string(),
            file_count: usage.files,
            bytes_used: usage.bytes,
            quota_bytes: self.config().storage.workspace_quota_bytes(),
            quota_mode: self.quota().kind().into(),
        }
    }

    fn registry_stats(&self, registry: &Registry) -> RegistryStats {
        RegistryStats {
            path: self.registry_dir().display().to_string(),
            categories: registry.categories().into_iter().map(|c| c.name).collect(),
            total_tools: registry.total_tools(),
            ranking: registry.ranking(),
        }
    }

    /// [`CAPABILITIES`], and calling upstream tools from code with `--upstreams`.
    fn capabilities(&self) -> Vec<String> {
        let upstreams = self.gateway().map(|_| "upstream_tools_as_code");
        let packages = self.shared.packages.as_ref().map(|_| "packages_on_demand");
        (CAPABILITIES.into_iter().chain(upstreams).chain(packages))
            .map(str::to_string)
            .collect()
    }

    fn limit_stats(&self) -> LimitStats {
        let c = self.config();
        LimitStats {
            default_timeout_seconds: c.limits.default_timeout_secs,
            max_timeout_seconds: c.limits.max_timeout_secs,
            default_memory_mb: c.limits.default_memory_mb,
            max_memory_mb: c.limits.max_memory_mb,
            // This tenant's limit (the whole server's when there are no tenants).
            max_concurrency: self.sandbox().settings().max_concurrency,
            max_queue: c.pool.max_queue,
            max_code_bytes: c.limits.max_code_bytes,
            max_output_bytes: c.limits.max_output_bytes,
            max_result_bytes: c.limits.max_result_bytes,
            pids_limit: c.sandbox.pids_limit,
        }
    }

    fn engine_stats(&self) -> EngineStats {
        let info = self.engine_info();
        EngineStats {
            kind: info.kind.clone(),
            version: info.version.clone(),
            api_version: info.api_version.clone(),
        }
    }

    fn node_stats(&self) -> NodeStats {
        NodeStats {
            name: self.node_name().to_string(),
            swarm_node_id: (self.engine_info().swarm.as_ref()).map(|s| s.node_id.clone()),
        }
    }

    fn sandbox_user_stats(&self) -> SandboxUserStats {
        let settings = self.sandbox().settings();
        let source = if self.has_own_uid() {
            "tenant"
        } else if settings.uid == crate::config::SANDBOX_UID {
            "default"
        } else {
            "workspace_owner"
        };
        SandboxUserStats {
            uid: settings.uid,
            gid: settings.gid,
            source: source.into(),
        }
    }

    /// The vault file's state, with `--pii-key-file`.
    fn pii_vault_stats(&self) -> Option<PiiVaultStats> {
        // The vault's lock is held across file I/O: off the async worker.
        let persistence = crate::host::blocking_here(|| self.pii().persistence())?;
        Some(PiiVaultStats {
            path: persistence.path.display().to_string(),
            tokens: self.pii().vault_len(),
            persisting: persistence.persisting,
            write_failures: persistence.write_failures,
            records_rejected: persistence.records_rejected,
        })
    }
}
