//! Tenants: who they are and where their data lives. A tenant is named by the tokens file
//! ([`tokens`]); its name becomes a directory name, so it is checked by allowlist before any
//! path is built from it, and its directories ([`TenantDirs`]) are made private to the server.
//! Its sandboxes run as a uid of its own, derived from the name ([`uid`]).
//! Per-tenant limits are the configuration's tenants group (`config::TenantsConfig`); the
//! HTTP transport opens each tenant's `App` at its first request (`transport::tenants`).

pub mod claim_map;
pub mod tokens;
pub mod uid;

use std::path::PathBuf;

/// Longest tenant name.
pub const MAX_TENANT_CHARS: usize = 32;

/// Whether `name` may name a tenant (it becomes a directory name): 1 to 32 of lowercase ASCII
/// letters, digits, `_` and `-`, starting with a letter or digit.
pub fn valid_tenant_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TENANT_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        && name.as_bytes()[0].is_ascii_alphanumeric()
}

/// One tenant's directories.
#[derive(Debug, Clone)]
pub struct TenantDirs {
    pub workspace: PathBuf,
    pub skills: PathBuf,
    /// Where the generated `servers` package is written (mounted read-only in sandboxes).
    pub servers: PathBuf,
    /// The encrypted PII vault file (used with `--pii-key-file`).
    pub pii_vault: PathBuf,
    /// Sessions' snapshots (never mounted in a sandbox: they travel through the channel).
    pub sessions: PathBuf,
    /// Upload and download links' single-use markers (never mounted in a sandbox).
    pub links: PathBuf,
}

/// Creates `dir` and its missing parents with mode 0700, and makes `dir` and its parent (the
/// tenants directory) 0700: other users of the host have no business in tenants' data. The
/// engine binds the workspaces as root, so sandboxes are unaffected.
///
/// On a volume several nodes share (GlusterFS), a `mkdir` that another node makes at the same
/// moment can fail with EIO, or with EEXIST before the directory shows here (servers opening
/// their first tenants at once all create `tenants/`): such failures are retried for about a
/// couple of seconds.
pub async fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    let mut attempt = 0;
    loop {
        match crate::host::blocking_here(|| create_private_dir_once(dir)) {
            Err(e) if attempt < 6 && matches!(e.raw_os_error(), Some(libc::EIO | libc::EEXIST)) => {
                attempt += 1;
                tracing::debug!("creating {} failed ({e}); retrying", dir.display());
                tokio::time::sleep(std::time::Duration::from_millis(15 << attempt)).await;
            }
            done => return done,
        }
    }
}

fn create_private_dir_once(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // Only where the mode differs: on a shared volume every node opens tenants under the same
    // parent, and GlusterFS answers EIO for a while after replicas saw concurrent changes of
    // one directory's attributes.
    for d in [Some(dir), dir.parent()].into_iter().flatten() {
        if std::fs::metadata(d)?.permissions().mode() & 0o7777 != 0o700 {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(())
}
