//! Operations: the metrics endpoint (`--metrics-listen`) and the audit trail (`--audit-*`).
//! Both are for the people who run the server, not for the model: metrics are off unless an
//! address is given, the trail is on by default and holds digests and tokens only.

use std::net::SocketAddr;

use clap::Args;

use super::ConfigError;
use super::range::Range;

const AUDIT_MAX_MB: Range = Range::new("--audit-max-mb", 1, 64 * 1024);
const AUDIT_KEEP: Range = Range::new("--audit-keep", 0, 10_000);

#[derive(Debug, Clone, Args)]
pub struct OperationsConfig {
    /// Serve Prometheus metrics at http://ADDR/metrics (for stdio and HTTP servers alike). Keep
    /// it on a private address: the metrics name tenants and upstream servers. Off by default.
    #[arg(long, env = "CEM_METRICS_LISTEN", value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,

    /// Keep the audit trail: one JSON line per execute_code call under
    /// DATA_DIR/audit/TENANT/NODE.jsonl (digests and tokens, never personal data's values).
    #[arg(long, env = "CEM_AUDIT", default_value_t = true, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub audit: bool,

    /// Audit records carry the code itself (tokenized), not only its SHA-256.
    #[arg(long, env = "CEM_AUDIT_CODE")]
    pub audit_code: bool,

    /// Refuse new executions while the audit trail cannot be written (a full disk, a read-only
    /// directory). Without it executions go on unrecorded; either way the log, /health and the
    /// metrics say the trail is failing.
    #[arg(long, env = "CEM_AUDIT_REQUIRED")]
    pub audit_required: bool,

    /// An audit file is rotated (renamed with the time) before it passes this size, in MB.
    #[arg(long, env = "CEM_AUDIT_MAX_MB", default_value_t = 64, value_parser = AUDIT_MAX_MB.parser::<u64>())]
    pub audit_max_mb: u64,

    /// Rotated audit files kept per tenant and node; older ones are deleted.
    #[arg(long, env = "CEM_AUDIT_KEEP", default_value_t = 16, value_parser = AUDIT_KEEP.parser::<usize>())]
    pub audit_keep: usize,
}

impl OperationsConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        AUDIT_MAX_MB.check(self.audit_max_mb)?;
        AUDIT_KEEP.check(self.audit_keep)?;
        if !self.audit && (self.audit_code || self.audit_required) {
            return Err(ConfigError::Conflict(
                "--audit-code and --audit-required shape the audit trail, which --audit false turns off: remove them, or keep the trail on".into(),
            ));
        }
        Ok(())
    }

    /// The trail's settings, `None` when it is off.
    pub fn audit_settings(&self) -> Option<crate::audit::AuditSettings> {
        self.audit.then_some(crate::audit::AuditSettings {
            max_file_bytes: self.audit_max_mb << 20,
            keep_rotated: self.audit_keep,
            include_code: self.audit_code,
            required: self.audit_required,
        })
    }
}
