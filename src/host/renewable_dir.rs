//! A directory fd that is reopened from its path when the filesystem calls it stale.
//!
//! The workspace and the skills store resolve every path beneath one fd to their directory,
//! opened once (so nothing later resolves a path string from `/`). On a network or replicated
//! filesystem (NFS, GlusterFS in a swarm) that fd can go stale: after a replica is lost, or the
//! directory is recreated on another node, every call through it fails with `ESTALE` until the
//! process reopens it, and a long-lived server would refuse the tenant for good. So an operation
//! that fails with `ESTALE` reopens the directory from its configured path once and runs again
//! ([`RenewableDir::renewing`]). The path is the trusted configuration the directory was opened
//! with, reopened with the same flags.
//!
//! A local filesystem never calls a handle stale, so the tests make one stale on purpose
//! ([`RenewableDir::inject_stale`]): from then on taking the fd fails with `ESTALE`, as every
//! call through a stale handle does, until the directory is reopened. That is why an operation
//! takes the fd through the fallible [`RenewableDir::fd`]: an operation that does not renew then
//! fails in a test, not only on shared storage.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use rustix::fs::{self as rfs, Mode, OFlags};
use rustix::io::Errno;

/// A directory's fd, swappable while operations hold the one they started with.
#[derive(Debug)]
pub(crate) struct RenewableDir {
    path: PathBuf,
    flags: OFlags,
    fd: RwLock<Arc<OwnedFd>>,
    /// Set by [`RenewableDir::inject_stale`]; cleared by a renewal.
    stale: AtomicBool,
}

impl RenewableDir {
    /// Opens the directory `path` with `flags` (`O_DIRECTORY | O_CLOEXEC` added).
    pub(crate) fn open(path: &Path, flags: OFlags) -> Result<Self, Errno> {
        let flags = flags | OFlags::DIRECTORY | OFlags::CLOEXEC;
        Ok(Self {
            path: path.to_path_buf(),
            flags,
            fd: RwLock::new(Arc::new(rfs::open(path, flags, Mode::empty())?)),
            stale: AtomicBool::new(false),
        })
    }

    /// The current fd. An operation that must see one directory throughout takes it once and
    /// keeps it; a renewal meanwhile only changes what later calls get. `ESTALE` only after
    /// [`RenewableDir::inject_stale`], until the next renewal.
    pub(crate) fn fd(&self) -> Result<Arc<OwnedFd>, Errno> {
        if self.stale.load(Ordering::Acquire) {
            return Err(Errno::STALE);
        }
        Ok(self
            .fd
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone())
    }

    /// Makes the handle stale, as shared storage does after a failover: every [`RenewableDir::fd`]
    /// fails with `ESTALE` until an operation renews the directory. A fault for tests: only an
    /// operation run through [`RenewableDir::renewing`] succeeds afterwards.
    pub(crate) fn inject_stale(&self) {
        self.stale.store(true, Ordering::Release);
    }

    /// Reopens the directory from its path and makes that the fd later operations get.
    fn renew(&self) -> Result<(), Errno> {
        let fresh = Arc::new(rfs::open(&self.path, self.flags, Mode::empty())?);
        *self.fd.write().unwrap_or_else(PoisonError::into_inner) = fresh;
        self.stale.store(false, Ordering::Release);
        Ok(())
    }

    /// Runs `op`; if it failed with an error `stale` recognises, reopens the directory and runs
    /// `op` once more. A second stale failure is returned as it is; the next call tries again.
    pub(crate) fn renewing<T, E>(
        &self,
        stale: impl Fn(&E) -> bool,
        op: impl Fn() -> Result<T, E>,
    ) -> Result<T, E> {
        match op() {
            Err(e) if stale(&e) => match self.renew() {
                Ok(()) => {
                    tracing::warn!(dir = %self.path.display(), "the directory's handle went stale (shared storage changed under it); reopened it");
                    op()
                }
                Err(renew) => {
                    tracing::warn!(dir = %self.path.display(), error = %renew, "the directory's handle went stale and reopening it failed");
                    Err(e)
                }
            },
            r => r,
        }
    }
}

/// Whether `e` is the filesystem calling a handle stale (`ESTALE`).
pub(crate) fn is_stale(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(Errno::STALE.raw_os_error())
}
