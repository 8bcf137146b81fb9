//! What an `egress` key covers: one host, the names under a domain, or any host.
//!
//! Why its own file: a key is read with the same parser as a request's host (`host.rs`), so
//! `API.example.org.`, `2130706433` and `[::1]` cover what they mean, and two keys that name
//! the same host are found when the rules are made.

use super::host::{self, Host};

/// What an `egress` key covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pattern {
    /// One name or address.
    Exact(Host),
    /// `*.domain`: every name under `.domain` (the suffix, with its leading dot), not the
    /// domain itself.
    Under(String),
    /// `*`: any host.
    Any,
}

impl Pattern {
    pub(super) fn parse(key: &str) -> Result<Pattern, String> {
        if key == "*" {
            return Ok(Pattern::Any);
        }
        let shape = "a key is a host name, an IP address, \"*.\" before a domain (\"*.example.org\") or \"*\" alone";
        if let Some(domain) = key.strip_prefix("*.") {
            return match host::parse(domain) {
                Ok(Host::Name(name)) => Ok(Pattern::Under(format!(".{name}"))),
                Ok(Host::Ip(_)) => Err(format!(
                    "a wildcard covers the names under a domain, not an address: {shape}"
                )),
                Err(why) => Err(format!("after \"*.\": {why}")),
            };
        }
        if key.contains('*') {
            return Err(format!(
                "\"*\" stands only alone or as the first label: {shape}"
            ));
        }
        host::parse(key)
            .map(Pattern::Exact)
            .map_err(|why| format!("{why}: {shape}"))
    }

    /// How specific a match is (higher wins), or `None` when the pattern does not cover `host`.
    pub(super) fn rank(&self, host: &Host) -> Option<usize> {
        match (self, host) {
            (Pattern::Exact(h), _) => (h == host).then_some(usize::MAX),
            (Pattern::Under(suffix), Host::Name(name)) => {
                name.ends_with(suffix.as_str()).then_some(suffix.len())
            }
            (Pattern::Under(_), Host::Ip(_)) => None,
            (Pattern::Any, _) => Some(0),
        }
    }
}
