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
//!
//! The pool also keeps ahead of the calls by their observed pace ([`pace`]): an execution that
//! leaves fewer containers ready or on their way than the calls of one start's time would use
//! raises the target before the pool is empty; a replacement imports the tenant's usual modules
//! only when the containers ahead of it last until it is ready ([`Pool::reserve`]), and only a
//! share of the pool carries them ([`preload`]). An execution takes the container that fits the
//! imports its code names. What the pool gives up when it cannot keep up, and in which order,
//! is in [`account`].

pub mod account;
mod budget;
pub mod pace;
pub mod preload;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, oneshot};

use crate::sandbox::run::Started;
use account::{Account, Degrade, KeepingUp};
pub use budget::PoolBudget;
use pace::Pace;

/// How long after an execution found the pool empty containers prepared for sessions give way.
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
    /// Of those, the ones that import modules ahead.
    pending_preloaded: AtomicUsize,
    /// No container has landed since the pool was made or fell idle to nothing: a wait now
    /// is the pool filling, not falling behind.
    filling: AtomicBool,
    /// Pooled starts that failed since the last one that succeeded.
    failures: AtomicU32,
    /// Signalled (one stored permit) when a pooled start fails.
    failed: Notify,
    /// How fast executions ask and containers get ready.
    pace: Pace,
    /// What the pool gave up when it could not keep up.
    account: Account,
}

/// A container waiting for a job, and the modules it imported ahead.
pub(crate) struct Waiting {
    pub(crate) started: Started,
    pub(crate) preload: Vec<String>,
}

/// A container the pool handed out: what it imported ahead, and whether the execution
/// waited for it to land (none was ready when it asked).
pub(crate) struct Handed {
    pub(crate) waiting: Waiting,
    pub(crate) waited: bool,
}

impl Waiting {
    /// How well it fits a job: one that imported a module the job names fits best, a plain
    /// one next (its start cost least), one that imported modules the job does not name last.
    fn fit(&self, wants: &Wants) -> Option<u8> {
        let tops = || (self.preload.iter()).map(|m| m.split('.').next().unwrap_or(m));
        match wants {
            Wants::Plain if self.preload.is_empty() => Some(1),
            Wants::Plain => None,
            Wants::Imports(names) if tops().any(|t| names.iter().any(|n| n == t)) => Some(2),
            Wants::Imports(_) if self.preload.is_empty() => Some(1),
            Wants::Imports(_) => Some(0),
        }
    }
}

/// What an execution wants of a pooled container.
#[derive(Debug, Clone)]
pub enum Wants {
    /// Any; best one that imported these top-level modules ahead (its code names them).
    Imports(Vec<String>),
    /// Only one that imported nothing ahead (its package set replaces the image's modules).
    Plain,
}

/// What the replacements should import ahead: `modules`, in `keep` of the pool's containers.
#[derive(Debug, Clone, Default)]
pub struct Wanted {
    pub modules: Vec<String>,
    pub keep: usize,
}

struct Slots {
    /// Containers waiting for a job, oldest first.
    ready: VecDeque<Waiting>,
    /// Executions waiting for a replacement, oldest first. A waiter that gave up has dropped
    /// its receiver; its sender is skipped.
    waiters: VecDeque<oneshot::Sender<Waiting>>,
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
    /// Ready containers that imported the tenant's usual modules ahead.
    pub preloaded_ready: usize,
    /// Executions that asked the pool per second over the last 10 seconds.
    pub asks_per_second: f64,
    /// Whether the pool keeps up, and what it gave up when it did not.
    pub keeping_up: KeepingUp,
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
            pending_preloaded: AtomicUsize::new(0),
            filling: AtomicBool::new(true),
            failures: AtomicU32::new(0),
            failed: Notify::new(),
            pace: Pace::default(),
            account: Account::default(),
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

    /// The ready container that fits `wants` best, if there is one (the newest of equals).
    /// Containers that ended while they waited are dropped (and so removed).
    pub(crate) fn take(&self, wants: &Wants) -> Option<Started> {
        Some(self.take_from(&mut self.slots(), wants)?.started)
    }

    fn take_from(&self, slots: &mut Slots, wants: &Wants) -> Option<Waiting> {
        let before = slots.ready.len();
        slots.ready.retain_mut(|w| w.started.is_waiting());
        self.budget.release(before - slots.ready.len());
        let best = (slots.ready.iter().enumerate())
            .filter_map(|(i, w)| Some((w.fit(wants)?, i)))
            .max()?;
        self.budget.release(1);
        slots.ready.remove(best.1)
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
    /// or left fewer containers ready (`left`) or on their way than the calls of one start's
    /// time would use. A miss also puts the pool under pressure.
    fn used(&self, missed: bool, left: usize) {
        self.pace.asked();
        let ahead = left + self.pending.load(Ordering::SeqCst);
        let empty = missed || left == 0 || !self.pace.keeps_up(false, ahead);
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

    /// Whether executions have outpaced the pool lately ([`PRESSURE_WINDOW`]).
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
            self.filling.store(true, Ordering::SeqCst);
        }
        let dropped: Vec<Waiting> = {
            let ready = &mut self.slots().ready;
            // Plain ones go first, the oldest first: an import paid for is kept.
            let drop = ready.len().saturating_sub(self.idle_floor);
            ready
                .make_contiguous()
                .sort_by_key(|w| !w.preload.is_empty());
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
            preloaded_ready: (self.slots().ready.iter())
                .filter(|w| !w.preload.is_empty())
                .count(),
            asks_per_second: self.pace.asks_per_second(),
            keeping_up: self.account.snapshot(),
        }
    }

    /// A ready container, or, when none is ready but a replacement is on its way that no
    /// other execution waits for, that replacement once it lands (at most `limit` from now).
    /// A replacement started earlier is closer to ready than a container started now, and a
    /// cold start beside running replacements only makes them all slower on a busy engine.
    /// Waiters are served in the order they came; an execution that wants a plain container
    /// does not wait (a replacement may import modules ahead). `None`: start one (cold).
    /// The container comes with what it imported ahead and whether the execution waited.
    pub(crate) async fn take_or_wait(&self, limit: Duration, wants: &Wants) -> Option<Handed> {
        let filling = self.filling.load(Ordering::SeqCst);
        let mut waiting = {
            let mut slots = self.slots();
            // Those who came first are served first: no taking past them.
            let taken = match slots.waiting() {
                0 => self.take_from(&mut slots, wants),
                _ => None,
            };
            self.used(taken.is_none(), slots.ready.len());
            if let Some(waiting) = taken {
                return Some(Handed {
                    waiting,
                    waited: false,
                });
            }
            if matches!(wants, Wants::Plain)
                || slots.waiting() >= self.pending.load(Ordering::SeqCst)
            {
                self.account.note(Degrade::ColdStart);
                return None;
            }
            let (handed, waiting) = oneshot::channel();
            slots.waiters.push_back(handed);
            waiting
        };
        let handed = match tokio::time::timeout(limit, &mut waiting).await {
            Ok(handed) => handed.ok(),
            // Given up; a container handed over at this very moment is still taken.
            Err(_) => {
                waiting.close();
                waiting.try_recv().ok()
            }
        };
        match handed {
            Some(_) if filling => self.account.note_filling_wait(),
            Some(_) => self.account.note(Degrade::Waited),
            None => self.account.note(Degrade::ColdStart),
        }
        Some(Handed {
            waiting: handed?,
            waited: true,
        })
    }

    /// Reserves the replacements to start now (release each with [`Pool::put`] or
    /// [`Pool::failed`]) and says, for each, the modules it imports ahead: `wanted`'s, while
    /// fewer than `wanted.keep` ready or starting containers carry them and the containers
    /// ready now last (at the observed pace) until a preloaded one is ready; else none. Those
    /// still starting do not count: in a burst they compete with the preload for the same CPU,
    /// and an import nobody asked for is what makes every start slower. Nor is anything
    /// preloaded while executions wait or start cold (the pool is behind). A preload skipped
    /// for the pace is counted.
    pub(crate) fn reserve(&self, wanted: &Wanted) -> Vec<Vec<String>> {
        let (ready, preloaded_ready) = {
            let slots = self.slots();
            let preloaded = slots.ready.iter().filter(|w| !w.preload.is_empty()).count();
            (slots.ready.len(), preloaded)
        };
        let ahead = ready + self.pending.load(Ordering::SeqCst);
        let missing = self.target().saturating_sub(ahead);
        let granted = self.budget.grant(missing);
        self.pending.fetch_add(granted, Ordering::SeqCst);
        let mut carrying = preloaded_ready + self.pending_preloaded.load(Ordering::SeqCst);
        let keeps_up = self.pace.keeps_up(true, ready) && !self.account.behind();
        (0..granted)
            .map(|_| {
                if wanted.modules.is_empty() || carrying >= wanted.keep {
                    return Vec::new();
                }
                if !keeps_up {
                    self.account.note(Degrade::PreloadSkipped);
                    return Vec::new();
                }
                carrying += 1;
                self.pending_preloaded.fetch_add(1, Ordering::SeqCst);
                wanted.modules.clone()
            })
            .collect()
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

    /// Adds a started container made from `image` that imported `preload` ahead and took
    /// `took` to get ready; one made from an image the pool has since left is dropped instead.
    pub(crate) fn put(&self, started: Started, image: &str, preload: Vec<String>, took: Duration) {
        self.pace.started(!preload.is_empty(), took);
        self.settle_pending(&preload);
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
        let mut waiting = Waiting { started, preload };
        // The execution that has waited longest takes it, whatever it imported.
        while let Some(waiter) = slots.waiters.pop_front() {
            match waiter.send(waiting) {
                Ok(()) => {
                    self.budget.release(1);
                    self.filling.store(false, Ordering::SeqCst);
                    return;
                }
                // That waiter gave up meanwhile: the next one.
                Err(back) => waiting = back,
            }
        }
        // Above the target (it shrank while this one started): dropped, and so removed.
        if slots.ready.len() < self.target() {
            slots.ready.push_back(waiting);
            // Filled no more once one is served or kept (not when one is dropped: a pool
            // shrunk to nothing is still to fill when it wakes).
            self.filling.store(false, Ordering::SeqCst);
        } else {
            self.budget.release(1);
        }
    }

    /// A reserved start that gave no container (it failed, or shutdown began); `preload` is
    /// what it was to import ahead.
    pub(crate) fn failed(&self, preload: &[String]) {
        self.settle_pending(preload);
        let mut slots = self.slots();
        self.budget.release(1);
        self.failures.fetch_add(1, Ordering::SeqCst);
        self.pending.fetch_sub(1, Ordering::SeqCst);
        self.release_waiters(&mut slots);
        drop(slots);
        self.failed.notify_one();
    }

    /// Notes that a reserved start with `preload` is no longer on its way.
    fn settle_pending(&self, preload: &[String]) {
        if !preload.is_empty() {
            self.pending_preloaded.fetch_sub(1, Ordering::SeqCst);
        }
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
        let drained: Vec<Waiting> = self.slots().ready.drain(..).collect();
        self.budget.release(drained.len());
        drained.len()
    }
}
