//! Execution statistics for `get_execution_stats`: counts by status, latency percentiles over
//! the most recent executions, and the number of sandbox containers alive right now. Lock-light
//! and bounded: the latency window keeps the last [`LATENCY_WINDOW`] samples.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::Status;

/// Latency samples kept for the percentiles.
pub const LATENCY_WINDOW: usize = 1024;

#[derive(Debug)]
pub struct Stats {
    started: Instant,
    by_status: Mutex<HashMap<Status, u64>>,
    engine_failures: AtomicU64,
    latencies_ms: Mutex<VecDeque<f64>>,
    containers_running: AtomicI64,
    pooled: AtomicU64,
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
    /// Executions served by a pre-started container (the rest started their own).
    pub executions_pooled: u64,
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
            by_status: Mutex::new(HashMap::new()),
            engine_failures: AtomicU64::new(0),
            latencies_ms: Mutex::new(VecDeque::with_capacity(LATENCY_WINDOW)),
            containers_running: AtomicI64::new(0),
            pooled: AtomicU64::new(0),
        }
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
    pub fn record_pooled(&self) {
        self.pooled.fetch_add(1, Ordering::Relaxed);
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
            executions_pooled: self.pooled.load(Ordering::Relaxed),
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
