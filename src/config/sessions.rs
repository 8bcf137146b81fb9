//! Sessions: state carried across `execute_code` calls, each in a fresh container.

use std::time::Duration;

use clap::Args;

use super::ConfigError;
use super::range::Range;

const SESSION_MAX_MB: Range = Range::new("--session-max-mb", 1, 4096);
const SESSION_MAX_COUNT: Range = Range::new("--session-max-count", 0, 1024);
const SESSION_IDLE_SECS: Range = Range::new("--session-idle-secs", 10, 30 * 24 * 3600);
const SESSION_HISTORY: Range = Range::new("--session-history", 1, 256);

#[derive(Debug, Clone, Args)]
pub struct SessionsConfig {
    /// The largest state a session keeps, in MB (its variables, serialized): a call whose state
    /// is larger succeeds, and the session keeps its previous state.
    #[arg(long, env = "CEM_SESSION_MAX_MB", default_value_t = 256, value_parser = SESSION_MAX_MB.parser::<u64>())]
    pub session_max_mb: u64,

    /// Sessions one tenant holds at once (0: sessions are off).
    #[arg(long, env = "CEM_SESSION_MAX_COUNT", default_value_t = 16, value_parser = SESSION_MAX_COUNT.parser::<usize>())]
    pub session_max_count: usize,

    /// Seconds without a call after which a session expires and its state is removed.
    #[arg(long, env = "CEM_SESSION_IDLE_SECS", default_value_t = 3600, value_parser = SESSION_IDLE_SECS.parser::<u64>())]
    pub session_idle_secs: u64,

    /// Revisions each session keeps (`session="HANDLE@N"` runs a call on revision N), within
    /// `--session-max-mb` of distinct bytes: the oldest go first, never the newest.
    #[arg(long, env = "CEM_SESSION_HISTORY", default_value_t = 8, value_parser = SESSION_HISTORY.parser::<usize>())]
    pub session_history: usize,
}

impl SessionsConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        SESSION_MAX_MB.check(self.session_max_mb)?;
        SESSION_MAX_COUNT.check(self.session_max_count)?;
        SESSION_IDLE_SECS.check(self.session_idle_secs)?;
        SESSION_HISTORY.check(self.session_history)?;
        Ok(())
    }

    /// The session store's bounds.
    pub fn limits(&self) -> crate::sessions::SessionLimits {
        crate::sessions::SessionLimits {
            max_bytes: self.session_max_mb << 20,
            max_count: self.session_max_count,
            idle: Duration::from_secs(self.session_idle_secs),
            history: self.session_history,
        }
    }
}
