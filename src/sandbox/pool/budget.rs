//! The server-wide budget of pooled containers: `--pool-max` containers waiting or starting
//! across every tenant's pool, shared among the pools in use.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The server-wide budget of pooled containers (waiting or starting), shared by every tenant's
/// pool: `--pool-max`.
#[derive(Debug)]
pub struct PoolBudget {
    pub(super) max: usize,
    /// Containers the pools hold (ready or starting).
    held: AtomicUsize,
    /// Pools whose target is above zero.
    pub(super) in_use: AtomicUsize,
}

impl PoolBudget {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            held: AtomicUsize::new(0),
            in_use: AtomicUsize::new(0),
        })
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Containers the pools hold now (ready or starting).
    pub fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// Takes up to `n` from the budget; returns how many it got.
    pub(super) fn grant(&self, n: usize) -> usize {
        let mut granted = 0;
        let _ = self
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                granted = n.min(self.max.saturating_sub(held));
                Some(held + granted)
            });
        granted
    }

    pub(super) fn release(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::SeqCst);
    }
}
