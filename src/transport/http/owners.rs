//! Whose an MCP session is: a session begun with an OAuth access token is continued only with
//! a token of the same user (issuer and subject), so that another user of the same tenant who
//! learns its `Mcp-Session-Id` cannot use it; one begun with a static token, only with a
//! static token of its tenant. A session id this record does not hold is answered 404 (MCP's
//! "initialize again"): the record keeps the [`MAX_SESSIONS`] newest sessions of a tenant, and
//! of one owner's the [`MAX_PER_OWNER`] newest, so that one user opening sessions in a loop
//! pushes out only their own.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::transport::authentication::Caller;

/// Most sessions a tenant's record keeps; the oldest is forgotten for a new one.
pub const MAX_SESSIONS: usize = 10_000;
/// Most sessions one owner keeps; their oldest is forgotten for a new one.
pub const MAX_PER_OWNER: usize = 1_000;

/// Who may continue a session.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    /// Sessions per owner.
    counts: HashMap<Owner, usize>,
}

impl Record {
    fn remove_at(&mut self, i: usize) {
        if let Some(gone) = self.order.remove(i) {
            self.remove_owner_of(&gone);
        }
    }

    fn remove_owner_of(&mut self, session: &str) -> bool {
        let Some(owner) = self.owners.remove(session) else {
            return false;
        };
        if let Some(n) = self.counts.get_mut(&owner) {
            *n -= 1;
            if *n == 0 {
                self.counts.remove(&owner);
            }
        }
        true
    }
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
        if record.owners.contains_key(session) {
            return;
        }
        if record.counts.get(&owner).copied().unwrap_or(0) >= MAX_PER_OWNER {
            let own = (record.order.iter()).position(|s| record.owners.get(s) == Some(&owner));
            own.into_iter().for_each(|i| record.remove_at(i));
        } else if record.owners.len() >= MAX_SESSIONS {
            record.remove_at(0);
        }
        *record.counts.entry(owner.clone()).or_default() += 1;
        record.owners.insert(session.to_string(), owner);
        record.order.push_back(session.to_string());
    }

    /// `session` ended.
    pub fn forget(&self, session: &str) {
        let mut record = self
            .inner
            .lock()
            .expect("the owners record is never poisoned");
        if record.remove_owner_of(session) {
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
    fn the_record_is_bounded_and_one_owner_pushes_out_only_their_own() {
        let owners = SessionOwners::default();
        owners.record("alice-1", user("alice"));
        for i in 0..=MAX_PER_OWNER {
            owners.record(&format!("m{i}"), user("mallory"));
        }
        assert!(owners.may_continue("alice-1", &user("alice")));
        assert!(!owners.may_continue("m0", &user("mallory")));
        assert!(owners.may_continue("m1", &user("mallory")));
        for i in 0..=MAX_SESSIONS {
            owners.record(&format!("u{i}"), user(&format!("user-{}", i % 20)));
        }
        assert!(
            !owners.may_continue("alice-1", &user("alice")),
            "the oldest of all goes"
        );
        assert!(owners.may_continue(&format!("u{MAX_SESSIONS}"), &user("user-0")));
    }
}
