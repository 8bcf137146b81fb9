//! The audit trail: for each file through an upload or download link, one JSON line of
//! `kind` upload or download ([`TransferRecord`]); for each `execute_code` call, one JSON line saying what code ran (its
//! SHA-256; the code itself, tokenized, only with `--audit-code`), for which tenant and client,
//! with what outcome, calling which upstream tools with what policy decisions, and which
//! workspace files it changed. Values of personal data never enter it: strings that could carry
//! them go through the PII engine first, and tool arguments appear as a digest only.
//!
//! Files live under `DATA_DIR/audit/TENANT/NODE.jsonl` (`_default` for a server without
//! tenants): one per tenant and node, so the servers of a swarm, which share the data
//! directory, never write the same file. A file past its size bound is renamed with the time
//! of its rotation and a new one begun ([`log`]); `code-execution-mcp audit` reads them back
//! ([`read`]).
//!
//! The subsystem knows nothing of MCP or the sandbox: the application builds the
//! [`AuditRecord`] and hands it to the tenant's [`AuditLog`].

pub mod log;
pub mod read;
pub mod record;

pub use log::{AuditHealth, AuditLog, AuditSettings};
pub use record::{
    AuditCall, AuditEntry, AuditPlan, AuditPlanCall, AuditRecord, AuditTokens, TokenCount,
    TransferKind, TransferRecord,
};

/// The directory of the trail under the data directory.
pub const DIR_NAME: &str = "audit";

/// The directory name of the one tenant of a server without tenants (never a tenant's name:
/// those begin with a letter or digit).
pub const SINGLE_TENANT_DIR: &str = "_default";

/// Whether `name` may be a directory of the trail: a tenant's name or [`SINGLE_TENANT_DIR`].
pub fn valid_tenant_dir(name: &str) -> bool {
    name == SINGLE_TENANT_DIR || crate::tenancy::valid_tenant_name(name)
}

/// A node name made safe as a file name: letters, digits, `.`, `_` and `-` kept (at most 64),
/// anything else `_`; never empty, never starting with a dot.
pub fn node_file_stem(node: &str) -> String {
    let mut stem: String = node
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.is_empty() || stem.starts_with('.') {
        stem.insert(0, 'n');
    }
    stem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_become_safe_file_stems() {
        assert_eq!(node_file_stem("node-1.example"), "node-1.example");
        assert_eq!(node_file_stem("../etc/passwd"), "n.._etc_passwd");
        assert_eq!(node_file_stem(""), "n");
        assert_eq!(node_file_stem("a b/c"), "a_b_c");
        assert_eq!(node_file_stem(&"x".repeat(100)).len(), 64);
    }

    #[test]
    fn tenant_directories_are_tenant_names_or_the_single_one() {
        assert!(valid_tenant_dir("alice"));
        assert!(valid_tenant_dir(SINGLE_TENANT_DIR));
        assert!(!valid_tenant_dir("../alice"));
        assert!(!valid_tenant_dir("_other"));
    }
}
