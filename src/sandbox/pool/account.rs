//! What the pool gave up when it could not keep up, counted and reported.
//!
//! The pool degrades in the cheapest order: first its replacements skip the preload (a data
//! call then pays its own import, nothing else slows down), then containers prepared for
//! sessions give their place back (the session's next call loads its state itself), then an
//! execution waits for a replacement already on its way, and only when none is coming does it
//! start its own container. `get_execution_stats` (`pool.keeping_up`) and the metrics say how
//! often each happened and which is happening now, so an operator can tell a pool that keeps up
//! from one that needs `--pool-size`, `--pool-max` or cores.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// How long after the last of a kind the pool still counts as giving that up.
const RECENT: Duration = Duration::from_secs(10);

/// What the pool gave up, cheapest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Degrade {
    /// A replacement started without the tenant's usual imports.
    PreloadSkipped,
    /// An execution waited for a replacement on its way.
    Waited,
    /// An execution found nothing ready or coming and started its own container.
    ColdStart,
}

impl Degrade {
    const ALL: [Degrade; 3] = [Degrade::PreloadSkipped, Degrade::Waited, Degrade::ColdStart];
}

/// The most the pool gave up in the last 10 seconds.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PoolPace {
    /// Every execution found a container ready, with its usual imports where wanted.
    #[default]
    KeepingUp,
    /// Replacements start without the usual imports, so they are ready sooner.
    SkippingPreloads,
    /// Executions wait for replacements on their way.
    Waiting,
    /// Executions start their own containers.
    ColdStarts,
}

/// How the pool kept up: its pace now and the counts since the server started.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub struct KeepingUp {
    /// The most the pool gave up in the last 10 seconds.
    pub pace: PoolPace,
    /// Replacements started without the tenant's usual imports because the calls came faster
    /// than such a container gets ready.
    pub preload_skipped: u64,
    /// Executions that waited for a replacement on its way.
    pub waits: u64,
    /// Executions that found no container ready or coming and started their own.
    pub cold_starts: u64,
}

#[derive(Debug, Default)]
pub struct Account {
    counts: [AtomicU64; 3],
    last: Mutex<[Option<Instant>; 3]>,
}

impl Account {
    pub fn note(&self, what: Degrade) {
        self.counts[what as usize].fetch_add(1, Ordering::Relaxed);
        self.last.lock().expect("account lock")[what as usize] = Some(Instant::now());
    }

    /// Counts a wait for the first container of a pool that was filling (new, or woken from
    /// idle with nothing kept): the wait is real, but the pool is not behind the calls' pace,
    /// so it does not hold back preloads. (Counted as behind, the first call on a fresh server
    /// kept every replacement plain for 10 s: a data call's next calls paid their imports.)
    pub fn note_filling_wait(&self) {
        self.counts[Degrade::Waited as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn count(&self, what: Degrade) -> u64 {
        self.counts[what as usize].load(Ordering::Relaxed)
    }

    /// Whether an execution waited for a container, or started its own, in the last 10
    /// seconds: the pool is behind, and a preload would only put it further behind.
    pub fn behind(&self) -> bool {
        let last = *self.last.lock().expect("account lock");
        [Degrade::Waited, Degrade::ColdStart]
            .into_iter()
            .any(|d| last[d as usize].is_some_and(|t| t.elapsed() < RECENT))
    }

    pub fn snapshot(&self) -> KeepingUp {
        let last = *self.last.lock().expect("account lock");
        let recent = |d: Degrade| last[d as usize].is_some_and(|t| t.elapsed() < RECENT);
        let pace = match Degrade::ALL.into_iter().rev().find(|d| recent(*d)) {
            None => PoolPace::KeepingUp,
            Some(Degrade::PreloadSkipped) => PoolPace::SkippingPreloads,
            Some(Degrade::Waited) => PoolPace::Waiting,
            Some(Degrade::ColdStart) => PoolPace::ColdStarts,
        };
        KeepingUp {
            pace,
            preload_skipped: self.count(Degrade::PreloadSkipped),
            waits: self.count(Degrade::Waited),
            cold_starts: self.count(Degrade::ColdStart),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_pace_is_the_most_given_up_lately() {
        let account = Account::default();
        assert_eq!(account.snapshot(), KeepingUp::default());
        account.note(Degrade::ColdStart);
        tokio::time::advance(Duration::from_secs(5)).await;
        account.note(Degrade::PreloadSkipped);
        account.note(Degrade::PreloadSkipped);
        let now = account.snapshot();
        assert_eq!(now.pace, PoolPace::ColdStarts);
        assert_eq!((now.preload_skipped, now.waits, now.cold_starts), (2, 0, 1));
        tokio::time::advance(Duration::from_secs(6)).await;
        assert_eq!(account.snapshot().pace, PoolPace::SkippingPreloads);
        tokio::time::advance(RECENT).await;
        let later = account.snapshot();
        assert_eq!(later.pace, PoolPace::KeepingUp);
        assert_eq!(later.cold_starts, 1, "counts stay");
    }
}
