//! Execution statistics for `get_execution_stats`: counts by status, latency percentiles over
//! the most recent executions, the number of sandbox containers alive right now, and where the
//! time goes: cumulative count and total of each [`Phase`] of a container's life. Totals (not
//! windows) so a reader takes two snapshots and divides the differences, which is how the
//! execution bench attributes time to each of its rows. Each phase's timings also go into a
//! [`Histogram`] for the metrics endpoint. Lock-light and bounded: the latency window keeps the
//! last [`LATENCY_WINDOW`] samples.

pub mod histogram;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::sandbox::Status;
use crate::sandbox::stats::histogram::{Histogram, HistogramSnapshot};

/// Latency samples kept for the percentiles.
pub const LATENCY_WINDOW: usize = 1024;

/// A timed step of a container's life or of a call, in the order they happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The engine's create call (cold starts and pool refills alike).
    Create,
    /// Attaching to the created container's streams.
    Attach,
    /// The engine's start call.
    Start,
    /// From a pooled or prepared container's start to its ready frame (its preload done).
    Ready,
    /// An execution asking the pool for a container: near 0 when one was ready, longer when it
    /// waited for one on its way (not timed when the pool is off).
    PoolWait,
    /// Sending a session's state to a container that did not have it loaded ahead.
    StateSent,
    /// Writing the job to the container's stdin.
    JobWritten,
    /// From the job written to the container's first output.
    FirstFrame,
    /// From the job written to the `done` frame (or whatever stopped the frame loop).
    Done,
    /// Killing the container and asking how it ended, when it did not end with `done`.
    KillWait,
    /// The engine's remove call (in the background, after the answer).
    Remove,
    /// `Sandbox::run`: from asking for a slot to the outcome.
    Run,
    /// The whole `execute_code` call inside the server: checks, workspace snapshot, the run,
    /// redaction and the response.
    Call,
}

impl Phase {
    pub const ALL: [Phase; 13] = [
        Phase::Create,
        Phase::Attach,
        Phase::Start,
        Phase::Ready,
        Phase::PoolWait,
        Phase::StateSent,
        Phase::JobWritten,
        Phase::FirstFrame,
        Phase::Done,
        Phase::KillWait,
        Phase::Remove,
        Phase::Run,
        Phase::Call,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Create => "create",
            Phase::Attach => "attach",
            Phase::Start => "start",
            Phase::Ready => "ready",
            Phase::PoolWait => "pool_wait",
            Phase::StateSent => "state_sent",
            Phase::JobWritten => "job_written",
            Phase::FirstFrame => "first_frame",
            Phase::Done => "done",
            Phase::KillWait => "kill_wait",
            Phase::Remove => "remove",
            Phase::Run => "run",
            Phase::Call => "call",
        }
    }
}

/// Cumulative count and total of one phase.
#[derive(Debug, Default)]
struct PhaseTotal {
    count: AtomicU64,
    total_us: AtomicU64,
}

/// One phase in a snapshot: how often it was timed and its total, since the server started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseSnapshot {
    pub count: u64,
    pub total_ms: f64,
}

#[derive(Debug)]
pub struct Stats {
    started: Instant,
    /// Every timing of each phase, bucketed (for the metrics endpoint).
    histograms: [Histogram; Phase::ALL.len()],
    by_status: Mutex<HashMap<Status, u64>>,
    engine_failures: AtomicU64,
    latencies_ms: Mutex<VecDeque<f64>>,
    containers_running: AtomicI64,
    pooled: AtomicU64,
    prepared: AtomicU64,
    /// Bytes of sessions' state received from containers (the blobs after `done`).
    state_received: AtomicU64,
    phases: [PhaseTotal; Phase::ALL.len()],
}

/// A point-in-time copy, shaped for the stats tool.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatsSnapshot {
    pub uptime_seconds: u64,
    pub executions_total: u64,
    /// Counts per status: ok, error, timeout, memory_limit, output_limit, cancelled.
    pub executions_by_status: HashMap<String, u64>,
    /// Executions that failed because the engine did (not counted by status).
    pub engine_failures: u64,
    pub latency_ms_p50: Option<f64>,
    pub latency_ms_p99: Option<f64>,
    pub latency_samples: usize,
    pub containers_running: i64,
    /// Pre-started containers waiting for an execution.
    pub pool_ready: usize,
    /// The pool: ready and starting containers, its target, base and share of the server's
    /// budget, and how fast it refills.
    pub pool: crate::sandbox::PoolSnapshot,
    /// Used containers (all their processes ended) waiting for an idle engine to be removed,
    /// server-wide.
    pub removal_backlog: usize,
    /// Executions served by a pre-started container (the rest started their own).
    pub executions_pooled: u64,
    /// Executions that ran in a container prepared for their session (state loaded ahead).
    pub executions_prepared: u64,
    /// Count and total time of each phase of a container's life since the server started
    /// (create, attach, start, pool_wait, job_written, first_frame, done, kill_wait, remove)
    /// and of the server's handling (run, call). The mean of a phase over a period is the
    /// difference of two snapshots' totals over that of their counts.
    pub phases: BTreeMap<String, PhaseSnapshot>,
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            histograms: Default::default(),
            by_status: Mutex::new(HashMap::new()),
            engine_failures: AtomicU64::new(0),
            latencies_ms: Mutex::new(VecDeque::with_capacity(LATENCY_WINDOW)),
            containers_running: AtomicI64::new(0),
            pooled: AtomicU64::new(0),
            prepared: AtomicU64::new(0),
            state_received: AtomicU64::new(0),
            phases: Default::default(),
        }
    }

    /// Adds one timing of `phase`.
    pub fn phase(&self, phase: Phase, took: Duration) {
        let total = &self.phases[phase as usize];
        total.count.fetch_add(1, Ordering::Relaxed);
        total
            .total_us
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        self.histograms[phase as usize].observe(took);
    }

    /// Every timing of `phase` so far, bucketed.
    pub fn histogram(&self, phase: Phase) -> HistogramSnapshot {
        self.histograms[phase as usize].snapshot()
    }

    /// Executions that failed because the engine did, since the server started.
    pub fn engine_failures(&self) -> u64 {
        self.engine_failures.load(Ordering::Relaxed)
    }

    /// Executions by status since the server started (every status, zeros included).
    pub fn by_status(&self) -> Vec<(Status, u64)> {
        let by_status = self.by_status.lock().unwrap();
        (Status::ALL.iter())
            .map(|s| (*s, by_status.get(s).copied().unwrap_or(0)))
            .collect()
    }

    pub fn record(&self, status: Status, elapsed: Duration) {
        *self.by_status.lock().unwrap().entry(status).or_default() += 1;
        let mut lat = self.latencies_ms.lock().unwrap();
        if lat.len() == LATENCY_WINDOW {
            lat.pop_front();
        }
        lat.push_back(elapsed.as_secs_f64() * 1000.0);
    }

    /// Counts an execution that took a pre-started container.
    pub fn record_prepared(&self) {
        self.prepared.fetch_add(1, Ordering::Relaxed);
    }

    pub fn record_pooled(&self) {
        self.pooled.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts bytes of a session's state that arrived from a container.
    pub fn record_state_received(&self, bytes: u64) {
        self.state_received.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Bytes of sessions' state received from containers since the server started: a
    /// variable that did not change adds nothing.
    pub fn state_bytes_received(&self) -> u64 {
        self.state_received.load(Ordering::Relaxed)
    }

    pub fn record_engine_failure(&self) {
        self.engine_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a running execution's container until the guard is dropped (also when the
    /// execution's future is dropped half-way).
    pub fn running_guard(&self) -> RunningGuard<'_> {
        self.containers_running.fetch_add(1, Ordering::Relaxed);
        RunningGuard(&self.containers_running)
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let by_status = self.by_status.lock().unwrap().clone();
        let mut sorted: Vec<f64> = self.latencies_ms.lock().unwrap().iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        StatsSnapshot {
            uptime_seconds: self.started.elapsed().as_secs(),
            executions_total: by_status.values().sum(),
            executions_by_status: Status::ALL
                .iter()
                .map(|s| {
                    (
                        s.as_str().to_string(),
                        by_status.get(s).copied().unwrap_or(0),
                    )
                })
                .collect(),
            engine_failures: self.engine_failures.load(Ordering::Relaxed),
            latency_ms_p50: percentile(&sorted, 0.50),
            latency_ms_p99: percentile(&sorted, 0.99),
            latency_samples: sorted.len(),
            containers_running: self.containers_running.load(Ordering::Relaxed),
            pool_ready: 0,
            pool: Default::default(),
            removal_backlog: 0,
            executions_pooled: self.pooled.load(Ordering::Relaxed),
            executions_prepared: self.prepared.load(Ordering::Relaxed),
            phases: Phase::ALL
                .iter()
                .map(|&p| {
                    let t = &self.phases[p as usize];
                    let snapshot = PhaseSnapshot {
                        count: t.count.load(Ordering::Relaxed),
                        total_ms: t.total_us.load(Ordering::Relaxed) as f64 / 1000.0,
                    };
                    (p.as_str().to_string(), snapshot)
                })
                .collect(),
        }
    }
}

pub struct RunningGuard<'a>(&'a AtomicI64);

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Nearest-rank percentile of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(50.0));
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn counts_by_status_and_bounds_the_window() {
        let s = Stats::new();
        for _ in 0..(LATENCY_WINDOW + 10) {
            s.record(Status::Ok, Duration::from_millis(5));
        }
        s.record(Status::Timeout, Duration::from_secs(1));
        let snap = s.snapshot();
        assert_eq!(snap.executions_total, LATENCY_WINDOW as u64 + 11);
        assert_eq!(snap.executions_by_status["timeout"], 1);
        assert_eq!(snap.executions_by_status["memory_limit"], 0);
        assert_eq!(snap.latency_samples, LATENCY_WINDOW);
        assert_eq!(snap.latency_ms_p50, Some(5.0));
    }

    #[test]
    fn phases_add_up_per_phase() {
        let s = Stats::new();
        s.phase(Phase::Create, Duration::from_millis(30));
        s.phase(Phase::Create, Duration::from_millis(10));
        s.phase(Phase::Remove, Duration::from_micros(1500));
        let snap = s.snapshot();
        assert_eq!(snap.phases.len(), Phase::ALL.len());
        assert_eq!(
            snap.phases["create"],
            PhaseSnapshot {
                count: 2,
                total_ms: 40.0
            }
        );
        assert_eq!(snap.phases["remove"].total_ms, 1.5);
        assert_eq!(snap.phases["done"].count, 0);
    }

    #[test]
    fn running_count_follows_guards() {
        let s = Stats::new();
        let a = s.running_guard();
        let b = s.running_guard();
        assert_eq!(s.snapshot().containers_running, 2);
        drop(a);
        drop(b);
        assert_eq!(s.snapshot().containers_running, 0);
    }
}
