//! Reading a file: regular files only, opened without blocking (a FIFO never blocks), refused
//! from `fstat` when over the size cap, and read to at most cap + 1 bytes, so a file that grows
//! after the `fstat` cannot get past the cap either.

use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{self as rfs, FileType, Mode, OFlags};

use super::error::{Result, WorkspaceError};
use super::path::{ctx, show};
use super::{FileContent, Workspace, validate_relative_path};
use crate::host::safe_fs::{self, kind_name};

impl Workspace {
    /// Reads a regular file of at most `max_file_bytes`.
    pub fn read_file(&self, rel: &str) -> Result<FileContent> {
        self.renewing(|| self.read_file_once(rel))
    }

    fn read_file_once(&self, rel: &str) -> Result<FileContent> {
        let (fd, size, comps) = self.open_regular(rel)?;
        let cap = self.limits.max_file_bytes;
        if size > cap {
            return Err(WorkspaceError::TooLarge {
                path: show(&comps),
                size,
                limit: cap,
            });
        }
        // cap + 1 bytes at most: a file that grew after the fstat is still caught.
        let capacity = usize::try_from(size).unwrap_or(0).saturating_add(1);
        let bytes = safe_fs::read_bounded(std::fs::File::from(fd), cap, capacity)
            .map_err(|e| WorkspaceError::io(ctx("read", &comps), e))?;
        let read = bytes.len() as u64;
        if read > cap {
            return Err(WorkspaceError::TooLarge {
                path: show(&comps),
                size: read,
                limit: cap,
            });
        }
        Ok(FileContent { bytes, size: read })
    }

    /// The size of a regular file, opened as [`Workspace::read_file`] opens it (so the same
    /// paths are refused), without reading it.
    pub fn file_size(&self, rel: &str) -> Result<u64> {
        self.renewing(|| self.file_size_once(rel))
    }

    fn file_size_once(&self, rel: &str) -> Result<u64> {
        self.open_regular(rel).map(|(_, size, _)| size)
    }

    /// Opens a regular file beneath the root without blocking; returns it with its size (from
    /// `fstat` on the fd opened) and the path's components.
    pub(super) fn open_regular<'a>(&self, rel: &'a str) -> Result<(OwnedFd, u64, Vec<&'a str>)> {
        let comps = validate_relative_path(rel, self.limits.max_path_len)?;
        let fd = self
            .root
            .fd()
            .and_then(|root| {
                self.open_beneath(
                    root.as_fd(),
                    &comps,
                    OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
                    Mode::empty(),
                )
            })
            .map_err(|e| self.open_error(e, &comps, "open"))?;
        let st = rfs::fstat(&fd).map_err(|e| WorkspaceError::io(ctx("stat", &comps), e))?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => Ok((fd, u64::try_from(st.st_size).unwrap_or(0), comps)),
            FileType::Directory => Err(WorkspaceError::IsDirectory {
                path: show(&comps),
                hint: "list_workspace_files shows the files inside it",
            }),
            other => Err(WorkspaceError::NotRegularFile {
                path: show(&comps),
                kind: kind_name(other),
            }),
        }
    }
}
