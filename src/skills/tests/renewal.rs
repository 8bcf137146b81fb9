//! Each operation of the store renews a stale directory: after a failover (the directory
//! replaced at its path and the old handle stale, [`SkillStore::inject_stale_handle`]) it
//! reopens the directory and answers from the new copy. An operation that skipped
//! `SkillStore::renewing` would fail with `ESTALE` here; each test runs one operation after the
//! failover, so its failure names it.

use std::path::PathBuf;

use super::{SkillStore, store};
use crate::skills::SkillError;

/// A store whose directory held what `old` saved, then failed over: the directory moved
/// aside, a new one at the configured path holding what `new` saved, the store's handle stale.
struct FailedOver {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    old_dir: PathBuf,
    s: SkillStore,
}

impl FailedOver {
    fn new(old: impl FnOnce(&SkillStore), new: impl FnOnce(&SkillStore)) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("skills");
        let old_dir = tmp.path().join("skills-old");
        let s = store(&dir);
        old(&s);
        std::fs::rename(&dir, &old_dir).unwrap();
        new(&store(&dir));
        s.inject_stale_handle();
        Self {
            _tmp: tmp,
            dir,
            old_dir,
            s,
        }
    }
}

fn save(s: &SkillStore, name: &str, code: &str) {
    s.save(name, code, "").unwrap();
}

#[test]
fn load_renews_a_stale_store() {
    let t = FailedOver::new(
        |s| save(s, "skill", "x = 1\n"),
        |s| save(s, "skill", "x = 2\n"),
    );
    assert_eq!(t.s.load("skill").unwrap().code, "x = 2\n");
}

#[test]
fn list_renews_a_stale_store() {
    let t = FailedOver::new(
        |s| save(s, "old_copy", "x = 1\n"),
        |s| save(s, "new_copy", "x = 2\n"),
    );
    let names: Vec<String> = t.s.list().unwrap().into_iter().map(|m| m.name).collect();
    assert_eq!(names, ["new_copy"]);
}

#[test]
fn history_renews_a_stale_store() {
    let t = FailedOver::new(
        |s| save(s, "skill", "x = 1\n"),
        |s| {
            save(s, "skill", "x = 2\n");
            save(s, "skill", "x = 3\n");
        },
    );
    let versions: Vec<u64> =
        t.s.history("skill")
            .unwrap()
            .iter()
            .map(|m| m.version)
            .collect();
    assert_eq!(versions, [1]);
}

#[test]
fn load_version_renews_a_stale_store() {
    let t = FailedOver::new(
        |s| save(s, "skill", "x = 1\n"),
        |s| {
            save(s, "skill", "x = 2\n");
            save(s, "skill", "x = 3\n");
        },
    );
    assert_eq!(t.s.load_version("skill", 1).unwrap().code, "x = 2\n");
}

#[test]
fn save_renews_a_stale_store() {
    let t = FailedOver::new(|_| {}, |_| {});
    save(&t.s, "fresh", "x = 1\n");
    assert!(t.dir.join("fresh.py").exists());
    assert!(
        !t.old_dir.join("fresh.py").exists(),
        "saved into the lost copy"
    );
}

#[test]
fn delete_renews_a_stale_store() {
    let t = FailedOver::new(
        |s| save(s, "gone", "x = 1\n"),
        |s| save(s, "gone", "x = 2\n"),
    );
    t.s.delete("gone").unwrap();
    assert!(!t.dir.join("gone.py").exists());
    assert!(
        t.old_dir.join("gone.py").exists(),
        "deleted from the lost copy"
    );
}

#[test]
fn a_stale_store_stays_stale_until_an_operation_renews_it() {
    let t = FailedOver::new(|_| {}, |s| save(s, "skill", "x = 1\n"));
    // What an operation that skipped the renewal would meet: every use of the handle fails.
    let err = t.s.root_fd().unwrap_err();
    assert!(
        matches!(&err, SkillError::Io { .. }) && err.is_stale(),
        "{err}"
    );
    assert!(t.s.root_fd().unwrap_err().is_stale(), "stale until renewed");
    assert_eq!(t.s.load("skill").unwrap().code, "x = 1\n");
    t.s.root_fd().expect("renewed by the load");
}
