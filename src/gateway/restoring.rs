//! Arguments on their way to an upstream: the personal-data tokens in them restored as the
//! upstream's flow rule allows (`flow.rs`), and what became of each token counted by type and
//! origin, for the audit trail, the metrics and the user's question. A value allowed into a
//! call arrives as it entered, byte for byte: the vault keeps it exactly.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::flow::{FlowRule, Otherwise};
use crate::audit::{AuditTokens, TokenCount};
use crate::pii::{Checked, PiiEngine, describe_origins};

/// A call's arguments after its upstream's flow rule.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The arguments to send: allowed tokens restored, the others kept as token text.
    pub arguments: Map<String, Value>,
    pub tokens: AuditTokens,
    /// Why the call must not be sent (`otherwise: refuse` and a token was not restored).
    pub refused: Option<String>,
}

impl Outgoing {
    /// Arguments no engine looked at (`--pii-output off`): sent as they are.
    pub fn unchanged(arguments: Map<String, Value>) -> Self {
        Outgoing {
            arguments,
            tokens: AuditTokens::default(),
            refused: None,
        }
    }

    /// For the user's question: where the restored values came from, and what was kept as
    /// tokens (empty when the arguments held none).
    pub fn note(&self) -> String {
        note(&self.tokens)
    }
}

/// For the user's question about a call or a request: where the values restored into it came
/// from, and what was kept as tokens (empty when it held none).
pub(crate) fn note(tokens: &AuditTokens) -> String {
    let list = |counts: &[TokenCount]| {
        let parts: Vec<String> = (counts.iter())
            .map(|c| match c.origin.as_str() {
                "" => format!("{} ×{}", c.kind, c.count),
                origin => format!("{} from {origin} ×{}", c.kind, c.count),
            })
            .collect();
        parts.join("; ")
    };
    let mut note = String::new();
    if !tokens.restored.is_empty() {
        note.push_str(&format!(
            " Personal data restored into it: {}.",
            list(&tokens.restored)
        ));
    }
    let kept: Vec<TokenCount> = (tokens.withheld.iter())
        .chain(&tokens.unknown)
        .cloned()
        .collect();
    if !kept.is_empty() {
        note.push_str(&format!(" Sent as tokens, not values: {}.", list(&kept)));
    }
    note
}

/// `arguments` for `server`, whose flow rule is `rule`: every string and key with its tokens
/// restored where the rule allows their origins.
pub fn restore_for(
    pii: &PiiEngine,
    server: &str,
    rule: &FlowRule,
    arguments: Map<String, Value>,
) -> Outgoing {
    let mut tally = Tally::default();
    let mut restore = |s: String| {
        if !s.contains('[') {
            return s;
        }
        let checked = pii.restore_where(&s, |origins| rule.allows(origins));
        tally.add(&checked);
        checked.text
    };
    let arguments = match walk(Value::Object(arguments), &mut restore) {
        Value::Object(map) => map,
        _ => unreachable!("an object stays an object"),
    };
    let tokens = tally.counts();
    let kept = tokens.withheld.iter().chain(&tokens.unknown);
    let refused = (rule.otherwise == Otherwise::Refuse)
        .then(|| kept.map(|c| c.count).sum::<u64>())
        .filter(|n| *n > 0)
        .map(|n| refusal(server, rule, &tokens, n));
    Outgoing {
        arguments,
        tokens,
        refused,
    }
}

fn refusal(server: &str, rule: &FlowRule, tokens: &AuditTokens, n: u64) -> String {
    let what: Vec<String> = (tokens.withheld.iter())
        .map(|c| format!("{} from {}", c.kind, c.origin))
        .chain((tokens.unknown.iter()).map(|c| format!("{} that this server never issued", c.kind)))
        .collect();
    format!(
        "the call was not sent: its arguments hold {n} personal-data token{} that upstream `{server}` may not receive ({}), by {}. Send it only data the rule allows, or an administrator changes the rule in the upstreams file",
        if n == 1 { "" } else { "s" },
        what.join("; "),
        rule.describe()
    )
}

/// Every string of `v`, keys included, through `f`.
fn walk(v: Value, f: &mut impl FnMut(String) -> String) -> Value {
    match v {
        Value::String(s) => Value::String(f(s)),
        Value::Array(items) => Value::Array(items.into_iter().map(|i| walk(i, f)).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let k = f(k);
                    (k, walk(v, f))
                })
                .collect(),
        ),
        other => other,
    }
}

/// Tokens counted by (type, origin): a call's arguments here, a request's parts in guarded
/// egress.
#[derive(Default)]
pub(crate) struct Tally {
    restored: BTreeMap<(String, String), u64>,
    withheld: BTreeMap<(String, String), u64>,
    unknown: BTreeMap<(String, String), u64>,
}

impl Tally {
    pub(crate) fn add(&mut self, checked: &Checked) {
        for (uses, into) in [
            (&checked.restored, &mut self.restored),
            (&checked.withheld, &mut self.withheld),
        ] {
            for u in uses {
                let key = (u.kind.as_str().to_owned(), describe_origins(&u.origins));
                *into.entry(key).or_default() += 1;
            }
        }
        for kind in &checked.unknown {
            *(self.unknown)
                .entry((kind.as_str().to_owned(), String::new()))
                .or_default() += 1;
        }
    }

    pub(crate) fn counts(self) -> AuditTokens {
        let list = |m: BTreeMap<(String, String), u64>| {
            m.into_iter()
                .map(|((kind, origin), count)| TokenCount {
                    kind,
                    origin,
                    count,
                })
                .collect()
        };
        AuditTokens {
            restored: list(self.restored),
            withheld: list(self.withheld),
            unknown: list(self.unknown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::flow::rule;
    use crate::pii::Origin;

    #[test]
    fn tokens_restore_by_origin_and_the_rest_is_kept_or_refused() {
        let pii = PiiEngine::new([3; 32], 100);
        let crm = pii
            .sanitize_from("ann@example.com", &Origin::upstream("crm", "rows"))
            .text;
        let typed = pii.sanitize_from("bo@example.com", &Origin::User).text;
        let forged = "[EMAIL_0123abcd]";
        let args = || match serde_json::json!({"to": [crm, typed], "note": format!("{crm} {forged}")})
        {
            Value::Object(m) => m,
            _ => unreachable!(),
        };

        let open = restore_for(&pii, "mail", &FlowRule::default(), args());
        assert_eq!(
            open.arguments["to"],
            serde_json::json!(["ann@example.com", "bo@example.com"])
        );
        assert_eq!(open.arguments["note"], format!("ann@example.com {forged}"));
        assert_eq!(open.refused, None);
        assert_eq!(open.tokens.unknown.len(), 1, "{:?}", open.tokens);

        let keep = restore_for(&pii, "search", &rule(&["user"], Otherwise::Keep), args());
        assert_eq!(
            keep.arguments["to"],
            serde_json::json!([crm, "bo@example.com"])
        );
        assert_eq!(keep.refused, None);
        let withheld = &keep.tokens.withheld;
        assert_eq!(
            (
                withheld[0].kind.as_str(),
                withheld[0].origin.as_str(),
                withheld[0].count
            ),
            ("EMAIL", "crm/rows", 2)
        );
        assert!(keep.note().contains("EMAIL from user ×1") && keep.note().contains("crm/rows ×2"));

        let refuse = restore_for(&pii, "search", &rule(&["user"], Otherwise::Refuse), args());
        let why = refuse.refused.expect("refused");
        assert!(
            why.contains("`search`") && why.contains("EMAIL from crm/rows"),
            "{why}"
        );
        assert!(!why.contains("ann@example.com"), "{why}");
    }
}
