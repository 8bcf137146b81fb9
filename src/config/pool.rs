//! How many executions run at once and wait, and the pool of containers started ahead.

use std::time::Duration;

use clap::Args;

use super::ConfigError;
use super::range::Range;

const MAX_CONCURRENCY: Range = Range::at_least("--max-concurrency", 1);
const POOL_SIZE: Range = Range::new("--pool-size", 0, 64);
const POOL_MAX: Range = Range::new("--pool-max", 0, 256);
const REMOVAL_BACKLOG: Range = Range::new("--removal-backlog", 0, 1024);

#[derive(Debug, Clone, Args)]
pub struct PoolConfig {
    /// Executions that run at once in the whole server; further ones wait in a queue.
    #[arg(long, env = "CEM_MAX_CONCURRENCY", default_value_t = 4, value_parser = MAX_CONCURRENCY.parser::<usize>())]
    pub max_concurrency: usize,

    /// Executions that may wait for a free slot (per tenant); beyond that a call fails with
    /// "busy".
    #[arg(long, env = "CEM_MAX_QUEUE", default_value_t = 32)]
    pub max_queue: usize,

    /// Containers kept started ahead, each used for one execution only (0: every execution
    /// starts its own container). The default matches --max-concurrency's: a burst of that many
    /// parallel calls finds a container ready for each (each idle one costs about 20 MiB). With
    /// tokens, each tenant has a pool of this size, started at its first request.
    #[arg(long, env = "CEM_POOL_SIZE", default_value_t = 4, value_parser = POOL_SIZE.parser::<usize>())]
    pub pool_size: usize,

    /// The most pooled containers (waiting or starting) the whole server holds, every tenant's
    /// pool together: the pool's memory budget (a waiting container holds about 20 MiB, more
    /// with --preload). Under bursts a pool grows past --pool-size up to its share of this (the
    /// budget divided among the pools in use).
    #[arg(long, env = "CEM_POOL_MAX", default_value_t = 16, value_parser = POOL_MAX.parser::<usize>())]
    pub pool_max: usize,

    /// Seconds without an execution after which a pool falls back to --pool-size, removing what
    /// it grew by; an HTTP tenant's pool gives back every container (0: never shrink).
    #[arg(long, env = "CEM_POOL_IDLE_SECS", default_value_t = 120)]
    pub pool_idle_secs: u64,

    /// Used containers (all their processes ended) whose removal may wait until the engine is
    /// idle, so that removals do not slow down the executions of a burst. Past it, removals go
    /// on during executions (0: remove each container at once). Shutdown removes the backlog.
    #[arg(long, env = "CEM_REMOVAL_BACKLOG", default_value_t = 32, value_parser = REMOVAL_BACKLOG.parser::<usize>())]
    pub removal_backlog: usize,
}

impl PoolConfig {
    pub fn pool_idle(&self) -> Duration {
        Duration::from_secs(self.pool_idle_secs)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        MAX_CONCURRENCY.check(self.max_concurrency)?;
        POOL_SIZE.check(self.pool_size)?;
        POOL_MAX.check(self.pool_max)?;
        REMOVAL_BACKLOG.check(self.removal_backlog)?;
        if self.pool_max < self.pool_size {
            return Err(ConfigError::Conflict(format!(
                "--pool-max {} is below --pool-size {}: the budget must hold at least one full pool",
                self.pool_max, self.pool_size
            )));
        }
        Ok(())
    }
}
