//! Handing a workspace to a user of its own (a tenant's uid), closed to every other uid.
//!
//! A tenant's workspace may have been written under another uid: the one sandbox user every
//! tenant shared before tenants had uids of their own, a uid from another `--tenant-uid-range`,
//! or a server that did not run as root. [`Workspace::hand_over`] gives the new uid what the
//! previous owner (the root directory's) had, so the sandbox can go on writing it, and makes
//! the root 0700, so no other uid enters it, even through a mount shared by mistake.
//!
//! The walk never follows a link: each directory is opened beneath its parent's fd with
//! `O_NOFOLLOW` (the shared walk of [`super::walk`]) and each entry is changed with
//! `fchownat(AT_SYMLINK_NOFOLLOW)`, so a symlink planted by sandbox code has its own owner
//! changed, never its target's. Only entries the previous owner had change hands: anything
//! else (root's, a hard link to another user's file) keeps its owner, and a root-owned
//! workspace (a new one) has only its root directory handed over, as
//! [`Workspace::prepare_for_sandbox`] does. The root directory changes last, so a walk a crash
//! cut short is done again at the next start; entries deeper than [`USAGE_MAX_DEPTH`] levels
//! keep their owner and are counted in [`Handover::left`]. A chown clears setuid and setgid
//! bits, which the sandbox could not set anyway.

use std::os::fd::AsFd;

use rustix::fs::{self as rfs, AtFlags, FileType, Gid, Mode, OFlags, Uid};

use super::error::{Result, WorkspaceError};
use super::walk::{Flow, walk};
use super::{SandboxUser, USAGE_MAX_DEPTH, Workspace};

/// The mode of a workspace root handed to a user of its own: that user only.
pub const PRIVATE_ROOT_MODE: u32 = 0o700;

/// What [`Workspace::hand_over`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Handover {
    /// The root's owner before, when it was another user.
    pub from: Option<SandboxUser>,
    /// Entries given to the new owner.
    pub changed: u64,
    /// Entries the walk could not reach (too deep, unreadable): they keep their owner.
    pub left: u64,
}

impl Workspace {
    /// Gives the workspace to `user` (the server must be root): every entry the root's owner
    /// had, then the root itself, with mode 0700. Nothing to walk when `user` owns it already.
    pub fn hand_over(&self, user: SandboxUser) -> Result<Handover> {
        let root = rfs::openat(
            &*self.root_fd()?,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| WorkspaceError::io("cannot open the workspace root", e))?;
        let st = rfs::fstat(&root)
            .map_err(|e| WorkspaceError::io("cannot stat the workspace root", e))?;
        let before = SandboxUser {
            uid: st.st_uid,
            gid: st.st_gid,
        };
        let failed = |e: rustix::io::Errno| {
            WorkspaceError::io(
                format!(
                    "cannot give workspace {} to uid {}",
                    self.root_path.display(),
                    user.uid
                ),
                e,
            )
        };
        let mut done = Handover::default();
        if before != user && before.uid != 0 {
            let start = rfs::openat(
                &root,
                ".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| WorkspaceError::io("cannot open the workspace root", e))?;
            let mut first_error = None;
            let end = walk(start, String::new(), USAGE_MAX_DEPTH, |entry| {
                let Ok(st) = rfs::statat(entry.dir, entry.name, AtFlags::SYMLINK_NOFOLLOW) else {
                    done.left += 1;
                    return Flow::Next;
                };
                if st.st_uid == before.uid {
                    match give(entry.dir, entry.name, user) {
                        Ok(()) => done.changed += 1,
                        Err(e) => {
                            done.left += 1;
                            if first_error.is_none() {
                                first_error = Some(e);
                            }
                        }
                    }
                }
                if entry.file_type == FileType::Directory {
                    Flow::Descend(String::new())
                } else {
                    Flow::Next
                }
            })
            .map_err(|e| WorkspaceError::io("cannot walk the workspace", e))?;
            done.left += end.unreadable as u64 + u64::from(end.depth_limited);
            // The root stays with its old owner while entries could not change: the next
            // start tries again.
            if let Some(e) = first_error {
                return Err(failed(e));
            }
        }
        if before != user {
            rfs::fchown(
                &root,
                Some(Uid::from_raw(user.uid)),
                Some(Gid::from_raw(user.gid)),
            )
            .map_err(failed)?;
            done.from = Some(before);
        }
        if st.st_mode & 0o7777 != PRIVATE_ROOT_MODE {
            rfs::fchmod(&root, Mode::from_raw_mode(PRIVATE_ROOT_MODE)).map_err(failed)?;
        }
        Ok(done)
    }
}

fn give(dir: impl AsFd, name: &std::ffi::CStr, user: SandboxUser) -> rustix::io::Result<()> {
    rfs::chownat(
        dir,
        name,
        Some(Uid::from_raw(user.uid)),
        Some(Gid::from_raw(user.gid)),
        AtFlags::SYMLINK_NOFOLLOW,
    )
}
