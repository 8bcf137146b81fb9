//! What a workspace tool can go wrong with, and how it is worded: [`WorkspaceError`], whose
//! every message says what to do next, with the helpers that recognise a full disk and print a
//! size for those messages. Kept apart so the operations read as operations.

use std::fmt;

use rustix::io::Errno;

use super::Workspace;
use crate::host::renewable_dir::is_stale;

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
    #[error(
        "'{path}' exists already and this upload may not replace it: ask for a link with overwrite, or another name"
    )]
    Exists { path: String },
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
    pub fn io(context: impl Into<String>, source: impl Into<std::io::Error>) -> Self {
        Self::Io {
            context: context.into(),
            source: source.into(),
        }
    }

    /// Whether the filesystem called a handle stale (`ESTALE`): the root fd may need reopening.
    pub(super) fn is_stale(&self) -> bool {
        matches!(self, Self::Io { source, .. } if is_stale(source))
    }
}

pub(super) type Result<T, E = WorkspaceError> = std::result::Result<T, E>;

impl Workspace {
    /// The error of a full workspace (its quota reached).
    pub fn full(&self) -> WorkspaceError {
        WorkspaceError::Full {
            quota_bytes: self.limits.quota_bytes,
        }
    }
}

pub(super) fn is_no_space(raw: Option<i32>) -> bool {
    raw == Some(Errno::NOSPC.raw_os_error()) || raw == Some(Errno::DQUOT.raw_os_error())
}

/// Bytes in binary units: "512 bytes", "10 MiB", "11.4 MiB".
pub(super) struct HumanBytes(pub(super) u64);

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
