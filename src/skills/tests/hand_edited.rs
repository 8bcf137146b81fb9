//! Hand-edited and malformed entries: malformed metadata, hand-placed code, "not found"
//! suggestions, bounded histories of deleted skills, stale temp files.

use super::{files_in, store, store_with};
use crate::skills::SkillError;
use crate::skills::meta::sha256_hex;

#[test]
fn malformed_metadata_is_skipped_in_list() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    s.save("good", "x = 1\n", "").unwrap();
    s.save("garbage", "x = 1\n", "").unwrap();
    s.save("other", "x = 1\n", "").unwrap();
    s.save("badtime", "x = 1\n", "").unwrap();
    std::fs::write(tmp.path().join("garbage.json"), "{ not json").unwrap();
    std::fs::write(tmp.path().join("other.json"), r#"{"name": "good"}"#).unwrap();
    std::fs::write(
        tmp.path().join("badtime.json"),
        r#"{"created": "yesterday"}"#,
    )
    .unwrap();
    // Entries that are not skills are ignored.
    std::fs::write(tmp.path().join(".tmp-0123456789abcdef"), "partial").unwrap();
    std::fs::write(tmp.path().join("notes.txt"), "hello").unwrap();
    std::fs::write(tmp.path().join("bad-name.py"), "x = 1\n").unwrap();
    std::fs::write(tmp.path().join("__init__.py"), "").unwrap();
    std::fs::write(tmp.path().join("orphan.json"), "{}").unwrap();
    let names: Vec<String> = s.list().unwrap().into_iter().map(|m| m.name).collect();
    assert_eq!(names, ["good"]);

    let err = s.load("garbage").unwrap_err();
    assert!(matches!(err, SkillError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("save_skill"), "{err}");
    assert!(matches!(s.load("other"), Err(SkillError::Corrupt { .. })));
    assert!(matches!(s.load("badtime"), Err(SkillError::Corrupt { .. })));
    // Saving again repairs it (the old code goes to the history).
    let m = s.save("garbage", "x = 1\n", "fixed").unwrap();
    assert_eq!(m.version, 2);
    assert_eq!(s.load("garbage").unwrap().meta.description, "fixed");
    assert_eq!(s.list().unwrap().len(), 2);
}

#[test]
fn hand_placed_and_hand_edited_skills() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    // A code file without metadata is a skill with derived metadata.
    std::fs::write(tmp.path().join("manual.py"), "x = 1\n").unwrap();
    let list = s.list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].sha256, sha256_hex(b"x = 1\n"));
    assert_eq!(list[0].version, 1);
    // Metadata in the shipped form is completed from the code.
    std::fs::write(
        tmp.path().join("manual.json"),
        r#"{"description": "by hand"}"#,
    )
    .unwrap();
    assert_eq!(s.load("manual").unwrap().meta.description, "by hand");
    // Code edited by hand: load reports the hash of what it returns.
    s.save("edited", "x = 1\n", "").unwrap();
    std::fs::write(tmp.path().join("edited.py"), "x = 2\n").unwrap();
    let skill = s.load("edited").unwrap();
    assert_eq!(skill.code, "x = 2\n");
    assert_eq!(skill.meta.sha256, sha256_hex(b"x = 2\n"));
    // Overwriting it archives the hand-edited code.
    s.save("edited", "x = 3\n", "").unwrap();
    assert_eq!(s.load_version("edited", 1).unwrap().code, "x = 2\n");
}

#[test]
fn not_found_lists_closest_names() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    let err = s.load("nothing").unwrap_err();
    assert!(err.to_string().contains("No skills are saved yet"), "{err}");
    for i in 0..15 {
        s.save(&format!("skill_{i:02}"), "x = 1\n", "").unwrap();
    }
    s.save("parse_logs", "x = 1\n", "").unwrap();
    let err = s.load("parse_log").unwrap_err();
    let SkillError::NotFound {
        existing, total, ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(*total, 16);
    assert_eq!(existing.len(), 10);
    assert_eq!(existing[0], "parse_logs");
    let msg = err.to_string();
    assert!(msg.starts_with("Skill not found: parse_log. "), "{msg}");
    assert!(msg.contains("10 of 16"), "{msg}");
}

#[test]
fn deleted_histories_are_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store_with(tmp.path(), |l| l.max_skills = 3);
    for i in 0..6 {
        let name = format!("gone_{i}");
        s.save(&name, "x = 1\n", "").unwrap();
        s.delete(&name).unwrap();
        // Directory mtimes have coarse resolution on some filesystems.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let kept = files_in(&tmp.path().join(".history"));
    assert_eq!(kept, ["gone_3", "gone_4", "gone_5"]);
}

#[test]
fn stale_temp_files_are_removed_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    store(tmp.path());
    let stale = tmp.path().join(".tmp-00000000000000aa");
    let fresh = tmp.path().join(".tmp-00000000000000bb");
    std::fs::write(&stale, "x").unwrap();
    std::fs::write(&fresh, "x").unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 3600);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(old)
        .unwrap();
    store(tmp.path());
    assert!(!stale.exists());
    assert!(fresh.exists());
}
