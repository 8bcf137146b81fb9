//! Where a value entered: the origin the vault keeps beside each value, so a flow rule can say
//! which upstreams and hosts may receive it restored (`gateway/flow.rs`).
//!
//! Why the vault holds it: a token is all the model and the sandbox code pass around, and the
//! gateway decides at the moment it would restore one; the vault is the one place that saw the
//! value enter. A value seen from several origins keeps them all (at most [`MAX_ORIGINS`]), and
//! a rule that allows any of them allows the value: a value the user typed is the user's to
//! send, whichever upstream also returned it. One exception: [`Origin::Sandbox`] (a value first
//! seen in what the code printed) is kept only for a value the vault did not know, so code
//! cannot give an upstream's value a second, looser origin by printing it.
//!
//! A vault from before origins were kept (its records carry none) restores its values with no
//! origin: a rule allows them only with `*` or `unknown`.

use std::fmt;
use std::sync::Arc;

/// Most origins kept for one value; later ones are not added.
pub const MAX_ORIGINS: usize = 8;
/// Longest origin label stored (an upstream's `server/tool`, cut on a character boundary).
pub const MAX_LABEL_BYTES: usize = 255;

/// Where a value entered the server.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub enum Origin {
    /// The user's own words: `sanitize_pii`'s text, `execute_code`'s code and `context_vars`.
    User,
    /// The server's own storage, as its tools answer: workspace files and resources, skills.
    Workspace,
    /// What sandbox code printed or returned, or tokenized itself.
    Sandbox,
    /// A result of an upstream's tool.
    Upstream { server: Arc<str>, tool: Arc<str> },
    /// A response that came through guarded egress under one `egress` entry: its name in flow
    /// rules, `http:KEY`.
    Http(Arc<str>),
}

impl Origin {
    pub fn upstream(server: &str, tool: &str) -> Self {
        Origin::Upstream {
            server: server.into(),
            tool: tool.into(),
        }
    }

    /// The origin of responses under the `egress` entry `key`: `http:KEY`.
    pub fn http(key: &str) -> Self {
        let name = format!("http:{key}");
        Origin::Http(crate::text::prefix(&name, MAX_LABEL_BYTES).into())
    }

    /// The name a flow rule's `restore_from` uses for it: `user`, `workspace`, `sandbox`, the
    /// upstream's server name, or `http:KEY`.
    pub fn source(&self) -> &str {
        match self {
            Origin::User => "user",
            Origin::Workspace => "workspace",
            Origin::Sandbox => "sandbox",
            Origin::Upstream { server, .. } => server,
            Origin::Http(name) => name,
        }
    }

    /// Whether it is one of the server's own origins (the user, its storage, the sandbox),
    /// rather than an upstream or a host whose values a flow rule may withhold.
    pub fn is_own(&self) -> bool {
        matches!(self, Origin::User | Origin::Workspace | Origin::Sandbox)
    }

    /// How it is stored in the vault file: the names above, `upstream:SERVER/TOOL` for an
    /// upstream (at most [`MAX_LABEL_BYTES`]).
    pub fn label(&self) -> String {
        match self {
            Origin::Upstream { server, tool } => {
                let label = format!("upstream:{server}/{tool}");
                crate::text::prefix(&label, MAX_LABEL_BYTES).to_owned()
            }
            other => other.source().to_owned(),
        }
    }

    /// The origin a stored label names (`None`: not a label this server writes).
    pub fn from_label(label: &str) -> Option<Self> {
        match label {
            "user" => Some(Origin::User),
            "workspace" => Some(Origin::Workspace),
            "sandbox" => Some(Origin::Sandbox),
            _ if label.len() > "http:".len() && label.starts_with("http:") => {
                Some(Origin::Http(label.into()))
            }
            _ => {
                let (server, tool) = label.strip_prefix("upstream:")?.split_once('/')?;
                (!server.is_empty()).then(|| Origin::upstream(server, tool))
            }
        }
    }
}

impl fmt::Display for Origin {
    /// As people read it: `user`, `workspace`, `sandbox`, `crm/list_customers`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Upstream { server, tool } => write!(f, "{server}/{tool}"),
            other => f.write_str(other.source()),
        }
    }
}

/// `origins` as people read them: `crm/rows, user`, or `unknown origin` when empty.
pub fn describe(origins: &[Origin]) -> String {
    if origins.is_empty() {
        return "unknown origin".into();
    }
    let names: Vec<String> = origins.iter().map(Origin::to_string).collect();
    names.join(", ")
}

/// Adds `origin` to `origins` (kept sorted, without duplicates, at most [`MAX_ORIGINS`]);
/// whether it was new.
pub(crate) fn add(origins: &mut Vec<Origin>, origin: &Origin) -> bool {
    match origins.binary_search(origin) {
        Ok(_) => false,
        Err(_) if origins.len() >= MAX_ORIGINS => false,
        Err(at) => {
            origins.insert(at, origin.clone());
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip_and_name_the_source() {
        for o in [
            Origin::User,
            Origin::Workspace,
            Origin::Sandbox,
            Origin::upstream("crm", "list/customers"),
            Origin::http("api.github.com"),
            Origin::http("*"),
        ] {
            assert_eq!(Origin::from_label(&o.label()), Some(o.clone()), "{o}");
        }
        assert_eq!(Origin::upstream("crm", "rows").source(), "crm");
        assert_eq!(Origin::upstream("crm", "rows").to_string(), "crm/rows");
        assert_eq!(Origin::http("*.example.org").source(), "http:*.example.org");
        assert!(Origin::User.is_own() && !Origin::http("a").is_own());
        for bad in ["", "upstream:", "upstream:/x", "crm", "USER", "http:"] {
            assert_eq!(Origin::from_label(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn origins_are_a_bounded_sorted_set() {
        let mut all = Vec::new();
        assert!(add(&mut all, &Origin::Sandbox));
        assert!(add(&mut all, &Origin::User));
        assert!(!add(&mut all, &Origin::User));
        assert_eq!(all, [Origin::User, Origin::Sandbox]);
        for i in 0..20 {
            add(&mut all, &Origin::upstream("s", &format!("t{i}")));
        }
        assert_eq!(all.len(), MAX_ORIGINS);
        assert_eq!(describe(&[]), "unknown origin");
        assert_eq!(describe(&all[..2]), "user, sandbox");
    }
}
