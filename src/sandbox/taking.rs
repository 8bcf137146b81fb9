//! How an execution gets its container: the session's prepared one, one from the pool, or
//! none (it starts its own), and, when none was at hand at once, why ([`StartNote`]). A
//! container started for the call costs it about a second instead of milliseconds; the
//! response says so, so that a slow call reads as the machine's doing, not the code's.

use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use crate::sandbox::Sandbox;
use crate::sandbox::engine::error::EngineError;
use crate::sandbox::pool::{self, preload};
use crate::sandbox::run::{self, Job};
use crate::sandbox::stats::Phase;

/// How a call's container was had, when it was not ready and fitting at once (absent then,
/// so that a call's response stays small).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StartNote {
    /// True: a pooled container served it, after a wait or without the imports the pool
    /// usually has ready. False: the call started a container of its own.
    pub pooled: bool,
    /// From the call's turn (past the concurrency limit) to its code starting, in ms.
    pub waited_ms: u64,
    pub reason: StartReason,
}

/// Why a call's container was not ready at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StartReason {
    /// No pooled container was ready: calls came faster than containers start (the pool
    /// grows to follow them).
    PoolEmpty,
    /// The pooled container had not imported the modules the code imports: containers skip
    /// that while calls come faster than such a container gets ready.
    PreloadSkipped,
    /// The code's packages want a container that imported nothing ahead, and none was ready.
    Packages,
    /// A non-default `memory_mb` the engine did not set on a pooled container.
    MemoryLimit,
    /// The server keeps no pool (`--pool-size 0`).
    PoolOff,
}

/// A container for a job, or none (start one), and the note its call gets (without the
/// time, known once the code starts).
pub(crate) struct Taken {
    pub ready: Option<run::Started>,
    pub note: Option<(bool, StartReason)>,
}

impl Taken {
    fn at_once(ready: run::Started) -> Self {
        Self {
            ready: Some(ready),
            note: None,
        }
    }

    fn cold(reason: StartReason) -> Self {
        Self {
            ready: None,
            note: Some((false, reason)),
        }
    }
}

impl Sandbox {
    /// A started container for `job` by `start_deadline`: the session's prepared one, or one
    /// from the pool; none when it must start its own.
    pub(crate) async fn take_ready(
        &self,
        job: &Job,
        start_deadline: tokio::time::Instant,
    ) -> Taken {
        let prepared = job.carry.as_ref().and_then(|c| c.prepared.as_ref());
        if let Some(prepared) = prepared
            && let Some(ready) = prepared.take(start_deadline).await
        {
            self.stats.record_prepared();
            return match self
                .fit_memory(ready, job.memory_bytes, start_deadline)
                .await
            {
                Some(ready) => Taken::at_once(ready),
                None => Taken::cold(StartReason::MemoryLimit),
            };
        }
        // A set that provides a module the pool may preload from the image wants a container
        // that imported nothing ahead.
        let wants = match job.replaces_image {
            true => pool::Wants::Plain,
            false => pool::Wants::Imports(preload::code_imports(&job.code)),
        };
        self.learned.asked(match &wants {
            pool::Wants::Imports(imports) => imports,
            pool::Wants::Plain => &[],
        });
        self.take_warm(job.memory_bytes, start_deadline, &wants)
            .await
    }

    /// A pooled container fitting `wants`, set to `memory_bytes`, if one is ready by
    /// `deadline` (and, for a non-default limit, the engine applied it by then).
    async fn take_warm(
        &self,
        memory_bytes: i64,
        deadline: tokio::time::Instant,
        wants: &pool::Wants,
    ) -> Taken {
        let default_limit = memory_bytes == self.pool.memory_bytes();
        if self.settings.pool_size == 0 {
            return Taken::cold(StartReason::PoolOff);
        }
        if !default_limit && self.no_memory_update.load(Ordering::Relaxed) {
            return Taken::cold(StartReason::MemoryLimit);
        }
        // Half the time left at most: a replacement the engine is stuck on must leave a cold
        // start the other half, not take the whole start limit with it.
        let limit = deadline.saturating_duration_since(tokio::time::Instant::now()) / 2;
        let asked = std::time::Instant::now();
        let handed = self.pool.take_or_wait(limit, wants).await;
        self.stats.phase(Phase::PoolWait, asked.elapsed());
        let Some(handed) = handed else {
            // Executions outpace the pool: containers prepared for sessions give way.
            let relieved = std::mem::take(&mut *self.pressure.lock().expect("pressure lock"));
            relieved.cancel();
            return Taken::cold(match wants {
                pool::Wants::Plain => StartReason::Packages,
                pool::Wants::Imports(_) => StartReason::PoolEmpty,
            });
        };
        let note = if handed.waited {
            Some((true, StartReason::PoolEmpty))
        } else {
            self.preload_missing(wants, &handed.waiting.preload)
                .then_some((true, StartReason::PreloadSkipped))
        };
        match self
            .fit_memory(handed.waiting.started, memory_bytes, deadline)
            .await
        {
            Some(ready) => Taken {
                ready: Some(ready),
                note,
            },
            None => Taken::cold(StartReason::MemoryLimit),
        }
    }

    /// Whether the code imports a module the pool imports ahead in its containers that this
    /// one (`preloaded`) did not: its call pays for the import itself.
    pub(crate) fn preload_missing(&self, wants: &pool::Wants, preloaded: &[String]) -> bool {
        let pool::Wants::Imports(imports) = wants else {
            return false;
        };
        let ahead = match &self.settings.preload {
            preload::Preload::Fixed(modules) => modules.clone(),
            preload::Preload::Learned => self.learned.modules(),
        };
        let top = |m: &String| m.split('.').next().unwrap_or(m).to_string();
        let had: Vec<String> = preloaded.iter().map(top).collect();
        (ahead.iter().map(top)).any(|m| imports.contains(&m) && !had.contains(&m))
    }

    /// A started container with its memory limit set to `memory_bytes` (pooled and prepared
    /// containers carry the default), or `None` when the engine did not set it by `deadline`.
    pub(crate) async fn fit_memory(
        &self,
        ready: run::Started,
        memory_bytes: i64,
        deadline: tokio::time::Instant,
    ) -> Option<run::Started> {
        if memory_bytes == self.pool.memory_bytes() {
            return Some(ready);
        }
        if self.no_memory_update.load(Ordering::Relaxed) {
            return None;
        }
        let update = self.backend.set_memory_limit(ready.name(), memory_bytes);
        match tokio::time::timeout_at(deadline, update).await {
            Ok(Ok(())) => Some(ready),
            Ok(Err(e @ EngineError::Unsupported(_))) => {
                self.no_memory_update.store(true, Ordering::Relaxed);
                tracing::warn!(
                    "{e}: executions with a non-default memory_mb start their own container instead of a pooled one"
                );
                None
            }
            Ok(Err(e)) => {
                tracing::warn!("running cold: {e}");
                None
            }
            Err(_) => {
                tracing::warn!(
                    "running cold: the engine did not update a pooled container's memory limit in time"
                );
                None
            }
        }
    }
}
