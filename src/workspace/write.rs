//! The operations that change files. [`Workspace::write_file`] creates missing parents one
//! `mkdirat` at a time, then writes a fresh `O_CREAT | O_EXCL` temp file, `fsync`s it and renames
//! it over the name ([`safe_fs::write_atomic`]); [`Workspace::delete_file`] unlinks a name, never
//! a directory. Neither ever modifies an existing inode, so a planted link or a hard link to
//! another file is replaced, not followed.

use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::error::{Result, WorkspaceError, is_no_space};
use super::owner::chown_fd;
use super::path::{ctx, show};
use super::temp::temp_name;
use super::{DIR_MODE, FILE_MODE, SandboxUser, Workspace, validate_relative_path};
use crate::host::safe_fs::{self, AtomicWriteError};

/// Makes the names created in `dir` (an `O_PATH` fd) durable: not worth failing a write over.
pub(super) fn sync_names(dir: &OwnedFd) {
    if let Ok(d) = rfs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        let _ = safe_fs::sync_dir(d.as_fd());
    }
}

impl Workspace {
    /// Writes `content` to `rel` atomically (temp file + `renameat`), creating missing parent
    /// directories. Returns the number of bytes written.
    ///
    /// Readers see the old content or the new, never a mix. A temp file (`.cem-tmp-…`) is removed
    /// on every error; only a crash of the server between create and rename can leave one.
    pub fn write_file(&self, rel: &str, content: &[u8]) -> Result<u64> {
        self.renewing(|| self.write_file_once(rel, content))
    }

    fn write_file_once(&self, rel: &str, content: &[u8]) -> Result<u64> {
        let comps = validate_relative_path(rel, self.limits.max_path_len)?;
        let len = content.len() as u64;
        if len > self.limits.max_file_bytes {
            return Err(WorkspaceError::TooLarge {
                path: show(&comps),
                size: len,
                limit: self.limits.max_file_bytes,
            });
        }
        if self.limits.soft_quota {
            let usage = self.usage()?;
            if usage.bytes.saturating_add(len) > self.limits.quota_bytes {
                return Err(self.full());
            }
        }
        let owner = self.owner_for_new_entries()?;
        let (name, parents) = comps.split_last().expect("validated paths are non-empty");
        let dir = self.open_dir_creating(parents, owner)?;

        // Only for a clearer error: renameat refuses to replace a directory anyway (EISDIR).
        if let Ok(st) = rfs::statat(&dir, *name, AtFlags::SYMLINK_NOFOLLOW)
            && FileType::from_raw_mode(st.st_mode) == FileType::Directory
        {
            return Err(WorkspaceError::IsDirectory {
                path: show(&comps),
                hint: "choose a file name, not a directory",
            });
        }

        let written = safe_fs::write_atomic(
            dir.as_fd(),
            name,
            content,
            Mode::from_raw_mode(FILE_MODE),
            temp_name,
            |fd| match owner {
                Some(owner) => chown_fd(fd, owner),
                None => Ok(()),
            },
        );
        written.map_err(|e| match e {
            AtomicWriteError::CreateTemp(e) if is_no_space(Some(e.raw_os_error())) => self.full(),
            AtomicWriteError::CreateTemp(e) => {
                WorkspaceError::io(ctx("create a temp file for", &comps), e)
            }
            AtomicWriteError::Write(e) if is_no_space(e.raw_os_error()) => self.full(),
            AtomicWriteError::Write(e) => WorkspaceError::io(ctx("write", &comps), e),
            AtomicWriteError::Rename(Errno::ISDIR | Errno::NOTEMPTY | Errno::EXIST) => {
                WorkspaceError::IsDirectory {
                    path: show(&comps),
                    hint: "choose a file name, not a directory",
                }
            }
            AtomicWriteError::Rename(e) if is_no_space(Some(e.raw_os_error())) => self.full(),
            AtomicWriteError::Rename(e) => WorkspaceError::io(ctx("rename into place", &comps), e),
        })?;
        sync_names(&dir);
        Ok(len)
    }

    /// Removes a file, symlink, FIFO or socket (never a directory); a symlink is removed itself.
    pub fn delete_file(&self, rel: &str) -> Result<()> {
        self.renewing(|| self.delete_file_once(rel))
    }

    fn delete_file_once(&self, rel: &str) -> Result<()> {
        let comps = validate_relative_path(rel, self.limits.max_path_len)?;
        let (name, parents) = comps.split_last().expect("validated paths are non-empty");
        let dir = self.open_dir(parents).map_err(|e| match e {
            // A missing parent means a missing file, and saying so is more useful.
            WorkspaceError::NotFound { .. } => WorkspaceError::NotFound { path: show(&comps) },
            e => e,
        })?;
        rfs::unlinkat(&dir, *name, AtFlags::empty()).map_err(|e| match e {
            Errno::ISDIR => WorkspaceError::IsDirectory {
                path: show(&comps),
                hint: "delete_workspace_file removes files only; remove directories from code in an execution",
            },
            Errno::NOENT => WorkspaceError::NotFound { path: show(&comps) },
            e => WorkspaceError::io(ctx("delete", &comps), e),
        })
    }

    /// Like `open_dir`, creating missing directories one component at a time.
    pub(super) fn open_dir_creating(
        &self,
        comps: &[&str],
        owner: Option<SandboxUser>,
    ) -> Result<OwnedFd> {
        match self.open_dir(comps) {
            Err(WorkspaceError::NotFound { .. }) => {}
            other => return other,
        }
        let mut cur = self
            .root_fd()?
            .try_clone()
            .map_err(|e| WorkspaceError::io("cannot duplicate the workspace fd", e))?;
        for (i, comp) in comps.iter().enumerate() {
            let here = &comps[..=i];
            let path_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            match rfs::openat(&cur, *comp, path_flags, Mode::empty()) {
                Ok(fd) => cur = fd,
                Err(Errno::NOENT) => {
                    let created = match rfs::mkdirat(&cur, *comp, Mode::from_raw_mode(DIR_MODE)) {
                        Ok(()) => true,
                        Err(Errno::EXIST) => false, // raced with the sandbox: use what is there
                        Err(e) if is_no_space(Some(e.raw_os_error())) => return Err(self.full()),
                        Err(e) => return Err(WorkspaceError::io(ctx("create directory", here), e)),
                    };
                    let fd = rfs::openat(
                        &cur,
                        *comp,
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(|e| self.open_error(e, here, "open directory"))?;
                    if created {
                        rfs::fchmod(&fd, Mode::from_raw_mode(DIR_MODE))
                            .map_err(|e| WorkspaceError::io(ctx("chmod", here), e))?;
                        if let Some(owner) = owner {
                            chown_fd(&fd, owner)
                                .map_err(|e| WorkspaceError::io(ctx("chown", here), e))?;
                        }
                    }
                    cur = fd;
                }
                Err(e) => return Err(self.open_error(e, here, "open directory")),
            }
        }
        Ok(cur)
    }
}
