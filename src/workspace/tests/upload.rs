//! Uploads staged in an unnamed file and moved in whole: nothing under any name until the
//! commit, nothing left by a cancelled one, never over an existing file unless asked, never
//! out of the workspace, and the hash of what arrived.

use super::*;

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[test]
fn a_staged_file_has_no_name_until_it_is_committed() {
    let f = Fixture::new();
    for ws in f.both(WorkspaceLimits::default()) {
        let mut staged = ws.stage().unwrap();
        staged.write(b"a,b\n", &ws).unwrap();
        staged.write(b"1,2\n", &ws).unwrap();
        assert_eq!(staged.size(), 8);
        // Nothing in the workspace under any name while it arrives.
        assert_eq!(entries(&f.root), Vec::<String>::new());
        let done = staged.commit(&ws, "in/data.csv", false).unwrap();
        assert_eq!(done.size, 8);
        assert_eq!(done.sha256, sha256_hex(b"a,b\n1,2\n"));
        assert!(!done.replaced);
        assert_eq!(fs::read(f.p("in/data.csv")).unwrap(), b"a,b\n1,2\n");
        assert_eq!(entries(&f.root), vec!["in"]);
        assert_eq!(entries(&f.p("in")), vec!["data.csv"]);
        fs::remove_dir_all(f.p("in")).unwrap();
    }
}

#[test]
fn a_cancelled_upload_leaves_nothing() {
    let f = Fixture::new();
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    let mut staged = ws.stage().unwrap();
    staged.write(&[7u8; 100_000], &ws).unwrap();
    drop(staged);
    assert_eq!(entries(&f.root), Vec::<String>::new());
}

#[test]
fn an_existing_file_is_replaced_only_when_asked() {
    let f = Fixture::new();
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    fs::write(f.p("x.txt"), b"old").unwrap();
    let mut staged = ws.stage().unwrap();
    staged.write(b"new", &ws).unwrap();
    let e = staged.commit(&ws, "x.txt", false).unwrap_err();
    assert!(matches!(e, WorkspaceError::Exists { .. }), "{e}");
    assert!(e.to_string().contains("overwrite"), "{e}");
    assert_eq!(fs::read(f.p("x.txt")).unwrap(), b"old");
    assert_eq!(entries(&f.root), vec!["x.txt"]);

    let mut staged = ws.stage().unwrap();
    staged.write(b"new", &ws).unwrap();
    let done = staged.commit(&ws, "x.txt", true).unwrap();
    assert!(done.replaced);
    assert_eq!(fs::read(f.p("x.txt")).unwrap(), b"new");
    assert_eq!(entries(&f.root), vec!["x.txt"]);
}

#[test]
fn an_upload_never_lands_outside_or_through_a_link() {
    let f = Fixture::new();
    for ws in f.both(WorkspaceLimits::default()) {
        symlink(&f.outside, f.p("out")).unwrap();
        for bad in [
            "../outside/secret",
            "/etc/passwd",
            "out/secret",
            "a\0b",
            &"n".repeat(256),
        ] {
            let mut staged = ws.stage().unwrap();
            staged.write(b"evil", &ws).unwrap();
            assert!(
                staged.commit(&ws, bad, true).is_err(),
                "{bad:?} was accepted"
            );
        }
        // A link at the name itself is replaced, not followed.
        symlink(f.outside.join("secret"), f.p("s")).unwrap();
        let mut staged = ws.stage().unwrap();
        staged.write(b"mine", &ws).unwrap();
        staged.commit(&ws, "s", true).unwrap();
        assert_eq!(fs::read(f.p("s")).unwrap(), b"mine");
        f.assert_outside_untouched(&["secret"]);
        fs::remove_file(f.p("out")).unwrap();
        fs::remove_file(f.p("s")).unwrap();
    }
}

#[test]
fn a_name_that_is_a_directory_is_refused() {
    let f = Fixture::new();
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    fs::create_dir(f.p("d")).unwrap();
    for overwrite in [false, true] {
        let mut staged = ws.stage().unwrap();
        staged.write(b"x", &ws).unwrap();
        let e = staged.commit(&ws, "d", overwrite).unwrap_err();
        assert!(
            matches!(
                e,
                WorkspaceError::IsDirectory { .. } | WorkspaceError::Exists { .. }
            ),
            "{e}"
        );
    }
    assert_eq!(entries(&f.root), vec!["d"]);
}

#[test]
fn without_o_tmpfile_a_temp_file_stands_in_and_goes_either_way() {
    let f = Fixture::new();
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    let tmp = rustix::fs::OFlags::empty();
    let mut staged = ws.stage_with(tmp).unwrap();
    staged.write(b"part", &ws).unwrap();
    let names = entries(&f.root);
    assert!(
        names.len() == 1 && names[0].starts_with(TEMP_PREFIX),
        "{names:?}"
    );
    drop(staged);
    assert_eq!(entries(&f.root), Vec::<String>::new());
    for overwrite in [false, true] {
        let mut staged = ws.stage_with(tmp).unwrap();
        staged.write(b"whole", &ws).unwrap();
        staged.commit(&ws, "d/f.bin", overwrite).unwrap();
        assert_eq!(entries(&f.root), vec!["d"]);
        assert_eq!(fs::read(f.p("d/f.bin")).unwrap(), b"whole");
        fs::remove_dir_all(f.p("d")).unwrap();
    }
}
