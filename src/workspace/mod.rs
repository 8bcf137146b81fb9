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
//!   an `O_PATH | O_DIRECTORY` fd to it. Nothing afterwards resolves a path string from `/`,
//!   except that a tool call which fails with `ESTALE` (shared storage after a failover) reopens
//!   that same canonical path once and runs again (`host::renewable_dir`).
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
//!   A tenant's workspace is instead handed to the tenant's own uid ([`Workspace::hand_over`]),
//!   its root 0700.
//! * **Quota.** See [`quota`]: the kernel enforces it when the workspace is a loop-mounted,
//!   size-limited ext4 image; otherwise ([`WorkspaceLimits::soft_quota`]) the server refuses tool
//!   writes and new executions once [`Workspace::usage`] reaches the quota.
//!
//! Everything here is blocking: the async callers wrap these calls in `spawn_blocking`.
//! [`quota::ensure`] must run before [`Workspace::open`], so that the root fd refers to the mounted
//! filesystem rather than the directory underneath it.
//!
//! # Layout
//!
//! [`Workspace`] and its limits and result types live here; each child module holds one part:
//! `path` (pure validation), `resolve` (opening beneath the root), `walk` (the bounded directory
//! walk), `read`, `write` (writes and deletes), `list`, `usage` (and the soft quota), `temp` (temp
//! file names and the stale-temp sweep), `owner` (the sandbox user and ownership of new entries),
//! `handover` (a workspace given to a tenant's own uid), `changes` (what an execution
//! created or changed), `upload` (a file received in parts, moved in whole),
//! `error` (errors and their wording) and [`quota`].

pub mod quota;
pub mod uri;

mod changes;
mod error;
mod handover;
mod list;
mod owner;
mod path;
mod read;
mod resolve;
mod temp;
mod upload;
mod usage;
mod walk;
mod write;

#[cfg(test)]
mod tests;

pub use changes::{FileChange, Snapshot};
pub use error::WorkspaceError;
pub use handover::{Handover, PRIVATE_ROOT_MODE};
pub use path::{validate_relative_path, validate_relative_subpath};
pub use upload::{Committed, Staged};

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::OFlags;

use crate::host::renewable_dir::RenewableDir;
use error::{HumanBytes, Result};
use resolve::{Resolver, probe_resolver};

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

const FILE_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o755;

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
    /// Each file's size and modification time, in the order of `files` (zero when the file
    /// went away during the listing).
    pub stats: Vec<FileStat>,
    /// True when the walk stopped early: `max_list_entries` files, the scan budget, or
    /// [`LIST_MAX_DEPTH`] reached. The files returned are then an arbitrary subset.
    pub truncated: bool,
    /// Entries left out because their path could not be shown or used (invalid UTF-8, control
    /// characters such as newlines, backslashes, over-long paths), plus directories that could not
    /// be opened.
    pub skipped: usize,
}

/// A listed file's size and modification time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileStat {
    pub size: u64,
    /// Nanoseconds since the Unix epoch.
    pub modified_ns: i128,
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

/// The workspace directory, opened once; every operation resolves beneath its fd.
#[derive(Debug)]
pub struct Workspace {
    root_path: PathBuf,
    root: RenewableDir,
    limits: WorkspaceLimits,
    resolver: Resolver,
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
        let root =
            RenewableDir::open(&root_path, OFlags::PATH | OFlags::NOFOLLOW).map_err(|e| {
                WorkspaceError::io(format!("cannot open workspace {}", root_path.display()), e)
            })?;
        let fd = root.fd().map_err(|e| {
            WorkspaceError::io(format!("cannot open workspace {}", root_path.display()), e)
        })?;
        let resolver = force.unwrap_or_else(|| probe_resolver(fd.as_fd()));
        tracing::debug!(root = %root_path.display(), ?resolver, "workspace opened");
        Ok(Self {
            root_path,
            root,
            limits,
            resolver,
        })
    }

    /// The canonical path of the workspace root on the host.
    pub fn root_path(&self) -> &Path {
        &self.root_path
    }

    /// Runs a tool call's `op`, once more on a reopened root if the root's fd went stale.
    fn renewing<T>(&self, op: impl Fn() -> Result<T>) -> Result<T> {
        self.root.renewing(WorkspaceError::is_stale, op)
    }

    /// The root's fd for one step of an operation; a stale handle is an error
    /// [`Workspace::renewing`] answers by reopening the root.
    fn root_fd(&self) -> Result<Arc<OwnedFd>> {
        self.root
            .fd()
            .map_err(|e| WorkspaceError::io("cannot use the workspace directory", e))
    }

    /// A fault for tests: the root's handle goes stale, as on shared storage after a failover
    /// (`ESTALE` from every use until an operation reopens the root from its path). Each
    /// operation meant to renew is tested through it; nothing else calls it.
    #[doc(hidden)]
    pub fn inject_stale_handle(&self) {
        self.root.inject_stale();
    }

    /// The limits this workspace enforces.
    pub fn limits(&self) -> &WorkspaceLimits {
        &self.limits
    }
}
