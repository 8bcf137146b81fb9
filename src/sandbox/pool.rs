//! A pool of pre-started, single-use containers. Each is created with exactly the cold path's
//! hardened spec, started, and left with its harness blocked on reading its job, so an
//! execution skips the container start and the interpreter start. Taking one triggers a
//! replacement in the background; no container ever runs two jobs, so isolation stays one
//! fresh container per execution.
//!
//! Pooled containers carry the default memory limit. A job asking for another limit takes the
//! cold path: changing a running container's limit through the engine's update API costs a
//! round trip comparable to what the pool saves, and would let one job's limit differ from the
//! spec the container was created with.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::execution::Started;

pub struct Pool {
    size: usize,
    memory_bytes: i64,
    ready: Mutex<VecDeque<Started>>,
    /// Replacements being created right now.
    pending: AtomicUsize,
}

impl Pool {
    pub fn new(size: usize, memory_bytes: i64) -> Self {
        Self {
            size,
            memory_bytes,
            ready: Mutex::new(VecDeque::with_capacity(size)),
            pending: AtomicUsize::new(0),
        }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn memory_bytes(&self) -> i64 {
        self.memory_bytes
    }

    /// Containers waiting for a job.
    pub fn ready(&self) -> usize {
        self.ready.lock().expect("pool lock").len()
    }

    /// A ready container for a job with this memory limit, if there is one. Containers that
    /// ended while they waited are dropped (and so removed).
    pub(crate) fn take(&self, memory_bytes: i64) -> Option<Started> {
        if memory_bytes != self.memory_bytes {
            return None;
        }
        let mut ready = self.ready.lock().expect("pool lock");
        while let Some(mut started) = ready.pop_front() {
            if started.is_waiting() {
                return Some(started);
            }
        }
        None
    }

    /// How many replacements to start now, reserving them (release each with
    /// [`Pool::put`] or [`Pool::failed`]).
    pub(crate) fn reserve(&self) -> usize {
        let have = self.ready() + self.pending.load(Ordering::SeqCst);
        let missing = self.size.saturating_sub(have);
        self.pending.fetch_add(missing, Ordering::SeqCst);
        missing
    }

    pub(crate) fn put(&self, started: Started) {
        self.ready.lock().expect("pool lock").push_back(started);
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }

    pub(crate) fn failed(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }

    /// Empties the pool; the dropped containers are removed by their guards.
    pub(crate) fn drain(&self) -> usize {
        let drained: Vec<Started> = self.ready.lock().expect("pool lock").drain(..).collect();
        drained.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_counts_what_is_missing_once() {
        let pool = Pool::new(3, 100);
        assert_eq!(pool.reserve(), 3);
        assert_eq!(pool.reserve(), 0, "pending replacements count");
        pool.failed();
        assert_eq!(pool.reserve(), 1);
        assert!(pool.take(100).is_none());
        assert!(pool.take(200).is_none(), "other limits take the cold path");
    }

    #[test]
    fn an_empty_pool_is_a_cold_path() {
        let pool = Pool::new(0, 100);
        assert_eq!(pool.reserve(), 0);
        assert!(pool.take(100).is_none());
        assert_eq!(pool.drain(), 0);
    }
}
