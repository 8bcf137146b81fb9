//! Python names for upstream servers and tools, which may be called anything (`weird-name.v2`,
//! `class`, `2fast`, `Mixed Case`).
//!
//! The mapping, documented in docs/gateway.md ("Names"): every character that is not an ASCII
//! letter, digit or `_` becomes `_`; a name that then starts with a digit gets a leading `_`; a Python
//! keyword, or a name the package itself uses (`__init__`, `__all__`, `TOOLS`, `SERVERS`,
//! `call_tool`, `ToolError`, `cem_runtime`), gets a trailing `_`; an empty name
//! becomes `_`; names are cut to 100 characters. Two names that map to the same identifier are
//! told apart by `_2`, `_3`, … in the order of their original names, so a mapping never
//! changes while the set of names stays the same. The original name is what goes to the
//! upstream; the identifier is only a file and function name.

use std::collections::{BTreeMap, HashSet};

const MAX_IDENT_CHARS: usize = 100;

/// Python's hard keywords (soft ones such as `match` and `type` are valid names).
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Names the package itself defines: `servers/__init__.py` exports `SERVERS`, `call_tool` and
/// `ToolError`, each server's `__init__.py` `TOOLS` and `__all__`. A module or function of the
/// same name would shadow them.
const RESERVED: &[&str] = &[
    "__init__",
    "__main__",
    "__pycache__",
    "__all__",
    "TOOLS",
    "SERVERS",
    "call_tool",
    "ToolError",
    "cem_runtime",
];

/// The identifier for one name, before collisions are resolved.
pub fn identifier(name: &str) -> String {
    let mut id: String = name
        .chars()
        .take(MAX_IDENT_CHARS)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if id.is_empty() {
        id.push('_');
    }
    if id.starts_with(|c: char| c.is_ascii_digit()) {
        id.insert(0, '_');
    }
    if KEYWORDS.contains(&id.as_str()) || RESERVED.contains(&id.as_str()) {
        id.push('_');
    }
    id
}

/// Identifiers for a set of names, unique among themselves: original name → identifier.
pub fn identifiers<'a>(names: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, String> {
    let sorted: std::collections::BTreeSet<&str> = names.into_iter().collect();
    let mut taken = HashSet::new();
    let mut out = BTreeMap::new();
    // Names that are already identifiers keep them; the others take what is left.
    let (exact, mapped): (Vec<&str>, Vec<&str>) = sorted.iter().partition(|n| identifier(n) == **n);
    for name in exact.into_iter().chain(mapped) {
        let base = identifier(name);
        let mut id = base.clone();
        let mut n = 2;
        while !taken.insert(id.clone()) {
            id = format!("{base}_{n}");
            n += 1;
        }
        out.insert(name.to_string(), id);
    }
    out
}

/// Whether `s` is a valid Python identifier of our ASCII form (for argument names).
pub fn is_identifier(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_what_python_cannot_name() {
        assert_eq!(identifier("get_time"), "get_time");
        assert_eq!(identifier("weird-name.v2"), "weird_name_v2");
        assert_eq!(identifier("class"), "class_");
        assert_eq!(identifier("2fast"), "_2fast");
        assert_eq!(identifier("Mixed Case"), "Mixed_Case");
        assert_eq!(identifier("__init__"), "__init___");
        assert_eq!(
            identifier("TOOLS"),
            "TOOLS_",
            "would shadow the module's own table"
        );
        assert_eq!(identifier("call_tool"), "call_tool_");
        assert_eq!(identifier(""), "_");
        assert_eq!(identifier("café"), "caf_");
        assert_eq!(identifier(&"x".repeat(300)).len(), 100);
    }

    #[test]
    fn collisions_get_numbered_and_exact_names_keep_theirs() {
        let ids = identifiers(["a-b", "a_b", "a.b", "class_", "class"]);
        assert_eq!(ids["a_b"], "a_b", "an exact identifier keeps its name");
        assert_eq!(ids["a-b"], "a_b_2");
        assert_eq!(ids["a.b"], "a_b_3");
        assert_eq!(ids["class_"], "class_");
        assert_eq!(ids["class"], "class__2");
        let values: HashSet<_> = ids.values().collect();
        assert_eq!(values.len(), ids.len());
    }

    #[test]
    fn identifiers_for_arguments() {
        assert!(is_identifier("timezone"));
        assert!(!is_identifier("time-zone"));
        assert!(!is_identifier("from"));
        assert!(!is_identifier("1a"));
    }
}
