//! Removal of used containers, off the executions' critical path.
//!
//! Removing a container is engine work (its writable layer deleted, its record dropped) that
//! competes with the next container's create and start on a small machine. A container whose
//! execution is over and whose processes have all ended (its output stream closed: the harness
//! exits after `done`, and with it the container's init and every process of its PID namespace)
//! holds no CPU, memory or file handle, and no code of it can run again, so its removal may
//! wait until the engine is idle: no execution running and no container starting, in any
//! tenant. The backlog is bounded (`--removal-backlog`): past the bound removals go on while
//! executions run, so a sustained load cannot pile containers up. Shutdown flushes the backlog;
//! after a crash, the next start's reaper removes what was left (every container carries its
//! server's labels).
//!
//! A container that may still run anything (its output never ended, a pooled container never
//! used, a start given up on) is never deferred: its guard removes it at once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::Notify;

use crate::sandbox::engine::backend::Backend;
use crate::sandbox::stats::{Phase, Stats};

/// Removals run at once by the deferred worker when it must catch up (past the bound, or
/// flushing at shutdown).
const MAX_IN_FLIGHT: usize = 4;

/// Removals run at once while the engine is merely idle: an execution or a pooled start that
/// arrives meanwhile competes with one removal, not four (a removal is tens of milliseconds
/// of the engine's work; the paced calls after a burst met the four in their tail).
const IDLE_IN_FLIGHT: usize = 1;

/// Delays (seconds) between attempts of a removal that failed; after the last, the container is
/// left to the next start's reaper.
const RETRY_DELAYS: [u64; 4] = [1, 2, 4, 8];

/// The server-wide backlog of stopped containers and the measure of engine activity that
/// decides when it is worked off. Shared by every tenant's sandbox.
pub struct Removals {
    inner: Arc<Inner>,
    worker: tokio::task::JoinHandle<()>,
}

struct Inner {
    backend: Arc<dyn Backend>,
    /// Most containers waiting for removal while the engine is busy (0: remove at once).
    bound: usize,
    queue: Mutex<VecDeque<Queued>>,
    /// Executions running and containers starting, server-wide.
    active: AtomicUsize,
    /// Removals the worker has under way.
    in_flight: AtomicUsize,
    /// Set by [`Removals::flush`]: remove everything now, busy or not.
    flushing: AtomicUsize,
    /// Wakes the worker (one stored permit).
    wake: Notify,
    /// Signalled whenever the worker finished a removal or found nothing to do.
    progressed: Notify,
}

struct Queued {
    name: String,
    stats: Arc<Stats>,
}

impl Removals {
    /// Starts the worker (on the current runtime). `bound` is `--removal-backlog`.
    pub fn new(backend: Arc<dyn Backend>, bound: usize) -> Arc<Self> {
        let inner = Arc::new(Inner {
            backend,
            bound,
            queue: Mutex::new(VecDeque::new()),
            active: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            flushing: AtomicUsize::new(0),
            wake: Notify::new(),
            progressed: Notify::new(),
        });
        let worker = tokio::spawn(inner.clone().work());
        Arc::new(Self { inner, worker })
    }

    /// Whether stopped containers may wait in the backlog (`--removal-backlog` above 0).
    pub fn defers(&self) -> bool {
        self.inner.bound > 0
    }

    /// Stopped containers waiting for removal.
    pub fn backlog(&self) -> usize {
        self.inner.queue.lock().expect("removal lock").len()
    }

    /// Marks the engine busy until the guard is dropped (an execution or a container start).
    pub fn busy(self: &Arc<Self>) -> Busy {
        self.inner.active.fetch_add(1, Ordering::SeqCst);
        Busy(self.inner.clone())
    }

    /// Queues a stopped container for removal when the engine is idle.
    pub(crate) fn defer(&self, name: String, stats: Arc<Stats>) {
        self.inner
            .queue
            .lock()
            .expect("removal lock")
            .push_back(Queued { name, stats });
        self.inner.wake.notify_one();
    }

    /// Removes every queued container now, busy or not, waiting until the backlog is empty or
    /// `deadline` (what is left then, the next start's reaper removes).
    pub async fn flush(&self, deadline: tokio::time::Instant) -> bool {
        self.inner.flushing.fetch_add(1, Ordering::SeqCst);
        let _done = Unflush(&self.inner.flushing);
        loop {
            let progressed = self.inner.progressed.notified();
            tokio::pin!(progressed);
            progressed.as_mut().enable();
            if self.backlog() == 0 && self.inner.in_flight.load(Ordering::SeqCst) == 0 {
                return true;
            }
            self.inner.wake.notify_one();
            if tokio::time::timeout_at(deadline, progressed).await.is_err() {
                return false;
            }
        }
    }
}

impl std::fmt::Debug for Removals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Removals")
            .field("bound", &self.inner.bound)
            .field("backlog", &self.backlog())
            .finish()
    }
}

impl Drop for Removals {
    fn drop(&mut self) {
        self.worker.abort();
    }
}

/// The engine counts as busy while one is alive (see [`Removals::busy`]).
pub struct Busy(Arc<Inner>);

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.wake.notify_one();
        }
    }
}

struct Unflush<'a>(&'a AtomicUsize);

impl Drop for Unflush<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Inner {
    /// Whether the worker may start another removal now, with `queued` waiting.
    fn may_remove(&self, queued: usize) -> bool {
        queued > 0
            && (queued > self.bound
                || self.active.load(Ordering::SeqCst) == 0
                || self.flushing.load(Ordering::SeqCst) > 0)
    }

    /// The next removal to start, with `running` under way.
    fn next(&self, running: usize) -> Option<Queued> {
        let mut queue = self.queue.lock().expect("removal lock");
        let catching_up = queue.len() > self.bound || self.flushing.load(Ordering::SeqCst) > 0;
        let limit = if catching_up {
            MAX_IN_FLIGHT
        } else {
            IDLE_IN_FLIGHT
        };
        if running < limit && self.may_remove(queue.len()) {
            queue.pop_front()
        } else {
            None
        }
    }

    async fn work(self: Arc<Self>) {
        let mut running = FuturesUnordered::new();
        loop {
            while let Some(Queued { name, stats }) = self.next(running.len()) {
                self.in_flight.fetch_add(1, Ordering::SeqCst);
                let backend = self.backend.clone();
                running.push(async move { remove(backend.as_ref(), &name, &stats).await });
            }
            self.progressed.notify_waiters();
            tokio::select! {
                Some(()) = running.next(), if !running.is_empty() => {
                    self.in_flight.fetch_sub(1, Ordering::SeqCst);
                }
                _ = self.wake.notified() => {}
            }
        }
    }
}

/// Force-removes `name`, retried (an engine restarting under us must not leave it), and
/// records the time of the call that succeeded.
pub(crate) async fn remove(backend: &dyn Backend, name: &str, stats: &Stats) {
    for delay in RETRY_DELAYS.into_iter().map(Some).chain([None]) {
        let t = Instant::now();
        match backend.remove(name).await {
            Ok(()) => {
                stats.phase(Phase::Remove, t.elapsed());
                return;
            }
            Err(e) if delay.is_none() => {
                tracing::warn!(container = %name, "could not remove sandbox container: {e}; the next start removes it");
            }
            Err(_) => tokio::time::sleep(Duration::from_secs(delay.unwrap_or(0))).await,
        }
    }
}

#[cfg(test)]
impl Removals {
    /// The worker's next pick with `running` removals under way, taken off the backlog.
    pub(crate) fn next_pick(&self, running: usize) -> Option<String> {
        self.inner.next(running).map(|q| q.name)
    }
}
