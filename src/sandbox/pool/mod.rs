//! A pool of pre-started, single-use containers. Each is created with exactly the cold path's
//! hardened spec, started, and left with its harness blocked on reading its job, so an
//! execution skips the container start and the interpreter start. Taking one triggers a
//! replacement in the background; no container ever runs two jobs, so isolation stays one
//! fresh container per execution.
//!
//! An execution that finds the pool empty while replacements are on their way waits for one
//! that no other execution waits for, rather than start its own: the replacement is closer to
//! ready, and on a small machine a cold start beside running replacements slows them all down
//! (calls in quick succession had a worse tail than the cold path without this). Waiters are
//! served oldest first: a landing replacement is handed to the execution that has waited
//! longest, and an execution that arrives while others wait queues behind them. (When every
//! waiter was woken to race for it, with newcomers taking from the pool directly, one waiter
//! could lose every race until its start limit ran out while executions around it succeeded.)
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
//!
//! The pool breathes. `--pool-size` is its base; an execution that finds it empty, or empties
//! it, raises its target by one, up to its share of the server-wide budget ([`PoolBudget`],
//! `--pool-max` containers waiting or starting across every tenant: a share is the budget
//! divided among the pools in use, never below the base). After `--pool-idle-secs` without an
//! execution the target falls back to the base (to nothing for an HTTP tenant: an idle tenant
//! gives its containers back) and the containers above it are removed.

pub mod preload;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, oneshot};

use crate::sandbox::run::Started;

/// The server-wide budget of pooled containers (waiting or starting), shared by every tenant's
/// pool: `--pool-max`.
#[derive(Debug)]
pub struct PoolBudget {
    max: usize,
    /// Containers the pools hold (ready or starting).
    held: AtomicUsize,
    /// Pools whose target is above zero.
    in_use: AtomicUsize,
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
    fn grant(&self, n: usize) -> usize {
        let mut granted = 0;
        let _ = self
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                granted = n.min(self.max.saturating_sub(held));
                Some(held + granted)
            });
        granted
    }

    fn release(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::SeqCst);
    }
}

/// How long after an execution found the pool empty its replacements skip `--preload`.
pub const PRESSURE_WINDOW: Duration = Duration::from_secs(10);

/// Successful starts remembered for the refill rate.
const RATE_WINDOW: Duration = Duration::from_secs(10);

pub struct Pool {
    /// `--pool-size`: the target while the pool is in use.
    base: usize,
    /// The target when idle: the base, or 0 for an HTTP tenant.
    idle_floor: usize,
    /// How many containers the pool aims to hold now.
    target: AtomicUsize,
    budget: Arc<PoolBudget>,
    /// When an execution last asked the pool (or the pool was created).
    last_use: Mutex<tokio::time::Instant>,
    /// When an execution last found the pool empty.
    last_miss: Mutex<Option<tokio::time::Instant>>,
    /// Starts that landed in the pool: the total, and the recent ones for the rate.
    started_total: AtomicU64,
    started_recent: Mutex<VecDeque<Instant>>,
    memory_bytes: i64,
    /// Ready containers and the executions waiting for one, under one lock: a container is
    /// only ever in `ready` while no execution waits.
    slots: Mutex<Slots>,
    /// The image id pooled containers are made from.
    image: Mutex<String>,
    /// Replacements being created right now.
    pending: AtomicUsize,
    /// Pooled starts that failed since the last one that succeeded.
    failures: AtomicU32,
    /// Signalled (one stored permit) when a pooled start fails.
    failed: Notify,
}

struct Slots {
    /// Containers waiting for a job, oldest first.
    ready: VecDeque<Started>,
    /// Executions waiting for a replacement, oldest first. A waiter that gave up has dropped
    /// its receiver; its sender is skipped.
    waiters: VecDeque<oneshot::Sender<Started>>,
}

impl Slots {
    /// Waiters still waiting.
    fn waiting(&mut self) -> usize {
        self.waiters.retain(|w| !w.is_closed());
        self.waiters.len()
    }
}

/// Longest delay between retries of failed pooled starts.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// Delay before retrying after `failures` consecutive failed pooled starts: 1 s, doubling,
/// at most [`MAX_RETRY_DELAY`].
pub fn retry_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    Duration::from_secs(1u64 << doublings).min(MAX_RETRY_DELAY)
}

/// The pool's state for `get_execution_stats`.
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
pub struct PoolSnapshot {
    /// Containers waiting for an execution.
    pub ready: usize,
    /// Containers being started for the pool.
    pub starting: usize,
    /// How many the pool aims to hold now (grows under bursts, falls back when idle).
    pub target: usize,
    /// The target in use (`--pool-size`).
    pub base: usize,
    /// The most this pool may grow to: its share of `--pool-max`.
    pub share: usize,
    /// Containers every pool of the server holds, and the server's budget (`--pool-max`).
    pub server_held: usize,
    pub server_max: usize,
    /// Pooled containers started per second over the last 10 seconds.
    pub refill_per_second: f64,
    /// Pooled containers started since the server started.
    pub started_total: u64,
}

impl Pool {
    /// A pool of `base` containers (`idle_floor` when idle), growing within `budget`.
    pub fn new(
        base: usize,
        idle_floor: usize,
        budget: Arc<PoolBudget>,
        memory_bytes: i64,
        image: String,
    ) -> Self {
        if base > 0 {
            budget.in_use.fetch_add(1, Ordering::SeqCst);
        }
        Self {
            base,
            idle_floor: idle_floor.min(base),
            target: AtomicUsize::new(base),
            budget,
            last_use: Mutex::new(tokio::time::Instant::now()),
            last_miss: Mutex::new(None),
            started_total: AtomicU64::new(0),
            started_recent: Mutex::new(VecDeque::new()),
            memory_bytes,
            image: Mutex::new(image),
            slots: Mutex::new(Slots {
                ready: VecDeque::with_capacity(base),
                waiters: VecDeque::new(),
            }),
            pending: AtomicUsize::new(0),
            failures: AtomicU32::new(0),
            failed: Notify::new(),
        }
    }

    pub fn memory_bytes(&self) -> i64 {
        self.memory_bytes
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().expect("pool lock")
    }

    /// Containers waiting for a job.
    pub fn ready(&self) -> usize {
        self.slots().ready.len()
    }

    /// A ready container, if there is one: the newest, which carries the current preload (the
    /// learned one; older containers may have started under pressure, without it). Containers
    /// that ended while they waited are dropped (and so removed).
    pub(crate) fn take(&self) -> Option<Started> {
        self.take_from(&mut self.slots())
    }

    fn take_from(&self, slots: &mut Slots) -> Option<Started> {
        while let Some(mut started) = slots.ready.pop_back() {
            self.budget.release(1);
            if started.is_waiting() {
                return Some(started);
            }
        }
        None
    }

    /// The most this pool may grow to: the budget shared among the pools in use, never below
    /// the base (the budget still bounds what is actually started).
    pub fn share(&self) -> usize {
        let in_use = self.budget.in_use.load(Ordering::SeqCst).max(1);
        (self.budget.max / in_use).max(self.base)
    }

    pub fn target(&self) -> usize {
        self.target.load(Ordering::SeqCst)
    }

    /// Notes an execution asking for a container: the pool is in use again (back to its base
    /// if it had fallen below), and grows by one when the execution `missed` (found it empty)
    /// or left it `empty`. A miss also puts the pool under pressure.
    fn used(&self, missed: bool, empty: bool) {
        let empty = missed || empty;
        *self.last_use.lock().expect("pool lock") = tokio::time::Instant::now();
        if self.base == 0 {
            return;
        }
        if missed {
            *self.last_miss.lock().expect("pool lock") = Some(tokio::time::Instant::now());
        }
        let share = self.share();
        let _ = self
            .target
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                let grown = if empty && t < share { t + 1 } else { t };
                Some(grown.max(self.base))
            })
            .map(|before| {
                if before == 0 && self.base > 0 {
                    self.budget.in_use.fetch_add(1, Ordering::SeqCst);
                }
            });
    }

    /// Whether executions have outpaced the pool lately ([`PRESSURE_WINDOW`]): replacements
    /// started then skip `--preload`, so they are ready for a job as soon as their interpreter
    /// is (a preload of numpy and pandas is about a second of CPU, which under a burst is the
    /// ceiling itself, spent on containers whose job rarely needs it).
    pub(crate) fn under_pressure(&self) -> bool {
        self.last_miss
            .lock()
            .expect("pool lock")
            .is_some_and(|t| t.elapsed() < PRESSURE_WINDOW)
    }

    /// Whether the pressure lasts: a miss lately, and the pool not yet back to its target.
    /// Containers prepared for sessions wait this out, and no longer.
    pub(crate) fn pressing(&self) -> bool {
        self.under_pressure() && self.ready() < self.target()
    }

    /// After `idle` without an execution, lowers the target to the idle floor and drops the
    /// containers above it. Returns how many it dropped.
    pub(crate) fn shrink_if_idle(&self, idle: Duration) -> usize {
        if self.last_use.lock().expect("pool lock").elapsed() < idle {
            return 0;
        }
        let before = self.target.swap(self.idle_floor, Ordering::SeqCst);
        if before > 0 && self.idle_floor == 0 {
            self.budget.in_use.fetch_sub(1, Ordering::SeqCst);
        }
        let dropped: Vec<Started> = {
            let ready = &mut self.slots().ready;
            // The oldest go: the newest carry the current preload.
            let drop = ready.len().saturating_sub(self.idle_floor);
            ready.drain(..drop).collect()
        };
        self.budget.release(dropped.len());
        dropped.len()
    }

    /// When the pool would next shrink if no execution comes.
    pub(crate) fn idle_deadline(&self, idle: Duration) -> tokio::time::Instant {
        *self.last_use.lock().expect("pool lock") + idle
    }

    pub fn snapshot(&self) -> PoolSnapshot {
        let recent = {
            let mut recent = self.started_recent.lock().expect("pool lock");
            while recent.front().is_some_and(|t| t.elapsed() > RATE_WINDOW) {
                recent.pop_front();
            }
            recent.len()
        };
        PoolSnapshot {
            ready: self.ready(),
            starting: self.pending.load(Ordering::SeqCst),
            target: self.target(),
            base: self.base,
            share: self.share(),
            server_held: self.budget.held(),
            server_max: self.budget.max,
            refill_per_second: recent as f64 / RATE_WINDOW.as_secs_f64(),
            started_total: self.started_total.load(Ordering::SeqCst),
        }
    }

    /// A ready container, or, when none is ready but a replacement is on its way that no
    /// other execution waits for, that replacement once it lands (at most `limit` from now).
    /// A replacement started earlier is closer to ready than a container started now, and a
    /// cold start beside running replacements only makes them all slower on a busy engine.
    /// Waiters are served in the order they came. `None`: start one (cold).
    pub(crate) async fn take_or_wait(&self, limit: Duration) -> Option<Started> {
        let mut waiting = {
            let mut slots = self.slots();
            // Those who came first are served first: no taking past them.
            let taken = match slots.waiting() {
                0 => self.take_from(&mut slots),
                _ => None,
            };
            self.used(taken.is_none(), slots.ready.is_empty());
            if taken.is_some() {
                return taken;
            }
            if slots.waiting() >= self.pending.load(Ordering::SeqCst) {
                return None;
            }
            let (handed, waiting) = oneshot::channel();
            slots.waiters.push_back(handed);
            waiting
        };
        match tokio::time::timeout(limit, &mut waiting).await {
            Ok(handed) => handed.ok(),
            // Given up; a container handed over at this very moment is still taken.
            Err(_) => {
                waiting.close();
                waiting.try_recv().ok()
            }
        }
    }

    /// How many replacements to start now, reserving them (release each with
    /// [`Pool::put`] or [`Pool::failed`]).
    pub(crate) fn reserve(&self) -> usize {
        let have = self.ready() + self.pending.load(Ordering::SeqCst);
        let missing = self.target().saturating_sub(have);
        let granted = self.budget.grant(missing);
        self.pending.fetch_add(granted, Ordering::SeqCst);
        granted
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
        self.started_total.fetch_add(1, Ordering::SeqCst);
        self.started_recent
            .lock()
            .expect("pool lock")
            .push_back(Instant::now());
        let current = *self.image.lock().expect("pool lock") == image;
        let mut slots = self.slots();
        self.failures.store(0, Ordering::SeqCst);
        self.pending.fetch_sub(1, Ordering::SeqCst);
        if !current {
            // Made from an image the pool has left: dropped, and so removed.
            self.budget.release(1);
            self.release_waiters(&mut slots);
            return;
        }
        let mut started = started;
        // The execution that has waited longest takes it.
        while let Some(waiter) = slots.waiters.pop_front() {
            match waiter.send(started) {
                Ok(()) => {
                    self.budget.release(1);
                    return;
                }
                // That waiter gave up meanwhile: the next one.
                Err(back) => started = back,
            }
        }
        // Above the target (it shrank while this one started): dropped, and so removed.
        if slots.ready.len() < self.target() {
            slots.ready.push_back(started);
        } else {
            self.budget.release(1);
        }
    }

    pub(crate) fn failed(&self) {
        let mut slots = self.slots();
        self.budget.release(1);
        self.failures.fetch_add(1, Ordering::SeqCst);
        self.pending.fetch_sub(1, Ordering::SeqCst);
        self.release_waiters(&mut slots);
        drop(slots);
        self.failed.notify_one();
    }

    /// Sends the waiters no pending replacement will serve off to start their own (the
    /// newest: the oldest keep their place).
    fn release_waiters(&self, slots: &mut Slots) {
        let pending = self.pending.load(Ordering::SeqCst);
        while slots.waiting() > pending {
            slots.waiters.pop_back();
        }
    }

    /// Waits until a pooled start has failed (one that failed since the last call counts), and
    /// returns how many have failed in a row.
    pub(crate) async fn next_failure(&self) -> u32 {
        self.failed.notified().await;
        self.failures.load(Ordering::SeqCst)
    }

    /// Empties the pool; the dropped containers are removed by their guards.
    pub(crate) fn drain(&self) -> usize {
        let drained: Vec<Started> = self.slots().ready.drain(..).collect();
        self.budget.release(drained.len());
        drained.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_counts_what_is_missing_once() {
        let pool = Pool::new(3, 3, PoolBudget::new(3), 100, "sha256:a".into());
        assert_eq!(pool.reserve(), 3);
        assert_eq!(pool.reserve(), 0, "pending replacements count");
        pool.failed();
        assert_eq!(pool.reserve(), 1);
        assert!(pool.take().is_none());
    }

    #[test]
    fn an_empty_pool_is_a_cold_path() {
        let pool = Pool::new(0, 0, PoolBudget::new(0), 100, "sha256:a".into());
        assert_eq!(pool.reserve(), 0);
        assert!(pool.take().is_none());
        assert_eq!(pool.drain(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn waits_only_for_replacements_no_one_else_waits_for() {
        let pool = std::sync::Arc::new(Pool::new(2, 2, PoolBudget::new(2), 100, "sha256:a".into()));
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
        assert_eq!(pool.slots().waiting(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_is_bounded() {
        let pool = Pool::new(1, 1, PoolBudget::new(1), 100, "sha256:a".into());
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
        let pool = Pool::new(2, 2, PoolBudget::new(2), 100, "sha256:a".into());
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
        let pool = Pool::new(1, 1, PoolBudget::new(1), 100, "sha256:a".into());
        assert!(!pool.retarget("sha256:a"));
        assert!(pool.retarget("sha256:b"));
        assert_eq!(pool.image(), "sha256:b");
        assert!(!pool.retarget("sha256:b"));
    }
}
