//! The workspace root's fd, renewed when the filesystem calls it stale.
//!
//! Every operation resolves beneath one `O_PATH` fd to the root (see the module above). On a
//! network or replicated filesystem (NFS, GlusterFS) that fd can go stale: after a replica is
//! lost, or the directory is recreated on another node, every call through it fails with
//! `ESTALE` until the process reopens it, and a long-lived server would refuse the tenant for
//! good. So an operation that fails with `ESTALE` reopens the root from its configured path once
//! and runs again ([`super::Workspace::renewing`]). The path is the trusted, canonical one the
//! workspace was opened with; its last component is opened with `O_NOFOLLOW`.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use rustix::fs::{self as rfs, Mode, OFlags};
use rustix::io::Errno;

use super::Workspace;
use super::error::Result;

/// The root's fd, swappable while operations hold the one they started with.
#[derive(Debug)]
pub(super) struct Root {
    path: PathBuf,
    fd: RwLock<Arc<OwnedFd>>,
}

impl Root {
    /// Opens `path` (canonical) as an `O_PATH | O_DIRECTORY` fd.
    pub(super) fn open(path: &Path) -> Result<Self, Errno> {
        Ok(Self {
            path: path.to_path_buf(),
            fd: RwLock::new(Arc::new(open_path(path)?)),
        })
    }

    /// The current fd; an operation keeps it for its whole run.
    pub(super) fn fd(&self) -> Arc<OwnedFd> {
        self.fd
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Reopens the root from its path and makes that the fd later operations get.
    pub(super) fn renew(&self) -> Result<(), Errno> {
        let fresh = Arc::new(open_path(&self.path)?);
        *self.fd.write().unwrap_or_else(PoisonError::into_inner) = fresh;
        Ok(())
    }
}

fn open_path(path: &Path) -> Result<OwnedFd, Errno> {
    rfs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

impl Workspace {
    /// Runs `op`; if it failed because the root fd went stale, reopens the root and runs it once
    /// more. A second stale failure is returned as it is, and the next call tries again.
    pub(super) fn renewing<T>(&self, op: impl Fn() -> Result<T>) -> Result<T> {
        match op() {
            Err(e) if e.is_stale() => match self.root.renew() {
                Ok(()) => {
                    tracing::warn!(root = %self.root_path.display(), "the workspace root's handle went stale (shared storage changed under it); reopened it");
                    op()
                }
                Err(renew) => {
                    tracing::warn!(root = %self.root_path.display(), error = %renew, "the workspace root's handle went stale and reopening it failed");
                    Err(e)
                }
            },
            r => r,
        }
    }
}
