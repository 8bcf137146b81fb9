//! Starting a tenant's sandbox: its mounts as the engine names them, the seccomp profile
//! (refused inside a directory sandboxes mount), and the settings from the configuration's
//! sandbox, limits and pool groups. The pool starts filling here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::app::{Shared, StartError};
use crate::gateway::GatewayView;
use crate::sandbox::container::spec::{ContainerOptions, Seccomp};
use crate::sandbox::stats::Stats;
use crate::sandbox::{CallHandler, Sandbox, SandboxSettings};
use crate::workspace::SandboxUser;

/// What a tenant's sandbox mounts and who it runs as.
pub(crate) struct Mounts<'a> {
    pub workspace: &'a Path,
    pub skills: &'a Path,
    pub gateway: Option<&'a GatewayView>,
    pub user: SandboxUser,
    /// Where each container's state directory is made (none: a session's state goes inline).
    pub state_dirs: Option<crate::sandbox::StateDirs>,
    /// Where each container's egress directory is made (none: the tenant has no egress).
    pub egress_dirs: Option<crate::sandbox::container::egress_dir::EgressDirs>,
}

/// Starts the sandbox of one tenant (`tenant`: an HTTP tenant, limited to its share of the
/// server and giving its pool back when idle) and begins filling its pool. Its background work
/// runs in `span`, the tenant's.
pub(crate) fn start(
    shared: &Shared,
    mounts: Mounts<'_>,
    tenant: bool,
    calls: Arc<dyn CallHandler>,
    stats: Arc<Stats>,
    span: tracing::Span,
) -> Result<Arc<Sandbox>, StartError> {
    let config = &shared.config;
    let for_engine = |path: &Path| {
        let canonical = path.canonicalize().unwrap_or(path.to_path_buf());
        shared
            .host_paths
            .to_engine(&canonical)
            .map_err(StartError::HostPath)
    };
    let servers = mounts.gateway.map(|view| view.tree_root().to_path_buf());
    let seccomp = match &shared.seccomp {
        Seccomp::Inline => Seccomp::Inline,
        Seccomp::File(profile) => {
            let real = |p: &Path| p.canonicalize().unwrap_or(p.to_path_buf());
            let mounted: Vec<PathBuf> =
                [mounts.workspace.to_path_buf(), mounts.skills.to_path_buf()]
                    .into_iter()
                    .chain(servers.clone())
                    .collect();
            let real_mounts: Vec<PathBuf> = mounted.iter().map(|p| real(p)).collect();
            outside_mounts(&real(profile), real_mounts.iter().map(PathBuf::as_path))?;
            // And as the engine sees them (a server in a container translates both).
            let on_engine = for_engine(profile)?;
            let mounts_on_engine =
                (mounted.iter().map(|p| for_engine(p))).collect::<Result<Vec<_>, _>>()?;
            outside_mounts(&on_engine, mounts_on_engine.iter().map(PathBuf::as_path))?;
            Seccomp::File(on_engine)
        }
    };
    let (uid, gid) = (shared.engine_limits).sandbox_ids((mounts.user.uid, mounts.user.gid));
    let settings = SandboxSettings {
        image: shared.image.clone(),
        workspace: for_engine(mounts.workspace)?,
        skills: Some(for_engine(mounts.skills)?),
        servers: servers.as_deref().map(for_engine).transpose()?,
        packages: (shared.packages.as_ref())
            .map(|p| for_engine(&p.sets_dir()))
            .transpose()?,
        uid,
        gid,
        container: ContainerOptions {
            runtime_kind: shared.runtime_kind,
            ..config.sandbox.container()
        },
        limits: config.limits.harness_limits(),
        max_concurrency: if tenant {
            config.tenant_max_concurrency()
        } else {
            config.pool.max_concurrency
        },
        server_slots: shared.slots.clone(),
        max_queue: config.pool.max_queue,
        pool_size: config.pool.pool_size,
        pool_budget: shared.pool_budget.clone(),
        pool_idle: config.pool.pool_idle(),
        // An HTTP tenant that has gone idle gives its containers back.
        pool_idle_floor: if tenant { 0 } else { config.pool.pool_size },
        removals: shared.removals.clone(),
        pool_memory_bytes: (config.limits.default_memory_mb * 1024 * 1024) as i64,
        image_id: shared.image_id.clone(),
        start_limit: (shared.runtime_kind).start_limit(config.sandbox.start_timeout()),
        preload: config.sandbox.preload(),
        seccomp,
        oom_reported: shared.engine_info.reports_oom_kills(),
        image_tree: shared.image_tree.clone(),
        state_dirs: mounts.state_dirs,
        egress_dirs: mounts.egress_dirs,
        span,
    };
    let sandbox = Arc::new(Sandbox::new(
        Arc::new(shared.engine.clone()),
        settings,
        calls,
        stats,
    ));
    sandbox.refill();
    sandbox.watch_engine();
    Ok(sandbox)
}

/// Refuses a seccomp profile file inside a directory sandboxes mount: their code could rewrite
/// it for the next container. The paths are compared as given (canonical, or as the engine
/// names them).
fn outside_mounts<'a>(
    profile: &Path,
    mounts: impl IntoIterator<Item = &'a Path>,
) -> Result<(), StartError> {
    match mounts.into_iter().find(|mount| profile.starts_with(mount)) {
        Some(mount) => Err(StartError::SeccompInMount {
            profile: profile.to_path_buf(),
            mount: mount.to_path_buf(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seccomp_profile_inside_a_sandbox_mount_is_refused() {
        let data = tempfile::tempdir().unwrap();
        let profile = data.path().join("engine/seccomp-0123.json");
        let (ws, skills) = (data.path().join("workspace"), data.path().join("skills"));
        assert!(outside_mounts(&profile, [ws.as_path(), skills.as_path()]).is_ok());
        // --workspace pointed at the data directory itself.
        let err = outside_mounts(&profile, [data.path(), skills.as_path()]).unwrap_err();
        assert!(
            matches!(&err, StartError::SeccompInMount { mount, .. } if mount == data.path()),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("point --workspace (CEM_WORKSPACE)"),
            "{err}"
        );
    }
}
