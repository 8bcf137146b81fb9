//! Where the server keeps its mutable data (workspaces, skills, registry additions), on which
//! storage, and how much of it a workspace may hold.
//!
//! Mutable data lives under `$XDG_DATA_HOME/code-execution-mcp` (or
//! `~/.local/share/code-execution-mcp`) unless `--data-dir` says otherwise.

use std::path::PathBuf;

use clap::Args;

use crate::tenancy::{TenantDirs, valid_tenant_name};

#[derive(Debug, Clone, Args)]
pub struct StorageConfig {
    /// Directory of the server's mutable data: the workspace and saved skills, or with tokens
    /// each tenant's under tenants/NAME/ [default: $XDG_DATA_HOME/code-execution-mcp].
    #[arg(long, env = "CEM_DATA_DIR")]
    pub data_dir: Option<PathBuf>,

    /// The data directory is the volume every node of a swarm mounts: refuse to start when it
    /// is on local storage (a shared mount that did not come up), and fail `/health` while reads
    /// of it fail or hang past a minute. See docs/deploying.md, "Scale out".
    #[arg(long, env = "CEM_SHARED_DATA")]
    pub shared_data: bool,

    /// This server's node, as `get_execution_stats` reports it [default: the engine's host
    /// name].
    #[arg(long, env = "CEM_NODE_NAME")]
    pub node_name: Option<String>,

    /// Host directory bind-mounted at /workspace in every sandbox [default: DATA_DIR/workspace].
    /// Not with tokens: each tenant has DATA_DIR/tenants/NAME/workspace.
    #[arg(long, env = "CEM_WORKSPACE")]
    pub workspace: Option<PathBuf>,

    /// Workspace disk quota in MiB (0 = no quota).
    #[arg(long, env = "CEM_WORKSPACE_QUOTA_MB", default_value_t = 1024)]
    pub workspace_quota_mb: u64,

    /// Directory of saved skills [default: DATA_DIR/skills]. Not with tokens: each tenant has
    /// DATA_DIR/tenants/NAME/skills.
    #[arg(long, env = "CEM_SKILLS_DIR")]
    pub skills_dir: Option<PathBuf>,

    /// Directory of tool registry files added to the catalog built into the binary; a tool id
    /// defined here overrides the built-in definition [default: DATA_DIR/tools_registry].
    #[arg(long, env = "CEM_REGISTRY_DIR")]
    pub registry_dir: Option<PathBuf>,

    /// Largest file the workspace tools read or write, in MiB.
    #[arg(long, env = "CEM_MAX_FILE_MB", default_value_t = 10)]
    pub max_file_mb: u64,
}

impl StorageConfig {
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir.clone().unwrap_or_else(data_home)
    }

    pub fn workspace_dir(&self) -> PathBuf {
        self.workspace
            .clone()
            .unwrap_or_else(|| self.data_dir().join("workspace"))
    }

    pub fn skills_dir(&self) -> PathBuf {
        self.skills_dir
            .clone()
            .unwrap_or_else(|| self.data_dir().join("skills"))
    }

    /// The directory whose registry files add to (and override) the built-in catalog.
    pub fn registry_dir(&self) -> PathBuf {
        self.registry_dir
            .clone()
            .unwrap_or_else(|| self.data_dir().join("tools_registry"))
    }

    /// The single tenant's directories (stdio, and HTTP without tokens): `--workspace`,
    /// `--skills-dir`, the rest under the data directory.
    pub fn single_tenant_dirs(&self) -> TenantDirs {
        let data = self.data_dir();
        TenantDirs {
            workspace: self.workspace_dir(),
            skills: self.skills_dir(),
            servers: data.join("servers"),
            pii_vault: data.join("pii").join("vault"),
            sessions: data.join("sessions"),
            links: data.join("links"),
        }
    }

    /// Tenant `name`'s directories under `DATA_DIR/tenants/` (the name is allowlisted by
    /// [`valid_tenant_name`] first).
    pub fn tenant_dirs(&self, name: &str) -> TenantDirs {
        assert!(valid_tenant_name(name), "tenant names are checked");
        let root = self.data_dir().join("tenants").join(name);
        TenantDirs {
            workspace: root.join("workspace"),
            skills: root.join("skills"),
            servers: root.join("servers"),
            pii_vault: root.join("pii").join("vault"),
            sessions: root.join("sessions"),
            links: root.join("links"),
        }
    }

    pub fn workspace_quota_bytes(&self) -> u64 {
        self.workspace_quota_mb.saturating_mul(1024 * 1024)
    }
}

/// `$XDG_DATA_HOME/code-execution-mcp`, else `~/.local/share/code-execution-mcp`, else
/// `/var/lib/code-execution-mcp` (a service account without a home).
pub fn data_home() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("code-execution-mcp");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(home).join(".local/share/code-execution-mcp");
    }
    PathBuf::from("/var/lib/code-execution-mcp")
}
