//! Upstream tool calls of one tenant, for `get_execution_stats` and the metrics endpoint: per
//! upstream, the calls made, how many failed, latency percentiles over the most recent ones (a
//! bounded window, as the execution statistics keep) and every latency in a histogram; per
//! tool and outcome, counts; per policy decision, counts; plans by what became of them.
//!
//! Series stay bounded: servers are the upstreams file's, a tool is named only when its
//! upstream lists it (code can call any name), and past [`MAX_TOOL_SERIES`] (server, tool)
//! pairs further tools count under [`OTHER_TOOL`].

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::call_record::{CallAudit, CallOutcome, PolicyDecision};
use super::plan::PlanStatus;
use crate::audit::AuditTokens;
use crate::sandbox::stats::histogram::{Histogram, HistogramSnapshot};
use crate::sandbox::stats::{LATENCY_WINDOW, percentile};

/// Distinct (server, tool) pairs counted by name per tenant.
pub const MAX_TOOL_SERIES: usize = 500;

/// The tool name of calls to a tool the upstream does not list, or past [`MAX_TOOL_SERIES`].
pub const OTHER_TOOL: &str = "(other)";

#[derive(Debug, Default)]
pub struct CallStats {
    by_server: Mutex<BTreeMap<String, ServerCalls>>,
    by_tool: Mutex<BTreeMap<(String, String, CallOutcome), u64>>,
    decisions: Mutex<BTreeMap<(String, PolicyDecision), u64>>,
    plans: Mutex<BTreeMap<PlanStatus, u64>>,
    /// Personal-data tokens not restored, by (upstream, type).
    withheld: Mutex<BTreeMap<(String, String), u64>>,
}

#[derive(Debug, Default)]
struct ServerCalls {
    calls: u64,
    failed: u64,
    latencies_ms: VecDeque<f64>,
    histogram: Histogram,
}

/// Calls by (server, tool, outcome) and policy decisions by (server, decision), as counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallCounts {
    pub by_tool: Vec<((String, String, CallOutcome), u64)>,
    pub decisions: Vec<((String, PolicyDecision), u64)>,
    /// Plans by status.
    pub plans: Vec<(PlanStatus, u64)>,
    /// Personal-data tokens not restored into a call (its rule withheld them, or the vault
    /// never issued them), by (upstream, type).
    pub withheld: Vec<((String, String), u64)>,
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
        s.histogram.observe(elapsed);
    }

    /// Counts a call to a configured upstream `server` by tool and outcome, and its policy
    /// decision.
    pub fn record_call(&self, server: &str, tool: &str, audit: &CallAudit) {
        {
            let mut by_tool = self.by_tool.lock().expect("stats lock");
            let named = audit.listed
                && (by_tool.len() < MAX_TOOL_SERIES * CallOutcome::ALL.len()
                    || by_tool.contains_key(&(
                        server.to_string(),
                        tool.to_string(),
                        audit.outcome,
                    )));
            let tool = if named { tool } else { OTHER_TOOL };
            *by_tool
                .entry((server.to_string(), tool.to_string(), audit.outcome))
                .or_default() += 1;
        }
        if let Some(decision) = audit.policy {
            *self
                .decisions
                .lock()
                .expect("stats lock")
                .entry((server.to_string(), decision))
                .or_default() += 1;
        }
    }

    /// Counts a plan by what became of it.
    pub fn record_plan(&self, status: PlanStatus) {
        *self
            .plans
            .lock()
            .expect("stats lock")
            .entry(status)
            .or_default() += 1;
    }

    /// Counts the tokens a call's flow rule did not restore, by type.
    pub fn record_tokens(&self, server: &str, tokens: &AuditTokens) {
        let mut withheld = self.withheld.lock().expect("stats lock");
        for c in tokens.withheld.iter().chain(&tokens.unknown) {
            *withheld
                .entry((server.to_string(), c.kind.clone()))
                .or_default() += c.count;
        }
    }

    /// The counts by tool and outcome, by policy decision, and plans by status.
    pub fn counts(&self) -> CallCounts {
        CallCounts {
            by_tool: (self.by_tool.lock().expect("stats lock").iter())
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            decisions: (self.decisions.lock().expect("stats lock").iter())
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            plans: (self.plans.lock().expect("stats lock").iter())
                .map(|(k, v)| (*k, *v))
                .collect(),
            withheld: (self.withheld.lock().expect("stats lock").iter())
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
        }
    }

    /// Every call's latency per upstream, bucketed.
    pub fn histograms(&self) -> Vec<(String, HistogramSnapshot)> {
        let map = self.by_server.lock().expect("stats lock");
        (map.iter())
            .map(|(name, s)| (name.clone(), s.histogram.snapshot()))
            .collect()
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
        assert_eq!(s.histograms()[0].1.count, 100);
    }

    #[test]
    fn unlisted_tools_and_tools_past_the_bound_count_as_other() {
        let s = CallStats::default();
        let listed = CallAudit {
            listed: true,
            policy: Some(PolicyDecision::Allow),
            ..CallAudit::default()
        };
        s.record_call("a", "made-up", &CallAudit::default());
        for i in 0..MAX_TOOL_SERIES * CallOutcome::ALL.len() + 3 {
            s.record_call("a", &format!("t{i}"), &listed);
        }
        s.record_call("a", "t0", &listed); // a known series still counts under its name
        let counts = s.counts();
        let count = |tool: &str| {
            (counts.by_tool.iter())
                .find(|((_, t, _), _)| t == tool)
                .map(|(_, n)| *n)
        };
        assert_eq!(count("made-up"), None);
        assert_eq!(count("t0"), Some(2));
        assert_eq!(count(OTHER_TOOL), Some(1 + 4));
        assert!(counts.by_tool.len() <= MAX_TOOL_SERIES * CallOutcome::ALL.len() + 1);
        assert_eq!(
            counts.decisions,
            vec![(
                ("a".to_string(), PolicyDecision::Allow),
                (MAX_TOOL_SERIES * CallOutcome::ALL.len()) as u64 + 4
            )]
        );
    }
}
