//! Flow rules: which origins' personal data an upstream may receive restored.
//!
//! Why: tokens keep values out of the model's context, and the gateway restores them on the
//! way to an upstream, so code can move a customer's email from the CRM into the mail tool.
//! Without a rule every token is restored into every call, so code written under a prompt
//! injection could send the CRM's emails to a web search in clear. A rule in the upstreams file,
//! `"pii": {"restore_from": ["crm", "user"], "otherwise": "keep"}`, names the origins
//! (`pii::Origin`) whose values the upstream may receive; a token of any other origin is kept
//! as its token text, or refuses the call (`otherwise: refuse`).
//!
//! A rule beside `mcpServers` is the default of every entry without its own; without any, every
//! upstream receives every value (`*`), as before rules existed. Origins a rule may name:
//! a server of the file, an `egress` entry as `http:KEY`, `user`, `workspace`, `sandbox`,
//! `unknown` (values of a vault from before origins were kept, and values the vault holds
//! without one) and `*` (all).
//!
//! Rules only hold if the code never holds the values: once any rule withholds an upstream's
//! values from some other upstream, that upstream's results enter the sandbox tokenized
//! ([`FlowRules::tokenizes_results_of`]), so the code passes tokens the rules decide on.

use serde::Deserialize;

use crate::pii::Origin;

/// The origins a rule may name besides the file's servers.
pub const ORIGIN_NAMES: [&str; 5] = ["user", "workspace", "sandbox", "unknown", "*"];

/// What happens to a token whose origin a rule does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Otherwise {
    /// The upstream receives the token text.
    Keep,
    /// The call is not sent; the code gets an error naming the rule.
    Refuse,
}

impl Otherwise {
    pub fn as_str(self) -> &'static str {
        match self {
            Otherwise::Keep => "keep",
            Otherwise::Refuse => "refuse",
        }
    }
}

/// Where a rule was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleSource {
    /// In the upstream's entry.
    Entry,
    /// Beside `mcpServers`, the default of the entries without their own.
    FileDefault,
    /// No rule anywhere: every value is restored.
    BuiltIn,
}

/// One upstream's flow rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRule {
    pub restore_from: Vec<String>,
    pub otherwise: Otherwise,
    pub source: RuleSource,
}

impl Default for FlowRule {
    /// No rule: every value restored, as before rules existed.
    fn default() -> Self {
        FlowRule {
            restore_from: vec!["*".into()],
            otherwise: Otherwise::Keep,
            source: RuleSource::BuiltIn,
        }
    }
}

impl FlowRule {
    /// Whether a value of `origins` (empty: unknown) may be restored into this upstream's
    /// calls: one allowed origin is enough.
    pub fn allows(&self, origins: &[Origin]) -> bool {
        if origins.is_empty() {
            return self.names("unknown");
        }
        origins.iter().any(|o| self.names(o.source()))
    }

    fn names(&self, source: &str) -> bool {
        self.restore_from.iter().any(|n| n == "*" || n == source)
    }

    /// The rule as the upstreams file says it, for messages:
    /// `its pii rule (restore_from ["user"], otherwise "refuse")`.
    pub fn describe(&self) -> String {
        let list: Vec<String> = self.restore_from.iter().map(|n| format!("{n:?}")).collect();
        let place = match self.source {
            RuleSource::Entry => "its pii rule",
            RuleSource::FileDefault => "the upstreams file's default pii rule",
            RuleSource::BuiltIn => "the built-in pii rule",
        };
        format!(
            "{place} (restore_from [{}], otherwise {:?})",
            list.join(", "),
            self.otherwise.as_str()
        )
    }
}

/// The rule of each upstream, to tell which upstreams' results must enter the sandbox
/// tokenized.
#[derive(Debug, Clone, Default)]
pub struct FlowRules {
    rules: Vec<FlowRule>,
}

impl FlowRules {
    pub fn new(rules: impl IntoIterator<Item = FlowRule>) -> Self {
        FlowRules {
            rules: rules.into_iter().collect(),
        }
    }

    /// Whether `server`'s results enter the sandbox as tokens: some upstream's rule does not
    /// allow its values, so the code must not hold them in clear.
    pub fn tokenizes_results_of(&self, server: &str) -> bool {
        self.rules.iter().any(|r| !r.names(server))
    }

    /// Whether sandbox code may hold a value of `origins` in clear (`detokenize_pii`, the
    /// workspace's tokens): not when it is an upstream's or a host's whose values enter
    /// tokenized, else the code could hand it to any upstream or host in clear. One other
    /// origin is enough; a value of unknown origin only while none of `sources` (the tenant's
    /// upstreams and `http:KEY` entries) has its values tokenized.
    pub fn sandbox_may_hold(&self, origins: &[Origin], sources: &[String]) -> bool {
        if origins.is_empty() {
            return !sources.iter().any(|s| self.tokenizes_results_of(s));
        }
        (origins.iter()).any(|o| o.is_own() || !self.tokenizes_results_of(o.source()))
    }
}

/// A `pii` object as the upstreams file writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFlow {
    restore_from: Vec<String>,
    #[serde(default)]
    otherwise: Option<Otherwise>,
}

impl RawFlow {
    /// The rule, its names checked against `servers` (every entry of the file); on a name that
    /// is neither a server nor an origin, why, naming the line of `text` it is on.
    pub(super) fn check(
        self,
        source: RuleSource,
        servers: &[&str],
        text: &str,
    ) -> Result<FlowRule, String> {
        if let Some(bad) = self
            .restore_from
            .iter()
            .find(|n| !servers.contains(&n.as_str()) && !ORIGIN_NAMES.contains(&n.as_str()))
        {
            let line = line_of(text, bad).map_or(String::new(), |l| format!(" (line {l})"));
            return Err(format!(
                "pii.restore_from names {bad:?}{line}, which is neither a server of the upstreams file ({}) nor an origin ({}): name the servers and origins whose personal data this upstream may receive (an egress entry as `http:KEY`)",
                servers.join(", "),
                ORIGIN_NAMES.join(", ")
            ));
        }
        Ok(FlowRule {
            restore_from: self.restore_from,
            otherwise: self.otherwise.unwrap_or(Otherwise::Keep),
            source,
        })
    }
}

/// The first line (from 1) on which `"name"` follows a `restore_from` key.
fn line_of(text: &str, name: &str) -> Option<usize> {
    let quoted = serde_json::to_string(name).ok()?;
    let mut after_key = false;
    for (i, line) in text.lines().enumerate() {
        after_key |= line.contains("\"restore_from\"");
        if after_key && line.contains(&quoted) {
            return Some(i + 1);
        }
    }
    None
}

/// An entry's rule restoring from `from` (tests).
#[cfg(test)]
pub(crate) fn rule(from: &[&str], otherwise: Otherwise) -> FlowRule {
    FlowRule {
        restore_from: from.iter().map(|s| s.to_string()).collect(),
        otherwise,
        source: RuleSource::Entry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_allowed_origin_is_enough_and_unknown_needs_naming() {
        let r = rule(&["crm", "user"], Otherwise::Refuse);
        assert!(r.allows(&[Origin::upstream("crm", "rows")]));
        assert!(r.allows(&[Origin::User, Origin::upstream("other", "t")]));
        assert!(!r.allows(&[Origin::upstream("other", "t"), Origin::Sandbox]));
        assert!(!r.allows(&[]), "unknown origin");
        assert!(rule(&["unknown"], Otherwise::Keep).allows(&[]));
        assert!(FlowRule::default().allows(&[]));
        assert!(FlowRule::default().allows(&[Origin::upstream("x", "y")]));
        assert_eq!(
            r.describe(),
            "its pii rule (restore_from [\"crm\", \"user\"], otherwise \"refuse\")"
        );
    }

    #[test]
    fn results_are_tokenized_when_some_rule_withholds_them() {
        let rules = FlowRules::new([FlowRule::default(), rule(&["crm"], Otherwise::Keep)]);
        assert!(!rules.tokenizes_results_of("crm"));
        assert!(rules.tokenizes_results_of("sqlite"));
        assert!(!FlowRules::new([FlowRule::default()]).tokenizes_results_of("sqlite"));
    }

    #[test]
    fn the_sandbox_holds_no_value_of_an_origin_that_enters_tokenized() {
        let rules = FlowRules::new([rule(&["user", "crm"], Otherwise::Keep)]);
        let sources = ["crm".to_string(), "http:api.example.org".to_string()];
        let api = Origin::http("api.example.org");
        assert!(!rules.sandbox_may_hold(std::slice::from_ref(&api), &sources));
        assert!(rules.sandbox_may_hold(&[api, Origin::User], &sources));
        assert!(rules.sandbox_may_hold(&[Origin::upstream("crm", "rows")], &sources));
        assert!(
            !rules.sandbox_may_hold(&[], &sources),
            "unknown, while one source is tokenized"
        );
        assert!(rules.sandbox_may_hold(&[], &sources[..1]));
    }

    #[test]
    fn a_name_neither_server_nor_origin_is_refused_with_its_line() {
        let text = "{\n \"pii\": {\n  \"restore_from\": [\n   \"crm\",\n   \"crn\"\n  ]\n }\n}";
        let raw = RawFlow {
            restore_from: vec!["crm".into(), "crn".into()],
            otherwise: None,
        };
        let e = raw
            .check(RuleSource::Entry, &["crm", "mail"], text)
            .unwrap_err();
        assert!(
            e.contains("\"crn\" (line 5)") && e.contains("crm, mail"),
            "{e}"
        );
        let ok = RawFlow {
            restore_from: vec!["crm".into(), "user".into(), "*".into()],
            otherwise: Some(Otherwise::Refuse),
        };
        let r = ok.check(RuleSource::Entry, &["crm"], text).unwrap();
        assert_eq!(r.otherwise, Otherwise::Refuse);
    }
}
