//! The [`SkillStore`] handle: the trusted directory fd every path is resolved against, opening
//! (and creating) the store, and the store-wide `flock` that every operation takes. The
//! operations themselves are in `read.rs`, `write.rs`, `history.rs` and `seed.rs`.

use std::fmt;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{self as rfs, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use super::error::{Result, SkillError};
use super::{DIR_MODE, FILE_MODE, LOCK_FILE, SkillLimits};
use crate::host::renewable_dir::RenewableDir;

/// A store of skills in one directory. See the module documentation.
pub struct SkillStore {
    pub(super) dir: PathBuf,
    /// `O_RDONLY | O_DIRECTORY` fd of the store; every path is resolved relative to it. Reopened
    /// when shared storage calls it stale ([`SkillStore::renewing`]).
    pub(super) root: RenewableDir,
    pub(super) limits: SkillLimits,
}

impl fmt::Debug for SkillStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkillStore")
            .field("dir", &self.dir)
            .field("limits", &self.limits)
            .finish()
    }
}

impl SkillStore {
    /// Opens the store in `dir`, creating it (mode 0755) when missing. The configured path itself
    /// may go through symlinks (it is configuration, not input); nothing inside it is followed.
    pub fn open(dir: &Path, limits: SkillLimits) -> Result<Self> {
        match std::fs::symlink_metadata(dir) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(DIR_MODE)
                    .create(dir)
                    .map_err(|e| {
                        SkillError::io(
                            format!("cannot create the skills directory {}", dir.display()),
                            e,
                        )
                    })?;
                // The mode given to mkdir is reduced by the umask; the sandbox user must read.
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))
                    .map_err(|e| SkillError::io(format!("cannot chmod {}", dir.display()), e))?;
            }
            Err(e) => {
                return Err(SkillError::io(
                    format!("cannot access the skills directory {}", dir.display()),
                    e,
                ));
            }
        }
        let root = RenewableDir::open(dir, OFlags::RDONLY).map_err(|e| {
            SkillError::io(
                format!("cannot open the skills directory {}", dir.display()),
                e,
            )
        })?;
        let store = Self {
            dir: dir.to_path_buf(),
            root,
            limits,
        };
        // Create the lock file now (best effort: a read-only store is still readable).
        if let Err(e) = store.open_lock_file(true) {
            tracing::debug!(dir = %dir.display(), error = %e, "skills store lock file not created");
        }
        store.remove_stale_temps(store.root_fd()?.as_fd());
        Ok(store)
    }

    /// The directory of the store.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs an operation's `op`, once more on a reopened directory if the store's fd went stale.
    pub(super) fn renewing<T>(&self, op: impl Fn() -> Result<T>) -> Result<T> {
        self.root.renewing(SkillError::is_stale, op)
    }

    /// The store's fd for one step of an operation; a stale handle is an error
    /// [`SkillStore::renewing`] answers by reopening the directory.
    pub(super) fn root_fd(&self) -> Result<Arc<OwnedFd>> {
        self.root
            .fd()
            .map_err(|e| SkillError::io("cannot use the skills directory", e))
    }

    /// A fault for tests: the store's handle goes stale, as on shared storage after a failover
    /// (`ESTALE` from every use until an operation reopens the directory from its path). Each
    /// operation meant to renew is tested through it; nothing else calls it.
    #[doc(hidden)]
    pub fn inject_stale_handle(&self) {
        self.root.inject_stale();
    }

    /// The limits of the store.
    pub fn limits(&self) -> &SkillLimits {
        &self.limits
    }

    // ---- locking ---------------------------------------------------------------------------

    fn open_lock_file(&self, write: bool) -> Result<OwnedFd> {
        let flags = if write {
            OFlags::RDWR | OFlags::CREATE
        } else {
            OFlags::RDONLY
        } | OFlags::NOFOLLOW
            | OFlags::CLOEXEC;
        match rfs::openat(
            &*self.root_fd()?,
            LOCK_FILE,
            flags,
            Mode::from_raw_mode(FILE_MODE),
        ) {
            Ok(fd) => Ok(fd),
            Err(Errno::LOOP) => Err(SkillError::Symlink {
                path: LOCK_FILE.into(),
            }),
            Err(e) => Err(SkillError::io(format!("cannot open {LOCK_FILE}"), e)),
        }
    }

    /// Takes the store lock: exclusive for mutations, shared for reads. A reader of a store it
    /// cannot write (no lock file, read-only) proceeds without one.
    pub(super) fn lock(&self, exclusive: bool) -> Result<Option<OwnedFd>> {
        let fd = match self.open_lock_file(true) {
            Ok(fd) => fd,
            Err(e @ SkillError::Symlink { .. }) => return Err(e),
            Err(e) if exclusive => return Err(e),
            Err(_) => match self.open_lock_file(false) {
                Ok(fd) => fd,
                Err(e @ SkillError::Symlink { .. }) => return Err(e),
                Err(_) => return Ok(None),
            },
        };
        let op = if exclusive {
            FlockOperation::LockExclusive
        } else {
            FlockOperation::LockShared
        };
        loop {
            match rfs::flock(&fd, op) {
                Ok(()) => return Ok(Some(fd)),
                Err(Errno::INTR) => continue,
                Err(e) => return Err(SkillError::io("cannot lock the skills directory", e)),
            }
        }
    }
}
