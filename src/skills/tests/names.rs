//! The name allowlist: a table of accepted and refused names, every operation checking the
//! name first, and property tests that the rule is exactly the allowlist.

use proptest::prelude::*;

use super::{files_in, store};
use crate::skills::name::PYTHON_KEYWORDS;
use crate::skills::{SkillError, validate_name};

#[test]
fn name_allowlist_table() {
    let long_ok = "a".repeat(64);
    let accepted = [
        "a",
        "_",
        "_private",
        "filter_high_risk",
        "A1",
        "CamelCase",
        "x_2_y",
        "match",
        "case",
        "type",
        long_ok.as_str(),
    ];
    for name in accepted {
        assert!(validate_name(name).is_ok(), "{name:?} should be accepted");
    }
    let long = "a".repeat(65);
    let very_long = "x".repeat(300);
    let refused: &[(&str, &str)] = &[
        ("", "empty"),
        ("../../x", "looks like a path"),
        ("..", "looks like a path"),
        (".", "'.'"),
        (".hidden", "'.'"),
        ("%2e%2e", "'%'"),
        ("%2e%2e%2fetc", "'%'"),
        ("a/b", "looks like a path"),
        ("/etc/passwd", "looks like a path"),
        ("a\\b", "looks like a path"),
        ("a.py", "'.'"),
        ("a b", "' '"),
        ("a-b", "'-'"),
        ("a\0b", "U+0000"),
        ("a\nb", "U+000A"),
        ("1abc", "digit"),
        ("9", "digit"),
        ("__init__", "\"__\""),
        ("__x", "\"__\""),
        ("class", "keyword"),
        ("import", "keyword"),
        ("None", "keyword"),
        ("lambda", "keyword"),
        ("await", "keyword"),
        (long.as_str(), "65 characters"),
        (very_long.as_str(), "300 characters"),
        ("filt\u{0435}r", "U+0435"), // Cyrillic е
        ("\u{0430}dmin", "U+0430"),  // Cyrillic а
        ("\u{FF41}", "U+FF41"),      // fullwidth a
        ("caf\u{e9}", "non-ASCII"),
        ("a\u{200b}", "U+200B"),      // zero-width space
        ("x\u{2024}py", "non-ASCII"), // one dot leader
    ];
    for (name, why) in refused {
        let err = validate_name(name).expect_err(name);
        let msg = err.to_string();
        assert!(matches!(err, SkillError::InvalidName { .. }));
        assert!(msg.contains(why), "{name:?}: {msg}");
        assert!(msg.starts_with("Invalid skill name"), "{msg}");
        assert!(msg.contains("alphanumeric and underscores only"), "{msg}");
        assert!(msg.contains("from skills import NAME"), "{msg}");
        assert!(
            msg.len() < 600,
            "message stays short even for long names: {msg}"
        );
    }
}

#[test]
fn every_operation_validates_the_name_first() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    for bad in ["../x", "a/b", "..", "class"] {
        assert!(matches!(
            s.save(bad, "x = 1\n", ""),
            Err(SkillError::InvalidName { .. })
        ));
        assert!(matches!(s.load(bad), Err(SkillError::InvalidName { .. })));
        assert!(matches!(s.delete(bad), Err(SkillError::InvalidName { .. })));
        assert!(matches!(
            s.history(bad),
            Err(SkillError::InvalidName { .. })
        ));
        assert!(matches!(
            s.load_version(bad, 1),
            Err(SkillError::InvalidName { .. })
        ));
    }
    assert_eq!(files_in(tmp.path()), vec![".lock"]);
    assert!(!tmp.path().parent().unwrap().join("x.py").exists());
}

fn bad_char() -> impl Strategy<Value = char> {
    prop_oneof![
        Just('/'),
        Just('.'),
        Just('\0'),
        any::<char>().prop_filter("non-ASCII", |c| !c.is_ascii()),
    ]
}

proptest! {
    #[test]
    fn validate_never_accepts_separators_dots_nul_or_non_ascii(
        s in "[A-Za-z0-9_]{0,40}",
        c in bad_char(),
        at in any::<prop::sample::Index>(),
    ) {
        let mut chars: Vec<char> = s.chars().collect();
        let i = at.index(chars.len() + 1);
        chars.insert(i, c);
        let name: String = chars.into_iter().collect();
        prop_assert!(validate_name(&name).is_err());
    }

    #[test]
    fn validate_accepts_exactly_the_allowlist(name in "\\PC{0,70}|[A-Za-z_][A-Za-z0-9_]{0,70}") {
        let by_rule = !name.is_empty()
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.as_bytes()[0].is_ascii_digit()
            && !name.starts_with("__")
            && !PYTHON_KEYWORDS.contains(&name.as_str());
        prop_assert_eq!(validate_name(&name).is_ok(), by_rule);
    }
}
