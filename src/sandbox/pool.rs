//! A pool of pre-started, single-use containers. Each is created with exactly the cold path's
//! hardened spec, started, and left with its harness blocked on reading its job, so an
//! execution skips the container start and the interpreter start. Taking one triggers a
//! replacement in the background; no container ever runs two jobs, so isolation stays one
//! fresh container per execution.
//!
//! An execution that finds the pool empty while replacements are on their way waits for one
//! that no other execution waits for, rather than start its own: the replacement is closer to
//! ready, and on a small machine a cold start beside running replacements slows them all down
//! (calls in quick succession had a worse tail than the cold path without this).
//!
//! Pooled containers are made from an image id, not a tag: when the tag moves to another image
//! (a rebuild under the same name), [`Pool::retarget`] discards the waiting containers and the
//! replacements come from the new image.
//!
//! Pooled containers are created with the default memory limit. A job asking for another limit
//! still takes one, and the engine's update API sets its limit (memory and swap, as at
//! creation) before the job is sent: about 22 ms on the reference machine, against 250-470 ms
//! for a cold start. Should the update fail, the container is discarded and the job
//! runs cold.
//!
//! A pooled start that fails (the engine is down, restarting or stuck) is retried in the
//! background after [`retry_delay`], growing with each consecutive failure, so the pool fills
//! up again by itself once the engine is back.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use super::execution::Started;

pub struct Pool {
    size: usize,
    memory_bytes: i64,
    ready: Mutex<VecDeque<Started>>,
    /// The image id pooled containers are made from.
    image: Mutex<String>,
    /// Replacements being created right now.
    pending: AtomicUsize,
    /// Executions waiting for one of the pending replacements.
    waiting: AtomicUsize,
    /// Signalled whenever a replacement lands or fails.
    changed: Notify,
    /// Pooled starts that failed since the last one that succeeded.
    failures: AtomicU32,
    /// Signalled (one stored permit) when a pooled start fails.
    failed: Notify,
}

/// Longest delay between retries of failed pooled starts.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// Delay before retrying after `failures` consecutive failed pooled starts: 1 s, doubling,
/// at most [`MAX_RETRY_DELAY`].
pub fn retry_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    Duration::from_secs(1u64 << doublings).min(MAX_RETRY_DELAY)
}

impl Pool {
    pub fn new(size: usize, memory_bytes: i64, image: String) -> Self {
        Self {
            size,
            memory_bytes,
            image: Mutex::new(image),
            ready: Mutex::new(VecDeque::with_capacity(size)),
            pending: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            changed: Notify::new(),
            failures: AtomicU32::new(0),
            failed: Notify::new(),
        }
    }

    pub fn memory_bytes(&self) -> i64 {
        self.memory_bytes
    }

    /// Containers waiting for a job.
    pub fn ready(&self) -> usize {
        self.ready.lock().expect("pool lock").len()
    }

    /// A ready container, if there is one. Containers that ended while they waited are dropped
    /// (and so removed).
    pub(crate) fn take(&self) -> Option<Started> {
        let mut ready = self.ready.lock().expect("pool lock");
        while let Some(mut started) = ready.pop_front() {
            if started.is_waiting() {
                return Some(started);
            }
        }
        None
    }

    /// A ready container, or, when none is ready but a replacement is on its way that no
    /// other execution waits for, that replacement once it lands (at most `limit` from now).
    /// A replacement started earlier is closer to ready than a container started now, and a
    /// cold start beside running replacements only makes them all slower on a busy engine.
    /// `None`: start one (cold).
    pub(crate) async fn take_or_wait(&self, limit: Duration) -> Option<Started> {
        let until = tokio::time::Instant::now() + limit;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(ready) = self.take() {
                return Some(ready);
            }
            let waiting = self.waiting.fetch_add(1, Ordering::SeqCst);
            let _leave = Leave(&self.waiting);
            if waiting >= self.pending.load(Ordering::SeqCst) {
                return None;
            }
            if tokio::time::timeout_at(until, changed).await.is_err() {
                return None;
            }
        }
    }

    /// How many replacements to start now, reserving them (release each with
    /// [`Pool::put`] or [`Pool::failed`]).
    pub(crate) fn reserve(&self) -> usize {
        let have = self.ready() + self.pending.load(Ordering::SeqCst);
        let missing = self.size.saturating_sub(have);
        self.pending.fetch_add(missing, Ordering::SeqCst);
        missing
    }

    /// The image id new pooled containers are made from.
    pub fn image(&self) -> String {
        self.image.lock().expect("pool lock").clone()
    }

    /// Makes `image` the pool's image; when it changed, the waiting containers (made from the
    /// old one) are dropped and `true` is returned.
    pub(crate) fn retarget(&self, image: &str) -> bool {
        let mut current = self.image.lock().expect("pool lock");
        if *current == image {
            return false;
        }
        *current = image.to_string();
        drop(current);
        self.drain();
        true
    }

    /// Adds a started container made from `image`; one made from an image the pool has since
    /// left is dropped instead.
    pub(crate) fn put(&self, started: Started, image: &str) {
        if *self.image.lock().expect("pool lock") == image {
            self.ready.lock().expect("pool lock").push_back(started);
        }
        self.failures.store(0, Ordering::SeqCst);
        self.pending.fetch_sub(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    pub(crate) fn failed(&self) {
        self.failures.fetch_add(1, Ordering::SeqCst);
        self.pending.fetch_sub(1, Ordering::SeqCst);
        self.changed.notify_waiters();
        self.failed.notify_one();
    }

    /// Waits until a pooled start has failed (one that failed since the last call counts), and
    /// returns how many have failed in a row.
    pub(crate) async fn next_failure(&self) -> u32 {
        self.failed.notified().await;
        self.failures.load(Ordering::SeqCst)
    }

    /// Empties the pool; the dropped containers are removed by their guards.
    pub(crate) fn drain(&self) -> usize {
        let drained: Vec<Started> = self.ready.lock().expect("pool lock").drain(..).collect();
        drained.len()
    }
}

/// Decrements a counter when dropped.
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_counts_what_is_missing_once() {
        let pool = Pool::new(3, 100, "sha256:a".into());
        assert_eq!(pool.reserve(), 3);
        assert_eq!(pool.reserve(), 0, "pending replacements count");
        pool.failed();
        assert_eq!(pool.reserve(), 1);
        assert!(pool.take().is_none());
    }

    #[test]
    fn an_empty_pool_is_a_cold_path() {
        let pool = Pool::new(0, 100, "sha256:a".into());
        assert_eq!(pool.reserve(), 0);
        assert!(pool.take().is_none());
        assert_eq!(pool.drain(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn waits_only_for_replacements_no_one_else_waits_for() {
        let pool = std::sync::Arc::new(Pool::new(2, 100, "sha256:a".into()));
        let limit = Duration::from_secs(30);
        assert!(
            pool.take_or_wait(limit).await.is_none(),
            "nothing on its way"
        );
        assert_eq!(pool.reserve(), 2);
        // Two waiters for two pending replacements; a third goes cold at once.
        let (a, b) = (pool.clone(), pool.clone());
        let wa = tokio::spawn(async move { a.take_or_wait(limit).await.is_none() });
        let wb = tokio::spawn(async move { b.take_or_wait(limit).await.is_none() });
        tokio::task::yield_now().await;
        assert!(!wa.is_finished() && !wb.is_finished(), "both wait");
        assert!(pool.take_or_wait(limit).await.is_none());
        // Both replacements fail: the waiters give up and go cold.
        pool.failed();
        pool.failed();
        assert!(wa.await.unwrap() && wb.await.unwrap());
        assert_eq!(pool.waiting.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_is_bounded() {
        let pool = Pool::new(1, 100, "sha256:a".into());
        assert_eq!(pool.reserve(), 1);
        let started = tokio::time::Instant::now();
        assert!(pool.take_or_wait(Duration::from_secs(5)).await.is_none());
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }

    #[test]
    fn retries_back_off_to_a_bound() {
        let delays: Vec<u64> = (1..=7).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(retry_delay(0), Duration::from_secs(1));
        assert_eq!(retry_delay(u32::MAX), MAX_RETRY_DELAY);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_are_signalled_and_counted() {
        let pool = Pool::new(2, 100, "sha256:a".into());
        assert_eq!(pool.reserve(), 2);
        pool.failed();
        pool.failed();
        // Both failures are signalled by one stored permit; the count says how many.
        assert_eq!(pool.next_failure().await, 2);
        let waited = tokio::time::timeout(Duration::from_secs(5), pool.next_failure()).await;
        assert!(waited.is_err(), "no further failure to report");
        assert_eq!(pool.reserve(), 2);
        pool.failed();
        assert_eq!(pool.next_failure().await, 3);
    }

    #[test]
    fn retargeting_changes_the_image_once() {
        let pool = Pool::new(1, 100, "sha256:a".into());
        assert!(!pool.retarget("sha256:a"));
        assert!(pool.retarget("sha256:b"));
        assert_eq!(pool.image(), "sha256:b");
        assert!(!pool.retarget("sha256:b"));
    }
}
