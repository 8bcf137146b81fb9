//! A store whose directory fd went stale (shared storage after a failover) reopens it from the
//! configured path and runs the operation again.

use std::cell::Cell;

use rustix::io::Errno;

use super::store;
use crate::skills::SkillError;

fn names(s: &crate::skills::SkillStore) -> Vec<String> {
    s.list().unwrap().into_iter().map(|m| m.name).collect()
}

#[test]
fn a_stale_store_is_reopened_from_its_path_and_the_operation_runs_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("skills");
    let s = store(&dir);
    s.save("old_copy", "x = 1\n", "").unwrap();
    // The directory is replaced under the open fd, as a lost replica's is after a failover.
    std::fs::rename(&dir, tmp.path().join("skills-old")).unwrap();
    store(&dir).save("new_copy", "x = 2\n", "").unwrap();
    assert_eq!(
        names(&s),
        ["old_copy"],
        "the old fd still reaches the old directory"
    );

    let runs = Cell::new(0);
    let listed = s
        .renewing(|| {
            runs.set(runs.get() + 1);
            if runs.get() == 1 {
                Err(SkillError::io("list", Errno::STALE))
            } else {
                s.list()
            }
        })
        .unwrap();
    assert_eq!(runs.get(), 2);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name, "new_copy");
    // Later operations get the renewed fd; other errors run once.
    assert_eq!(s.load("new_copy").unwrap().code, "x = 2\n");
    runs.set(0);
    let err = s
        .renewing(|| {
            runs.set(runs.get() + 1);
            s.load("old_copy")
        })
        .unwrap_err();
    assert!(matches!(err, SkillError::NotFound { .. }), "{err}");
    assert_eq!(runs.get(), 1);
}
