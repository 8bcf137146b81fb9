//! Whether a call to an upstream tool may go out: `allow`, `deny`, `confirm` (ask the user
//! through MCP elicitation first), or `plan` (record it; when the code has finished, ask the
//! user once about all the calls it planned, and send them on accept).
//!
//! The rule for one tool, first match wins: a `tools` entry naming it exactly; else the
//! longest `tools` glob (`*` any run of characters, `?` one) that matches it; else the
//! server's `default`; else `confirm` when the upstream annotates the tool
//! `destructiveHint: true` and `allow` otherwise. Annotations are the upstream's own claims,
//! so they only choose a default; a configured rule always wins.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
    Confirm,
    Plan,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Confirm => "confirm",
            Decision::Plan => "plan",
        }
    }
}

/// One upstream's policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    pub default: Option<Decision>,
    tools: BTreeMap<String, Decision>,
}

impl Policy {
    pub fn new(default: Option<Decision>, tools: BTreeMap<String, Decision>) -> Self {
        Self { default, tools }
    }

    /// The decision for `tool`, given whether the upstream annotates it destructive.
    pub fn decide(&self, tool: &str, destructive: bool) -> Decision {
        if let Some(&d) = self.tools.get(tool) {
            return d;
        }
        let best = self
            .tools
            .iter()
            .filter(|(pattern, _)| glob_match(pattern, tool))
            .max_by_key(|(pattern, _)| pattern.len());
        if let Some((_, &d)) = best {
            return d;
        }
        match (self.default, destructive) {
            (Some(d), _) => d,
            (None, true) => Decision::Confirm,
            (None, false) => Decision::Allow,
        }
    }
}

/// `*` matches any run of characters (also none), `?` exactly one; everything else itself.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matching with one backtrack point: linear in practice, never exponential.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        for (p, t, m) in [
            ("*", "", true),
            ("delete_*", "delete_file", true),
            ("delete_*", "undelete_file", false),
            ("*_file", "read_file", true),
            ("r?ad", "read", true),
            ("r?ad", "rad", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
        ] {
            assert_eq!(glob_match(p, t), m, "{p} ~ {t}");
        }
    }

    #[test]
    fn exact_then_longest_glob_then_default_then_annotation() {
        let tools = BTreeMap::from([
            ("*".to_string(), Decision::Allow),
            ("delete_*".to_string(), Decision::Deny),
            ("delete_draft".to_string(), Decision::Confirm),
        ]);
        let p = Policy::new(None, tools);
        assert_eq!(p.decide("delete_draft", false), Decision::Confirm);
        assert_eq!(p.decide("delete_user", false), Decision::Deny);
        assert_eq!(
            p.decide("drop_table", true),
            Decision::Allow,
            "a rule beats the hint"
        );

        let none = Policy::default();
        assert_eq!(none.decide("drop_table", true), Decision::Confirm);
        assert_eq!(none.decide("read", false), Decision::Allow);
        let deny_all = Policy::new(Some(Decision::Deny), BTreeMap::new());
        assert_eq!(deny_all.decide("read", false), Decision::Deny);
        let allow_all = Policy::new(Some(Decision::Allow), BTreeMap::new());
        assert_eq!(allow_all.decide("drop_table", true), Decision::Allow);
    }
}
