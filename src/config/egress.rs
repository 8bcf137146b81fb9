//! Guarded egress: the HTTP requests sandbox code makes through the server to the hosts of the
//! upstreams file's `egress` object. Which hosts is the file's business; these flags bound what
//! one execution may do through them and say what the server trusts and where its sockets go.
//!
//! Why bounds per execution: a listed host is still a way out for workspace data and a way in
//! for bulk data, and one execution's loop must not hold the server's connections or fill its
//! memory. The per-response cap allows more than 1 GiB (data downloads are the point); the
//! per-execution totals bound a loop of them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::ConfigError;
use super::range::Range;
use crate::gateway::egress::rules::EgressLimits;

const EGRESS_MAX_REQUESTS: Range = Range::new("--egress-max-requests", 1, 1_000_000);
const EGRESS_MAX_BYTES_IN_MB: Range = Range::new("--egress-max-bytes-in-mb", 1, 1 << 20);
const EGRESS_MAX_BYTES_OUT_MB: Range = Range::new("--egress-max-bytes-out-mb", 1, 1 << 20);
const EGRESS_MAX_CONNECTIONS: Range = Range::new("--egress-max-connections", 1, 1024);
const EGRESS_MAX_RESPONSE_MB: Range = Range::new("--egress-max-response-mb", 1, 1 << 20);
const EGRESS_MAX_SCANNED_MB: Range = Range::new("--egress-max-scanned-mb", 1, 1024);
const EGRESS_TIMEOUT_SECONDS: Range = Range::new("--egress-timeout-seconds", 1, 86_400);

/// Longest socket directory: a socket's path inside it (a directory per container, then the
/// socket) must fit the 108 bytes of `sun_path`.
pub const MAX_SOCKET_DIR_BYTES: usize = 64;

#[derive(Debug, Clone, Args)]
pub struct EgressConfig {
    /// A PEM bundle of extra CA certificates the server trusts for the hosts of `egress`
    /// entries, added to the system's roots (a private CA, a TLS-inspecting proxy). Sandboxes
    /// never see it.
    #[arg(long, env = "CEM_EGRESS_CA_FILE")]
    pub egress_ca_file: Option<PathBuf>,

    /// HTTP requests one execution may make through the server.
    #[arg(long, env = "CEM_EGRESS_MAX_REQUESTS", default_value_t = 256, value_parser = EGRESS_MAX_REQUESTS.parser::<u32>())]
    pub egress_max_requests: u32,

    /// MiB one execution may receive from hosts, all responses together.
    #[arg(long, env = "CEM_EGRESS_MAX_BYTES_IN_MB", default_value_t = 4096, value_parser = EGRESS_MAX_BYTES_IN_MB.parser::<u64>())]
    pub egress_max_bytes_in_mb: u64,

    /// MiB one execution may send to hosts, all request bodies together.
    #[arg(long, env = "CEM_EGRESS_MAX_BYTES_OUT_MB", default_value_t = 64, value_parser = EGRESS_MAX_BYTES_OUT_MB.parser::<u64>())]
    pub egress_max_bytes_out_mb: u64,

    /// Connections to hosts one execution may hold open at once.
    #[arg(long, env = "CEM_EGRESS_MAX_CONNECTIONS", default_value_t = 16, value_parser = EGRESS_MAX_CONNECTIONS.parser::<u32>())]
    pub egress_max_connections: u32,

    /// MiB of one response body (at most --egress-max-bytes-in-mb).
    #[arg(long, env = "CEM_EGRESS_MAX_RESPONSE_MB", default_value_t = 2048, value_parser = EGRESS_MAX_RESPONSE_MB.parser::<u64>())]
    pub egress_max_response_mb: u64,

    /// MiB of one body read whole for personal data: a response that must enter tokenized (a
    /// larger one is refused), a request body whose tokens are restored (a larger one is sent
    /// as it is, its tokens left as tokens).
    #[arg(long, env = "CEM_EGRESS_MAX_SCANNED_MB", default_value_t = 32, value_parser = EGRESS_MAX_SCANNED_MB.parser::<u64>())]
    pub egress_max_scanned_mb: u64,

    /// Seconds one request may take, from its first byte to its response's last.
    #[arg(long, env = "CEM_EGRESS_TIMEOUT_SECONDS", default_value_t = 300, value_parser = EGRESS_TIMEOUT_SECONDS.parser::<u64>())]
    pub egress_timeout_seconds: u64,

    /// Directory where each sandbox's socket directory is made: local disk, never the shared
    /// data directory [default: $XDG_RUNTIME_DIR/code-execution-mcp, else
    /// /tmp/code-execution-mcp-egress-UID].
    #[arg(long, env = "CEM_EGRESS_SOCKET_DIR")]
    pub egress_socket_dir: Option<PathBuf>,
}

impl EgressConfig {
    /// The flags' ranges, the response cap against the per-execution total, the socket
    /// directory's form, and the CA file read (for a configuration built in code too).
    pub fn validate(&self) -> Result<(), ConfigError> {
        EGRESS_MAX_REQUESTS.check(self.egress_max_requests)?;
        EGRESS_MAX_BYTES_IN_MB.check(self.egress_max_bytes_in_mb)?;
        EGRESS_MAX_BYTES_OUT_MB.check(self.egress_max_bytes_out_mb)?;
        EGRESS_MAX_CONNECTIONS.check(self.egress_max_connections)?;
        EGRESS_MAX_RESPONSE_MB.check(self.egress_max_response_mb)?;
        EGRESS_MAX_SCANNED_MB.check(self.egress_max_scanned_mb)?;
        EGRESS_TIMEOUT_SECONDS.check(self.egress_timeout_seconds)?;
        if self.egress_max_response_mb > self.egress_max_bytes_in_mb {
            return Err(ConfigError::Conflict(format!(
                "--egress-max-response-mb {} is more than one execution may receive in all (--egress-max-bytes-in-mb {}): raise the total or lower the response cap",
                self.egress_max_response_mb, self.egress_max_bytes_in_mb
            )));
        }
        let dir = self.socket_dir();
        let invalid = |problem: String| ConfigError::Invalid {
            flag: "--egress-socket-dir",
            problem,
        };
        if !dir.is_absolute() {
            return Err(invalid(format!(
                "{} must be an absolute path",
                dir.display()
            )));
        }
        if dir.as_os_str().len() > MAX_SOCKET_DIR_BYTES {
            return Err(invalid(format!(
                "{} is longer than {MAX_SOCKET_DIR_BYTES} bytes: a socket's path under it must fit the 108 bytes the kernel allows; choose a shorter directory",
                dir.display()
            )));
        }
        self.extra_roots()?;
        Ok(())
    }

    /// How one execution's requests are bounded.
    pub fn limits(&self) -> EgressLimits {
        EgressLimits {
            max_requests: self.egress_max_requests,
            max_bytes_in: self.egress_max_bytes_in_mb * 1024 * 1024,
            max_bytes_out: self.egress_max_bytes_out_mb * 1024 * 1024,
            max_connections: self.egress_max_connections,
            max_response_bytes: self.egress_max_response_mb * 1024 * 1024,
            max_scanned_bytes: self.egress_max_scanned_mb * 1024 * 1024,
            timeout: Duration::from_secs(self.egress_timeout_seconds),
        }
    }

    /// `--egress-ca-file`, when set to something (compose passes an empty value for unset).
    pub fn ca_file(&self) -> Option<&Path> {
        self.egress_ca_file
            .as_deref()
            .filter(|p| !p.as_os_str().is_empty())
    }

    /// The certificates of `--egress-ca-file` (none without it), each one a certificate
    /// rustls can take as a root; a file that cannot be read, holds no certificate or a
    /// malformed one is an error naming the flag.
    pub fn extra_roots(&self) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
        match self.ca_file() {
            Some(path) => pem_roots(path, "--egress-ca-file"),
            None => Ok(Vec::new()),
        }
    }

    /// Where each sandbox's socket directory is made: `--egress-socket-dir`, else
    /// `$XDG_RUNTIME_DIR/code-execution-mcp`, else `/tmp/code-execution-mcp-egress-UID`.
    pub fn socket_dir(&self) -> PathBuf {
        (self.egress_socket_dir.clone())
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| {
                default_socket_dir(
                    std::env::var_os("XDG_RUNTIME_DIR"),
                    rustix::process::getuid().as_raw(),
                )
            })
    }
}

/// The certificates of the PEM file at `path` (`flag` names it in errors), each one a
/// certificate rustls can take as a root; a file that cannot be read, holds no certificate or a
/// malformed one is an error naming the flag.
pub fn pem_roots(
    path: &Path,
    flag: &'static str,
) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let invalid = |what: String| ConfigError::Invalid {
        flag,
        problem: format!(
            "{}: {what}. Point it at a readable PEM file of CA certificates (\"-----BEGIN CERTIFICATE-----\")",
            path.display()
        ),
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| invalid(format!("cannot be read ({e})")))?
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(format!("is not PEM ({e})")))?;
    if certs.is_empty() {
        return Err(invalid("holds no certificate".into()));
    }
    let mut store = rustls::RootCertStore::empty();
    for (i, cert) in certs.iter().enumerate() {
        store
            .add(cert.clone())
            .map_err(|e| invalid(format!("certificate {} is not usable ({e})", i + 1)))?;
    }
    Ok(certs)
}

/// The default socket directory, given `$XDG_RUNTIME_DIR` and this process's uid: the runtime
/// directory is the user's own, on local memory, removed at logout; `/tmp` with the uid in the
/// name keeps two users' servers apart.
fn default_socket_dir(runtime_dir: Option<OsString>, uid: u32) -> PathBuf {
    match runtime_dir.filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("code-execution-mcp"),
        None => PathBuf::from(format!("/tmp/code-execution-mcp-egress-{uid}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_directory_defaults_to_the_runtime_directory_else_tmp_by_uid() {
        assert_eq!(
            default_socket_dir(Some("/run/user/1000".into()), 1000),
            PathBuf::from("/run/user/1000/code-execution-mcp")
        );
        assert_eq!(
            default_socket_dir(Some("".into()), 1000),
            PathBuf::from("/tmp/code-execution-mcp-egress-1000")
        );
        assert_eq!(
            default_socket_dir(None, 0),
            PathBuf::from("/tmp/code-execution-mcp-egress-0")
        );
    }
}
