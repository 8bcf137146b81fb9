//! Tests of reading, writing and deleting files: special files, size caps, atomic writes and
//! their temp files, ownership of what the server writes.

use super::*;
use crate::host::safe_fs::FAIL_BEFORE_RENAME;
use crate::workspace::temp::{parse_temp_writer, temp_name};
use rustix::fs::FileType;

// ----- special files -----

#[test]
fn fifo_read_does_not_block() {
    let f = Fixture::new();
    let root = rfs::open(&f.root, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).unwrap();
    rfs::mkfifoat(&root, "fifo", Mode::from_raw_mode(0o666)).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let root_path = f.root.clone();
    std::thread::spawn(move || {
        for r in [Resolver::Openat2, Resolver::Walk] {
            let ws = Workspace::open_with(&root_path, WorkspaceLimits::default(), Some(r)).unwrap();
            tx.send(ws.read_file("fifo").map(|c| c.size)).unwrap();
        }
    });
    for _ in 0..2 {
        let got = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("read_file blocked on a FIFO");
        let err = got.unwrap_err();
        assert!(
            matches!(&err, WorkspaceError::NotRegularFile { kind: "fifo", .. }),
            "{err}"
        );
        assert!(err.to_string().contains("not a regular file (fifo)"));
    }
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    assert!(ws.list_files("").unwrap().files.is_empty());
    assert_eq!(ws.usage().unwrap().files, 0);
    ws.delete_file("fifo").unwrap();
}

#[test]
fn socket_device_and_directory_are_not_read() {
    let f = Fixture::new();
    let _listener = std::os::unix::net::UnixListener::bind(f.p("sock")).unwrap();
    fs::create_dir(f.p("d")).unwrap();
    let have_dev = is_root() && {
        let root = rfs::open(&f.root, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).unwrap();
        rfs::mknodat(
            &root,
            "null",
            FileType::CharacterDevice,
            Mode::from_raw_mode(0o666),
            rfs::makedev(1, 3),
        )
        .is_ok()
    };
    for ws in f.both(WorkspaceLimits::default()) {
        let err = ws.read_file("sock").unwrap_err();
        assert!(
            matches!(&err, WorkspaceError::NotRegularFile { kind: "socket", .. }),
            "{err}"
        );
        let err = ws.read_file("d").unwrap_err();
        assert!(matches!(&err, WorkspaceError::IsDirectory { .. }), "{err}");
        if have_dev {
            let err = ws.read_file("null").unwrap_err();
            assert!(
                matches!(
                    &err,
                    WorkspaceError::NotRegularFile {
                        kind: "character device",
                        ..
                    }
                ),
                "{err}"
            );
        }
        assert!(ws.list_files("").unwrap().files.is_empty());
    }
    if !have_dev {
        eprintln!("device-node case skipped: needs root to mknod");
    }
}

// ----- size caps -----

#[test]
fn oversize_reads_and_writes_are_refused() {
    let f = Fixture::new();
    // A huge sparse file: refused from its size, without reading it.
    let sparse = fs::File::create(f.p("sparse")).unwrap();
    sparse.set_len(1 << 40).unwrap();
    drop(sparse);
    let small = WorkspaceLimits {
        max_file_bytes: 100,
        ..WorkspaceLimits::default()
    };
    fs::write(f.p("exact"), [7u8; 100]).unwrap();
    fs::write(f.p("over"), [7u8; 101]).unwrap();
    for ws in f.both(WorkspaceLimits::default()) {
        // Refused from its size (a read of 1 TiB would not end); `cargo bench --bench
        // workbench` times it.
        let err = ws.read_file("sparse").unwrap_err();
        assert_eq!(
            err.to_string(),
            "'sparse' is 1 TiB, over the 10 MiB limit for workspace tools; \
             work with it from code in an execution instead"
        );
    }
    for ws in f.both(small) {
        assert_eq!(ws.read_file("exact").unwrap().size, 100);
        assert!(matches!(
            ws.read_file("over"),
            Err(WorkspaceError::TooLarge {
                size: 101,
                limit: 100,
                ..
            })
        ));
        assert_eq!(ws.write_file("w100", &[1u8; 100]).unwrap(), 100);
        assert!(matches!(
            ws.write_file("w101", &[1u8; 101]),
            Err(WorkspaceError::TooLarge { size: 101, .. })
        ));
        assert!(!f.p("w101").exists());
    }
}

// ----- writing -----

#[test]
fn write_creates_parents_and_replaces_atomically() {
    let f = Fixture::new();
    for ws in f.both(WorkspaceLimits::default()) {
        assert_eq!(ws.write_file("a/b/c.txt", b"hello").unwrap(), 5);
        assert_eq!(fs::read(f.p("a/b/c.txt")).unwrap(), b"hello");
        assert_eq!(ws.read_file("a/b/c.txt").unwrap().bytes, b"hello");
        assert_eq!(ws.write_file("a/b/c.txt", b"bye").unwrap(), 3);
        assert_eq!(ws.read_file("./a//b/c.txt").unwrap().bytes, b"bye");
        assert_eq!(ws.write_file("empty", b"").unwrap(), 0);
        assert_eq!(ws.read_file("empty").unwrap().size, 0);
        assert_eq!(
            fs::metadata(f.p("a/b/c.txt")).unwrap().mode() & 0o7777,
            0o644
        );
        assert_eq!(fs::metadata(f.p("a/b")).unwrap().mode() & 0o7777, 0o755);
        ws.write_file("%2e%2e", b"literal").unwrap();
        assert_eq!(fs::read(f.p("%2e%2e")).unwrap(), b"literal");
        assert_eq!(ws.write_file("日本語/données.txt", b"u").unwrap(), 1);

        // A directory at the name, a file where a parent should be.
        fs::create_dir_all(f.p("dir")).unwrap();
        let err = ws.write_file("dir", b"x").unwrap_err();
        assert!(matches!(&err, WorkspaceError::IsDirectory { .. }), "{err}");
        let err = ws.write_file("empty/x", b"x").unwrap_err();
        assert!(
            matches!(&err, WorkspaceError::NotADirectory { path } if path == "empty"),
            "{err}"
        );
        assert!(
            !entries(&f.root).iter().any(|n| n.starts_with(TEMP_PREFIX)),
            "no temp files left"
        );
        for p in ["a", "dir", "日本語"] {
            fs::remove_dir_all(f.p(p)).unwrap();
        }
        for p in ["empty", "%2e%2e"] {
            fs::remove_file(f.p(p)).unwrap();
        }
    }
}

#[test]
fn failed_write_leaves_no_temp_file_and_keeps_the_old_content() {
    let f = Fixture::new();
    for ws in f.both(WorkspaceLimits::default()) {
        ws.write_file("d/keep.txt", b"old").unwrap();
        FAIL_BEFORE_RENAME.with(|c| c.set(true));
        let result = ws.write_file("d/keep.txt", b"new");
        FAIL_BEFORE_RENAME.with(|c| c.set(false));
        assert!(result.is_err());
        assert_eq!(fs::read(f.p("d/keep.txt")).unwrap(), b"old");
        assert_eq!(entries(&f.p("d")), ["keep.txt"]);
    }
}

#[test]
fn temp_files_of_a_dead_writer_are_removed_and_a_live_ones_kept() {
    let f = Fixture::new();
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    let dead = format!("{TEMP_PREFIX}{}-1-00000000deadbeef", u32::MAX - 1);
    let live = temp_name();
    let legacy_new = format!("{TEMP_PREFIX}0123456789abcdef");
    let legacy_old = format!("{TEMP_PREFIX}fedcba9876543210");
    fs::create_dir_all(f.p("d/e")).unwrap();
    for (name, content) in [
        (format!("d/e/{dead}"), "half a file"),
        (dead.clone(), "half a file"),
        (live.clone(), "being written"),
        (legacy_new.clone(), "recent"),
        (legacy_old.clone(), "old"),
        ("data.txt".to_string(), "user data"),
    ] {
        fs::write(f.p(&name), content).unwrap();
    }
    let old = std::time::SystemTime::now() - Duration::from_secs(2 * 3600);
    fs::File::options()
        .write(true)
        .open(f.p(&legacy_old))
        .unwrap()
        .set_modified(old)
        .unwrap();
    // Not regular files: left alone (a link is never followed).
    let dead_dir = format!("{TEMP_PREFIX}{}-1-00000000deadbee0", u32::MAX - 1);
    fs::create_dir(f.p(&dead_dir)).unwrap();
    let dead_link = format!("{TEMP_PREFIX}{}-1-00000000deadbee1", u32::MAX - 1);
    symlink(f.outside.join("secret"), f.p(&dead_link)).unwrap();

    assert_eq!(ws.remove_stale_temps().unwrap(), 3);
    let mut left = entries(&f.root);
    left.sort();
    let mut expected = vec![
        "d".to_string(),
        "data.txt".into(),
        legacy_new,
        live,
        dead_dir,
        dead_link,
    ];
    expected.sort();
    assert_eq!(left, expected);
    assert!(entries(&f.p("d/e")).is_empty());
    f.assert_outside_untouched(&["secret"]);
    assert_eq!(ws.remove_stale_temps().unwrap(), 0);
}

#[test]
fn temp_names_carry_the_writer() {
    let name = temp_name();
    let (pid, started) = parse_temp_writer(name.strip_prefix(TEMP_PREFIX).unwrap()).unwrap();
    assert_eq!(pid, std::process::id());
    assert!(!crate::host::process::process_is_gone(pid, started));
    for junk in [
        "",
        "1-2",
        "1-2-xyz",
        "a-2-0123456789abcdef",
        "1-2-0123456789abcde",
    ] {
        assert_eq!(parse_temp_writer(junk), None, "{junk:?}");
    }
}

#[test]
#[ignore = "needs root: chowns new files to the workspace owner"]
fn files_written_as_root_belong_to_the_workspace_owner() {
    require_root("chowning new files");
    let f = Fixture::new();
    // Root-owned workspace: nothing is chowned (prepare_for_sandbox hands the root over).
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    ws.write_file("r/x", b"x").unwrap();
    assert_eq!(fs::metadata(f.p("r/x")).unwrap().uid(), 0);
    // Owned by a developer: new directories and files are theirs.
    std::os::unix::fs::chown(&f.root, Some(12345), Some(12346)).unwrap();
    ws.write_file("n/m/x.txt", b"x").unwrap();
    for p in ["n", "n/m", "n/m/x.txt"] {
        let m = fs::metadata(f.p(p)).unwrap();
        assert_eq!((m.uid(), m.gid()), (12345, 12346), "{p}");
    }
}

// ----- deleting -----

#[test]
fn delete_removes_files_only() {
    let f = Fixture::new();
    for ws in f.both(WorkspaceLimits::default()) {
        ws.write_file("d/x", b"x").unwrap();
        ws.delete_file("d/x").unwrap();
        assert!(!f.p("d/x").exists());
        let err = ws.delete_file("d").unwrap_err();
        assert!(matches!(&err, WorkspaceError::IsDirectory { .. }), "{err}");
        assert!(f.p("d").is_dir());
        let err = ws.delete_file("d/x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "file not found: 'd/x'; list_workspace_files shows what exists"
        );
        assert!(matches!(
            ws.delete_file("nope/x"),
            Err(WorkspaceError::NotFound { path }) if path == "nope/x"
        ));
        fs::remove_dir(f.p("d")).unwrap();
    }
}
