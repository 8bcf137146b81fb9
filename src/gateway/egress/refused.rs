//! Why a request is refused, for the 403 body the proxy answers with.
//!
//! Why worded this way: the body is read by a model that wrote the code, or by the user behind
//! it. It says what was refused, which rule refused it and what in the upstreams file's
//! `egress` object would allow it, so the next attempt can be a change of configuration
//! (made by the user) rather than a workaround in code. A message never carries a header
//! value: headers are the entry's secrets.

/// Why a request is refused, for a 403 body: which rule, and what in the `egress` object to
/// change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    /// The rule that refused: `host` (no entry), `port`, `scheme` (plain HTTP), `method`,
    /// `path`, `policy`, `private` (an address the entry did not opt into), `always` (an
    /// address never reached), `name` (not a host name at all).
    pub rule: &'static str,
    /// The `egress` key of the entry that refused, when one did.
    pub key: Option<String>,
    pub message: String,
}

impl Refused {
    pub(super) fn new(rule: &'static str, key: Option<&str>, message: String) -> Self {
        Refused {
            rule,
            key: key.map(str::to_owned),
            message,
        }
    }

    /// No entry covers `host`.
    pub fn no_entry(host: &impl std::fmt::Display) -> Self {
        Refused::new(
            "host",
            None,
            format!(
                "egress: no entry for {host}: add \"{host}\" (or \"*\") to \"egress\" in the upstreams file"
            ),
        )
    }

    /// `input` is not a host name or address at all (`why`, a few words). The input is cut:
    /// it comes from the sandbox and may be long.
    pub(super) fn name(input: &str, why: &str) -> Self {
        let shown = crate::text::cut_chars(input, 80);
        Refused::new(
            "name",
            None,
            format!("egress: {shown:?} is not a host the server can check: {why}"),
        )
    }
}
