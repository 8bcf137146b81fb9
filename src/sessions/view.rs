//! What a session holds, read from its files alone (no container is started): the resource
//! `session://HANDLE` shows it, so a model sees a session's variables after a restart or a long
//! gap without running code to print them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::sessions::revisions::Parent;
use crate::sessions::{SessionError, SessionStore};

/// A session at a glance.
#[derive(Debug, Clone, Serialize)]
pub struct SessionView {
    pub session: String,
    /// The newest revision (0: none saved yet).
    pub revision: u64,
    pub created_unix: u64,
    pub used_unix: u64,
    /// The newest state's variables.
    pub variables: Vec<VariableView>,
    /// Names bound to modules, imported again by name.
    pub modules: BTreeMap<String, String>,
    /// The revisions held, oldest first: each can be named as `HANDLE@N`.
    pub revisions: Vec<RevisionView>,
    /// The package requirements the session keeps.
    pub packages: Vec<String>,
    /// Where revision 1 came from, for a fork (`HANDLE@N`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
    /// Why the last call's state was not saved, until a call's is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsaved: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct VariableView {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub len: Option<u64>,
    pub preview: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct RevisionView {
    pub revision: u64,
    pub created_unix: u64,
    pub bytes: u64,
    /// What the server received to save it: the variables its call changed (an unchanged one
    /// is named, not sent again).
    pub bytes_received: u64,
    pub variables: usize,
    /// The revision it was made from (a rewind's is an earlier one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
}

impl SessionStore {
    /// What session `handle` holds. An expired session is named so (and left for the sweep).
    pub fn view(&self, handle: &str) -> Result<SessionView, SessionError> {
        let meta = self.peek(handle)?;
        let held = self.revisions(handle);
        let newest = held.iter().find(|m| m.revision == meta.revision);
        let first = held.first().filter(|m| m.revision == 1);
        let forked_from =
            first
                .and_then(|m| m.parent.as_ref())
                .and_then(|Parent { session, revision }| {
                    session.as_ref().map(|s| format!("{s}@{revision}"))
                });
        Ok(SessionView {
            session: handle.to_string(),
            revision: meta.revision,
            created_unix: meta.created_unix,
            used_unix: meta.used_unix,
            variables: (newest.iter().flat_map(|m| &m.vars))
                .map(|v| VariableView {
                    name: v.name.clone(),
                    kind: v.kind.clone(),
                    bytes: v.bytes(),
                    shape: v.shape.clone(),
                    len: v.len,
                    preview: v.preview.clone(),
                })
                .collect(),
            modules: newest.map(|m| m.modules.clone()).unwrap_or_default(),
            revisions: (held.iter())
                .map(|m| RevisionView {
                    revision: m.revision,
                    created_unix: m.created_unix,
                    bytes: m.bytes(),
                    bytes_received: m.received,
                    variables: m.vars.len() + m.modules.len(),
                    parent: (m.parent.as_ref())
                        .filter(|p| p.session.is_none())
                        .map(|p| p.revision),
                })
                .collect(),
            packages: self.packages(handle),
            forked_from,
            unsaved: meta.unsaved,
        })
    }
}

/// The URI of a session's resource.
pub fn uri(handle: &str) -> String {
    format!("{SCHEME}{handle}")
}

/// The scheme of sessions' resources.
pub const SCHEME: &str = "session://";

/// The handle a session URI names (checked to be a handle's shape), if it is one.
pub fn handle_of(uri: &str) -> Option<&str> {
    let handle = uri.strip_prefix(SCHEME)?;
    crate::sessions::valid_handle(handle).then_some(handle)
}
