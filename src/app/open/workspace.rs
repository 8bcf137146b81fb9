//! Opening a tenant's workspace: its quota (a loop-mounted image, else checked between
//! executions), the workspace itself, the user sandboxes run as (the tenant's own, which the
//! workspace is handed to, else the owner's or 10001), and a background sweep of the temp
//! files a killed server left.

use std::path::Path;
use std::sync::Arc;

use crate::app::{Shared, StartError};
use crate::config::SANDBOX_UID;
use crate::sandbox::engine::paths::HostPaths;
use crate::workspace::quota::{self, QuotaMode};
use crate::workspace::{SandboxUser, Workspace, WorkspaceError, WorkspaceLimits};

/// An open workspace and what opening it decided.
pub(crate) struct Opened {
    pub workspace: Arc<Workspace>,
    pub quota: QuotaMode,
    /// Who sandboxes run as: the workspace's owner when that is another non-root user.
    pub user: SandboxUser,
}

pub(crate) async fn open(
    shared: &Shared,
    path: &Path,
    own_user: Option<SandboxUser>,
) -> Result<Opened, StartError> {
    let storage = &shared.config.storage;
    let failed = |error: WorkspaceError| StartError::Workspace {
        path: path.to_path_buf(),
        error,
    };
    let quota = if storage.workspace_quota_mb == 0 {
        QuotaMode::Soft {
            reason: "no quota configured (--workspace-quota-mb 0)".into(),
        }
    } else if let HostPaths::InContainer { .. } = shared.host_paths {
        // A loop mount made in the server's container is invisible to the engine.
        QuotaMode::Soft {
            reason: "the server runs in a container, where a loop-mounted quota image would be invisible to the Docker engine".into(),
        }
    } else {
        let (owned, bytes) = (path.to_path_buf(), storage.workspace_quota_bytes());
        tokio::task::spawn_blocking(move || quota::ensure(&owned, bytes))
            .await
            .expect("quota setup does not panic")
            .map_err(|e| StartError::Quota {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?
    };
    if let QuotaMode::Soft { reason } = &quota
        && storage.workspace_quota_mb > 0
    {
        tracing::warn!(
            "workspace quota is enforced between executions only: {reason} (see docs/deploying.md, \"Workspace quota\")"
        );
    }
    let quota_bytes = storage.workspace_quota_bytes();
    let limits = WorkspaceLimits {
        max_file_bytes: storage.max_file_mb * 1024 * 1024,
        // No quota configured: a limit nothing reaches.
        quota_bytes: if quota_bytes == 0 {
            u64::MAX
        } else {
            quota_bytes
        },
        soft_quota: quota_bytes > 0 && !quota.kernel_enforced(quota_bytes),
        ..WorkspaceLimits::default()
    };
    let workspace = Arc::new(Workspace::open(path, limits).map_err(failed)?);
    let user = match own_user {
        Some(user) => {
            crate::app::open::tenant_user::hand_over(&workspace, user)
                .await
                .map_err(failed)?;
            user
        }
        None => workspace.prepare_for_sandbox(SANDBOX_UID).map_err(failed)?,
    };
    // Temp files of a server killed mid-write: removed in the background (a walk of a large
    // workspace should not delay the start; only dead writers' files are touched).
    let sweep = workspace.clone();
    tokio::task::spawn_blocking(move || match sweep.remove_stale_temps() {
        Ok(0) => {}
        Ok(n) => tracing::info!("removed {n} temp files a stopped server left in the workspace"),
        Err(e) => tracing::warn!("could not look for stale temp files in the workspace: {e}"),
    });
    Ok(Opened {
        workspace,
        quota,
        user,
    })
}
