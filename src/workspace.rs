//! Path-safe host-side access to the shared workspace directory.
//!
//! # Why it is built this way
//!
//! The workspace is bind-mounted read-write into every sandbox container at `/workspace`, so
//! untrusted code can change it at any moment: plant symlinks (to `/etc/passwd`, to a host secret,
//! to `..`), FIFOs and sockets, huge sparse files, 100k files, names with newlines or invalid
//! UTF-8, and swap a directory for a symlink between any check the server makes and its use. The
//! server reaches the same directory from the host, often with more privilege than the sandbox,
//! so every file tool is a potential confused deputy (Judge0 2024, Compiler Explorer #6026).
//!
//! The rules that follow from that:
//!
//! * **One trusted handle.** [`Workspace::open`] canonicalises the configured root once and keeps
//!   an `O_PATH | O_DIRECTORY` fd to it. Nothing afterwards resolves a path string from `/`.
//! * **Resolve beneath, never check-then-open.** Every operation opens its target relative to the
//!   root fd with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` plus
//!   `O_NOFOLLOW | O_CLOEXEC`: the kernel refuses any symlink anywhere in the path and any escape,
//!   atomically with the open, so a swap between a check and a use has nothing to race. Decisions
//!   (regular file? how big?) are made with `fstat` on the fd actually opened. On kernels without
//!   `openat2` (< 5.6, `ENOSYS`) a small fallback walks the path one component at a time with
//!   `openat(O_NOFOLLOW)` from the root fd; a single component holds no `/`, and `.`/`..` are
//!   refused earlier, so nothing can be followed there either.
//! * **Validate before touching the disk.** [`validate_relative_path`] is pure and refuses
//!   absolute paths, `..`, NUL, control characters, backslashes and over-long input with an error
//!   that names the input and says what is allowed.
//! * **Regular files only, without blocking, with a cap.** Reads open with `O_NONBLOCK` (a FIFO
//!   never blocks), refuse anything `fstat` does not call a regular file, refuse files over
//!   [`WorkspaceLimits::max_file_bytes`] and read at most cap + 1 bytes, so a file that grows after
//!   the `fstat` cannot get past the cap either. The sandbox cannot create device nodes (no
//!   `CAP_MKNOD`), so opening one is not something it can arrange.
//! * **Writes never modify an existing inode.** [`Workspace::write_file`] writes a fresh
//!   `O_CREAT | O_EXCL` temp file in the target directory, `fsync`s it and `renameat`s it over the
//!   name. A planted symlink at the name is replaced, not followed; a hard link at the name is
//!   replaced too, so the other name's content never changes. Missing parents are created with
//!   `mkdirat` one component at a time, each opened with `O_NOFOLLOW`. A temp file is named after
//!   the writing process (`.cem-tmp-<pid>-<start time>-<random>`), so the temp files a killed
//!   server left are told apart from a live writer's and removed at the next start
//!   ([`Workspace::remove_stale_temps`]).
//! * **Hard links.** Reading a multiply-linked file is allowed. `linkat` needs both names on the
//!   same mount, so from inside the container the sandbox can only link inodes it can already
//!   reach through `/workspace` (a link to anything else fails with `EXDEV`, and
//!   `fs.protected_hardlinks` covers files it does not own); a link to a host file can only have
//!   been made by someone on the host, who has thereby shared it. Since writes replace the name
//!   and deletes unlink the name, no tool ever changes the other name's data.
//! * **Listing is bounded and honest.** [`Workspace::list_files`] lists regular files only, never
//!   follows a symlink (directories are entered with `openat(O_NOFOLLOW | O_DIRECTORY)` relative to
//!   their parent's fd), stops at [`WorkspaceLimits::max_list_entries`] files, a scan budget and a
//!   depth of [`LIST_MAX_DEPTH`], and says so with `truncated`. Names the other tools would refuse
//!   (invalid UTF-8, control characters such as newlines, backslashes, over-long paths) are left
//!   out and counted in `skipped`, so every listed path can be passed back to a tool as is.
//! * **Ownership.** The sandbox runs as a non-root user that must be able to write the workspace;
//!   [`Workspace::prepare_for_sandbox`] picks that user from the owner of the root directory and
//!   never picks root. When the server runs as root, files and directories it creates are
//!   `fchown`ed to that owner. Modes are 0644 for files and 0755 for directories: the sandbox
//!   runs as the owner, so owner bits suffice and nothing is opened up to the host's other users.
//! * **Quota.** See [`quota`]: the kernel enforces it when the workspace is a loop-mounted,
//!   size-limited ext4 image; otherwise ([`WorkspaceLimits::soft_quota`]) the server refuses tool
//!   writes and new executions once [`Workspace::usage`] reaches the quota.
//!
//! Everything here is blocking: the async callers wrap these calls in `spawn_blocking`.
//! [`quota::ensure`] must run before [`Workspace::open`], so that the root fd refers to the mounted
//! filesystem rather than the directory underneath it.

pub mod quota;

use std::collections::HashSet;
use std::ffi::CStr;
use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{self as rfs, AtFlags, FileType, Gid, Mode, OFlags, ResolveFlags, Uid};
use rustix::io::Errno;

/// Default cap on a file read or written through the workspace tools (10 MiB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// Default cap on the number of files one listing returns.
pub const DEFAULT_MAX_LIST_ENTRIES: usize = 10_000;
/// Default cap on the length of a relative path, in bytes.
pub const DEFAULT_MAX_PATH_LEN: usize = 1024;
/// Default disk quota of the workspace (1 GiB).
pub const DEFAULT_QUOTA_BYTES: u64 = 1024 * 1024 * 1024;
/// Longest single name (`NAME_MAX` on Linux filesystems).
pub const MAX_NAME_LEN: usize = 255;
/// Deepest directory level a listing descends to (the start directory is level 0).
pub const LIST_MAX_DEPTH: usize = 32;
/// Deepest directory level [`Workspace::usage`] descends to. The walk keeps one fd per level.
pub const USAGE_MAX_DEPTH: usize = 128;
/// Most directory entries [`Workspace::usage`] examines before it reports `truncated`.
pub const USAGE_MAX_ENTRIES: usize = 1_000_000;
/// The default non-root user of the sandbox image.
pub const DEFAULT_SANDBOX_UID: u32 = 10001;

/// Prefix of the temp files `write_file` renames into place:
/// `.cem-tmp-<pid>-<process start time>-<16 hex digits>`.
pub const TEMP_PREFIX: &str = ".cem-tmp-";
/// Temp files whose writer cannot be told from their name (an older naming) are removed once
/// they are this old.
const STALE_TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(3600);
const FILE_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o755;
/// A listing examines at most this many entries per file it may return.
const LIST_SCAN_FACTOR: usize = 10;

/// Bounds on what the workspace tools do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkspaceLimits {
    /// Largest file `read_file` returns or `write_file` writes.
    pub max_file_bytes: u64,
    /// Most files one `list_files` returns.
    pub max_list_entries: usize,
    /// Longest relative path accepted, in bytes.
    pub max_path_len: usize,
    /// Disk quota of the workspace, used in "workspace is full" errors and by the soft quota.
    pub quota_bytes: u64,
    /// When true the kernel does not enforce the quota (see [`quota::QuotaMode::Soft`]), so
    /// `write_file` and [`Workspace::check_quota`] measure [`Workspace::usage`] themselves.
    pub soft_quota: bool,
}

impl Default for WorkspaceLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_list_entries: DEFAULT_MAX_LIST_ENTRIES,
            max_path_len: DEFAULT_MAX_PATH_LEN,
            quota_bytes: DEFAULT_QUOTA_BYTES,
            soft_quota: false,
        }
    }
}

/// What a workspace tool can go wrong with; every message says what to do next.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    #[error(
        "path '{path}' leaves the workspace: use a relative path inside it (no leading '/', no '..')"
    )]
    Escapes { path: String },
    #[error(
        "invalid path '{path}': {reason}; use a relative path of names separated by '/' \
         (at most {max_len} bytes, each name at most 255 bytes, no NUL, control characters or backslashes)"
    )]
    InvalidPath {
        path: String,
        reason: String,
        max_len: usize,
    },
    #[error(
        "'{path}' is a symlink; the workspace tools never follow links (use the real path, or delete the link)"
    )]
    Symlink { path: String },
    #[error(
        "'{path}' is not a regular file ({kind}); the workspace tools only read and write regular files"
    )]
    NotRegularFile { path: String, kind: &'static str },
    #[error("'{path}' is a directory; {hint}")]
    IsDirectory { path: String, hint: &'static str },
    #[error("'{path}' is not a directory; use a path whose parents are directories")]
    NotADirectory { path: String },
    #[error(
        "'{path}' is {}, over the {} limit for workspace tools; work with it from code in an execution instead",
        HumanBytes(*size),
        HumanBytes(*limit)
    )]
    TooLarge { path: String, size: u64, limit: u64 },
    #[error("file not found: '{path}'; list_workspace_files shows what exists")]
    NotFound { path: String },
    #[error("workspace is full (quota {}): delete files to free space", HumanBytes(*quota_bytes))]
    Full { quota_bytes: u64 },
    #[error("{message}")]
    SandboxUser { message: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl WorkspaceError {
    fn io(context: impl Into<String>, source: impl Into<std::io::Error>) -> Self {
        Self::Io {
            context: context.into(),
            source: source.into(),
        }
    }
}

type Result<T, E = WorkspaceError> = std::result::Result<T, E>;

/// The bytes of a file read through [`Workspace::read_file`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileContent {
    pub bytes: Vec<u8>,
    /// Number of bytes read (the file's size at the time of reading).
    pub size: u64,
}

/// The result of [`Workspace::list_files`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Regular files, as paths relative to the workspace root, sorted bytewise.
    pub files: Vec<String>,
    /// True when the walk stopped early: `max_list_entries` files, the scan budget, or
    /// [`LIST_MAX_DEPTH`] reached. The files returned are then an arbitrary subset.
    pub truncated: bool,
    /// Entries left out because their path could not be shown or used (invalid UTF-8, control
    /// characters such as newlines, backslashes, over-long paths), plus directories that could not
    /// be opened.
    pub skipped: usize,
}

/// The result of [`Workspace::usage`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Allocated bytes (`st_blocks * 512`) of everything below the root, hard links counted once.
    pub bytes: u64,
    /// Number of regular files.
    pub files: u64,
    /// True when the walk hit [`USAGE_MAX_DEPTH`] or [`USAGE_MAX_ENTRIES`]: `bytes` is then a
    /// lower bound.
    pub truncated: bool,
}

/// The user the sandbox container runs as (`docker run --user uid:gid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxUser {
    pub uid: u32,
    pub gid: u32,
}

impl SandboxUser {
    /// `"uid:gid"`, the form Docker's `User` field takes.
    pub fn docker_user(&self) -> String {
        format!("{}:{}", self.uid, self.gid)
    }
}

/// How paths are resolved beneath the root fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolver {
    /// `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`.
    Openat2,
    /// One `openat(O_NOFOLLOW)` per component, for kernels without `openat2`.
    Walk,
}

/// The workspace directory, opened once; every operation resolves beneath its fd.
#[derive(Debug)]
pub struct Workspace {
    root_path: PathBuf,
    root: OwnedFd,
    limits: WorkspaceLimits,
    resolver: Resolver,
}

fn resolve_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

impl Workspace {
    /// Creates `root` if missing (mode 0755), canonicalises it and keeps an `O_PATH` fd to it.
    pub fn open(root: &Path, limits: WorkspaceLimits) -> Result<Self> {
        Self::open_with(root, limits, None)
    }

    /// Like [`Workspace::open`], optionally forcing a resolver (tests use it for the fallback).
    pub(crate) fn open_with(
        root: &Path,
        limits: WorkspaceLimits,
        force: Option<Resolver>,
    ) -> Result<Self> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(root)
            .map_err(|e| {
                WorkspaceError::io(format!("cannot create workspace {}", root.display()), e)
            })?;
        // The configured root is trusted host configuration; the sandbox only ever sees what is
        // below it, so following links in the configured path itself is fine.
        let root_path = std::fs::canonicalize(root).map_err(|e| {
            WorkspaceError::io(format!("cannot resolve workspace {}", root.display()), e)
        })?;
        let fd = rfs::open(
            &root_path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            WorkspaceError::io(format!("cannot open workspace {}", root_path.display()), e)
        })?;
        let resolver = force.unwrap_or_else(|| probe_resolver(fd.as_fd()));
        tracing::debug!(root = %root_path.display(), ?resolver, "workspace opened");
        Ok(Self {
            root_path,
            root: fd,
            limits,
            resolver,
        })
    }

    /// The canonical path of the workspace root on the host.
    pub fn root_path(&self) -> &Path {
        &self.root_path
    }

    /// The limits this workspace enforces.
    pub fn limits(&self) -> &WorkspaceLimits {
        &self.limits
    }

    /// Reads a regular file of at most `max_file_bytes`.
    pub fn read_file(&self, rel: &str) -> Result<FileContent> {
        let comps = validate_relative_path(rel, self.limits.max_path_len)?;
        let fd = self
            .open_beneath(
                self.root.as_fd(),
                &comps,
                OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
                Mode::empty(),
            )
            .map_err(|e| self.open_error(e, &comps, "open"))?;
        let st = rfs::fstat(&fd).map_err(|e| WorkspaceError::io(ctx("stat", &comps), e))?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => {}
            FileType::Directory => {
                return Err(WorkspaceError::IsDirectory {
                    path: show(&comps),
                    hint: "list_workspace_files shows the files inside it",
                });
            }
            other => {
                return Err(WorkspaceError::NotRegularFile {
                    path: show(&comps),
                    kind: kind_name(other),
                });
            }
        }
        let cap = self.limits.max_file_bytes;
        let size = u64::try_from(st.st_size).unwrap_or(0);
        if size > cap {
            return Err(WorkspaceError::TooLarge {
                path: show(&comps),
                size,
                limit: cap,
            });
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).saturating_add(1));
        // cap + 1 bytes at most: a file that grew after the fstat is still caught.
        std::fs::File::from(fd)
            .take(cap.saturating_add(1))
            .read_to_end(&mut bytes)
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

    /// Writes `content` to `rel` atomically (temp file + `renameat`), creating missing parent
    /// directories. Returns the number of bytes written.
    ///
    /// Readers see the old content or the new, never a mix. A temp file (`.cem-tmp-…`) is removed
    /// on every error; only a crash of the server between create and rename can leave one.
    pub fn write_file(&self, rel: &str, content: &[u8]) -> Result<u64> {
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

        let (tmp_name, tmp_fd) = self.create_temp(dir.as_fd(), &comps)?;
        let result = self.fill_and_rename(&dir, &tmp_name, tmp_fd, name, content, owner, &comps);
        if let Err(e) = result {
            // Best effort: the temp name is ours (O_EXCL), nothing else is lost if it is gone.
            let _ = rfs::unlinkat(&dir, tmp_name.as_str(), AtFlags::empty());
            return Err(e);
        }
        // Durability of the rename; not worth failing the write over.
        if let Ok(d) = rfs::openat(
            &dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            let _ = rfs::fsync(&d);
        }
        Ok(len)
    }

    #[allow(clippy::too_many_arguments)]
    fn fill_and_rename(
        &self,
        dir: &OwnedFd,
        tmp_name: &str,
        tmp_fd: OwnedFd,
        name: &str,
        content: &[u8],
        owner: Option<SandboxUser>,
        comps: &[&str],
    ) -> Result<()> {
        let write_err = |e: std::io::Error| -> WorkspaceError {
            if is_no_space(e.raw_os_error()) {
                self.full()
            } else {
                WorkspaceError::io(ctx("write", comps), e)
            }
        };
        rfs::fchmod(&tmp_fd, Mode::from_raw_mode(FILE_MODE)).map_err(|e| write_err(e.into()))?;
        if let Some(owner) = owner {
            chown_fd(&tmp_fd, owner).map_err(|e| write_err(e.into()))?;
        }
        let mut file = std::fs::File::from(tmp_fd);
        file.write_all(content).map_err(write_err)?;
        file.sync_all().map_err(write_err)?;
        drop(file);
        #[cfg(test)]
        if FAIL_BEFORE_RENAME.with(|f| f.get()) {
            return Err(WorkspaceError::io("injected failure", Errno::IO));
        }
        rfs::renameat(dir, tmp_name, dir, name).map_err(|e| match e {
            Errno::ISDIR | Errno::NOTEMPTY | Errno::EXIST => WorkspaceError::IsDirectory {
                path: show(comps),
                hint: "choose a file name, not a directory",
            },
            e if is_no_space(Some(e.raw_os_error())) => self.full(),
            e => WorkspaceError::io(ctx("rename into place", comps), e),
        })
    }

    /// Removes a file, symlink, FIFO or socket (never a directory); a symlink is removed itself.
    pub fn delete_file(&self, rel: &str) -> Result<()> {
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

    /// Lists regular files below `subpath` (`""` or `"."` for the whole workspace), recursively,
    /// as paths relative to the workspace root, sorted.
    pub fn list_files(&self, subpath: &str) -> Result<Listing> {
        let comps = validate_relative_subpath(subpath, self.limits.max_path_len)?;
        let start = self
            .open_dir_for_reading(&comps)
            .map_err(|e| self.open_error(e, &comps, "open directory"))?;
        let max_files = self.limits.max_list_entries;
        let budget = max_files.saturating_mul(LIST_SCAN_FACTOR).max(1000);
        let at_root = comps.is_empty();
        let mut listing = Listing::default();
        let mut examined = 0usize;
        let end = walk(start, comps.join("/"), LIST_MAX_DEPTH, |e| {
            examined += 1;
            if examined > budget {
                listing.truncated = true;
                return Flow::Stop;
            }
            let Ok(name) = e.name.to_str() else {
                listing.skipped += 1;
                return Flow::Next;
            };
            if at_root && e.depth == 0 && name == "lost+found" {
                return Flow::Next;
            }
            if !matches!(e.file_type, FileType::RegularFile | FileType::Directory) {
                return Flow::Next;
            }
            if check_name(name).is_err() {
                listing.skipped += 1;
                return Flow::Next;
            }
            let path = if e.prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{}/{name}", e.prefix)
            };
            if path.len() > self.limits.max_path_len {
                listing.skipped += 1;
                return Flow::Next;
            }
            if e.file_type == FileType::Directory {
                return Flow::Descend(path);
            }
            if listing.files.len() >= max_files {
                listing.truncated = true;
                return Flow::Stop;
            }
            listing.files.push(path);
            Flow::Next
        })
        .map_err(|e| WorkspaceError::io(ctx("list", &comps), e))?;
        listing.truncated |= end.depth_limited;
        listing.skipped += end.unreadable;
        listing.files.sort_unstable();
        Ok(listing)
    }

    /// Bounded walk of the whole workspace adding up allocated bytes (`st_blocks * 512`).
    pub fn usage(&self) -> Result<Usage> {
        let start = self
            .open_dir_for_reading(&[])
            .map_err(|e| WorkspaceError::io("cannot open the workspace root", e))?;
        let mut usage = Usage::default();
        let mut seen: HashSet<(u64, u64)> = HashSet::new();
        let mut examined = 0usize;
        let end = walk(start, String::new(), USAGE_MAX_DEPTH, |e| {
            examined += 1;
            if examined > USAGE_MAX_ENTRIES {
                usage.truncated = true;
                return Flow::Stop;
            }
            let Ok(st) = rfs::statat(e.dir, e.name, AtFlags::SYMLINK_NOFOLLOW) else {
                return Flow::Next; // raced away
            };
            let ft = FileType::from_raw_mode(st.st_mode);
            if ft != FileType::Directory && st.st_nlink > 1 && !seen.insert((st.st_dev, st.st_ino))
            {
                return Flow::Next;
            }
            usage.bytes = usage
                .bytes
                .saturating_add((st.st_blocks as u64).saturating_mul(512));
            match ft {
                FileType::RegularFile => {
                    usage.files += 1;
                    Flow::Next
                }
                FileType::Directory => Flow::Descend(String::new()),
                _ => Flow::Next,
            }
        })
        .map_err(|e| WorkspaceError::io("cannot measure the workspace", e))?;
        usage.truncated |= end.depth_limited;
        Ok(usage)
    }

    /// Removes the temp files of [`Workspace::write_file`] whose writing process is gone (a
    /// server killed between creating and renaming one), anywhere in the workspace; the walk is
    /// bounded like [`Workspace::usage`]. Only regular files are removed, by name (a link is
    /// never followed). A live writer's temp files, this process's included, are left alone.
    /// Returns how many were removed.
    pub fn remove_stale_temps(&self) -> Result<usize> {
        let start = self
            .open_dir_for_reading(&[])
            .map_err(|e| WorkspaceError::io("cannot open the workspace root", e))?;
        let now = std::time::SystemTime::now();
        let mut removed = 0;
        let mut examined = 0usize;
        walk(start, String::new(), USAGE_MAX_DEPTH, |e| {
            examined += 1;
            if examined > USAGE_MAX_ENTRIES {
                return Flow::Stop;
            }
            match e.file_type {
                FileType::Directory => return Flow::Descend(String::new()),
                FileType::RegularFile => {}
                _ => return Flow::Next,
            }
            let Some(rest) = e
                .name
                .to_str()
                .ok()
                .and_then(|n| n.strip_prefix(TEMP_PREFIX))
            else {
                return Flow::Next;
            };
            let stale = match parse_temp_writer(rest) {
                Some((pid, started)) => crate::process::process_is_gone(pid, started),
                None => rfs::statat(e.dir, e.name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
                    let mtime = std::time::UNIX_EPOCH
                        + std::time::Duration::from_secs(st.st_mtime.max(0) as u64);
                    now.duration_since(mtime).unwrap_or_default() > STALE_TEMP_AGE
                }),
            };
            if stale && rfs::unlinkat(e.dir, e.name, AtFlags::empty()).is_ok() {
                removed += 1;
            }
            Flow::Next
        })
        .map_err(|e| WorkspaceError::io("cannot walk the workspace", e))?;
        Ok(removed)
    }

    /// Refuses with [`WorkspaceError::Full`] when a soft quota is reached (a bounded
    /// [`Workspace::usage`] walk); the executor calls this before each execution. Under a kernel
    /// quota nothing is refused here: writes past it fail with ENOSPC by themselves, and code
    /// that cleans up a full workspace must still be able to run.
    pub fn check_quota(&self) -> Result<()> {
        if self.limits.soft_quota {
            let usage = self.usage()?;
            // A walk cut short is a lower bound: treat it as full rather than under.
            if usage.truncated || usage.bytes >= self.limits.quota_bytes {
                return Err(self.full());
            }
        }
        Ok(())
    }

    /// Chooses the user the sandbox runs as so that it can write the workspace, never root.
    ///
    /// If the root directory is owned by a non-root user, the sandbox runs as that user (a
    /// developer's files stay theirs; a root group is replaced by the user's own id). If it is
    /// owned by root and the server is root, the directory is given to `sandbox_uid:sandbox_uid`
    /// (only the directory itself; existing root-owned files stay read-only to the sandbox). If it
    /// is owned by root and the server is not root, this is an error that says how to fix it.
    pub fn prepare_for_sandbox(&self, sandbox_uid: u32) -> Result<SandboxUser> {
        let st = rfs::fstat(&self.root)
            .map_err(|e| WorkspaceError::io("cannot stat the workspace root", e))?;
        let euid = rustix::process::geteuid().as_raw();
        match decide_sandbox_user(st.st_uid, st.st_gid, euid, sandbox_uid) {
            Decision::Use(user) => Ok(user),
            Decision::ChownRoot(user) => {
                let fd = rfs::openat(
                    &self.root,
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

    // ----- internals -----

    fn full(&self) -> WorkspaceError {
        WorkspaceError::Full {
            quota_bytes: self.limits.quota_bytes,
        }
    }

    /// The owner that new files and directories get: only when the server is root, and only a
    /// non-root owner (root-owned workspaces are handed over by `prepare_for_sandbox`).
    fn owner_for_new_entries(&self) -> Result<Option<SandboxUser>> {
        if !rustix::process::geteuid().is_root() {
            return Ok(None);
        }
        let st = rfs::fstat(&self.root)
            .map_err(|e| WorkspaceError::io("cannot stat the workspace root", e))?;
        Ok((st.st_uid != 0).then(|| SandboxUser {
            uid: st.st_uid,
            gid: non_root_gid(st.st_uid, st.st_gid),
        }))
    }

    /// Opens `comps` (validated, non-empty) beneath `dir` without following any symlink.
    fn open_beneath(
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

    fn open_dir_for_reading(&self, comps: &[&str]) -> std::result::Result<OwnedFd, Errno> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY;
        if comps.is_empty() {
            rfs::openat(&self.root, ".", flags | OFlags::CLOEXEC, Mode::empty())
        } else {
            self.open_beneath(self.root.as_fd(), comps, flags, Mode::empty())
        }
    }

    /// Opens the directory `comps` (possibly the root) as an `O_PATH` fd.
    fn open_dir(&self, comps: &[&str]) -> Result<OwnedFd> {
        if comps.is_empty() {
            return self
                .root
                .try_clone()
                .map_err(|e| WorkspaceError::io("cannot duplicate the workspace fd", e));
        }
        self.open_beneath(
            self.root.as_fd(),
            comps,
            OFlags::PATH | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .map_err(|e| self.open_error(e, comps, "open directory"))
    }

    /// Like `open_dir`, creating missing directories one component at a time.
    fn open_dir_creating(&self, comps: &[&str], owner: Option<SandboxUser>) -> Result<OwnedFd> {
        match self.open_dir(comps) {
            Err(WorkspaceError::NotFound { .. }) => {}
            other => return other,
        }
        let mut cur = self
            .root
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

    fn create_temp(&self, dir: BorrowedFd<'_>, comps: &[&str]) -> Result<(String, OwnedFd)> {
        for _ in 0..16 {
            let name = temp_name();
            match rfs::openat(
                dir,
                name.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(FILE_MODE),
            ) {
                Ok(fd) => return Ok((name, fd)),
                Err(Errno::EXIST) => continue,
                Err(e) if is_no_space(Some(e.raw_os_error())) => return Err(self.full()),
                Err(e) => return Err(WorkspaceError::io(ctx("create a temp file for", comps), e)),
            }
        }
        Err(WorkspaceError::io(
            ctx("create a temp file for", comps),
            Errno::EXIST,
        ))
    }

    /// Turns an errno from resolving `comps` into an error a model can act on.
    fn open_error(&self, errno: Errno, comps: &[&str], action: &str) -> WorkspaceError {
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
        let mut cur: Option<OwnedFd> = None;
        for (i, comp) in comps.iter().enumerate() {
            let here = show(&comps[..=i]);
            let base = cur.as_ref().map_or(self.root.as_fd(), |f| f.as_fd());
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
fn probe_resolver(root: BorrowedFd<'_>) -> Resolver {
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

// ----- the bounded directory walk -----

struct Entry<'a> {
    dir: BorrowedFd<'a>,
    name: &'a CStr,
    file_type: FileType,
    /// Level of the directory holding the entry (the start directory is 0).
    depth: usize,
    prefix: &'a str,
}

enum Flow {
    Next,
    /// Enter this directory; its entries get this prefix.
    Descend(String),
    Stop,
}

#[derive(Default)]
struct WalkEnd {
    depth_limited: bool,
    unreadable: usize,
}

struct Frame {
    dir: rfs::Dir,
    prefix: String,
    depth: usize,
}

/// Depth-first walk holding one fd per level. Subdirectories are opened relative to their
/// parent's fd with `O_NOFOLLOW | O_DIRECTORY`: a directory swapped for a symlink is skipped.
fn walk(
    start: OwnedFd,
    prefix: String,
    max_depth: usize,
    mut visit: impl FnMut(Entry<'_>) -> Flow,
) -> std::io::Result<WalkEnd> {
    let mut end = WalkEnd::default();
    let mut stack = vec![Frame {
        dir: rfs::Dir::new(start)?,
        prefix,
        depth: 0,
    }];
    while let Some(frame) = stack.last_mut() {
        let entry = match frame.dir.read() {
            None => {
                stack.pop();
                continue;
            }
            Some(Err(_)) => {
                end.unreadable += 1;
                stack.pop();
                continue;
            }
            Some(Ok(entry)) => entry,
        };
        let name = entry.file_name();
        if name.to_bytes() == b"." || name.to_bytes() == b".." {
            continue;
        }
        let dirfd = frame.dir.fd()?;
        let mut file_type = entry.file_type();
        if file_type == FileType::Unknown {
            file_type = rfs::statat(dirfd, name, AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| FileType::from_raw_mode(st.st_mode))
                .unwrap_or(FileType::Unknown);
        }
        let depth = frame.depth;
        match visit(Entry {
            dir: dirfd,
            name,
            file_type,
            depth,
            prefix: &frame.prefix,
        }) {
            Flow::Next => {}
            Flow::Stop => break,
            Flow::Descend(child_prefix) => {
                if depth + 1 > max_depth {
                    end.depth_limited = true;
                    continue;
                }
                match rfs::openat(
                    dirfd,
                    name,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                ) {
                    Ok(fd) => stack.push(Frame {
                        dir: rfs::Dir::new(fd)?,
                        prefix: child_prefix,
                        depth: depth + 1,
                    }),
                    // Deleted or swapped for something else since the read: nothing to list.
                    Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => {}
                    Err(_) => end.unreadable += 1,
                }
            }
        }
    }
    Ok(end)
}

// ----- path validation (pure) -----

/// Validates a relative path naming a file and returns its components, with `.` and repeated
/// `/` dropped. Refuses empty, absolute, NUL, control characters, backslashes, `..` components,
/// paths over `max_len` bytes and names over 255 bytes. Touches no disk.
pub fn validate_relative_path(s: &str, max_len: usize) -> Result<Vec<&str>> {
    if s.is_empty() {
        return Err(invalid(s, "it is empty", max_len));
    }
    let comps = validate_inner(s, max_len)?;
    if comps.is_empty() {
        return Err(invalid(
            s,
            "it names no file, only the workspace root",
            max_len,
        ));
    }
    Ok(comps)
}

/// Like [`validate_relative_path`] for a directory to list: `""` and `"."` mean the root and give
/// no components.
pub fn validate_relative_subpath(s: &str, max_len: usize) -> Result<Vec<&str>> {
    validate_inner(s, max_len)
}

fn validate_inner(s: &str, max_len: usize) -> Result<Vec<&str>> {
    if s.len() > max_len {
        return Err(invalid(
            s,
            &format!("it is {} bytes long", s.len()),
            max_len,
        ));
    }
    if s.contains('\0') {
        return Err(invalid(s, "it contains a NUL byte", max_len));
    }
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        return Err(invalid(
            s,
            &format!("it contains the control character U+{:04X}", c as u32),
            max_len,
        ));
    }
    if s.contains('\\') {
        return Err(invalid(
            s,
            "it contains a backslash (separate names with '/')",
            max_len,
        ));
    }
    if s.starts_with('/') {
        return Err(WorkspaceError::Escapes {
            path: escape_for_message(s),
        });
    }
    let mut comps = Vec::new();
    for comp in s.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                return Err(WorkspaceError::Escapes {
                    path: escape_for_message(s),
                });
            }
            c if c.len() > MAX_NAME_LEN => {
                return Err(invalid(
                    s,
                    &format!("a name in it is {} bytes long", c.len()),
                    max_len,
                ));
            }
            c => comps.push(c),
        }
    }
    Ok(comps)
}

/// The per-name rules of `validate_inner`, for names read from disk by the listing.
fn check_name(name: &str) -> std::result::Result<(), ()> {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.len() > MAX_NAME_LEN
        || name.contains(['/', '\\'])
        || name.chars().any(char::is_control)
    {
        Err(())
    } else {
        Ok(())
    }
}

fn invalid(s: &str, reason: &str, max_len: usize) -> WorkspaceError {
    WorkspaceError::InvalidPath {
        path: escape_for_message(s),
        reason: reason.to_owned(),
        max_len,
    }
}

/// Escapes control characters and quotes, and shortens long input, for an error message.
fn escape_for_message(s: &str) -> String {
    const MAX_CHARS: usize = 120;
    let escaped: String = s.escape_debug().collect();
    if escaped.chars().count() <= MAX_CHARS {
        escaped
    } else {
        let head: String = escaped.chars().take(MAX_CHARS).collect();
        format!("{head}… ({} bytes)", s.len())
    }
}

/// A validated path for a message (`.` for the root).
fn show(comps: &[&str]) -> String {
    if comps.is_empty() {
        ".".to_owned()
    } else {
        escape_for_message(&comps.join("/"))
    }
}

fn ctx(action: &str, comps: &[&str]) -> String {
    format!("cannot {action} '{}'", show(comps))
}

fn kind_name(ft: FileType) -> &'static str {
    match ft {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        _ => "unknown type",
    }
}

fn is_no_space(raw: Option<i32>) -> bool {
    raw == Some(Errno::NOSPC.raw_os_error()) || raw == Some(Errno::DQUOT.raw_os_error())
}

// ----- ownership -----

#[derive(Debug, PartialEq, Eq)]
enum Decision {
    Use(SandboxUser),
    ChownRoot(SandboxUser),
    Refuse(Refusal),
}

#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    SandboxUidIsRoot,
    RootOwnedNotRoot,
}

impl Refusal {
    fn message(&self, root: &Path, euid: u32, sandbox_uid: u32) -> String {
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
fn decide_sandbox_user(owner_uid: u32, owner_gid: u32, euid: u32, sandbox_uid: u32) -> Decision {
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

fn chown_fd(fd: &OwnedFd, user: SandboxUser) -> std::result::Result<(), Errno> {
    rfs::fchown(
        fd,
        Some(Uid::from_raw(user.uid)),
        Some(Gid::from_raw(user.gid)),
    )
}

// ----- small helpers -----

/// `.cem-tmp-<pid>-<start time>-<random>`: the writer's identity, so that its leftovers can be
/// recognised once it is gone (see [`Workspace::remove_stale_temps`]).
fn temp_name() -> String {
    static WRITER: std::sync::OnceLock<(u32, u64)> = std::sync::OnceLock::new();
    let (pid, started) = *WRITER.get_or_init(|| {
        let pid = std::process::id();
        (
            pid,
            crate::process::process_start_time(pid).unwrap_or(0),
        )
    });
    format!("{TEMP_PREFIX}{pid}-{started}-{:016x}", random_u64())
}

/// The writer's pid and start time from what follows [`TEMP_PREFIX`] in a temp file's name.
fn parse_temp_writer(rest: &str) -> Option<(u32, u64)> {
    let mut parts = rest.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    let started = parts.next()?.parse().ok()?;
    let random = parts.next()?;
    (random.len() == 16 && random.bytes().all(|b| b.is_ascii_hexdigit())).then_some((pid, started))
}

/// Unpredictable enough for temp names (O_EXCL makes collisions harmless): std's per-process
/// random hash keys over a counter and the time.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    RandomState::new().hash_one((n, t, std::process::id()))
}

/// Bytes in binary units: "512 bytes", "10 MiB", "11.4 MiB".
struct HumanBytes(u64);

impl fmt::Display for HumanBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
        let n = self.0;
        if n < 1024 {
            return write!(f, "{n} bytes");
        }
        let mut unit = 0;
        let mut div: u64 = 1024;
        while unit + 1 < UNITS.len() && n / div >= 1024 {
            div *= 1024;
            unit += 1;
        }
        if n.is_multiple_of(div) {
            write!(f, "{} {}", n / div, UNITS[unit])
        } else {
            write!(f, "{:.1} {}", n as f64 / div as f64, UNITS[unit])
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Test hook: make `write_file` fail after the temp file is written, before the rename.
    static FAIL_BEFORE_RENAME: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;
    use std::ffi::OsStr;
    use std::fs;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, symlink};
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    const CANARY: &[u8] = b"CANARY: host secret";

    /// A workspace at `<tmp>/ws` and a directory `<tmp>/outside` holding `secret` (the canary).
    struct Fixture {
        _tmp: tempfile::TempDir,
        root: PathBuf,
        outside: PathBuf,
    }

    impl Fixture {
        fn new() -> Self {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("ws");
            let outside = tmp.path().join("outside");
            fs::create_dir(&root).unwrap();
            fs::create_dir(&outside).unwrap();
            fs::write(outside.join("secret"), CANARY).unwrap();
            Self {
                _tmp: tmp,
                root,
                outside,
            }
        }

        /// The same workspace through both resolvers, so every safety test covers the fallback.
        fn both(&self, limits: WorkspaceLimits) -> Vec<Workspace> {
            [Resolver::Openat2, Resolver::Walk]
                .into_iter()
                .map(|r| Workspace::open_with(&self.root, limits, Some(r)).unwrap())
                .collect()
        }

        fn p(&self, rel: &str) -> PathBuf {
            self.root.join(rel)
        }

        /// The outside directory holds exactly `names`, and the canary is unchanged.
        fn assert_outside_untouched(&self, names: &[&str]) {
            assert_eq!(fs::read(self.outside.join("secret")).unwrap(), CANARY);
            let found: BTreeSet<String> = fs::read_dir(&self.outside)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            let want: BTreeSet<String> = names.iter().map(|s| s.to_string()).collect();
            assert_eq!(found, want, "the outside directory changed");
        }
    }

    fn is_root() -> bool {
        rustix::process::geteuid().is_root()
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    // ----- validation -----

    #[test]
    fn validation_table() {
        let max = DEFAULT_MAX_PATH_LEN;
        let long_name = "a".repeat(4096);
        let name_256 = "n".repeat(256);
        let refused: &[(&str, &str)] = &[
            ("../../x", "leaves the workspace"),
            ("/etc/x", "leaves the workspace"),
            ("a/../../b", "leaves the workspace"),
            ("a/..", "leaves the workspace"),
            ("..", "leaves the workspace"),
            ("a\0b", "NUL"),
            (&long_name, "4096 bytes long"),
            (&name_256, "a name in it is 256 bytes long"),
            ("a\nb", "control character U+000A"),
            ("a\u{7f}b", "control character U+007F"),
            ("a\u{85}b", "control character U+0085"),
            ("a\\b", "backslash"),
            ("..\\..\\x", "backslash"),
            ("", "it is empty"),
            (".", "names no file"),
            ("./", "names no file"),
            ("//", "leaves the workspace"),
        ];
        for (input, needle) in refused {
            let err = validate_relative_path(input, max).expect_err(input);
            let msg = err.to_string();
            assert!(msg.contains(needle), "{input:?}: {msg}");
            assert!(
                msg.contains("relative path"),
                "{input:?}: says what is allowed: {msg}"
            );
        }
        // The message names the input, escaped.
        let msg = validate_relative_path("a\nb", max).unwrap_err().to_string();
        assert!(msg.contains("'a\\nb'"), "{msg}");
        let msg = validate_relative_path(&long_name, max)
            .unwrap_err()
            .to_string();
        assert!(msg.len() < 600, "long input is shortened in messages");

        let accepted: &[(&str, &[&str])] = &[
            ("%2e%2e", &["%2e%2e"]),
            ("...", &["..."]),
            ("a//b/./c/", &["a", "b", "c"]),
            ("./x.txt", &["x.txt"]),
            ("données/日本語.txt", &["données", "日本語.txt"]),
            ("emoji 🦀 name.py", &["emoji 🦀 name.py"]),
            ("~/x", &["~", "x"]),
            (".hidden", &[".hidden"]),
        ];
        for (input, want) in accepted {
            assert_eq!(
                &validate_relative_path(input, max).unwrap(),
                want,
                "{input:?}"
            );
        }
        let max_name = "m".repeat(255);
        assert_eq!(validate_relative_path(&max_name, max).unwrap().len(), 1);
        assert!(validate_relative_path("abcd", 3).is_err());

        for root in ["", ".", "./", ".//."] {
            assert!(validate_relative_subpath(root, max).unwrap().is_empty());
        }
        assert!(validate_relative_subpath("../x", max).is_err());
        assert_eq!(validate_relative_subpath("a/b", max).unwrap(), ["a", "b"]);
    }

    proptest! {
        #[test]
        fn validate_never_panics_or_escapes(
            s in prop_oneof![
                any::<String>(),
                "[a./\\\\\0\n%~ ]{0,40}",
                "[ab/.]{0,8}[ab]{250,260}",
                proptest::collection::vec(prop_oneof![
                    Just(".."), Just("."), Just(""), Just("a"), Just("/"), Just("b c"), Just("é")
                ], 0..12).prop_map(|v| v.join("/")),
            ],
            max in prop_oneof![0usize..64, Just(DEFAULT_MAX_PATH_LEN)],
        ) {
            let results = [validate_relative_path(&s, max), validate_relative_subpath(&s, max)];
            for comps in results.into_iter().flatten() {
                prop_assert!(!s.starts_with('/'));
                prop_assert!(s.len() <= max);
                for c in comps {
                    prop_assert!(!c.is_empty() && c != "." && c != "..");
                    prop_assert!(!c.contains('/') && !c.contains('\\') && !c.contains('\0'));
                    prop_assert!(c.len() <= MAX_NAME_LEN);
                    prop_assert!(check_name(c).is_ok());
                }
            }
        }
    }

    #[test]
    fn human_bytes() {
        assert_eq!(HumanBytes(0).to_string(), "0 bytes");
        assert_eq!(HumanBytes(1023).to_string(), "1023 bytes");
        assert_eq!(HumanBytes(10 * 1024 * 1024).to_string(), "10 MiB");
        assert_eq!(HumanBytes(12_000_000).to_string(), "11.4 MiB");
        assert_eq!(HumanBytes(1 << 30).to_string(), "1 GiB");
        assert_eq!(HumanBytes(u64::MAX).to_string(), "16.0 EiB");
        assert_eq!(HumanBytes(1 << 40).to_string(), "1 TiB");
    }

    #[test]
    fn open_creates_the_root_and_probes_openat2() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("a/b/ws");
        let ws = Workspace::open(&root, WorkspaceLimits::default()).unwrap();
        assert!(root.is_dir());
        assert_eq!(ws.root_path(), fs::canonicalize(&root).unwrap());
        assert_eq!(fs::metadata(&root).unwrap().mode() & 0o777, 0o755);
        // This kernel has openat2 (>= 5.6); the fallback is exercised by forcing it.
        eprintln!("resolver picked: {:?}", ws.resolver);
    }

    // ----- symlinks -----

    #[test]
    fn symlink_at_the_file_is_never_followed() {
        let f = Fixture::new();
        for ws in f.both(WorkspaceLimits::default()) {
            symlink(f.outside.join("secret"), f.p("evil")).unwrap();
            let err = ws.read_file("evil").unwrap_err();
            assert!(
                matches!(&err, WorkspaceError::Symlink { path } if path == "evil"),
                "{err}"
            );
            assert!(err.to_string().contains("never follow"), "{err}");
            assert!(!ws.list_files("").unwrap().files.contains(&"evil".into()));

            // Writing replaces the link itself; the target keeps its content.
            ws.write_file("evil", b"replaced").unwrap();
            let meta = fs::symlink_metadata(f.p("evil")).unwrap();
            assert!(meta.file_type().is_file());
            assert_eq!(fs::read(f.p("evil")).unwrap(), b"replaced");
            f.assert_outside_untouched(&["secret"]);
            fs::remove_file(f.p("evil")).unwrap();

            // Deleting removes the link, not the target.
            symlink(f.outside.join("secret"), f.p("evil")).unwrap();
            ws.delete_file("evil").unwrap();
            assert!(fs::symlink_metadata(f.p("evil")).is_err());
            f.assert_outside_untouched(&["secret"]);

            // Relative links, links to directories and link loops are refused the same way.
            symlink("../outside/secret", f.p("rel")).unwrap();
            symlink("loop", f.p("loop")).unwrap();
            symlink("/", f.p("slash")).unwrap();
            for name in ["rel", "loop", "slash"] {
                assert!(
                    matches!(ws.read_file(name), Err(WorkspaceError::Symlink { .. })),
                    "{name}"
                );
            }
            assert!(matches!(
                ws.list_files("slash"),
                Err(WorkspaceError::Symlink { .. })
            ));
            for name in ["rel", "loop", "slash"] {
                ws.delete_file(name).unwrap();
            }
            f.assert_outside_untouched(&["secret"]);
        }
    }

    #[test]
    fn symlink_at_an_intermediate_directory_is_refused() {
        let f = Fixture::new();
        fs::create_dir(f.p("a")).unwrap();
        symlink(&f.outside, f.p("dir")).unwrap();
        symlink(&f.outside, f.p("a/b")).unwrap();
        for ws in f.both(WorkspaceLimits::default()) {
            for (path, link) in [("dir/secret", "dir"), ("a/b/secret", "a/b")] {
                let err = ws.read_file(path).unwrap_err();
                assert!(
                    matches!(&err, WorkspaceError::Symlink { path } if path == link),
                    "{path}: {err}"
                );
                assert!(matches!(
                    ws.write_file(path, b"pwned"),
                    Err(WorkspaceError::Symlink { .. })
                ));
                assert!(matches!(
                    ws.delete_file(path),
                    Err(WorkspaceError::Symlink { .. })
                ));
            }
            assert!(matches!(
                ws.write_file("dir/new.txt", b"x"),
                Err(WorkspaceError::Symlink { .. })
            ));
            assert!(matches!(
                ws.write_file("dir/deeper/new.txt", b"x"),
                Err(WorkspaceError::Symlink { .. })
            ));
            assert!(matches!(
                ws.list_files("dir"),
                Err(WorkspaceError::Symlink { .. })
            ));
            assert!(matches!(
                ws.list_files("a/b"),
                Err(WorkspaceError::Symlink { .. })
            ));
            let all = ws.list_files("").unwrap();
            assert!(all.files.is_empty(), "{:?}", all.files);
            f.assert_outside_untouched(&["secret"]);
        }
    }

    #[test]
    fn symlink_to_etc_at_the_root_is_refused() {
        let f = Fixture::new();
        symlink("/etc", f.p("etc")).unwrap();
        let probe = format!("cem-workspace-test-{}", std::process::id());
        for ws in f.both(WorkspaceLimits::default()) {
            assert!(matches!(
                ws.read_file("etc/passwd"),
                Err(WorkspaceError::Symlink { .. })
            ));
            assert!(matches!(
                ws.read_file("etc/hostname"),
                Err(WorkspaceError::Symlink { .. })
            ));
            assert!(ws.write_file(&format!("etc/{probe}"), b"pwned").is_err());
            assert!(!Path::new("/etc").join(&probe).exists());
            assert!(ws.delete_file("etc/hostname").is_err());
            assert!(matches!(
                ws.list_files("etc"),
                Err(WorkspaceError::Symlink { .. })
            ));
            assert!(ws.list_files("").unwrap().files.is_empty());
        }
        assert!(
            fs::symlink_metadata(f.p("etc"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn escapes_are_refused_before_touching_the_disk() {
        let f = Fixture::new();
        for ws in f.both(WorkspaceLimits::default()) {
            for bad in ["../outside/secret", "/etc/passwd", "a/../../outside/secret"] {
                assert!(matches!(
                    ws.read_file(bad),
                    Err(WorkspaceError::Escapes { .. })
                ));
                assert!(matches!(
                    ws.write_file(bad, b"x"),
                    Err(WorkspaceError::Escapes { .. })
                ));
                assert!(matches!(
                    ws.delete_file(bad),
                    Err(WorkspaceError::Escapes { .. })
                ));
                assert!(matches!(
                    ws.list_files(bad),
                    Err(WorkspaceError::Escapes { .. })
                ));
            }
            assert!(entries(&f.root).is_empty(), "nothing was created");
            f.assert_outside_untouched(&["secret"]);
        }
    }

    #[test]
    fn fallback_walk_refuses_dot_components_itself() {
        let f = Fixture::new();
        let ws = Workspace::open_with(&f.root, WorkspaceLimits::default(), Some(Resolver::Walk))
            .unwrap();
        for comps in [&["..", "outside", "secret"][..], &["."], &[""], &["a/b"]] {
            assert_eq!(
                ws.open_beneath(ws.root.as_fd(), comps, OFlags::RDONLY, Mode::empty())
                    .unwrap_err(),
                Errno::INVAL
            );
        }
    }

    // ----- hard links -----

    #[test]
    fn hard_link_to_an_outside_file_is_never_modified() {
        // Only the host can make such a link (the sandbox gets EXDEV across the bind mount); a
        // read returns what the host shared, a write or delete only ever changes the name.
        let f = Fixture::new();
        for ws in f.both(WorkspaceLimits::default()) {
            fs::hard_link(f.outside.join("secret"), f.p("hl")).unwrap();
            assert_eq!(ws.read_file("hl").unwrap().bytes, CANARY);
            ws.write_file("hl", b"new content").unwrap();
            assert_eq!(fs::read(f.p("hl")).unwrap(), b"new content");
            assert_eq!(fs::metadata(f.p("hl")).unwrap().nlink(), 1);
            f.assert_outside_untouched(&["secret"]);
            assert_eq!(fs::metadata(f.outside.join("secret")).unwrap().nlink(), 1);

            fs::remove_file(f.p("hl")).unwrap();
            fs::hard_link(f.outside.join("secret"), f.p("hl")).unwrap();
            ws.delete_file("hl").unwrap();
            f.assert_outside_untouched(&["secret"]);
        }
    }

    // ----- special files -----

    #[test]
    fn fifo_read_does_not_block() {
        let f = Fixture::new();
        let root = rfs::open(&f.root, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).unwrap();
        rfs::mkfifoat(&root, "fifo", Mode::from_raw_mode(0o666)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let root_path = f.root.clone();
        std::thread::spawn(move || {
            for r in [Resolver::Openat2, Resolver::Walk] {
                let ws =
                    Workspace::open_with(&root_path, WorkspaceLimits::default(), Some(r)).unwrap();
                tx.send(ws.read_file("fifo").map(|c| c.size)).unwrap();
            }
        });
        for _ in 0..2 {
            let got = rx
                .recv_timeout(Duration::from_secs(5))
                .expect("read_file blocked on a FIFO");
            let err = got.unwrap_err();
            assert!(
                matches!(&err, WorkspaceError::NotRegularFile { kind: "fifo", .. }),
                "{err}"
            );
            assert!(err.to_string().contains("not a regular file (fifo)"));
        }
        let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
        assert!(ws.list_files("").unwrap().files.is_empty());
        assert_eq!(ws.usage().unwrap().files, 0);
        ws.delete_file("fifo").unwrap();
    }

    #[test]
    fn socket_device_and_directory_are_not_read() {
        let f = Fixture::new();
        let _listener = std::os::unix::net::UnixListener::bind(f.p("sock")).unwrap();
        fs::create_dir(f.p("d")).unwrap();
        let have_dev = is_root() && {
            let root = rfs::open(&f.root, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).unwrap();
            rfs::mknodat(
                &root,
                "null",
                FileType::CharacterDevice,
                Mode::from_raw_mode(0o666),
                rfs::makedev(1, 3),
            )
            .is_ok()
        };
        for ws in f.both(WorkspaceLimits::default()) {
            let err = ws.read_file("sock").unwrap_err();
            assert!(
                matches!(&err, WorkspaceError::NotRegularFile { kind: "socket", .. }),
                "{err}"
            );
            let err = ws.read_file("d").unwrap_err();
            assert!(matches!(&err, WorkspaceError::IsDirectory { .. }), "{err}");
            if have_dev {
                let err = ws.read_file("null").unwrap_err();
                assert!(
                    matches!(
                        &err,
                        WorkspaceError::NotRegularFile {
                            kind: "character device",
                            ..
                        }
                    ),
                    "{err}"
                );
            }
            assert!(ws.list_files("").unwrap().files.is_empty());
        }
        if !have_dev {
            eprintln!("device-node case skipped: needs root to mknod");
        }
    }

    // ----- size caps -----

    #[test]
    fn oversize_reads_and_writes_are_refused() {
        let f = Fixture::new();
        // A huge sparse file: refused from its size, without reading it.
        let sparse = fs::File::create(f.p("sparse")).unwrap();
        sparse.set_len(1 << 40).unwrap();
        drop(sparse);
        let small = WorkspaceLimits {
            max_file_bytes: 100,
            ..WorkspaceLimits::default()
        };
        fs::write(f.p("exact"), [7u8; 100]).unwrap();
        fs::write(f.p("over"), [7u8; 101]).unwrap();
        for ws in f.both(WorkspaceLimits::default()) {
            let t = Instant::now();
            let err = ws.read_file("sparse").unwrap_err();
            assert!(t.elapsed() < Duration::from_secs(1));
            assert_eq!(
                err.to_string(),
                "'sparse' is 1 TiB, over the 10 MiB limit for workspace tools; \
                 work with it from code in an execution instead"
            );
        }
        for ws in f.both(small) {
            assert_eq!(ws.read_file("exact").unwrap().size, 100);
            assert!(matches!(
                ws.read_file("over"),
                Err(WorkspaceError::TooLarge {
                    size: 101,
                    limit: 100,
                    ..
                })
            ));
            assert_eq!(ws.write_file("w100", &[1u8; 100]).unwrap(), 100);
            assert!(matches!(
                ws.write_file("w101", &[1u8; 101]),
                Err(WorkspaceError::TooLarge { size: 101, .. })
            ));
            assert!(!f.p("w101").exists());
        }
    }

    // ----- writing -----

    #[test]
    fn write_creates_parents_and_replaces_atomically() {
        let f = Fixture::new();
        for ws in f.both(WorkspaceLimits::default()) {
            assert_eq!(ws.write_file("a/b/c.txt", b"hello").unwrap(), 5);
            assert_eq!(fs::read(f.p("a/b/c.txt")).unwrap(), b"hello");
            assert_eq!(ws.read_file("a/b/c.txt").unwrap().bytes, b"hello");
            assert_eq!(ws.write_file("a/b/c.txt", b"bye").unwrap(), 3);
            assert_eq!(ws.read_file("./a//b/c.txt").unwrap().bytes, b"bye");
            assert_eq!(ws.write_file("empty", b"").unwrap(), 0);
            assert_eq!(ws.read_file("empty").unwrap().size, 0);
            assert_eq!(
                fs::metadata(f.p("a/b/c.txt")).unwrap().mode() & 0o7777,
                0o644
            );
            assert_eq!(fs::metadata(f.p("a/b")).unwrap().mode() & 0o7777, 0o755);
            ws.write_file("%2e%2e", b"literal").unwrap();
            assert_eq!(fs::read(f.p("%2e%2e")).unwrap(), b"literal");
            assert_eq!(ws.write_file("日本語/données.txt", b"u").unwrap(), 1);

            // A directory at the name, a file where a parent should be.
            fs::create_dir_all(f.p("dir")).unwrap();
            let err = ws.write_file("dir", b"x").unwrap_err();
            assert!(matches!(&err, WorkspaceError::IsDirectory { .. }), "{err}");
            let err = ws.write_file("empty/x", b"x").unwrap_err();
            assert!(
                matches!(&err, WorkspaceError::NotADirectory { path } if path == "empty"),
                "{err}"
            );
            assert!(
                !entries(&f.root).iter().any(|n| n.starts_with(TEMP_PREFIX)),
                "no temp files left"
            );
            for p in ["a", "dir", "日本語"] {
                fs::remove_dir_all(f.p(p)).unwrap();
            }
            for p in ["empty", "%2e%2e"] {
                fs::remove_file(f.p(p)).unwrap();
            }
        }
    }

    #[test]
    fn failed_write_leaves_no_temp_file_and_keeps_the_old_content() {
        let f = Fixture::new();
        for ws in f.both(WorkspaceLimits::default()) {
            ws.write_file("d/keep.txt", b"old").unwrap();
            FAIL_BEFORE_RENAME.with(|c| c.set(true));
            let result = ws.write_file("d/keep.txt", b"new");
            FAIL_BEFORE_RENAME.with(|c| c.set(false));
            assert!(result.is_err());
            assert_eq!(fs::read(f.p("d/keep.txt")).unwrap(), b"old");
            assert_eq!(entries(&f.p("d")), ["keep.txt"]);
        }
    }

    #[test]
    fn temp_files_of_a_dead_writer_are_removed_and_a_live_ones_kept() {
        let f = Fixture::new();
        let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
        let dead = format!("{TEMP_PREFIX}{}-1-00000000deadbeef", u32::MAX - 1);
        let live = temp_name();
        let legacy_new = format!("{TEMP_PREFIX}0123456789abcdef");
        let legacy_old = format!("{TEMP_PREFIX}fedcba9876543210");
        fs::create_dir_all(f.p("d/e")).unwrap();
        for (name, content) in [
            (format!("d/e/{dead}"), "half a file"),
            (dead.clone(), "half a file"),
            (live.clone(), "being written"),
            (legacy_new.clone(), "recent"),
            (legacy_old.clone(), "old"),
            ("data.txt".to_string(), "user data"),
        ] {
            fs::write(f.p(&name), content).unwrap();
        }
        let old = std::time::SystemTime::now() - Duration::from_secs(2 * 3600);
        fs::File::options()
            .write(true)
            .open(f.p(&legacy_old))
            .unwrap()
            .set_modified(old)
            .unwrap();
        // Not regular files: left alone (a link is never followed).
        let dead_dir = format!("{TEMP_PREFIX}{}-1-00000000deadbee0", u32::MAX - 1);
        fs::create_dir(f.p(&dead_dir)).unwrap();
        let dead_link = format!("{TEMP_PREFIX}{}-1-00000000deadbee1", u32::MAX - 1);
        symlink(f.outside.join("secret"), f.p(&dead_link)).unwrap();

        assert_eq!(ws.remove_stale_temps().unwrap(), 3);
        let mut left = entries(&f.root);
        left.sort();
        let mut expected = vec![
            "d".to_string(),
            "data.txt".into(),
            legacy_new,
            live,
            dead_dir,
            dead_link,
        ];
        expected.sort();
        assert_eq!(left, expected);
        assert!(entries(&f.p("d/e")).is_empty());
        f.assert_outside_untouched(&["secret"]);
        assert_eq!(ws.remove_stale_temps().unwrap(), 0);
    }

    #[test]
    fn temp_names_carry_the_writer() {
        let name = temp_name();
        let (pid, started) = parse_temp_writer(name.strip_prefix(TEMP_PREFIX).unwrap()).unwrap();
        assert_eq!(pid, std::process::id());
        assert!(!crate::process::process_is_gone(pid, started));
        for junk in [
            "",
            "1-2",
            "1-2-xyz",
            "a-2-0123456789abcdef",
            "1-2-0123456789abcde",
        ] {
            assert_eq!(parse_temp_writer(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn files_written_as_root_belong_to_the_workspace_owner() {
        if !is_root() {
            eprintln!("skipped: needs root to chown");
            return;
        }
        let f = Fixture::new();
        // Root-owned workspace: nothing is chowned (prepare_for_sandbox hands the root over).
        let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
        ws.write_file("r/x", b"x").unwrap();
        assert_eq!(fs::metadata(f.p("r/x")).unwrap().uid(), 0);
        // Owned by a developer: new directories and files are theirs.
        std::os::unix::fs::chown(&f.root, Some(12345), Some(12346)).unwrap();
        ws.write_file("n/m/x.txt", b"x").unwrap();
        for p in ["n", "n/m", "n/m/x.txt"] {
            let m = fs::metadata(f.p(p)).unwrap();
            assert_eq!((m.uid(), m.gid()), (12345, 12346), "{p}");
        }
    }

    // ----- deleting -----

    #[test]
    fn delete_removes_files_only() {
        let f = Fixture::new();
        for ws in f.both(WorkspaceLimits::default()) {
            ws.write_file("d/x", b"x").unwrap();
            ws.delete_file("d/x").unwrap();
            assert!(!f.p("d/x").exists());
            let err = ws.delete_file("d").unwrap_err();
            assert!(matches!(&err, WorkspaceError::IsDirectory { .. }), "{err}");
            assert!(f.p("d").is_dir());
            let err = ws.delete_file("d/x").unwrap_err();
            assert_eq!(
                err.to_string(),
                "file not found: 'd/x'; list_workspace_files shows what exists"
            );
            assert!(matches!(
                ws.delete_file("nope/x"),
                Err(WorkspaceError::NotFound { path }) if path == "nope/x"
            ));
            fs::remove_dir(f.p("d")).unwrap();
        }
    }

    // ----- listing -----

    #[test]
    fn listing_is_sorted_recursive_and_regular_files_only() {
        let f = Fixture::new();
        let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
        for p in [
            "b.txt",
            "a/z",
            "a/b/c.txt",
            ".hidden",
            "lost+found/x",
            "a/lost+found/y",
        ] {
            ws.write_file(p, b"x").unwrap();
        }
        symlink(&f.outside, f.p("a/link")).unwrap();
        symlink(f.outside.join("secret"), f.p("slink")).unwrap();
        for ws in f.both(WorkspaceLimits::default()) {
            let l = ws.list_files("").unwrap();
            assert_eq!(
                l.files,
                [".hidden", "a/b/c.txt", "a/lost+found/y", "a/z", "b.txt"]
            );
            assert!(!l.truncated);
            assert_eq!(l.skipped, 0);
            assert_eq!(ws.list_files(".").unwrap(), l);
            assert_eq!(
                ws.list_files("a").unwrap().files,
                ["a/b/c.txt", "a/lost+found/y", "a/z"]
            );
            assert_eq!(ws.list_files("a/b/").unwrap().files, ["a/b/c.txt"]);
            assert_eq!(ws.list_files("lost+found").unwrap().files, ["lost+found/x"]);
            assert!(matches!(
                ws.list_files("b.txt"),
                Err(WorkspaceError::NotADirectory { .. })
            ));
            assert!(matches!(
                ws.list_files("missing"),
                Err(WorkspaceError::NotFound { .. })
            ));
            // Every listed path is accepted back by the other tools.
            for p in &l.files {
                ws.read_file(p).unwrap();
            }
        }
    }

    #[test]
    fn names_with_newlines_or_invalid_utf8_are_skipped_and_counted() {
        let f = Fixture::new();
        let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
        ws.write_file("ok.txt", b"x").unwrap();
        let bad: [&[u8]; 4] = [b"new\nline", b"bad\xffutf8", b"back\\slash", b"tab\there"];
        for name in bad {
            fs::write(f.root.join(OsStr::from_bytes(name)), b"x").unwrap();
        }
        let bad_dir = f.root.join(OsStr::from_bytes(b"dir\xfe"));
        fs::create_dir(&bad_dir).unwrap();
        fs::write(bad_dir.join("inner.txt"), b"x").unwrap();
        for ws in f.both(WorkspaceLimits::default()) {
            let l = ws.list_files("").unwrap();
            assert_eq!(l.files, ["ok.txt"]);
            assert_eq!(l.skipped, 5);
            assert!(!l.truncated);
        }
    }

    #[test]
    fn listing_stops_at_the_depth_limit() {
        let f = Fixture::new();
        let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
        let deep = vec!["d"; LIST_MAX_DEPTH + 3].join("/");
        ws.write_file(&format!("{deep}/bottom.txt"), b"x").unwrap();
        ws.write_file("d/d/top.txt", b"x").unwrap();
        let l = ws.list_files("").unwrap();
        assert_eq!(l.files, ["d/d/top.txt"]);
        assert!(l.truncated);
    }

    #[test]
    fn listing_100k_files_is_bounded_and_quick() {
        let f = Fixture::new();
        let many = f.p("many");
        fs::create_dir(&many).unwrap();
        for i in 0..100_000 {
            fs::File::create(many.join(format!("f{i:06}"))).unwrap();
        }
        for ws in f.both(WorkspaceLimits::default()) {
            let t = Instant::now();
            let l = ws.list_files("").unwrap();
            let took = t.elapsed();
            assert!(l.truncated);
            assert_eq!(l.files.len(), DEFAULT_MAX_LIST_ENTRIES);
            assert!(l.files.windows(2).all(|w| w[0] < w[1]));
            assert!(took < Duration::from_secs(5), "listing took {took:?}");
            let t = Instant::now();
            let u = ws.usage().unwrap();
            assert_eq!(u.files, 100_000);
            assert!(!u.truncated);
            assert!(t.elapsed() < Duration::from_secs(20));
        }
    }

    // ----- usage and the soft quota -----

    #[test]
    fn usage_counts_allocated_bytes_and_hard_links_once() {
        let f = Fixture::new();
        let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
        for p in ["a", "b/c", "b/d/e"] {
            ws.write_file(p, &[1u8; 10_000]).unwrap();
        }
        fs::hard_link(f.p("a"), f.p("a-link")).unwrap();
        symlink(&f.outside, f.p("out")).unwrap();
        let u = ws.usage().unwrap();
        assert_eq!(u.files, 3);
        assert!(u.bytes >= 30_000, "{u:?}");
        assert!(u.bytes < 1_000_000, "{u:?}");
        assert!(!u.truncated);
    }

    #[test]
    fn soft_quota_refuses_writes_and_executions_when_full() {
        let f = Fixture::new();
        let limits = WorkspaceLimits {
            quota_bytes: 1024 * 1024,
            soft_quota: true,
            ..WorkspaceLimits::default()
        };
        for ws in f.both(limits) {
            ws.write_file("one", &[1u8; 600 * 1024]).unwrap();
            ws.check_quota().unwrap();
            let err = ws.write_file("two", &[1u8; 600 * 1024]).unwrap_err();
            assert_eq!(
                err.to_string(),
                "workspace is full (quota 1 MiB): delete files to free space"
            );
            assert!(!f.p("two").exists());
            // The sandbox writes past the quota directly: the next execution is refused.
            fs::write(f.p("sandbox.bin"), vec![1u8; 2 * 1024 * 1024]).unwrap();
            assert!(matches!(ws.check_quota(), Err(WorkspaceError::Full { .. })));
            ws.delete_file("sandbox.bin").unwrap();
            ws.delete_file("one").unwrap();
            ws.check_quota().unwrap();
        }
    }

    // ----- the sandbox user -----

    #[test]
    fn sandbox_user_rule() {
        let u = |uid, gid| SandboxUser { uid, gid };
        assert_eq!(
            decide_sandbox_user(1000, 1000, 1000, 10001),
            Decision::Use(u(1000, 1000))
        );
        assert_eq!(
            decide_sandbox_user(1000, 0, 0, 10001),
            Decision::Use(u(1000, 1000))
        );
        assert_eq!(
            decide_sandbox_user(0, 0, 0, 10001),
            Decision::ChownRoot(u(10001, 10001))
        );
        assert_eq!(
            decide_sandbox_user(0, 0, 1000, 10001),
            Decision::Refuse(Refusal::RootOwnedNotRoot)
        );
        assert_eq!(
            decide_sandbox_user(0, 0, 0, 0),
            Decision::Refuse(Refusal::SandboxUidIsRoot)
        );
        let msg = Refusal::RootOwnedNotRoot.message(Path::new("/srv/ws"), 1000, 10001);
        assert!(msg.contains("sudo chown 1000:$(id -g) /srv/ws"), "{msg}");
        assert!(msg.contains("never runs as root"), "{msg}");
        assert_eq!(u(5, 6).docker_user(), "5:6");
    }

    #[test]
    fn prepare_for_sandbox_hands_a_root_owned_workspace_over() {
        if !is_root() {
            // A root-owned directory that exists everywhere; prepare only reads its owner.
            let ws = Workspace::open(Path::new("/usr"), WorkspaceLimits::default()).unwrap();
            let err = ws.prepare_for_sandbox(DEFAULT_SANDBOX_UID).unwrap_err();
            assert!(err.to_string().contains("sudo chown"), "{err}");
            eprintln!("root-owned handover skipped: needs root to chown");
            return;
        }
        let f = Fixture::new();
        let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
        assert_eq!(fs::metadata(&f.root).unwrap().uid(), 0);
        let user = ws.prepare_for_sandbox(DEFAULT_SANDBOX_UID).unwrap();
        assert_eq!(
            user,
            SandboxUser {
                uid: 10001,
                gid: 10001
            }
        );
        let m = fs::metadata(&f.root).unwrap();
        assert_eq!((m.uid(), m.gid()), (10001, 10001));
        // Idempotent, and files written now belong to the sandbox user.
        assert_eq!(ws.prepare_for_sandbox(DEFAULT_SANDBOX_UID).unwrap(), user);
        ws.write_file("x", b"x").unwrap();
        assert_eq!(fs::metadata(f.p("x")).unwrap().uid(), 10001);
        // A developer's workspace keeps its owner.
        std::os::unix::fs::chown(&f.root, Some(1000), Some(1000)).unwrap();
        assert_eq!(
            ws.prepare_for_sandbox(DEFAULT_SANDBOX_UID).unwrap(),
            SandboxUser {
                uid: 1000,
                gid: 1000
            }
        );
        assert!(
            ws.prepare_for_sandbox(0).is_ok(),
            "owner wins over the configured uid"
        );
        std::os::unix::fs::chown(&f.root, Some(0), Some(0)).unwrap();
        assert!(matches!(
            ws.prepare_for_sandbox(0),
            Err(WorkspaceError::SandboxUser { .. })
        ));
    }

    #[test]
    fn workspace_can_be_shared_across_blocking_tasks() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Workspace>();
        assert_send_sync::<WorkspaceError>();
    }

    // ----- races -----

    /// A thread swaps `d` (a real directory) and `f` (a real file) with symlinks to the outside,
    /// atomically and in a loop, while the tools use `d/...` and `f` 1000 times each.
    #[test]
    fn directory_swapped_for_a_symlink_never_reaches_outside() {
        let f = Fixture::new();
        fs::write(f.outside.join("f"), CANARY).unwrap();
        fs::create_dir(f.p("d")).unwrap();
        fs::write(f.p("d/f"), b"inside").unwrap();
        fs::write(f.p("f"), b"inside").unwrap();
        symlink(&f.outside, f.p("d-link")).unwrap();
        symlink(f.outside.join("secret"), f.p("f-link")).unwrap();

        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let swapper = {
            let (stop, swaps, root) = (stop.clone(), swaps.clone(), f.root.clone());
            std::thread::spawn(move || {
                let dir = rfs::open(&root, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    for (a, b) in [("d", "d-link"), ("f", "f-link")] {
                        rfs::renameat_with(&dir, a, &dir, b, rfs::RenameFlags::EXCHANGE).unwrap();
                    }
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        let mut outcomes = [0usize; 2];
        for ws in f.both(WorkspaceLimits::default()) {
            for i in 0..1000 {
                for path in ["d/f", "f"] {
                    match ws.read_file(path) {
                        Ok(c) => {
                            assert_ne!(c.bytes, CANARY, "read escaped via {path}");
                            outcomes[0] += 1;
                        }
                        Err(_) => outcomes[1] += 1,
                    }
                }
                let _ = ws.write_file("d/f", b"inside");
                let _ = ws.write_file(&format!("d/new{}", i % 7), b"x");
                let _ = ws.delete_file(&format!("d/new{}", i % 7));
                let _ = ws.delete_file("d/secret");
                if let Ok(l) = ws.list_files("d") {
                    assert!(l.files.iter().all(|p| p == "d/f" || p.starts_with("d/new")));
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        eprintln!(
            "swaps: {}, reads ok/refused: {outcomes:?}",
            swaps.load(Ordering::Relaxed)
        );
        assert!(swaps.load(Ordering::Relaxed) > 0);
        assert_eq!(fs::read(f.outside.join("f")).unwrap(), CANARY);
        f.assert_outside_untouched(&["f", "secret"]);
    }
}
