//! A tenant's own sandbox user: the uid its name gives within `--tenant-uid-range`
//! ([`crate::tenancy::uid`]), its workspace handed to that uid (0700), and the directories its
//! sandboxes only read (skills, the tools package) closed to every group but the tenant's
//! (`root:<gid>`, 0750: the server keeps writing them as their owner, and the sandbox gets no
//! more than reading). Another tenant's sandbox, whatever it manages to mount, meets `EACCES`.
//!
//! Changing owners needs root: a server that is not root keeps the rule of a single workspace
//! (its sandboxes run as the owner of the tenant's workspace, the server's own user, for every
//! tenant) and says so. Without tenants nothing here applies: `--workspace` keeps its owner's
//! uid, or 10001.

use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{self as rfs, Gid, Mode, OFlags};

use crate::app::StartError;
use crate::config::Config;
use crate::workspace::{SandboxUser, Workspace, WorkspaceError};

/// The mode of a directory sandboxes of one tenant read: the server (its owner) writes, the
/// tenant's group reads, nobody else enters.
pub(crate) const GROUP_READ_MODE: u32 = 0o750;

/// The user tenant `name`'s sandboxes run as, when the server can give it the tenant's
/// directories (it runs as root); `None` without a tenant, or when it cannot.
pub(crate) fn own_user(config: &Config, tenant: Option<&str>) -> Option<SandboxUser> {
    let name = tenant?;
    let uid = config.tenants.tenant_uid_range.uid_of(name);
    if !rustix::process::geteuid().is_root() {
        tracing::warn!(
            "tenant {name} runs its sandboxes as the owner of its workspace, like every tenant of this server: only a server running as root can give each tenant a uid of its own (it would be {uid}, from --tenant-uid-range), so tenants are kept apart by their mounts alone"
        );
        return None;
    }
    Some(SandboxUser { uid, gid: uid })
}

/// Hands the workspace to `user` on the blocking pool (a walk when another user owned it).
pub(crate) async fn hand_over(
    workspace: &Arc<Workspace>,
    user: SandboxUser,
) -> Result<(), WorkspaceError> {
    let ws = workspace.clone();
    let done = tokio::task::spawn_blocking(move || ws.hand_over(user))
        .await
        .expect("the handover does not panic")?;
    if let Some(from) = done.from {
        tracing::info!(
            root = %workspace.root_path().display(),
            "gave the workspace to the tenant's uid {} (from uid {}: {} entries changed hands)",
            user.uid,
            from.uid,
            done.changed
        );
    }
    if done.left > 0 {
        tracing::warn!(
            root = %workspace.root_path().display(),
            "{} entries of the workspace could not be given to uid {} (deeper than the walk goes, or unreadable): the sandbox cannot change them",
            done.left,
            user.uid
        );
    }
    Ok(())
}

/// Makes `dir` (a directory the tenant's sandboxes mount read-only) `root:<gid>` 0750. The
/// last component is not followed.
pub(crate) fn close_to_group(dir: &Path, user: SandboxUser) -> Result<(), StartError> {
    let failed = |source: rustix::io::Errno| StartError::TenantUser {
        path: dir.to_path_buf(),
        uid: user.uid,
        source: source.into(),
    };
    let fd = rfs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(failed)?;
    restrict(fd.as_fd(), user.gid).map_err(failed)
}

fn restrict(fd: impl AsFd, gid: u32) -> rustix::io::Result<()> {
    let st = rfs::fstat(&fd)?;
    if st.st_gid != gid {
        rfs::fchown(&fd, None, Some(Gid::from_raw(gid)))?;
    }
    if st.st_mode & 0o7777 != GROUP_READ_MODE {
        rfs::fchmod(&fd, Mode::from_raw_mode(GROUP_READ_MODE))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_tenant_has_no_user_of_its_own() {
        assert_eq!(own_user(&Config::defaults(), None), None);
    }

    #[test]
    fn a_tenant_gets_the_uid_its_name_gives_when_the_server_is_root() {
        let config = Config::defaults();
        let own = own_user(&config, Some("alice"));
        if rustix::process::geteuid().is_root() {
            let uid = config.tenants.tenant_uid_range.uid_of("alice");
            assert_eq!(own, Some(SandboxUser { uid, gid: uid }));
        } else {
            assert_eq!(own, None);
        }
    }

    #[test]
    #[ignore = "needs root: changes a directory's group"]
    fn a_read_only_directory_is_closed_to_all_but_the_tenants_group() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        assert!(rustix::process::geteuid().is_root(), "run as root");
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("skills");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let user = SandboxUser {
            uid: 2_000_000_000,
            gid: 2_000_000_000,
        };
        close_to_group(&dir, user).unwrap();
        let m = std::fs::metadata(&dir).unwrap();
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (0, user.gid, 0o750));
        // Idempotent; a symlink in the directory's place is refused, not followed.
        close_to_group(&dir, user).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(matches!(
            close_to_group(&link, user),
            Err(StartError::TenantUser { .. })
        ));
    }
}
