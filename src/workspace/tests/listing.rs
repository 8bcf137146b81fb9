//! Tests of listing, usage and the soft quota.

use super::*;

// ----- listing -----

#[test]
fn listing_is_sorted_recursive_and_regular_files_only() {
    let f = Fixture::new();
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    for p in [
        "b.txt",
        "a/z",
        "a/b/c.txt",
        ".hidden",
        "lost+found/x",
        "a/lost+found/y",
    ] {
        ws.write_file(p, b"x").unwrap();
    }
    symlink(&f.outside, f.p("a/link")).unwrap();
    symlink(f.outside.join("secret"), f.p("slink")).unwrap();
    for ws in f.both(WorkspaceLimits::default()) {
        let l = ws.list_files("").unwrap();
        assert_eq!(
            l.files,
            [".hidden", "a/b/c.txt", "a/lost+found/y", "a/z", "b.txt"]
        );
        assert!(!l.truncated);
        assert_eq!(l.skipped, 0);
        assert_eq!(ws.list_files(".").unwrap(), l);
        assert_eq!(
            ws.list_files("a").unwrap().files,
            ["a/b/c.txt", "a/lost+found/y", "a/z"]
        );
        assert_eq!(ws.list_files("a/b/").unwrap().files, ["a/b/c.txt"]);
        assert_eq!(ws.list_files("lost+found").unwrap().files, ["lost+found/x"]);
        assert!(matches!(
            ws.list_files("b.txt"),
            Err(WorkspaceError::NotADirectory { .. })
        ));
        assert!(matches!(
            ws.list_files("missing"),
            Err(WorkspaceError::NotFound { .. })
        ));
        // Every listed path is accepted back by the other tools.
        for p in &l.files {
            ws.read_file(p).unwrap();
        }
    }
}

#[test]
fn names_with_newlines_or_invalid_utf8_are_skipped_and_counted() {
    let f = Fixture::new();
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    ws.write_file("ok.txt", b"x").unwrap();
    let bad: [&[u8]; 4] = [b"new\nline", b"bad\xffutf8", b"back\\slash", b"tab\there"];
    for name in bad {
        fs::write(f.root.join(OsStr::from_bytes(name)), b"x").unwrap();
    }
    let bad_dir = f.root.join(OsStr::from_bytes(b"dir\xfe"));
    fs::create_dir(&bad_dir).unwrap();
    fs::write(bad_dir.join("inner.txt"), b"x").unwrap();
    for ws in f.both(WorkspaceLimits::default()) {
        let l = ws.list_files("").unwrap();
        assert_eq!(l.files, ["ok.txt"]);
        assert_eq!(l.skipped, 5);
        assert!(!l.truncated);
    }
}

#[test]
fn listing_stops_at_the_depth_limit() {
    let f = Fixture::new();
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    let deep = vec!["d"; LIST_MAX_DEPTH + 3].join("/");
    ws.write_file(&format!("{deep}/bottom.txt"), b"x").unwrap();
    ws.write_file("d/d/top.txt", b"x").unwrap();
    let l = ws.list_files("").unwrap();
    assert_eq!(l.files, ["d/d/top.txt"]);
    assert!(l.truncated);
}

/// The time these take is measured by `cargo bench --bench workbench`, not asserted here.
#[test]
fn listing_100k_files_is_bounded_and_usage_counts_them_all() {
    let f = Fixture::new();
    let many = f.p("many");
    fs::create_dir(&many).unwrap();
    for i in 0..100_000 {
        fs::File::create(many.join(format!("f{i:06}"))).unwrap();
    }
    for ws in f.both(WorkspaceLimits::default()) {
        let l = ws.list_files("").unwrap();
        assert!(l.truncated);
        assert_eq!(l.files.len(), DEFAULT_MAX_LIST_ENTRIES);
        assert!(l.files.windows(2).all(|w| w[0] < w[1]));
        let u = ws.usage().unwrap();
        assert_eq!(u.files, 100_000);
        assert!(!u.truncated);
    }
}

// ----- usage and the soft quota -----

#[test]
fn usage_counts_allocated_bytes_and_hard_links_once() {
    let f = Fixture::new();
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    for p in ["a", "b/c", "b/d/e"] {
        ws.write_file(p, &[1u8; 10_000]).unwrap();
    }
    fs::hard_link(f.p("a"), f.p("a-link")).unwrap();
    symlink(&f.outside, f.p("out")).unwrap();
    let u = ws.usage().unwrap();
    assert_eq!(u.files, 3);
    assert!(u.bytes >= 30_000, "{u:?}");
    assert!(u.bytes < 1_000_000, "{u:?}");
    assert!(!u.truncated);
}

#[test]
fn soft_quota_refuses_writes_and_executions_when_full() {
    let f = Fixture::new();
    let limits = WorkspaceLimits {
        quota_bytes: 1024 * 1024,
        soft_quota: true,
        ..WorkspaceLimits::default()
    };
    for ws in f.both(limits) {
        ws.write_file("one", &[1u8; 600 * 1024]).unwrap();
        ws.check_quota().unwrap();
        let err = ws.write_file("two", &[1u8; 600 * 1024]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "workspace is full (quota 1 MiB): delete files to free space"
        );
        assert!(!f.p("two").exists());
        // The sandbox writes past the quota directly: the next execution is refused.
        fs::write(f.p("sandbox.bin"), vec![1u8; 2 * 1024 * 1024]).unwrap();
        assert!(matches!(ws.check_quota(), Err(WorkspaceError::Full { .. })));
        ws.delete_file("sandbox.bin").unwrap();
        ws.delete_file("one").unwrap();
        ws.check_quota().unwrap();
    }
}
