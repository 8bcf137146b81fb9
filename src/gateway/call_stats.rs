//! Upstream tool calls of one tenant, for `get_execution_stats`: per upstream, the calls made,
//! how many failed, and latency percentiles over the most recent ones (a bounded window, as
//! the execution statistics keep).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::sandbox::stats::{LATENCY_WINDOW, percentile};

#[derive(Debug, Default)]
pub struct CallStats {
    by_server: Mutex<BTreeMap<String, ServerCalls>>,
}

#[derive(Debug, Default)]
struct ServerCalls {
    calls: u64,
    failed: u64,
    latencies_ms: VecDeque<f64>,
}

/// One upstream's calls, shaped for the stats tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UpstreamCallStats {
    pub calls: u64,
    pub failed: u64,
    pub latency_ms_p50: Option<f64>,
    pub latency_ms_p99: Option<f64>,
}

impl CallStats {
    /// Counts a call to `server` (a configured upstream's name: the map stays bounded).
    pub fn record(&self, server: &str, ok: bool, elapsed: Duration) {
        let mut map = self.by_server.lock().expect("stats lock");
        let s = map.entry(server.to_string()).or_default();
        s.calls += 1;
        if !ok {
            s.failed += 1;
        }
        if s.latencies_ms.len() == LATENCY_WINDOW {
            s.latencies_ms.pop_front();
        }
        s.latencies_ms.push_back(elapsed.as_secs_f64() * 1000.0);
    }

    pub fn snapshot(&self) -> BTreeMap<String, UpstreamCallStats> {
        let map = self.by_server.lock().expect("stats lock");
        map.iter()
            .map(|(name, s)| {
                let mut sorted: Vec<f64> = s.latencies_ms.iter().copied().collect();
                sorted.sort_by(f64::total_cmp);
                (
                    name.clone(),
                    UpstreamCallStats {
                        calls: s.calls,
                        failed: s.failed,
                        latency_ms_p50: percentile(&sorted, 0.50),
                        latency_ms_p99: percentile(&sorted, 0.99),
                    },
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_percentiles_per_upstream() {
        let s = CallStats::default();
        for ms in 1..=100 {
            s.record("a", ms != 100, Duration::from_millis(ms));
        }
        s.record("b", true, Duration::from_millis(5));
        let snap = s.snapshot();
        assert_eq!(snap["a"].calls, 100);
        assert_eq!(snap["a"].failed, 1);
        assert!((49.0..=51.0).contains(&snap["a"].latency_ms_p50.unwrap()));
        assert_eq!(snap["b"].calls, 1);
    }
}
