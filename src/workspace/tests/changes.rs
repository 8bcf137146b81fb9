//! Snapshots and the changes an execution made.

use super::*;

#[test]
fn created_and_changed_files_are_found_and_symlinks_are_not_followed() {
    let f = Fixture::new();
    fs::write(f.p("same.txt"), b"x").unwrap();
    fs::write(f.p("edited.txt"), b"old").unwrap();
    fs::write(f.p("gone.txt"), b"bye").unwrap();
    for ws in f.both(WorkspaceLimits::default()) {
        let before = ws.snapshot().unwrap();
        fs::write(f.p("edited.txt"), b"new content").unwrap();
        fs::create_dir_all(f.p("out/deep")).unwrap();
        fs::write(f.p("out/deep/chart.png"), b"png").unwrap();
        symlink(&f.outside, f.p("link")).unwrap();
        fs::remove_file(f.p("gone.txt")).unwrap();
        let after = ws.snapshot().unwrap();
        let changes = after.changes_since(&before);
        assert_eq!(
            changes,
            vec![
                FileChange {
                    path: "edited.txt".into(),
                    size: 11,
                    created: false
                },
                FileChange {
                    path: "out/deep/chart.png".into(),
                    size: 3,
                    created: true
                },
            ]
        );
        assert_eq!(after.removed_since(&before), vec!["gone.txt".to_string()]);
        assert!(!after.truncated);
        // Undo for the other resolver's turn.
        fs::write(f.p("edited.txt"), b"old").unwrap();
        fs::write(f.p("gone.txt"), b"bye").unwrap();
        fs::remove_file(f.p("link")).unwrap();
        fs::remove_dir_all(f.p("out")).unwrap();
    }
    f.assert_outside_untouched(&["secret"]);
}

#[test]
fn a_snapshot_is_bounded_and_says_so() {
    let f = Fixture::new();
    for i in 0..20 {
        fs::write(f.p(&format!("f{i}")), b"x").unwrap();
    }
    let limits = WorkspaceLimits {
        max_list_entries: 5,
        ..WorkspaceLimits::default()
    };
    let snapshot = Workspace::open(&f.root, limits)
        .unwrap()
        .snapshot()
        .unwrap();
    assert!(snapshot.truncated);
    assert!(snapshot.changes_since(&Snapshot::default()).len() <= 5);
}
