//! An upstream's own credentials kept out of everything it sends back.
//!
//! The gateway knows exactly which secrets it handed an upstream (the values of its entry's
//! `env` and `headers`, the user info and query of its URL), and an upstream may quote them in
//! anything it returns: an API that answers "invalid key sk-…" in an error result, a tool that
//! echoes its configuration, a stderr line. A [`Redactor`] is built once per upstream from those
//! values and applied where its output comes in ([`super::upstream::Upstream`]): every string of
//! a tool result (keys included, however deeply nested), every error, status and stderr line.
//! What is not in the entry (a secret the upstream holds by itself) is left to the PII
//! detectors that run on everything the model gets.
//!
//! One Aho-Corasick pass (leftmost-longest) finds every secret at once, so a result of tens of
//! MiB costs one scan, not one per secret, and a secret containing a shorter one is replaced
//! whole.

use std::borrow::Cow;

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::{Map, Value};

/// What a secret becomes.
pub const REDACTED: &str = "[redacted]";

/// Replaces known strings by their stand-ins in text and in JSON values.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// `None` when there is nothing to replace.
    matcher: Option<AhoCorasick>,
    /// The stand-in of each pattern, by pattern index.
    replacements: Vec<String>,
}

impl Redactor {
    /// A redactor replacing each `(pattern, stand-in)`; empty patterns are ignored.
    pub fn new(pairs: Vec<(String, String)>) -> Self {
        let pairs: Vec<(String, String)> =
            pairs.into_iter().filter(|(p, _)| !p.is_empty()).collect();
        if pairs.is_empty() {
            return Self::default();
        }
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(pairs.iter().map(|(p, _)| p))
            // A few hundred short patterns at most: far below any automaton size limit.
            .expect("an automaton of an entry's secrets");
        Self {
            matcher: Some(matcher),
            replacements: pairs.into_iter().map(|(_, r)| r).collect(),
        }
    }

    /// `text` with every pattern replaced; borrowed when nothing matched.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(matcher) = &self.matcher else {
            return Cow::Borrowed(text);
        };
        if !matcher.is_match(text) {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        matcher.replace_all_with(text, &mut out, |m, _, out| {
            out.push_str(&self.replacements[m.pattern().as_usize()]);
            true
        });
        Cow::Owned(out)
    }

    /// `value` with every string replaced as [`Redactor::text`] does, object keys included.
    pub fn value(&self, value: Value) -> Value {
        if self.matcher.is_none() {
            return value;
        }
        match value {
            Value::String(s) => match self.text(&s) {
                Cow::Borrowed(_) => Value::String(s),
                Cow::Owned(o) => Value::String(o),
            },
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (self.text(&k).into_owned(), self.value(v)))
                    .collect::<Map<String, Value>>(),
            ),
            other => other,
        }
    }
}

/// Each secret in every form it may come back in: as it is, percent-encoded (upper- and
/// lower-case hex) and JSON-escaped; sorted, without duplicates, and without values under 4
/// characters (replacing every "1" or "on" would garble messages and hide nothing).
pub fn secret_forms(mut found: Vec<String>) -> Vec<String> {
    let mut forms: Vec<String> = Vec::new();
    for secret in &found {
        forms.push(percent_encoded(secret, false));
        forms.push(percent_encoded(secret, true));
        // A JSON string is always quoted: its inside is the escaped form.
        let quoted = serde_json::Value::String(secret.clone()).to_string();
        forms.push(quoted[1..quoted.len() - 1].to_string());
    }
    found.extend(forms);
    found.retain(|s| s.chars().count() >= 4);
    found.sort();
    found.dedup();
    found
}

/// `s` with every byte outside the URL-unreserved set percent-encoded, in upper- or lower-case
/// hex (clients write either).
fn percent_encoded(s: &str, upper: bool) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ if upper => format!("%{b:02X}"),
            _ => format!("%{b:02x}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secrets(list: &[&str]) -> Redactor {
        Redactor::new(
            list.iter()
                .map(|s| (s.to_string(), REDACTED.to_string()))
                .collect(),
        )
    }

    #[test]
    fn replaces_the_longest_secret_at_each_place() {
        let r = secrets(&["abcd", "abcd-1234"]);
        assert_eq!(
            r.text("key abcd-1234, prefix abcd."),
            "key [redacted], prefix [redacted]."
        );
        assert!(matches!(r.text("nothing here"), Cow::Borrowed(_)));
        assert!(matches!(Redactor::default().text("abcd"), Cow::Borrowed(_)));
    }

    #[test]
    fn every_string_of_a_value_keys_included() {
        let r = secrets(&["s3cret-key"]);
        let v = json!({
            "content": [{"type": "text", "text": "invalid key s3cret-key for project alpha"}],
            "structuredContent": {"auth": {"keys": ["s3cret-key", 7, null, true],
                                  "by_key": {"s3cret-key": "alpha"}}},
        });
        let out = r.value(v);
        assert!(!out.to_string().contains("s3cret-key"), "{out}");
        assert_eq!(
            out,
            json!({
                "content": [{"type": "text", "text": "invalid key [redacted] for project alpha"}],
                "structuredContent": {"auth": {"keys": ["[redacted]", 7, null, true],
                                      "by_key": {"[redacted]": "alpha"}}},
            })
        );
    }

    #[test]
    fn each_pattern_has_its_own_stand_in() {
        let r = Redactor::new(vec![
            ("https://h/mcp?key=abcd".into(), "https://h/mcp".into()),
            ("abcd".into(), REDACTED.into()),
        ]);
        assert_eq!(
            r.text("GET https://h/mcp?key=abcd failed; key abcd"),
            "GET https://h/mcp failed; key [redacted]"
        );
    }
}
