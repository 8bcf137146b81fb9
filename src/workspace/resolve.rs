//! Opening beneath the root: every path a tool uses is resolved relative to the workspace's root
//! fd, with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` or, on kernels
//! without it, one `openat(O_NOFOLLOW)` per component; a failed resolution is then worded by
//! looking at each component. Every operation's safety rests on this, so it is kept on its own.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::Workspace;
use super::error::{Result, WorkspaceError, is_no_space};
use super::path::{ctx, show};
use crate::host::safe_fs::kind_name;

/// How paths are resolved beneath the root fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolver {
    /// `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`.
    Openat2,
    /// One `openat(O_NOFOLLOW)` per component, for kernels without `openat2`.
    Walk,
}

fn resolve_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

impl Workspace {
    /// Opens `comps` (validated, non-empty) beneath `dir` without following any symlink.
    pub(super) fn open_beneath(
        &self,
        dir: BorrowedFd<'_>,
        comps: &[&str],
        flags: OFlags,
        mode: Mode,
    ) -> std::result::Result<OwnedFd, Errno> {
        // Defence in depth: callers pass validated components only.
        if comps.is_empty()
            || comps
                .iter()
                .any(|c| c.is_empty() || *c == "." || *c == ".." || c.contains('/'))
        {
            return Err(Errno::INVAL);
        }
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match self.resolver {
            Resolver::Openat2 => {
                let path = comps.join("/");
                let mut tries = 0;
                loop {
                    match rfs::openat2(dir, path.as_str(), flags, mode, resolve_flags()) {
                        // openat2 asks for a retry when a rename raced its resolution.
                        Err(Errno::AGAIN) if tries < 16 => tries += 1,
                        r => return r,
                    }
                }
            }
            Resolver::Walk => walk_open(dir, comps, flags, mode),
        }
    }

    pub(super) fn open_dir_for_reading(
        &self,
        comps: &[&str],
    ) -> std::result::Result<OwnedFd, Errno> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY;
        if comps.is_empty() {
            rfs::openat(
                &*self.root.fd()?,
                ".",
                flags | OFlags::CLOEXEC,
                Mode::empty(),
            )
        } else {
            self.open_beneath(self.root.fd()?.as_fd(), comps, flags, Mode::empty())
        }
    }

    /// Opens the directory `comps` (possibly the root) as an `O_PATH` fd.
    pub(super) fn open_dir(&self, comps: &[&str]) -> Result<OwnedFd> {
        if comps.is_empty() {
            return self
                .root_fd()?
                .try_clone()
                .map_err(|e| WorkspaceError::io("cannot duplicate the workspace fd", e));
        }
        self.root
            .fd()
            .and_then(|root| {
                self.open_beneath(
                    root.as_fd(),
                    comps,
                    OFlags::PATH | OFlags::DIRECTORY,
                    Mode::empty(),
                )
            })
            .map_err(|e| self.open_error(e, comps, "open directory"))
    }

    /// Turns an errno from resolving `comps` into an error a model can act on.
    pub(super) fn open_error(&self, errno: Errno, comps: &[&str], action: &str) -> WorkspaceError {
        match errno {
            Errno::NOENT | Errno::LOOP | Errno::NOTDIR | Errno::NXIO => self.diagnose(comps, errno),
            Errno::XDEV => WorkspaceError::Escapes { path: show(comps) },
            Errno::ISDIR => WorkspaceError::IsDirectory {
                path: show(comps),
                hint: "choose a file name, not a directory",
            },
            Errno::NAMETOOLONG => WorkspaceError::InvalidPath {
                path: show(comps),
                reason: "the filesystem says it is too long".into(),
                max_len: self.limits.max_path_len,
            },
            e if is_no_space(Some(e.raw_os_error())) => self.full(),
            e => WorkspaceError::io(ctx(action, comps), e),
        }
    }

    /// Words the error for a failed resolution by looking at each component with
    /// `fstatat(AT_SYMLINK_NOFOLLOW)`. Only the message depends on this; access never does.
    fn diagnose(&self, comps: &[&str], errno: Errno) -> WorkspaceError {
        let root = match self.root.fd() {
            Ok(root) => root,
            Err(stale) => return WorkspaceError::io(ctx("open", comps), stale),
        };
        let mut cur: Option<OwnedFd> = None;
        for (i, comp) in comps.iter().enumerate() {
            let here = show(&comps[..=i]);
            let base = cur.as_ref().map_or(root.as_fd(), |f| f.as_fd());
            let st = match rfs::statat(base, *comp, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(Errno::NOENT) => return WorkspaceError::NotFound { path: show(comps) },
                Err(_) => break,
            };
            let last = i + 1 == comps.len();
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Symlink => return WorkspaceError::Symlink { path: here },
                FileType::Directory if !last => {
                    match rfs::openat(
                        base,
                        *comp,
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    ) {
                        Ok(fd) => cur = Some(fd),
                        Err(_) => break,
                    }
                }
                _ if !last => return WorkspaceError::NotADirectory { path: here },
                FileType::Directory | FileType::RegularFile => break,
                other => {
                    return WorkspaceError::NotRegularFile {
                        path: here,
                        kind: kind_name(other),
                    };
                }
            }
        }
        match errno {
            Errno::LOOP => WorkspaceError::Symlink { path: show(comps) },
            Errno::NOTDIR => WorkspaceError::NotADirectory { path: show(comps) },
            Errno::NOENT => WorkspaceError::NotFound { path: show(comps) },
            e => WorkspaceError::io(ctx("open", comps), e),
        }
    }
}

/// Probes `openat2` once; falls back to the component walk when the kernel (or a seccomp filter
/// in front of it) does not offer it.
pub(super) fn probe_resolver(root: BorrowedFd<'_>) -> Resolver {
    match rfs::openat2(
        root,
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        resolve_flags(),
    ) {
        Ok(_) => Resolver::Openat2,
        Err(e) => {
            tracing::warn!(error = %e, "openat2 unavailable; resolving workspace paths one component at a time");
            Resolver::Walk
        }
    }
}

/// The fallback resolver: every component but the last is opened `O_PATH | O_DIRECTORY |
/// O_NOFOLLOW` relative to the previous one, the last with the caller's flags and `O_NOFOLLOW`.
/// A component is a single validated name (no `/`, not `.` or `..`), so nothing is followed.
fn walk_open(
    dir: BorrowedFd<'_>,
    comps: &[&str],
    flags: OFlags,
    mode: Mode,
) -> std::result::Result<OwnedFd, Errno> {
    let (last, parents) = comps.split_last().ok_or(Errno::INVAL)?;
    let mut cur: Option<OwnedFd> = None;
    for comp in parents {
        let base = cur.as_ref().map_or(dir, |f| f.as_fd());
        cur = Some(rfs::openat(
            base,
            *comp,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?);
    }
    let base = cur.as_ref().map_or(dir, |f| f.as_fd());
    rfs::openat(
        base,
        *last,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        mode,
    )
}
