//! Tests of path validation (pure) and of the sizes shown in messages.

use super::*;
use crate::workspace::path::check_name;

// ----- validation -----

#[test]
fn validation_table() {
    let max = DEFAULT_MAX_PATH_LEN;
    let long_name = "a".repeat(4096);
    let name_256 = "n".repeat(256);
    let refused: &[(&str, &str)] = &[
        ("../../x", "leaves the workspace"),
        ("/etc/x", "leaves the workspace"),
        ("a/../../b", "leaves the workspace"),
        ("a/..", "leaves the workspace"),
        ("..", "leaves the workspace"),
        ("a\0b", "NUL"),
        (&long_name, "4096 bytes long"),
        (&name_256, "a name in it is 256 bytes long"),
        ("a\nb", "control character U+000A"),
        ("a\u{7f}b", "control character U+007F"),
        ("a\u{85}b", "control character U+0085"),
        ("a\\b", "backslash"),
        ("..\\..\\x", "backslash"),
        ("", "it is empty"),
        (".", "names no file"),
        ("./", "names no file"),
        ("//", "leaves the workspace"),
    ];
    for (input, needle) in refused {
        let err = validate_relative_path(input, max).expect_err(input);
        let msg = err.to_string();
        assert!(msg.contains(needle), "{input:?}: {msg}");
        assert!(
            msg.contains("relative path"),
            "{input:?}: says what is allowed: {msg}"
        );
    }
    // The message names the input, escaped.
    let msg = validate_relative_path("a\nb", max).unwrap_err().to_string();
    assert!(msg.contains("'a\\nb'"), "{msg}");
    let msg = validate_relative_path(&long_name, max)
        .unwrap_err()
        .to_string();
    assert!(msg.len() < 600, "long input is shortened in messages");

    let accepted: &[(&str, &[&str])] = &[
        ("%2e%2e", &["%2e%2e"]),
        ("...", &["..."]),
        ("a//b/./c/", &["a", "b", "c"]),
        ("./x.txt", &["x.txt"]),
        ("données/日本語.txt", &["données", "日本語.txt"]),
        ("emoji 🦀 name.py", &["emoji 🦀 name.py"]),
        ("~/x", &["~", "x"]),
        (".hidden", &[".hidden"]),
    ];
    for (input, want) in accepted {
        assert_eq!(
            &validate_relative_path(input, max).unwrap(),
            want,
            "{input:?}"
        );
    }
    let max_name = "m".repeat(255);
    assert_eq!(validate_relative_path(&max_name, max).unwrap().len(), 1);
    assert!(validate_relative_path("abcd", 3).is_err());

    for root in ["", ".", "./", ".//."] {
        assert!(validate_relative_subpath(root, max).unwrap().is_empty());
    }
    assert!(validate_relative_subpath("../x", max).is_err());
    assert_eq!(validate_relative_subpath("a/b", max).unwrap(), ["a", "b"]);
}

proptest! {
    #[test]
    fn validate_never_panics_or_escapes(
        s in prop_oneof![
            any::<String>(),
            "[a./\\\\\0\n%~ ]{0,40}",
            "[ab/.]{0,8}[ab]{250,260}",
            proptest::collection::vec(prop_oneof![
                Just(".."), Just("."), Just(""), Just("a"), Just("/"), Just("b c"), Just("é")
            ], 0..12).prop_map(|v| v.join("/")),
        ],
        max in prop_oneof![0usize..64, Just(DEFAULT_MAX_PATH_LEN)],
    ) {
        let results = [validate_relative_path(&s, max), validate_relative_subpath(&s, max)];
        for comps in results.into_iter().flatten() {
            prop_assert!(!s.starts_with('/'));
            prop_assert!(s.len() <= max);
            for c in comps {
                prop_assert!(!c.is_empty() && c != "." && c != "..");
                prop_assert!(!c.contains('/') && !c.contains('\\') && !c.contains('\0'));
                prop_assert!(c.len() <= MAX_NAME_LEN);
                prop_assert!(check_name(c).is_ok());
            }
        }
    }
}

#[test]
fn human_bytes() {
    assert_eq!(HumanBytes(0).to_string(), "0 bytes");
    assert_eq!(HumanBytes(1023).to_string(), "1023 bytes");
    assert_eq!(HumanBytes(10 * 1024 * 1024).to_string(), "10 MiB");
    assert_eq!(HumanBytes(12_000_000).to_string(), "11.4 MiB");
    assert_eq!(HumanBytes(1 << 30).to_string(), "1 GiB");
    assert_eq!(HumanBytes(u64::MAX).to_string(), "16.0 EiB");
    assert_eq!(HumanBytes(1 << 40).to_string(), "1 TiB");
}
