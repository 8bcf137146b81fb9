//! HTTP tenants: the bearer tokens that name them, how much of the server one may use, and the
//! uids their sandboxes run as.

use std::path::PathBuf;

use clap::Args;

use super::ConfigError;

use super::Secret;
use super::range::Range;
use crate::tenancy::uid::UidRange;

const TENANT_MAX_CONCURRENCY: Range = Range::at_least("--tenant-max-concurrency", 1);

#[derive(Debug, Clone, Args)]
pub struct TenantsConfig {
    /// File of bearer tokens for HTTP, one `TENANT:TOKEN` per line (`#` starts a comment). Each
    /// tenant gets its own workspace, skills, PII vault and stats; a tenant may have several
    /// tokens. Without tokens, HTTP listens on loopback addresses only.
    #[arg(long, env = "CEM_TOKENS_FILE")]
    pub tokens_file: Option<PathBuf>,

    /// Bearer tokens for HTTP as `TENANT:TOKEN,TENANT:TOKEN` (prefer --tokens-file: an
    /// environment variable is visible to whoever can inspect the process or its container).
    #[arg(long = "tokens", env = "CEM_TOKENS", hide_env_values = true)]
    pub tokens: Option<Secret>,

    /// Executions one tenant may run at once (HTTP with tokens), so that one tenant cannot take
    /// every slot [default: half of --max-concurrency, at least 1].
    #[arg(long, env = "CEM_TENANT_MAX_CONCURRENCY", value_parser = TENANT_MAX_CONCURRENCY.parser::<usize>())]
    pub tenant_max_concurrency: Option<usize>,

    /// Uids tenants' sandboxes run as, FIRST-LAST: each tenant gets one derived from its name
    /// (the same on every server), owning its workspace, and its group alone reads its skills.
    /// Needs a server running as root; two tenants whose names give one uid are refused at
    /// start. Within 65536-2147483647; the default is a block no common software assigns.
    #[arg(long, env = "CEM_TENANT_UID_RANGE", default_value_t = UidRange::default())]
    pub tenant_uid_range: UidRange,
}

impl TenantsConfig {
    /// The flags' ranges, for a configuration built in code.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(n) = self.tenant_max_concurrency {
            TENANT_MAX_CONCURRENCY.check(n)?;
        }
        Ok(())
    }

    /// Whether bearer tokens are configured (HTTP then serves tenants).
    pub fn has_tokens(&self) -> bool {
        self.tokens_file.is_some() || self.tokens.as_ref().is_some_and(|t| !t.0.trim().is_empty())
    }

    /// Executions one tenant may run at once, of the server's `max_concurrency` (`tenants`:
    /// whether the server serves tenants).
    pub fn max_concurrency(&self, server: usize, tenants: bool) -> usize {
        let default = if tenants { (server / 2).max(1) } else { server };
        self.tenant_max_concurrency.unwrap_or(default).min(server)
    }
}
