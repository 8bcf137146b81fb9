//! What links did, for the metrics endpoint: transfers by kind and outcome, and bytes by
//! kind. Counters only, each an atomic; the outcomes are a fixed set, so a metric's label
//! values are bounded.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Kind;

/// How a use of a link ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The link was changed, expired or spent, or is of the other kind.
    BadLink,
    /// The body was past a limit (the link's, the workspace's, the hour's allowance).
    TooLarge,
    /// Another upload of the link, or too many of the tenant's, were in progress.
    Busy,
    /// The request was malformed (name, content type, form).
    BadRequest,
    /// The name exists and may not be replaced, or is a directory.
    Conflict,
    /// The client was too slow, went away, or the server failed.
    Failed,
}

impl Outcome {
    pub const ALL: [Outcome; 7] = [
        Outcome::Ok,
        Outcome::BadLink,
        Outcome::TooLarge,
        Outcome::Busy,
        Outcome::BadRequest,
        Outcome::Conflict,
        Outcome::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::BadLink => "bad_link",
            Outcome::TooLarge => "too_large",
            Outcome::Busy => "busy",
            Outcome::BadRequest => "bad_request",
            Outcome::Conflict => "conflict",
            Outcome::Failed => "failed",
        }
    }
}

/// One tenant's link counters on this server.
#[derive(Debug, Default)]
pub struct LinkStats {
    /// [upload, download] × outcome.
    transfers: [[AtomicU64; Outcome::ALL.len()]; 2],
    bytes: [AtomicU64; 2],
    /// Links made, [upload, download].
    issued: [AtomicU64; 2],
}

fn slot(kind: Kind) -> usize {
    match kind {
        Kind::Upload => 0,
        Kind::Download => 1,
    }
}

impl LinkStats {
    pub fn issued(&self, kind: Kind) {
        self.issued[slot(kind)].fetch_add(1, Ordering::Relaxed);
    }

    /// A use of a `kind` link ended with `outcome`, having moved `bytes`.
    pub fn ended(&self, kind: Kind, outcome: Outcome, bytes: u64) {
        let o = Outcome::ALL
            .iter()
            .position(|x| *x == outcome)
            .expect("listed");
        self.transfers[slot(kind)][o].fetch_add(1, Ordering::Relaxed);
        self.bytes[slot(kind)].fetch_add(bytes, Ordering::Relaxed);
    }

    /// (kind, outcome, count) of every use so far.
    pub fn transfers(&self) -> Vec<(Kind, Outcome, u64)> {
        let mut all = Vec::new();
        for kind in [Kind::Upload, Kind::Download] {
            for (i, outcome) in Outcome::ALL.iter().enumerate() {
                let n = self.transfers[slot(kind)][i].load(Ordering::Relaxed);
                all.push((kind, *outcome, n));
            }
        }
        all
    }

    /// (kind, bytes moved).
    pub fn bytes(&self) -> Vec<(Kind, u64)> {
        [Kind::Upload, Kind::Download]
            .map(|k| (k, self.bytes[slot(k)].load(Ordering::Relaxed)))
            .to_vec()
    }

    /// (kind, links made).
    pub fn issued_counts(&self) -> Vec<(Kind, u64)> {
        [Kind::Upload, Kind::Download]
            .map(|k| (k, self.issued[slot(k)].load(Ordering::Relaxed)))
            .to_vec()
    }
}
