//! A latency histogram with fixed buckets and atomic counts, for the server's metrics: every
//! timing is kept (a bucket count and a running sum), not sampled, so a scraper's rates and
//! quantile estimates cover every execution, while memory stays a few hundred bytes whatever
//! the traffic. The percentiles `get_execution_stats` reports come from a window of samples
//! instead (`stats::LATENCY_WINDOW`); both are fed by the same calls.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in seconds: from a pooled container's few milliseconds to an
/// execution's longest timeout. The last bucket (`+Inf`) is implicit.
pub const BUCKETS_SECONDS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations per bucket (not cumulative), the last one past every bound.
    counts: [AtomicU64; BUCKETS_SECONDS.len() + 1],
    sum_us: AtomicU64,
}

/// A point-in-time copy: cumulative counts per upper bound (as Prometheus wants them), the
/// count and the sum.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// `(upper bound in seconds, observations at or below it)`, the bounds of
    /// [`BUCKETS_SECONDS`] in order.
    pub cumulative: Vec<(f64, u64)>,
    pub count: u64,
    pub sum_seconds: f64,
}

impl Histogram {
    pub fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bucket = BUCKETS_SECONDS
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(BUCKETS_SECONDS.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_us
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut running = 0;
        let cumulative = BUCKETS_SECONDS
            .iter()
            .zip(&self.counts)
            .map(|(&bound, count)| {
                running += count.load(Ordering::Relaxed);
                (bound, running)
            })
            .collect();
        let count = running + self.counts[BUCKETS_SECONDS.len()].load(Ordering::Relaxed);
        HistogramSnapshot {
            cumulative,
            count,
            sum_seconds: self.sum_us.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_bounds_inclusive() {
        let h = Histogram::default();
        h.observe(Duration::from_millis(1)); // on the first bound
        h.observe(Duration::from_millis(7));
        h.observe(Duration::from_secs(400)); // past every bound
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.cumulative[0], (0.001, 1));
        assert_eq!(s.cumulative[2], (0.005, 1));
        assert_eq!(s.cumulative[3], (0.01, 2));
        assert_eq!(s.cumulative.last(), Some(&(300.0, 2)));
        assert!((s.sum_seconds - 400.008).abs() < 1e-9);
    }

    #[test]
    fn an_empty_histogram_has_zero_everywhere() {
        let s = Histogram::default().snapshot();
        assert_eq!(s.count, 0);
        assert_eq!(s.cumulative.len(), BUCKETS_SECONDS.len());
        assert!(s.cumulative.iter().all(|&(_, c)| c == 0));
    }
}
