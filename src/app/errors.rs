//! Why the server or a tenant did not start, and why an execution did not run: each message
//! says what happened and what to change.

use std::path::PathBuf;

use crate::app::execution::request::InputError;
use crate::gateway::UpstreamsError;
use crate::pii::KeyFileError;
use crate::sandbox::engine::paths::HostPathError;
use crate::sandbox::image::ImageError;
use crate::sandbox::{EngineError, SandboxError};
use crate::skills::SkillError;
use crate::workspace::WorkspaceError;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid configuration: {0}")]
    Config(crate::config::ConfigError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Image(#[from] ImageError),
    // The errors below embed their cause in the message and do not expose it as a source,
    // so `main`'s error chain does not print it two more times.
    #[error("workspace {path}: {error}")]
    Workspace {
        path: PathBuf,
        error: WorkspaceError,
    },
    #[error("workspace quota for {path}: {message}")]
    Quota { path: PathBuf, message: String },
    #[error(
        "skills directory {path}: {error}. Point --skills-dir (CEM_SKILLS_DIR) at a directory the server can read and write (it is created when missing), or move what is at that path away"
    )]
    Skills { path: PathBuf, error: SkillError },
    #[error(
        "tool registry {path}: {message}. Point --registry-dir (CEM_REGISTRY_DIR) at a directory of *.json registry files (they add to the catalog built into the server), or leave it out"
    )]
    Registry { path: PathBuf, message: String },
    #[error("PII engine: {0}")]
    Pii(String),
    #[error("upload and download links: {0}")]
    Links(String),
    #[error(transparent)]
    PiiKey(#[from] KeyFileError),
    #[error(transparent)]
    Upstreams(#[from] UpstreamsError),
    #[error(
        "tools package directory {path}: {source}. The server writes the generated `servers` package for sandboxes there (under --data-dir)"
    )]
    ToolsPackage {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    HostPath(HostPathError),
    /// The runtime's registration would break a guarantee (gVisor without `--oci-seccomp`).
    #[error("{what}. Fix: {fix}")]
    Runtime { what: String, fix: String },
    #[error(
        "cannot write the seccomp profile for the engine to {path}: {source}. The server writes it under --data-dir (CEM_DATA_DIR) when the engine is Podman, whose Docker-compatible API takes the profile as a file; make that directory writable"
    )]
    SeccompFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the seccomp profile file {profile} is inside {mount}, which sandboxes mount, so their code could change it: point --workspace (CEM_WORKSPACE) and --skills-dir (CEM_SKILLS_DIR) at directories that do not contain --data-dir's `engine` directory (their defaults, under --data-dir, do not)"
    )]
    SeccompInMount { profile: PathBuf, mount: PathBuf },
    #[error(transparent)]
    Storage(#[from] crate::host::storage::StorageError),
    #[error("packages on demand: {0}. Turn them off with --packages off, or fix the cause")]
    Packages(String),
    #[error(
        "guarded egress: {0}. Remove \"egress\" from the upstreams file to run without it, or fix the cause"
    )]
    Egress(String),
    /// The engine does not enforce the sandbox's limits (see `engine_limits`).
    #[error("{0}")]
    LimitsNotEnforced(String),
    #[error(
        "cannot give {path} to the tenant's sandbox uid {uid}: {source}. A server running as root gives each tenant a uid of its own (--tenant-uid-range); in a container it needs the CHOWN, FOWNER and DAC_OVERRIDE capabilities (compose.yaml grants them), and a shared volume must let root change owners (no root squashing)"
    )]
    TenantUser {
        path: PathBuf,
        uid: u32,
        source: std::io::Error,
    },
    /// The starting task ended without a result (it panicked).
    #[error(
        "the server's start stopped unexpectedly; its log (stderr) says where. Restart the server, and report the log if it happens again"
    )]
    Interrupted,
    /// The server was told to stop before its start had ended.
    #[error("the server is stopping: it was told to stop before its start had ended")]
    Cancelled,
    /// A tenant could not be opened. What the tenant is told: the cause names the server's
    /// paths, so it goes to the server's log only (with the tenant's name).
    #[error(
        "the server could not open this tenant's workspace or skills: retry later, or ask the administrator, who finds the cause in the server's log"
    )]
    TenantUnavailable,
    /// The start of what every tenant shares failed. What a tenant is told: the cause names
    /// the server's paths, so it goes to the server's log only.
    #[error(
        "the server could not start: its administrator finds the cause in the server's log, fixes it and restarts the server"
    )]
    ServerUnavailable,
}

/// Why an execution request did not run.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("{0}")]
    Workspace(WorkspaceError),
    #[error(
        "cannot prepare the `servers` package for this execution: {0}. Check that the data directory is writable"
    )]
    ToolsPackage(std::io::Error),
    #[error(transparent)]
    Session(#[from] crate::sessions::SessionError),
    /// The packages the call named could not be made importable; the code did not run.
    #[error("{error}; the code did not run")]
    Packages {
        error: crate::packages::PackageError,
        requested: Vec<String>,
        took: std::time::Duration,
    },
    #[error(
        "sessions are off on this server (--session-max-count 0): call without `session`, or ask its operator to allow them"
    )]
    SessionsOff,
    /// `--audit-required` and the audit trail cannot be written.
    #[error(
        "this server records every execution in its audit trail and cannot write it now ({0}): no code ran. Retry later; the server's operator frees space or fixes DATA_DIR/audit"
    )]
    AuditUnavailable(String),
}

// By hand rather than `#[from]`: the message already holds the cause, and a `source` would make
// `main`'s error chain print it a second time.
impl From<crate::config::ConfigError> for StartError {
    fn from(error: crate::config::ConfigError) -> Self {
        StartError::Config(error)
    }
}
