//! Whose an MCP session is: a session begun with an OAuth access token is continued only with
//! a token of the same user (issuer and subject), so that another user of the same tenant who
//! learns its `Mcp-Session-Id` cannot use it; one begun with a static token, only with a
//! static token of its tenant. A session id this record does not hold is answered 404 (MCP's
//! "initialize again"): the record keeps the [`MAX_SESSIONS`] newest sessions of a tenant.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::transport::authentication::Caller;

/// Most sessions a tenant's record keeps; the oldest is forgotten for a new one.
pub const MAX_SESSIONS: usize = 10_000;

/// Who may continue a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// A server without tenants: its one client (loopback only).
    Anyone,
    /// A static bearer token's holder.
    Token,
    /// The user an issuer names.
    User { issuer: String, subject: String },
}

impl Owner {
    pub fn of(caller: &Caller) -> Self {
        match &caller.identity {
            Some(identity) => Owner::User {
                issuer: identity.issuer.clone(),
                subject: identity.subject.clone(),
            },
            None => Owner::Token,
        }
    }
}

/// One tenant's sessions and their owners.
#[derive(Default)]
pub struct SessionOwners {
    inner: Mutex<Record>,
}

#[derive(Default)]
struct Record {
    owners: HashMap<String, Owner>,
    order: VecDeque<String>,
}

impl SessionOwners {
    /// Whether `owner` may continue `session`.
    pub fn may_continue(&self, session: &str, owner: &Owner) -> bool {
        if *owner == Owner::Anyone {
            return true;
        }
        let record = self
            .inner
            .lock()
            .expect("the owners record is never poisoned");
        record.owners.get(session) == Some(owner)
    }

    /// `owner` began `session`.
    pub fn record(&self, session: &str, owner: Owner) {
        if owner == Owner::Anyone {
            return;
        }
        let mut record = self
            .inner
            .lock()
            .expect("the owners record is never poisoned");
        if record.owners.len() >= MAX_SESSIONS
            && let Some(oldest) = record.order.pop_front()
        {
            record.owners.remove(&oldest);
        }
        if record.owners.insert(session.to_string(), owner).is_none() {
            record.order.push_back(session.to_string());
        }
    }

    /// `session` ended.
    pub fn forget(&self, session: &str) {
        let mut record = self
            .inner
            .lock()
            .expect("the owners record is never poisoned");
        if record.owners.remove(session).is_some() {
            record.order.retain(|s| s != session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(subject: &str) -> Owner {
        Owner::User {
            issuer: "https://idp".into(),
            subject: subject.into(),
        }
    }

    #[test]
    fn a_session_is_continued_by_its_owner_only() {
        let owners = SessionOwners::default();
        owners.record("s1", user("alice"));
        owners.record("s2", Owner::Token);
        assert!(owners.may_continue("s1", &user("alice")));
        assert!(!owners.may_continue("s1", &user("amy")));
        assert!(!owners.may_continue("s1", &Owner::Token));
        assert!(owners.may_continue("s2", &Owner::Token));
        assert!(!owners.may_continue("s2", &user("alice")));
        assert!(!owners.may_continue("unknown", &user("alice")));
        owners.forget("s1");
        assert!(!owners.may_continue("s1", &user("alice")));
        assert!(owners.may_continue("anything", &Owner::Anyone));
    }

    #[test]
    fn the_record_is_bounded() {
        let owners = SessionOwners::default();
        for i in 0..=MAX_SESSIONS {
            owners.record(&format!("s{i}"), Owner::Token);
        }
        assert!(!owners.may_continue("s0", &Owner::Token));
        assert!(owners.may_continue("s1", &Owner::Token));
        assert!(owners.may_continue(&format!("s{MAX_SESSIONS}"), &Owner::Token));
    }
}
