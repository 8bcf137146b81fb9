//! One execution's way out: what its code may reach (its tenant's `egress` entries), how much
//! it has used of its bounds, who to ask for a `confirm` entry, and what it did.
//!
//! A grant is made for one execution and handed to the sandbox with its job: the container's
//! proxy socket exists only while that execution runs (`sandbox::run::egress`), and every
//! request on it is decided under this grant alone. Nothing in it outlives the execution but
//! what it recorded, which the execution's response, audit record and metrics read.

use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::connect::Connector;
use super::personal::EgressPii;
use super::record::{HttpLog, HttpRecord};
use super::rules::{EgressRules, Refused};
use super::stats::EgressStats;
use super::{Egress, EgressLimits};
use crate::gateway::confirm::Confirm;

/// What an execution has used of its bounds.
#[derive(Debug, Default, Clone, Copy)]
struct Used {
    requests: u32,
    bytes_in: u64,
    bytes_out: u64,
}

pub struct Grant {
    pub(super) egress: Arc<Egress>,
    /// How the server reaches hosts for this grant: the tenants' client, or the installer's.
    pub(super) connector: Arc<Connector>,
    limits: EgressLimits,
    pub(super) rules: EgressRules,
    pub(super) confirm: Option<Arc<dyn Confirm>>,
    /// The tenant's personal data (none with `--pii-output off`, and for the installer).
    pub(super) pii: Option<Arc<EgressPii>>,
    stats: Arc<EgressStats>,
    connections: Arc<Semaphore>,
    used: Mutex<Used>,
    log: Mutex<HttpLog>,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("entries", &self.rules.entries().len())
            .finish_non_exhaustive()
    }
}

impl Grant {
    /// A grant of `rules` (already the tenant's) under the server's egress and its bounds,
    /// its personal data under `pii`.
    pub fn new(
        egress: Arc<Egress>,
        rules: EgressRules,
        confirm: Option<Arc<dyn Confirm>>,
        stats: Arc<EgressStats>,
        pii: Option<Arc<EgressPii>>,
    ) -> Self {
        let (connector, limits) = (egress.connector.clone(), egress.limits);
        let mut grant = Self::with(egress, connector, limits, rules, confirm, stats);
        grant.pii = pii;
        grant
    }

    /// A grant that reaches hosts through `connector` within `limits` (the package
    /// installer's: its own roots and the operator's proxy).
    pub fn with(
        egress: Arc<Egress>,
        connector: Arc<Connector>,
        limits: EgressLimits,
        rules: EgressRules,
        confirm: Option<Arc<dyn Confirm>>,
        stats: Arc<EgressStats>,
    ) -> Self {
        let connections = Arc::new(Semaphore::new(limits.max_connections as usize));
        Self {
            egress,
            connector,
            limits,
            rules,
            confirm,
            pii: None,
            stats,
            connections,
            used: Mutex::default(),
            log: Mutex::default(),
        }
    }

    /// Whether some entry lets plain `http://` through.
    pub fn plain_http(&self) -> bool {
        self.rules.entries().iter().any(|e| e.http)
    }

    pub(super) fn limits(&self) -> &EgressLimits {
        &self.limits
    }

    /// A connection slot, or why there is none.
    pub(super) fn connection(&self) -> Result<OwnedSemaphorePermit, Refused> {
        self.connections.clone().try_acquire_owned().map_err(|_| Refused {
            rule: "bounds",
            key: None,
            message: format!(
                "egress: this execution already has {} connections open through the proxy (--egress-max-connections): close some (use one session object, or fewer threads)",
                self.limits().max_connections
            ),
        })
    }

    /// Counts one request against the execution's bound.
    pub(super) fn count_request(&self) -> Result<(), Refused> {
        let mut used = self.used.lock().expect("never poisoned");
        if used.requests >= self.limits().max_requests {
            return Err(Refused {
                rule: "bounds",
                key: None,
                message: format!(
                    "egress: this execution has made its {} requests (--egress-max-requests): fetch in fewer requests, or split the work over executions",
                    self.limits().max_requests
                ),
            });
        }
        used.requests += 1;
        Ok(())
    }

    /// Counts `n` bytes received from a host; false once the execution's bound is passed.
    pub(super) fn take_in(&self, n: u64) -> bool {
        let mut used = self.used.lock().expect("never poisoned");
        used.bytes_in += n;
        used.bytes_in <= self.limits().max_bytes_in
    }

    /// Counts `n` bytes sent to a host; false once the execution's bound is passed.
    pub(super) fn take_out(&self, n: u64) -> bool {
        let mut used = self.used.lock().expect("never poisoned");
        used.bytes_out += n;
        used.bytes_out <= self.limits().max_bytes_out
    }

    /// What is left of the execution's outgoing bytes.
    pub(super) fn out_left(&self) -> u64 {
        let used = self.used.lock().expect("never poisoned");
        self.limits().max_bytes_out.saturating_sub(used.bytes_out)
    }

    /// Notes a finished request: in the execution's log and the tenant's counters.
    pub(super) fn record(&self, record: HttpRecord) {
        self.stats.count(&record);
        self.log.lock().expect("never poisoned").push(record);
    }

    /// The last request that was refused or failed, if any.
    pub fn last_problem(&self) -> Option<HttpRecord> {
        let log = self.log.lock().expect("never poisoned");
        (log.records().iter())
            .rev()
            .find(|r| r.decision != super::record::HttpDecision::Sent.as_str())
            .cloned()
    }

    /// The requests made so far (the first [`HttpLog::MAX`]) and how many more there were.
    pub fn requests(&self) -> (Vec<HttpRecord>, u64) {
        let log = self.log.lock().expect("never poisoned");
        (log.records().to_vec(), log.dropped())
    }
}
