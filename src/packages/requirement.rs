//! The requirement strings of `execute_code`'s `packages`, checked before anything is resolved:
//! PEP 508 as pip reads it, parsed by `pep508_rs` (uv's parser), with names normalized as the
//! index does (PEP 503). Only index requirements are accepted: a URL, a path or a pip option
//! would let a caller pick where code comes from, past the server's index and policy.

use std::str::FromStr;

use pep508_rs::{Requirement as Pep508, VersionOrUrl};

/// Most requirements one execution may name.
pub const MAX_REQUIREMENTS: usize = 32;
/// Longest requirement string accepted.
const MAX_REQUIREMENT_CHARS: usize = 200;

/// A requirement refused before anything was resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    #[error(
        "`{text}` is not a requirement pip understands ({why}). Write NAME, NAME==VERSION or NAME with a range, such as \"orjson==3.*\" or \"scikit-learn>=1.5\""
    )]
    Malformed { text: String, why: String },
    #[error(
        "`{text}` names a URL or a path; packages come only from the server's package index: name the package and a version instead"
    )]
    NotFromIndex { text: String },
    #[error("{count} packages requested; at most {MAX_REQUIREMENTS} may be named in one call")]
    TooMany { count: usize },
    #[error("`packages` names nothing: leave it out, or list requirements such as \"humanize\"")]
    Empty,
}

/// One checked requirement: its normalized name and the text pip is given.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Requirement {
    /// PEP 503 normalized (`scikit-learn`, lower case, runs of `-_.` as one `-`).
    pub name: String,
    /// The requirement as pip reads it, normalized (`scikit-learn>=1.5`).
    pub text: String,
}

impl Requirement {
    pub fn parse(raw: &str) -> Result<Self, RequirementError> {
        let trimmed = raw.trim();
        let malformed = |why: String| RequirementError::Malformed {
            text: crate::text::prefix_chars(trimmed, 120).to_owned(),
            why,
        };
        if trimmed.chars().count() > MAX_REQUIREMENT_CHARS {
            return Err(malformed(format!(
                "over {MAX_REQUIREMENT_CHARS} characters"
            )));
        }
        if trimmed.starts_with('-') || trimmed.contains(char::is_control) {
            return Err(malformed("pip options are not accepted".into()));
        }
        if let Some(word) = dangling_separator(trimmed) {
            return Err(malformed(format!(
                "`{word}` ends in `{}`: a name ends with a letter or digit",
                word.chars().last().unwrap_or('.')
            )));
        }
        let parsed = Pep508::<pep508_rs::VerbatimUrl>::from_str(trimmed)
            .map_err(|e| malformed(first_line(&e.to_string())))?;
        if matches!(parsed.version_or_url, Some(VersionOrUrl::Url(_))) {
            return Err(RequirementError::NotFromIndex {
                text: crate::text::prefix_chars(trimmed, 120).to_owned(),
            });
        }
        Ok(Self {
            name: parsed.name.to_string(),
            text: parsed.to_string(),
        })
    }
}

/// The requirements of one request, checked, without duplicates, in a stable order (the cache
/// key does not depend on the order they were written in).
pub fn parse_all<S: AsRef<str>>(raw: &[S]) -> Result<Vec<Requirement>, RequirementError> {
    if raw.is_empty() {
        return Err(RequirementError::Empty);
    }
    if raw.len() > MAX_REQUIREMENTS {
        return Err(RequirementError::TooMany { count: raw.len() });
    }
    let mut all = raw
        .iter()
        .map(|r| Requirement::parse(r.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    all.sort();
    all.dedup();
    Ok(all)
}

/// A session's requirements and a call's new ones: the call's requirement replaces the
/// session's for the same package name, so a session can move to another version.
pub fn merged(kept: &[Requirement], new: &[Requirement]) -> Vec<Requirement> {
    let mut all: Vec<Requirement> = kept
        .iter()
        .filter(|k| !new.iter().any(|n| n.name == k.name))
        .chain(new)
        .cloned()
        .collect();
    all.sort();
    all.dedup();
    all
}

/// A name normalized as PEP 503 does (what pip's report and the index use to compare).
pub fn normalize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut dash = false;
    for c in name.chars() {
        if "-_.".contains(c) {
            dash = true;
        } else {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// A package or extra name, in the part before any version, marker or URL, that ends in `.`,
/// `-` or `_`. PEP 508 refuses them, and `pep508_rs` 0.9 panics on one followed by more text
/// (`orjson3.==*`, `x[a.]`) instead of returning its error, so they are refused here first.
fn dangling_separator(text: &str) -> Option<&str> {
    let names = text
        .split(['<', '>', '=', '!', '~', ';', '@', '('])
        .next()?;
    names
        .split(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
        .find(|word| word.ends_with(['.', '-', '_']))
}

fn first_line(text: &str) -> String {
    crate::text::prefix_chars(text.lines().next().unwrap_or(""), 160).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_are_normalized_sorted_and_deduplicated() {
        let all = parse_all(&["Scikit_Learn>=1.5", "humanize", "orjson==3.*", "humanize"]).unwrap();
        let texts: Vec<&str> = all.iter().map(|r| r.text.as_str()).collect();
        assert_eq!(texts, ["humanize", "orjson==3.*", "scikit-learn>=1.5"]);
        assert_eq!(all[2].name, "scikit-learn");
    }

    #[test]
    fn urls_paths_options_and_garbage_are_refused() {
        for bad in [
            "pkg @ https://example.com/pkg.whl",
            "pkg @ file:///tmp/pkg.whl",
        ] {
            assert!(
                matches!(
                    Requirement::parse(bad),
                    Err(RequirementError::NotFromIndex { .. })
                ),
                "{bad}"
            );
        }
        for bad in [
            "--index-url https://evil.example/simple",
            "-e .",
            "pkg==1\n--extra-index-url x",
            "pkg>=>1",
            "",
            "pk g",
            // pep508_rs panics on these rather than refusing them.
            "orjson3.==*",
            "x[a.]",
            "x[a-,b]>1",
            "x_ >=1",
        ] {
            assert!(
                matches!(
                    Requirement::parse(bad),
                    Err(RequirementError::Malformed { .. })
                ),
                "{bad:?}: {:?}",
                Requirement::parse(bad)
            );
        }
        assert_eq!(parse_all::<&str>(&[]), Err(RequirementError::Empty));
        let many: Vec<String> = (0..33).map(|i| format!("p{i}")).collect();
        assert_eq!(
            parse_all(&many),
            Err(RequirementError::TooMany { count: 33 })
        );
    }

    #[test]
    fn a_calls_requirement_replaces_the_sessions_for_the_same_name() {
        let kept = parse_all(&["humanize==4.9.0", "orjson"]).unwrap();
        let new = parse_all(&["humanize==4.12.0"]).unwrap();
        let texts: Vec<String> = merged(&kept, &new).into_iter().map(|r| r.text).collect();
        assert_eq!(texts, ["humanize==4.12.0", "orjson"]);
    }

    #[test]
    fn names_normalize_as_the_index_does() {
        assert_eq!(normalize_name("Scikit__Learn"), "scikit-learn");
        assert_eq!(normalize_name("zope.interface"), "zope-interface");
    }
}
