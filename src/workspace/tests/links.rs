//! Tests of resolution beneath the root: symlinks at the name and at a parent, escapes, hard
//! links, and a directory swapped for a symlink while the tools run.

use super::*;
use rustix::io::Errno;
use std::sync::atomic::{AtomicU64, Ordering};

#[test]
fn open_creates_the_root_and_probes_openat2() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("a/b/ws");
    let ws = Workspace::open(&root, WorkspaceLimits::default()).unwrap();
    assert!(root.is_dir());
    assert_eq!(ws.root_path(), fs::canonicalize(&root).unwrap());
    assert_eq!(fs::metadata(&root).unwrap().mode() & 0o777, 0o755);
    // This kernel has openat2 (>= 5.6); the fallback is exercised by forcing it.
    eprintln!("resolver picked: {:?}", ws.resolver);
}

// ----- symlinks -----

#[test]
fn symlink_at_the_file_is_never_followed() {
    let f = Fixture::new();
    for ws in f.both(WorkspaceLimits::default()) {
        symlink(f.outside.join("secret"), f.p("evil")).unwrap();
        let err = ws.read_file("evil").unwrap_err();
        assert!(
            matches!(&err, WorkspaceError::Symlink { path } if path == "evil"),
            "{err}"
        );
        assert!(err.to_string().contains("never follow"), "{err}");
        assert!(!ws.list_files("").unwrap().files.contains(&"evil".into()));

        // Writing replaces the link itself; the target keeps its content.
        ws.write_file("evil", b"replaced").unwrap();
        let meta = fs::symlink_metadata(f.p("evil")).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(fs::read(f.p("evil")).unwrap(), b"replaced");
        f.assert_outside_untouched(&["secret"]);
        fs::remove_file(f.p("evil")).unwrap();

        // Deleting removes the link, not the target.
        symlink(f.outside.join("secret"), f.p("evil")).unwrap();
        ws.delete_file("evil").unwrap();
        assert!(fs::symlink_metadata(f.p("evil")).is_err());
        f.assert_outside_untouched(&["secret"]);

        // Relative links, links to directories and link loops are refused the same way.
        symlink("../outside/secret", f.p("rel")).unwrap();
        symlink("loop", f.p("loop")).unwrap();
        symlink("/", f.p("slash")).unwrap();
        for name in ["rel", "loop", "slash"] {
            assert!(
                matches!(ws.read_file(name), Err(WorkspaceError::Symlink { .. })),
                "{name}"
            );
        }
        assert!(matches!(
            ws.list_files("slash"),
            Err(WorkspaceError::Symlink { .. })
        ));
        for name in ["rel", "loop", "slash"] {
            ws.delete_file(name).unwrap();
        }
        f.assert_outside_untouched(&["secret"]);
    }
}

#[test]
fn symlink_at_an_intermediate_directory_is_refused() {
    let f = Fixture::new();
    fs::create_dir(f.p("a")).unwrap();
    symlink(&f.outside, f.p("dir")).unwrap();
    symlink(&f.outside, f.p("a/b")).unwrap();
    for ws in f.both(WorkspaceLimits::default()) {
        for (path, link) in [("dir/secret", "dir"), ("a/b/secret", "a/b")] {
            let err = ws.read_file(path).unwrap_err();
            assert!(
                matches!(&err, WorkspaceError::Symlink { path } if path == link),
                "{path}: {err}"
            );
            assert!(matches!(
                ws.write_file(path, b"pwned"),
                Err(WorkspaceError::Symlink { .. })
            ));
            assert!(matches!(
                ws.delete_file(path),
                Err(WorkspaceError::Symlink { .. })
            ));
        }
        assert!(matches!(
            ws.write_file("dir/new.txt", b"x"),
            Err(WorkspaceError::Symlink { .. })
        ));
        assert!(matches!(
            ws.write_file("dir/deeper/new.txt", b"x"),
            Err(WorkspaceError::Symlink { .. })
        ));
        assert!(matches!(
            ws.list_files("dir"),
            Err(WorkspaceError::Symlink { .. })
        ));
        assert!(matches!(
            ws.list_files("a/b"),
            Err(WorkspaceError::Symlink { .. })
        ));
        let all = ws.list_files("").unwrap();
        assert!(all.files.is_empty(), "{:?}", all.files);
        f.assert_outside_untouched(&["secret"]);
    }
}

#[test]
fn symlink_to_etc_at_the_root_is_refused() {
    let f = Fixture::new();
    symlink("/etc", f.p("etc")).unwrap();
    let probe = format!("cem-workspace-test-{}", std::process::id());
    for ws in f.both(WorkspaceLimits::default()) {
        assert!(matches!(
            ws.read_file("etc/passwd"),
            Err(WorkspaceError::Symlink { .. })
        ));
        assert!(matches!(
            ws.read_file("etc/hostname"),
            Err(WorkspaceError::Symlink { .. })
        ));
        assert!(ws.write_file(&format!("etc/{probe}"), b"pwned").is_err());
        assert!(!Path::new("/etc").join(&probe).exists());
        assert!(ws.delete_file("etc/hostname").is_err());
        assert!(matches!(
            ws.list_files("etc"),
            Err(WorkspaceError::Symlink { .. })
        ));
        assert!(ws.list_files("").unwrap().files.is_empty());
    }
    assert!(
        fs::symlink_metadata(f.p("etc"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn escapes_are_refused_before_touching_the_disk() {
    let f = Fixture::new();
    for ws in f.both(WorkspaceLimits::default()) {
        for bad in ["../outside/secret", "/etc/passwd", "a/../../outside/secret"] {
            assert!(matches!(
                ws.read_file(bad),
                Err(WorkspaceError::Escapes { .. })
            ));
            assert!(matches!(
                ws.write_file(bad, b"x"),
                Err(WorkspaceError::Escapes { .. })
            ));
            assert!(matches!(
                ws.delete_file(bad),
                Err(WorkspaceError::Escapes { .. })
            ));
            assert!(matches!(
                ws.list_files(bad),
                Err(WorkspaceError::Escapes { .. })
            ));
        }
        assert!(entries(&f.root).is_empty(), "nothing was created");
        f.assert_outside_untouched(&["secret"]);
    }
}

#[test]
fn fallback_walk_refuses_dot_components_itself() {
    let f = Fixture::new();
    let ws =
        Workspace::open_with(&f.root, WorkspaceLimits::default(), Some(Resolver::Walk)).unwrap();
    for comps in [&["..", "outside", "secret"][..], &["."], &[""], &["a/b"]] {
        assert_eq!(
            ws.open_beneath(
                ws.root.fd().unwrap().as_fd(),
                comps,
                OFlags::RDONLY,
                Mode::empty()
            )
            .unwrap_err(),
            Errno::INVAL
        );
    }
}

// ----- hard links -----

#[test]
fn hard_link_to_an_outside_file_is_never_modified() {
    // Only the host can make such a link (the sandbox gets EXDEV across the bind mount); a
    // read returns what the host shared, a write or delete only ever changes the name.
    let f = Fixture::new();
    for ws in f.both(WorkspaceLimits::default()) {
        fs::hard_link(f.outside.join("secret"), f.p("hl")).unwrap();
        assert_eq!(ws.read_file("hl").unwrap().bytes, CANARY);
        ws.write_file("hl", b"new content").unwrap();
        assert_eq!(fs::read(f.p("hl")).unwrap(), b"new content");
        assert_eq!(fs::metadata(f.p("hl")).unwrap().nlink(), 1);
        f.assert_outside_untouched(&["secret"]);
        assert_eq!(fs::metadata(f.outside.join("secret")).unwrap().nlink(), 1);

        fs::remove_file(f.p("hl")).unwrap();
        fs::hard_link(f.outside.join("secret"), f.p("hl")).unwrap();
        ws.delete_file("hl").unwrap();
        f.assert_outside_untouched(&["secret"]);
    }
}

// ----- races -----

/// A thread swaps `d` (a real directory) and `f` (a real file) with symlinks to the outside,
/// atomically and in a loop, while the tools use `d/...` and `f` 1000 times each.
#[test]
fn directory_swapped_for_a_symlink_never_reaches_outside() {
    let f = Fixture::new();
    fs::write(f.outside.join("f"), CANARY).unwrap();
    fs::create_dir(f.p("d")).unwrap();
    fs::write(f.p("d/f"), b"inside").unwrap();
    fs::write(f.p("f"), b"inside").unwrap();
    symlink(&f.outside, f.p("d-link")).unwrap();
    symlink(f.outside.join("secret"), f.p("f-link")).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (stop, swaps, root) = (stop.clone(), swaps.clone(), f.root.clone());
        std::thread::spawn(move || {
            let dir = rfs::open(&root, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).unwrap();
            while !stop.load(Ordering::Relaxed) {
                for (a, b) in [("d", "d-link"), ("f", "f-link")] {
                    rfs::renameat_with(&dir, a, &dir, b, rfs::RenameFlags::EXCHANGE).unwrap();
                }
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let mut outcomes = [0usize; 2];
    for ws in f.both(WorkspaceLimits::default()) {
        for i in 0..1000 {
            for path in ["d/f", "f"] {
                match ws.read_file(path) {
                    Ok(c) => {
                        assert_ne!(c.bytes, CANARY, "read escaped via {path}");
                        outcomes[0] += 1;
                    }
                    Err(_) => outcomes[1] += 1,
                }
            }
            let _ = ws.write_file("d/f", b"inside");
            let _ = ws.write_file(&format!("d/new{}", i % 7), b"x");
            let _ = ws.delete_file(&format!("d/new{}", i % 7));
            let _ = ws.delete_file("d/secret");
            if let Ok(l) = ws.list_files("d") {
                assert!(l.files.iter().all(|p| p == "d/f" || p.starts_with("d/new")));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    eprintln!(
        "swaps: {}, reads ok/refused: {outcomes:?}",
        swaps.load(Ordering::Relaxed)
    );
    assert!(swaps.load(Ordering::Relaxed) > 0);
    assert_eq!(fs::read(f.outside.join("f")).unwrap(), CANARY);
    f.assert_outside_untouched(&["f", "secret"]);
}
