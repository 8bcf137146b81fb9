//! Executions paused on a question, between the `tools/call` that returned the question to a
//! 2026-07-28 client (`InputRequiredResult`) and the retry that carries the answer.
//!
//! The code is still running in its container, so a retry must resume that execution, never
//! run the code again; the `requestState` the client echoes names it. The client is untrusted,
//! so the state is sealed with a key of this process (HMAC-SHA256, rmcp's
//! `RequestStateCodec`) over the execution's id, the round, the tenant, and the digest of the
//! code and the session the call was made with, and it expires with the pause. Opening it
//! tells a forged state, one of another tenant or another call, an expired one and a replayed
//! one apart, each with its own words; none of them runs anything. A state of another server
//! process (another replica, or this one before a restart) cannot be told from a forged one:
//! its words name both.
//!
//! Each pause is one round: the entry leaves the table while a retry drives it, and comes back
//! with the next round's number when it asks again, so a state is good for one retry. A pause
//! that gets no retry within `--confirm-wait-secs` cancels its execution (the container is
//! removed; the execution ends as `cancelled`). The table is one tenant's and bounded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::model::{RequestStateCodec, RequestStateError, SealOptions};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tracing::Instrument;

use crate::app::execution::detached::{Detached, Question};

/// Executions one tenant may have paused at once.
pub const MAX_PAUSED: usize = 64;

/// What a request state says, sealed.
#[derive(Debug, Serialize, Deserialize)]
struct Sealed {
    /// The paused execution.
    id: String,
    round: u32,
    /// The tenant it belongs to ("" for the only one).
    tenant: String,
    /// SHA-256 of the call's code and session, so a state only resumes the call that made it.
    call: String,
}

/// Why a request state was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PausedError {
    #[error(
        "the requestState was not issued by this server, or was altered: nothing ran. A requestState works only on the server that paused the execution, until it restarts (behind a proxy, the retry must reach that same server). Call execute_code again without requestState"
    )]
    Forged,
    #[error(
        "the requestState belongs to another tenant: nothing ran. Call execute_code again without requestState"
    )]
    Foreign,
    #[error(
        "the requestState was issued for other code or another session: retry with the same arguments, or call execute_code again without requestState"
    )]
    OtherCall,
    #[error(
        "the requestState has expired: the paused execution waited {0} s for an answer and was cancelled (--confirm-wait-secs). Call execute_code again"
    )]
    Expired(u64),
    #[error(
        "the requestState was already answered (a retry is good once): nothing ran again. Use the requestState of the latest answer"
    )]
    Replayed,
    #[error(
        "the execution that requestState paused has ended (answered already, or cancelled): nothing ran. Call execute_code again"
    )]
    Ended,
    #[error(
        "{MAX_PAUSED} executions of this tenant already wait for answers: answer or abandon some first"
    )]
    TooMany,
}

/// One execution waiting for a retry, or being driven by one.
pub struct Parked {
    pub id: String,
    /// The round the last pause was (0 before the first).
    round: u32,
    pub detached: Detached,
    /// Questions asked and not yet answered, by the key the client sees them under.
    pub questions: Vec<(String, Question)>,
    /// Questions asked so far (the next key's number).
    asked: u32,
    call: String,
}

impl Parked {
    /// A fresh execution, before its first question.
    pub fn new(detached: Detached, code: &str, session: Option<&str>) -> Self {
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).expect("the system's random source works");
        Self {
            id: hex::encode(id),
            round: 0,
            detached,
            questions: Vec::new(),
            asked: 0,
            call: call_digest(code, session),
        }
    }

    /// Adds a question; its key is unique over the execution's life (a plan's names the
    /// plan, whose id is random).
    pub fn ask(&mut self, question: Question) {
        self.asked += 1;
        let key = (question.key.clone()).unwrap_or_else(|| format!("confirm-{}", self.asked));
        self.questions.push((key, question));
    }
}

/// SHA-256 over the code and the session argument.
fn call_digest(code: &str, session: Option<&str>) -> String {
    let mut h = Sha256::new();
    h.update((code.len() as u64).to_le_bytes());
    h.update(code.as_bytes());
    h.update(session.unwrap_or("").as_bytes());
    hex::encode(h.finalize())
}

/// The key request states are sealed with: random, once per process (a restart ends every
/// paused execution anyway).
fn codec() -> &'static RequestStateCodec {
    static CODEC: OnceLock<RequestStateCodec> = OnceLock::new();
    CODEC.get_or_init(|| {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the system's random source works");
        RequestStateCodec::try_new(key.to_vec()).expect("32 bytes is long enough")
    })
}

/// One tenant's paused executions.
pub struct PausedTable {
    tenant: String,
    wait: Duration,
    entries: Mutex<HashMap<String, Parked>>,
}

impl PausedTable {
    pub fn new(tenant: Option<&str>, wait: Duration) -> Arc<Self> {
        Arc::new(Self {
            tenant: tenant.unwrap_or("").to_string(),
            wait,
            entries: Mutex::new(HashMap::new()),
        })
    }

    /// How long a pause waits for its retry.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Paused executions now.
    pub fn len(&self) -> usize {
        self.entries.lock().expect("paused lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parks `parked` (with its unanswered questions) for the next round and returns the
    /// request state that resumes it. After the wait without a retry, the execution is
    /// cancelled. A full table cancels it at once.
    pub fn pause(self: &Arc<Self>, mut parked: Parked) -> Result<String, PausedError> {
        parked.round += 1;
        let sealed = Sealed {
            id: parked.id.clone(),
            round: parked.round,
            tenant: self.tenant.clone(),
            call: parked.call.clone(),
        };
        let state = codec()
            .seal_json_with(&sealed, &SealOptions::new().ttl(self.wait))
            .expect("a small struct serializes");
        {
            let mut entries = self.entries.lock().expect("paused lock");
            if entries.len() >= MAX_PAUSED {
                drop(entries);
                parked.detached.cancel.cancel();
                return Err(PausedError::TooMany);
            }
            entries.insert(parked.id.clone(), parked);
        }
        let (table, id, round) = (Arc::downgrade(self), sealed.id, sealed.round);
        let wait = self.wait;
        let expiry = async move {
            tokio::time::sleep(wait).await;
            if let Some(table) = table.upgrade() {
                table.expire(&id, round);
            }
        };
        tokio::spawn(expiry.in_current_span());
        Ok(state)
    }

    /// The execution `state` paused, taken out of the table for its retry to drive, if the
    /// state is genuine, this tenant's, for this call, fresh and not answered before.
    pub fn resume(
        &self,
        state: &str,
        code: &str,
        session: Option<&str>,
    ) -> Result<Parked, PausedError> {
        let sealed: Sealed = codec().open_json(state).map_err(|e| match e {
            RequestStateError::Expired => PausedError::Expired(self.wait.as_secs()),
            _ => PausedError::Forged,
        })?;
        if sealed.tenant != self.tenant {
            return Err(PausedError::Foreign);
        }
        if sealed.call != call_digest(code, session) {
            return Err(PausedError::OtherCall);
        }
        let mut entries = self.entries.lock().expect("paused lock");
        let Some(parked) = entries.get(&sealed.id) else {
            return Err(PausedError::Ended);
        };
        if parked.round != sealed.round {
            return Err(PausedError::Replayed);
        }
        Ok(entries.remove(&sealed.id).expect("present"))
    }

    /// Ends a pause nobody answered within the wait: its execution is cancelled.
    fn expire(&self, id: &str, round: u32) {
        let mut entries = self.entries.lock().expect("paused lock");
        if entries.get(id).is_some_and(|p| p.round == round) {
            let parked = entries.remove(id).expect("present");
            drop(entries);
            tracing::info!(
                "a paused execution got no answer within {} s: cancelled",
                self.wait.as_secs()
            );
            // Its questions go first, so an execution waiting on one sees it unanswered (a
            // plan: expired) before it sees the cancellation.
            let Parked {
                detached,
                questions,
                ..
            } = parked;
            drop(questions);
            detached.cancel.cancel();
        }
    }

    /// Cancels every paused execution (at shutdown).
    pub fn cancel_all(&self) {
        let parked: Vec<Parked> = self
            .entries
            .lock()
            .expect("paused lock")
            .drain()
            .map(|(_, p)| p)
            .collect();
        for p in parked {
            p.detached.cancel.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    fn parked(code: &str) -> (Parked, CancellationToken) {
        let (_events, received) = tokio::sync::mpsc::channel(1);
        let cancel = CancellationToken::new();
        let detached = Detached {
            events: received,
            cancel: cancel.clone(),
        };
        (Parked::new(detached, code, None), cancel)
    }

    #[tokio::test]
    async fn a_state_resumes_its_execution_once() {
        let table = PausedTable::new(Some("a"), Duration::from_secs(60));
        let (p, _) = parked("x = 1");
        let id = p.id.clone();
        let state = table.pause(p).unwrap();
        let again = table.resume(&state, "x = 1", None).unwrap();
        assert_eq!(again.id, id);
        // Taken out while its retry drives it: the same state again is refused.
        assert_eq!(
            table.resume(&state, "x = 1", None).err(),
            Some(PausedError::Ended)
        );
        // Paused again: the old state is a replay, the new one works.
        let newer = table.pause(again).unwrap();
        assert_eq!(
            table.resume(&state, "x = 1", None).err(),
            Some(PausedError::Replayed)
        );
        assert!(table.resume(&newer, "x = 1", None).is_ok());
    }

    #[tokio::test]
    async fn forged_foreign_and_other_calls_are_refused() {
        let table = PausedTable::new(Some("a"), Duration::from_secs(60));
        let other = PausedTable::new(Some("b"), Duration::from_secs(60));
        let (p, _) = parked("x = 1");
        let state = table.pause(p).unwrap();
        let mut altered = state.clone().into_bytes();
        let i = altered.len() / 2;
        altered[i] = if altered[i] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(altered).unwrap();
        for forged in ["", "rs2.x.y", "not a state", altered.as_str()] {
            assert_eq!(
                table.resume(forged, "x = 1", None).err(),
                Some(PausedError::Forged),
                "{forged}"
            );
        }
        assert_eq!(
            other.resume(&state, "x = 1", None).err(),
            Some(PausedError::Foreign)
        );
        assert_eq!(
            table.resume(&state, "x = 2", None).err(),
            Some(PausedError::OtherCall)
        );
        assert_eq!(
            table.resume(&state, "x = 1", Some("ses_1")).err(),
            Some(PausedError::OtherCall)
        );
        assert!(table.resume(&state, "x = 1", None).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_pause_cancels_its_execution() {
        let table = PausedTable::new(None, Duration::from_secs(5));
        let (p, cancel) = parked("x = 1");
        let _state = table.pause(p).unwrap();
        assert_eq!(table.len(), 1);
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert!(cancel.is_cancelled());
        assert!(table.is_empty());
    }

    #[tokio::test]
    async fn the_table_is_bounded() {
        let table = PausedTable::new(None, Duration::from_secs(60));
        for _ in 0..MAX_PAUSED {
            table.pause(parked("x").0).unwrap();
        }
        let (p, cancel) = parked("x");
        assert_eq!(table.pause(p).err(), Some(PausedError::TooMany));
        assert!(cancel.is_cancelled());
        table.cancel_all();
        assert!(table.is_empty());
    }
}
