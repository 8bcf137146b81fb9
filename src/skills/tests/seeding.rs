//! Seeding: only names that never existed are added, and the shipped skills seed cleanly.

use std::path::Path;

use super::{store, store_with};
use crate::skills::SkillError;

#[test]
fn seed_from_adds_only_absent_names() {
    let tmp = tempfile::tempdir().unwrap();
    let shipped = tmp.path().join("shipped");
    std::fs::create_dir(&shipped).unwrap();
    std::fs::write(shipped.join("mine.py"), "def mine(): return 'shipped'\n").unwrap();
    std::fs::write(
        shipped.join("mine.json"),
        r#"{"description": "shipped one"}"#,
    )
    .unwrap();
    std::fs::write(shipped.join("fresh.py"), "def fresh(): return 1\n").unwrap();
    std::fs::write(
        shipped.join("fresh.json"),
        r#"{"name": "fresh", "description": " new "}"#,
    )
    .unwrap();
    std::fs::write(shipped.join("nodesc.py"), "def nodesc(): pass\n").unwrap();
    std::fs::write(shipped.join("badjson.py"), "def badjson(): pass\n").unwrap();
    std::fs::write(shipped.join("badjson.json"), "{not json").unwrap();
    std::fs::write(shipped.join("1bad.py"), "x = 1\n").unwrap();
    std::fs::write(shipped.join("__init__.py"), "").unwrap();
    std::fs::write(shipped.join("README.md"), "# skills\n").unwrap();
    std::fs::write(shipped.join("binary.py"), b"\xff\xfe").unwrap();
    std::fs::create_dir(shipped.join("dir.py")).unwrap();

    let s = store(&tmp.path().join("store"));
    let user = s
        .save("mine", "def mine(): return 'user'\n", "user's")
        .unwrap();
    assert_eq!(s.seed_from(&shipped).unwrap(), 3);
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
    assert_eq!(s.seed_from(&shipped).unwrap(), 0);
    s.delete("fresh").unwrap();
    assert_eq!(s.seed_from(&shipped).unwrap(), 0);
    assert!(matches!(s.load("fresh"), Err(SkillError::NotFound { .. })));
    let s0 = store_with(&tmp.path().join("store0"), |l| l.max_versions_kept = 0);
    assert_eq!(s0.seed_from(&shipped).unwrap(), 4);
    s0.delete("fresh").unwrap();
    assert_eq!(s0.seed_from(&shipped).unwrap(), 0);

    assert_eq!(s.seed_from(&tmp.path().join("missing")).unwrap(), 0);
}

#[test]
fn shipped_skills_seed_cleanly() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("skills");
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    let added = s.seed_from(&shipped).unwrap();
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
