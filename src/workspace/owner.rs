//! Ownership: which non-root user the sandbox runs as so that it can write the workspace (never
//! root), and the owner new files and directories get when the server runs as root. The rule is a
//! pure function, kept apart from the `fchown` calls that act on it.

use std::os::fd::AsFd;
use std::path::Path;

use rustix::fs::{self as rfs, Gid, Mode, OFlags, Uid};
use rustix::io::Errno;

use super::error::{Result, WorkspaceError};
use super::{DEFAULT_SANDBOX_UID, SandboxUser, Workspace};

impl Workspace {
    /// Chooses the user the sandbox runs as so that it can write the workspace, never root.
    ///
    /// If the root directory is owned by a non-root user, the sandbox runs as that user (a
    /// developer's files stay theirs; a root group is replaced by the user's own id). If it is
    /// owned by root and the server is root, the directory is given to `sandbox_uid:sandbox_uid`
    /// (only the directory itself; existing root-owned files stay read-only to the sandbox). If it
    /// is owned by root and the server is not root, this is an error that says how to fix it.
    pub fn prepare_for_sandbox(&self, sandbox_uid: u32) -> Result<SandboxUser> {
        let st = rfs::fstat(&*self.root_fd()?)
            .map_err(|e| WorkspaceError::io("cannot stat the workspace root", e))?;
        let euid = rustix::process::geteuid().as_raw();
        match decide_sandbox_user(st.st_uid, st.st_gid, euid, sandbox_uid) {
            Decision::Use(user) => Ok(user),
            Decision::ChownRoot(user) => {
                let fd = rfs::openat(
                    &*self.root_fd()?,
                    ".",
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| WorkspaceError::io("cannot open the workspace root", e))?;
                chown_fd(&fd, user).map_err(|e| {
                    WorkspaceError::io(
                        format!(
                            "cannot give workspace {} to uid {}",
                            self.root_path.display(),
                            user.uid
                        ),
                        e,
                    )
                })?;
                tracing::info!(root = %self.root_path.display(), uid = user.uid, "gave the root-owned workspace to the sandbox user");
                Ok(user)
            }
            Decision::Refuse(why) => Err(WorkspaceError::SandboxUser {
                message: why.message(&self.root_path, euid, sandbox_uid),
            }),
        }
    }

    /// The owner that new files and directories get: only when the server is root, and only a
    /// non-root owner (root-owned workspaces are handed over by `prepare_for_sandbox`).
    pub(super) fn owner_for_new_entries(&self) -> Result<Option<SandboxUser>> {
        if !rustix::process::geteuid().is_root() {
            return Ok(None);
        }
        let st = rfs::fstat(&*self.root_fd()?)
            .map_err(|e| WorkspaceError::io("cannot stat the workspace root", e))?;
        Ok((st.st_uid != 0).then(|| SandboxUser {
            uid: st.st_uid,
            gid: non_root_gid(st.st_uid, st.st_gid),
        }))
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Decision {
    Use(SandboxUser),
    ChownRoot(SandboxUser),
    Refuse(Refusal),
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    SandboxUidIsRoot,
    RootOwnedNotRoot,
}

impl Refusal {
    pub(super) fn message(&self, root: &Path, euid: u32, sandbox_uid: u32) -> String {
        match self {
            Refusal::SandboxUidIsRoot => format!(
                "refusing to run the sandbox as uid {sandbox_uid}: the sandbox user must not be root \
                 or -1; configure a non-root uid such as {DEFAULT_SANDBOX_UID}"
            ),
            Refusal::RootOwnedNotRoot => format!(
                "workspace {root} is owned by root and this server runs as uid {euid}, so it cannot \
                 hand the directory to the sandbox user (the sandbox never runs as root); fix it with \
                 `sudo chown {euid}:$(id -g) {root}` (or `sudo chown {sandbox_uid}:{sandbox_uid} {root}`), \
                 or choose a workspace directory you own",
                root = root.display()
            ),
        }
    }
}

/// The pure rule behind [`Workspace::prepare_for_sandbox`].
pub(super) fn decide_sandbox_user(
    owner_uid: u32,
    owner_gid: u32,
    euid: u32,
    sandbox_uid: u32,
) -> Decision {
    if owner_uid != 0 && owner_uid != u32::MAX {
        return Decision::Use(SandboxUser {
            uid: owner_uid,
            gid: non_root_gid(owner_uid, owner_gid),
        });
    }
    if sandbox_uid == 0 || sandbox_uid == u32::MAX {
        return Decision::Refuse(Refusal::SandboxUidIsRoot);
    }
    let user = SandboxUser {
        uid: sandbox_uid,
        gid: sandbox_uid,
    };
    if euid == 0 {
        Decision::ChownRoot(user)
    } else {
        Decision::Refuse(Refusal::RootOwnedNotRoot)
    }
}

/// A root group would give the sandbox group-root access in its own image: use the uid instead.
fn non_root_gid(uid: u32, gid: u32) -> u32 {
    if gid == 0 || gid == u32::MAX {
        uid
    } else {
        gid
    }
}

pub(super) fn chown_fd(fd: impl AsFd, user: SandboxUser) -> std::result::Result<(), Errno> {
    rfs::fchown(
        fd,
        Some(Uid::from_raw(user.uid)),
        Some(Gid::from_raw(user.gid)),
    )
}
