//! What one request through the egress proxy was: as the execution's response lists it
//! (`http_requests`), and as the audit trail and the metrics keep it (one type, the audit's).
//! Never a header value, a body or a query string: the path alone, which the entry's `paths`
//! are written against.

use serde::Serialize;

/// How a request through the proxy ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HttpDecision {
    /// Sent, and answered by the host (whatever its status).
    Sent,
    /// Refused by the `egress` rules (no entry, port, method, path, address, policy, bounds).
    Refused,
    /// Sent, but the host could not be reached or did not answer in time.
    Failed,
}

impl HttpDecision {
    pub const ALL: [HttpDecision; 3] = [
        HttpDecision::Sent,
        HttpDecision::Refused,
        HttpDecision::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HttpDecision::Sent => "sent",
            HttpDecision::Refused => "refused",
            HttpDecision::Failed => "failed",
        }
    }
}

/// One request through the proxy: the audit trail's record of it, which the response lists
/// too.
pub use crate::audit::record::AuditHttp as HttpRecord;

/// The records of one execution: the first [`HttpLog::MAX`] in full, then a count.
#[derive(Debug, Default)]
pub struct HttpLog {
    records: Vec<HttpRecord>,
    dropped: u64,
}

impl HttpLog {
    /// Most records kept per execution (the count goes on).
    pub const MAX: usize = 200;

    pub fn push(&mut self, record: HttpRecord) {
        if self.records.len() < Self::MAX {
            self.records.push(record);
        } else {
            self.dropped += 1;
        }
    }

    pub fn records(&self) -> &[HttpRecord] {
        &self.records
    }

    /// Requests made beyond the kept records.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}
