//! Seeding: only names that never existed are added, and the shipped skills seed cleanly.

use super::{store, store_with};
use crate::shipped::{STARTER_SKILLS, ShippedFile};
use crate::skills::SkillError;

/// Files as the binary would carry them (leaked: the store takes `&'static` names and bytes).
fn files(list: &[(&str, &[u8])]) -> &'static [ShippedFile] {
    let files: Vec<ShippedFile> = list
        .iter()
        .map(|(name, bytes)| ShippedFile {
            name: String::leak(name.to_string()),
            bytes: Vec::leak(bytes.to_vec()),
        })
        .collect();
    Vec::leak(files)
}

#[test]
fn seed_from_adds_only_absent_names() {
    let tmp = tempfile::tempdir().unwrap();
    let shipped = files(&[
        ("mine.py", b"def mine(): return 'shipped'\n"),
        ("mine.json", br#"{"description": "shipped one"}"#),
        ("fresh.py", b"def fresh(): return 1\n"),
        (
            "fresh.json",
            br#"{"name": "fresh", "description": " new "}"#,
        ),
        ("nodesc.py", b"def nodesc(): pass\n"),
        ("badjson.py", b"def badjson(): pass\n"),
        ("badjson.json", b"{not json"),
        ("1bad.py", b"x = 1\n"),
        ("__init__.py", b""),
        ("README.md", b"# skills\n"),
        ("binary.py", b"\xff\xfe"),
        ("huge.py", &[b'#'; 2 << 20]),
    ]);

    let s = store(&tmp.path().join("store"));
    let user = s
        .save("mine", "def mine(): return 'user'\n", "user's")
        .unwrap();
    assert_eq!(s.seed_from(shipped).unwrap(), 3);
    assert_eq!(
        s.load("mine").unwrap().meta,
        user,
        "a user's skill is never overwritten"
    );
    assert_eq!(s.load("fresh").unwrap().meta.description, "new");
    assert_eq!(s.load("nodesc").unwrap().meta.description, "");
    assert_eq!(s.load("badjson").unwrap().meta.description, "");
    let names: Vec<String> = s.list().unwrap().into_iter().map(|m| m.name).collect();
    assert_eq!(names, ["badjson", "fresh", "mine", "nodesc"]);

    // Idempotent, and a deleted starter skill does not come back.
    assert_eq!(s.seed_from(shipped).unwrap(), 0);
    s.delete("fresh").unwrap();
    assert_eq!(s.seed_from(shipped).unwrap(), 0);
    assert!(matches!(s.load("fresh"), Err(SkillError::NotFound { .. })));
    let s0 = store_with(&tmp.path().join("store0"), |l| l.max_versions_kept = 0);
    assert_eq!(s0.seed_from(shipped).unwrap(), 4);
    s0.delete("fresh").unwrap();
    assert_eq!(s0.seed_from(shipped).unwrap(), 0);

    assert_eq!(s.seed_from(&[]).unwrap(), 0);
}

#[test]
fn shipped_skills_seed_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    let added = s.seed_from(STARTER_SKILLS).unwrap();
    assert!(added >= 5, "{added}");
    let list = s.list().unwrap();
    assert_eq!(list.len(), added);
    for m in &list {
        assert!(!m.description.is_empty(), "{} has a description", m.name);
        let code = s.load(&m.name).unwrap().code;
        assert!(
            code.starts_with("\"\"\""),
            "{} starts with a docstring",
            m.name
        );
        assert!(
            code.contains(&format!("def {}(", m.name)),
            "{} defines {0}()",
            m.name
        );
    }
    let high = s.load("filter_high_risk").unwrap().code;
    assert!(high.contains("[v for v in vulns if v['severity'] in ['high', 'critical']]"));
}
