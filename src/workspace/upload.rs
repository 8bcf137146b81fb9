//! A file that arrives in parts (an upload link's body), moved in whole or not at all.
//!
//! [`Workspace::stage`] opens an unnamed file (`O_TMPFILE`) in the workspace root: on the
//! workspace's filesystem, so that it can be linked in without a copy, yet under no name, so a
//! running sandbox never sees it, and a cancelled upload, or a server killed during one,
//! leaves nothing (the kernel frees an unnamed file with its last fd). A filesystem without
//! `O_TMPFILE` gets a temp file named like `write_file`'s (`.cem-tmp-…`, swept at the next
//! start) instead. [`Staged::commit`] makes the file the sandbox user's, syncs it and links it
//! in: under its name directly when it must not replace anything (the link fails when the
//! name exists, atomically), else under a temp name renamed over the target.

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use sha2::Digest;

use super::error::{Result, WorkspaceError, is_no_space};
use super::owner::chown_fd;
use super::path::{ctx, show};
use super::temp::temp_name;
use super::{FILE_MODE, Workspace, validate_relative_path};
use crate::host::safe_fs;

/// A file being received, not yet in the workspace.
pub struct Staged {
    file: std::fs::File,
    root: Arc<OwnedFd>,
    /// The temp file's name in the root, when the filesystem has no `O_TMPFILE`.
    temp: Option<String>,
    hasher: sha2::Sha256,
    size: u64,
}

/// What [`Staged::commit`] put in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    pub size: u64,
    /// SHA-256 of the content, hex.
    pub sha256: String,
    /// A file of that name was replaced.
    pub replaced: bool,
}

impl Workspace {
    /// A new unnamed file to receive an upload into.
    pub fn stage(&self) -> Result<Staged> {
        self.stage_with(OFlags::TMPFILE)
    }

    /// [`Workspace::stage`]; tests pass no `O_TMPFILE` to take the named temp file's way.
    pub(super) fn stage_with(&self, tmpfile: OFlags) -> Result<Staged> {
        let root = self.root_fd()?;
        let flags = OFlags::WRONLY | OFlags::CLOEXEC;
        let unnamed = if tmpfile.is_empty() {
            Err(Errno::OPNOTSUPP)
        } else {
            rfs::openat(&*root, ".", flags | tmpfile, Mode::from_raw_mode(0o600))
        };
        let (fd, temp) = match unnamed {
            Ok(fd) => (fd, None),
            // No O_TMPFILE here (EOPNOTSUPP; EISDIR from kernels that ignore the flag).
            Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) => {
                let (name, fd) =
                    safe_fs::create_temp(root.as_fd(), Mode::from_raw_mode(0o600), temp_name)
                        .map_err(|e| self.staging_error(e))?;
                (fd, Some(name))
            }
            Err(e) => return Err(self.staging_error(e)),
        };
        Ok(Staged {
            file: std::fs::File::from(fd),
            root,
            temp,
            hasher: sha2::Sha256::new(),
            size: 0,
        })
    }

    fn staging_error(&self, e: Errno) -> WorkspaceError {
        if is_no_space(Some(e.raw_os_error())) {
            return self.full();
        }
        WorkspaceError::io("cannot create a file to receive the upload into", e)
    }

    /// Bytes the soft quota leaves for an upload, when the server enforces it (`None`: the
    /// kernel does, or there is none).
    pub fn room_left(&self) -> Result<Option<u64>> {
        if !self.limits.soft_quota {
            return Ok(None);
        }
        let usage = self.usage()?;
        if usage.truncated {
            return Ok(Some(0));
        }
        Ok(Some(self.limits.quota_bytes.saturating_sub(usage.bytes)))
    }
}

impl Staged {
    /// Appends `chunk`.
    pub fn write(&mut self, chunk: &[u8], ws: &Workspace) -> Result<()> {
        self.file.write_all(chunk).map_err(|e| {
            if is_no_space(e.raw_os_error()) {
                ws.full()
            } else {
                WorkspaceError::io("cannot write the upload", e)
            }
        })?;
        self.hasher.update(chunk);
        self.size += chunk.len() as u64;
        Ok(())
    }

    /// Bytes received so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Moves the file in at `rel`: never over an existing file unless `overwrite`, never over
    /// a directory. Parent directories are made as `write_file` makes them.
    pub fn commit(mut self, ws: &Workspace, rel: &str, overwrite: bool) -> Result<Committed> {
        let comps = validate_relative_path(rel, ws.limits.max_path_len)?;
        let (name, parents) = comps.split_last().expect("validated paths are non-empty");
        let owner = ws.owner_for_new_entries()?;
        let io = |what: &str| {
            let context = ctx(what, &comps);
            move |e: std::io::Error| WorkspaceError::io(context, e)
        };
        rfs::fchmod(&self.file, Mode::from_raw_mode(FILE_MODE))
            .map_err(|e| io("chmod")(e.into()))?;
        if let Some(owner) = owner {
            chown_fd(&self.file, owner).map_err(|e| io("chown")(e.into()))?;
        }
        self.file.sync_all().map_err(|e| {
            if is_no_space(e.raw_os_error()) {
                ws.full()
            } else {
                io("sync")(e)
            }
        })?;
        let dir = ws.open_dir_creating(parents, owner)?;
        let replaced = matches!(
            rfs::statat(&dir, *name, AtFlags::SYMLINK_NOFOLLOW),
            Ok(st) if FileType::from_raw_mode(st.st_mode) != FileType::Directory
        );
        self.link_in(&dir, name, overwrite).map_err(|e| match e {
            Errno::EXIST if !overwrite => WorkspaceError::Exists { path: show(&comps) },
            Errno::ISDIR | Errno::EXIST | Errno::NOTEMPTY => WorkspaceError::IsDirectory {
                path: show(&comps),
                hint: "choose a file name, not a directory",
            },
            e if is_no_space(Some(e.raw_os_error())) => ws.full(),
            e => io("move the upload into place at")(e.into()),
        })?;
        super::write::sync_names(&dir);
        let sha256 = hex::encode(std::mem::take(&mut self.hasher).finalize());
        Ok(Committed {
            size: self.size,
            sha256,
            replaced: replaced && overwrite,
        })
    }

    /// Gives the file the name `name` in `dir`.
    fn link_in(
        &mut self,
        dir: &OwnedFd,
        name: &str,
        overwrite: bool,
    ) -> std::result::Result<(), Errno> {
        let (from_dir, from): (&OwnedFd, String) = match &self.temp {
            Some(temp) => (&self.root, temp.clone()),
            None => {
                if !overwrite {
                    return self.link_unnamed(dir, name);
                }
                let temp = temp_name();
                self.link_unnamed(dir, &temp)?;
                self.temp = None;
                let renamed = rfs::renameat(dir, temp.as_str(), dir, name);
                if renamed.is_err() {
                    let _ = rfs::unlinkat(dir, temp.as_str(), AtFlags::empty());
                }
                return renamed;
            }
        };
        if overwrite {
            rfs::renameat(from_dir, from.as_str(), dir, name)?;
        } else {
            rfs::linkat(from_dir, from.as_str(), dir, name, AtFlags::empty())?;
            let _ = rfs::unlinkat(from_dir, from.as_str(), AtFlags::empty());
        }
        self.temp = None;
        Ok(())
    }

    /// Links the unnamed file in as `name` (through `/proc`, which needs no capability;
    /// `AT_EMPTY_PATH` would need `CAP_DAC_READ_SEARCH`).
    fn link_unnamed(&self, dir: &OwnedFd, name: &str) -> std::result::Result<(), Errno> {
        let proc_path = format!("/proc/self/fd/{}", self.file.as_raw_fd());
        rfs::linkat(
            rfs::CWD,
            proc_path.as_str(),
            dir,
            name,
            AtFlags::SYMLINK_FOLLOW,
        )
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(temp) = self.temp.take() {
            let _ = rfs::unlinkat(&*self.root, temp.as_str(), AtFlags::empty());
        }
    }
}

impl Workspace {
    /// The size and modification time of a regular file, opened as `read_file` opens it.
    pub fn file_stat(&self, rel: &str) -> Result<super::FileStat> {
        self.renewing(|| {
            let (fd, _, comps) = self.open_regular(rel)?;
            let st = rfs::fstat(&fd).map_err(|e| WorkspaceError::io(ctx("stat", &comps), e))?;
            Ok(super::FileStat {
                size: u64::try_from(st.st_size).unwrap_or(0),
                modified_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
            })
        })
    }

    /// Opens a regular file for a download link: the file and its size, never through a link.
    pub fn open_for_download(&self, rel: &str) -> Result<(std::fs::File, u64)> {
        self.renewing(|| {
            let (fd, size, _) = self.open_regular(rel)?;
            Ok((std::fs::File::from(fd), size))
        })
    }
}
