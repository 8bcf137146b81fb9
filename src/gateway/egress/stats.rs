//! A tenant's egress counters, read by the metrics endpoint: requests by entry and decision,
//! bytes by entry and direction. Labelled by the `egress` key (`none` when no entry matched),
//! never by host, so the label set stays as small as the upstreams file under `*`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::record::{HttpDecision, HttpRecord};

/// The label of requests no entry matched.
pub const NO_ENTRY: &str = "none";

#[derive(Debug, Default)]
pub struct EgressStats {
    requests: Mutex<BTreeMap<(String, HttpDecision), u64>>,
    /// (entry, "in" | "out") → bytes.
    bytes: Mutex<BTreeMap<(String, &'static str), u64>>,
}

impl EgressStats {
    pub fn count(&self, record: &HttpRecord) {
        let entry = record.entry.clone().unwrap_or_else(|| NO_ENTRY.into());
        let decision = match record.decision.as_str() {
            "sent" => HttpDecision::Sent,
            "failed" => HttpDecision::Failed,
            _ => HttpDecision::Refused,
        };
        *(self.requests.lock().expect("never poisoned"))
            .entry((entry.clone(), decision))
            .or_default() += 1;
        let mut bytes = self.bytes.lock().expect("never poisoned");
        *bytes.entry((entry.clone(), "in")).or_default() += record.bytes_in;
        *bytes.entry((entry, "out")).or_default() += record.bytes_out;
    }

    /// Requests so far: (entry, decision, count).
    pub fn requests(&self) -> Vec<(String, HttpDecision, u64)> {
        let requests = self.requests.lock().expect("never poisoned");
        (requests.iter())
            .map(|((entry, decision), n)| (entry.clone(), *decision, *n))
            .collect()
    }

    /// Bytes so far: (entry, "in" | "out", bytes).
    pub fn bytes(&self) -> Vec<(String, &'static str, u64)> {
        let bytes = self.bytes.lock().expect("never poisoned");
        (bytes.iter())
            .map(|((entry, direction), n)| (entry.clone(), *direction, *n))
            .collect()
    }
}
