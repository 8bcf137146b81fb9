//! Skill names: the allowlist every name passes before a path is built, and the closeness
//! measure a "not found" error uses to suggest existing names. Pure functions with no access to the
//! store, so the rule can be read (and fuzzed) on its own.

pub use super::error::NAME_RULE;
use super::error::{Result, SkillError};

/// Longest skill name, in bytes (all ASCII).
pub const MAX_NAME_LEN: usize = 64;
/// Python's hard keywords (3.12). Soft keywords (`match`, `case`, `type`, `_`) are valid
/// identifiers and allowed.
pub(super) const PYTHON_KEYWORDS: [&str; 35] = [
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// A name as an error message shows it: quoted, escaped, at most 80 characters.
fn shown(name: &str) -> String {
    const MAX: usize = 80;
    if name.chars().count() <= MAX {
        format!("{name:?}")
    } else {
        let cut = crate::text::prefix_chars(name, MAX);
        format!("{cut:?}… ({} characters)", name.chars().count())
    }
}

/// Checks `name` against the allowlist `^[A-Za-z_][A-Za-z0-9_]{0,63}$`, refusing names that
/// start with `__` and Python keywords. Pure; runs before any path is built.
pub fn validate_name(name: &str) -> Result<()> {
    let fail = |reason: String| {
        Err(SkillError::InvalidName {
            name: shown(name),
            reason,
        })
    };
    if name.is_empty() {
        return fail("it is empty".into());
    }
    if name.contains(['/', '\\']) || name.contains("..") {
        return fail("it looks like a path; a skill name is a bare name, not a path".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
    {
        let what = match c {
            '.' => "it contains '.'".into(),
            c if c.is_ascii_control() => {
                format!("it contains the control character U+{:04X}", c as u32)
            }
            c if !c.is_ascii() => {
                format!(
                    "it contains the non-ASCII character {c:?} (U+{:04X})",
                    c as u32
                )
            }
            c => format!("it contains {c:?}"),
        };
        return fail(what);
    }
    if name.len() > MAX_NAME_LEN {
        return fail(format!("it is {} characters long", name.len()));
    }
    if name.as_bytes()[0].is_ascii_digit() {
        return fail("it starts with a digit".into());
    }
    if name.starts_with("__") {
        return fail("names starting with \"__\" are reserved".into());
    }
    if PYTHON_KEYWORDS.contains(&name) {
        return fail("it is a Python keyword".into());
    }
    Ok(())
}

pub(super) fn is_name_file<'a>(file: &'a str, ext: &str) -> Option<&'a str> {
    let stem = file.strip_suffix(ext)?;
    validate_name(stem).ok().map(|()| stem)
}

pub(super) fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}
