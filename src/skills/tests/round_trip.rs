//! Round trip and metadata (save, load, list, delete; the stored fields and modes; versions
//! and history), and the limits on size and content.

use std::os::unix::fs::PermissionsExt;

use chrono::DateTime;

use super::{files_in, store, store_with};
use crate::skills::SkillError;
use crate::skills::meta::{now, sha256_hex};

#[test]
fn save_load_list_delete_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    assert!(s.list().unwrap().is_empty());
    let meta = s
        .save(
            "double",
            "def double(x):\n    return 2 * x\n",
            "  doubles  ",
        )
        .unwrap();
    assert_eq!(meta.name, "double");
    assert_eq!(meta.description, "doubles");
    s.save("alpha", "x = 1\n", "").unwrap();

    let skill = s.load("double").unwrap();
    assert_eq!(skill.code, "def double(x):\n    return 2 * x\n");
    assert_eq!(skill.meta, meta);
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("double.py")).unwrap(),
        skill.code
    );

    let names: Vec<String> = s.list().unwrap().into_iter().map(|m| m.name).collect();
    assert_eq!(names, ["alpha", "double"]);

    s.delete("double").unwrap();
    let err = s.load("double").unwrap_err();
    assert!(matches!(err, SkillError::NotFound { .. }));
    assert!(
        err.to_string().starts_with("Skill not found: double."),
        "{err}"
    );
    assert!(err.to_string().contains("alpha"), "{err}");
    let names: Vec<String> = s.list().unwrap().into_iter().map(|m| m.name).collect();
    assert_eq!(names, ["alpha"]);
    assert!(matches!(
        s.delete("double"),
        Err(SkillError::NotFound { .. })
    ));
    // The deleted version is in the history.
    let h = s.history("double").unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].version, 1);
    assert_eq!(s.load_version("double", 1).unwrap().code, skill.code);
    assert!(!tmp.path().join("double.py").exists());
    assert!(!tmp.path().join("double.json").exists());
}

#[test]
fn metadata_fields_and_sha256() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    let before = now();
    let meta = s.save("one", "x = 1\n", "sets x").unwrap();
    assert_eq!(
        meta.sha256,
        "9e26bf369911c45c243c684147b23fc9e1dcfcf257d299a1c632016a6fcd33f4"
    );
    assert_eq!(meta.size, 6);
    assert_eq!(meta.version, 1);
    assert_eq!(meta.created, meta.updated);
    assert!(meta.created >= before && meta.created <= now());

    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("one.json")).unwrap()).unwrap();
    let obj = json.as_object().unwrap();
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "created",
            "description",
            "name",
            "sha256",
            "size",
            "updated",
            "version"
        ]
    );
    assert_eq!(obj["name"], "one");
    assert_eq!(obj["description"], "sets x");
    assert_eq!(obj["sha256"], meta.sha256);
    let created = obj["created"].as_str().unwrap();
    assert!(created.ends_with('Z'), "{created}");
    assert_eq!(DateTime::parse_from_rfc3339(created).unwrap(), meta.created);

    let mode = |p: &str| {
        std::fs::metadata(tmp.path().join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("one.py"), 0o644);
    assert_eq!(mode("one.json"), 0o644);
    assert_eq!(s.list().unwrap(), vec![meta]);
}

#[test]
fn open_creates_the_directory_0755() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a/b/skills");
    let s = store(&dir);
    assert_eq!(s.dir(), dir);
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    s.save("x", "x = 1\n", "").unwrap();
    s.save("x", "x = 2\n", "").unwrap();
    for d in [".history", ".history/x"] {
        let mode = std::fs::metadata(dir.join(d)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755, "{d}");
    }
}

#[test]
fn created_kept_across_overwrite_and_versions_grow() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    let v1 = s.save("w", "x = 1\n", "first").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let v2 = s.save("w", "x = 2\n", "second").unwrap();
    assert_eq!(v2.created, v1.created);
    assert!(v2.updated > v1.updated);
    assert_eq!(v2.version, 2);
    assert_eq!(s.load("w").unwrap().meta, v2);
    // Re-saving identical code and description is a no-op.
    let again = s.save("w", "x = 2\n", " second ").unwrap();
    assert_eq!(again, v2);
    assert_eq!(s.history("w").unwrap().len(), 1);
    // A description change alone is a new version.
    let v3 = s.save("w", "x = 2\n", "third").unwrap();
    assert_eq!(v3.version, 3);
    assert_eq!(v3.created, v1.created);
    // Delete and save again: a new skill (new created), versions keep growing.
    s.delete("w").unwrap();
    let v4 = s.save("w", "x = 4\n", "").unwrap();
    assert_eq!(v4.version, 4);
    assert!(v4.created > v1.created);
    let versions: Vec<u64> = s.history("w").unwrap().iter().map(|m| m.version).collect();
    assert_eq!(versions, [1, 2, 3]);
}

#[test]
fn history_kept_and_pruned() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store_with(tmp.path(), |l| l.max_versions_kept = 3);
    for i in 1..=6 {
        s.save("h", format!("x = {i}\n"), &format!("v{i}")).unwrap();
    }
    let h = s.history("h").unwrap();
    let versions: Vec<u64> = h.iter().map(|m| m.version).collect();
    assert_eq!(versions, [3, 4, 5]);
    assert_eq!(h[0].description, "v3");
    assert_eq!(h[0].sha256, sha256_hex(b"x = 3\n"));
    assert_eq!(s.load("h").unwrap().meta.version, 6);
    assert_eq!(s.load_version("h", 4).unwrap().code, "x = 4\n");
    let err = s.load_version("h", 1).unwrap_err();
    assert!(matches!(err, SkillError::VersionNotFound { .. }), "{err}");
    assert!(err.to_string().contains("Versions kept: 3, 4, 5."), "{err}");
    let files = files_in(&tmp.path().join(".history/h"));
    assert_eq!(files.len(), 6, "{files:?}");
    assert!(
        files[0].starts_with("000003-") && files[0].ends_with(".json"),
        "{files:?}"
    );
    // No history at all when none is kept.
    let s0 = store_with(&tmp.path().join("none"), |l| l.max_versions_kept = 0);
    s0.save("h", "x = 1\n", "").unwrap();
    s0.save("h", "x = 2\n", "").unwrap();
    assert!(s0.history("h").unwrap().is_empty());
    assert_eq!(s0.load("h").unwrap().meta.version, 2);
}

#[test]
fn size_and_content_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store_with(tmp.path(), |l| {
        l.max_code_bytes = 100;
        l.max_description_bytes = 10;
        l.max_skills = 2;
    });
    let err = s.save("big", "#".repeat(101), "").unwrap_err();
    assert!(
        matches!(
            err,
            SkillError::TooLarge {
                size: 101,
                limit: 100,
                ..
            }
        ),
        "{err}"
    );
    s.save("edge", "#".repeat(100), "").unwrap();
    let err = s.save("d", "x = 1\n", "12345678901").unwrap_err();
    assert!(
        matches!(err, SkillError::TooLarge { limit: 10, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("description"));
    s.save("d", "x = 1\n", "   1234567890   \n").unwrap();
    assert_eq!(s.load("d").unwrap().meta.description, "1234567890");

    let err = s.save("e", &b"x = '\xff'\n"[..], "").unwrap_err();
    assert!(matches!(err, SkillError::NotText { .. }), "{err}");
    assert!(err.to_string().contains("UTF-8"));
    let err = s.save("e", "x = 1\0\n", "").unwrap_err();
    assert!(err.to_string().contains("NUL"), "{err}");
    let err = s.save("e", " \n\t", "").unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");

    // The store is full: new names are refused, overwrites are not.
    let err = s.save("third", "x = 1\n", "").unwrap_err();
    assert!(
        matches!(err, SkillError::TooMany { count: 2, limit: 2 }),
        "{err}"
    );
    assert!(err.to_string().contains("delete_skill"));
    s.save("d", "x = 2\n", "").unwrap();
    s.delete("d").unwrap();
    s.save("third", "x = 1\n", "").unwrap();

    // A stored file over the limit (hand-placed) is refused on load without reading it all.
    std::fs::write(tmp.path().join("edge.py"), "#".repeat(5000)).unwrap();
    assert!(matches!(
        s.load("edge"),
        Err(SkillError::TooLarge { size: 5000, .. })
    ));
}
