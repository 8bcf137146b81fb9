use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::sandbox::image::tree::unpack::{Bounds, UnpackError, unpack};
use crate::sandbox::image::tree::*;

const BIG: Bounds = Bounds {
    bytes: 1 << 20,
    entries: 1000,
};

/// One entry of a hand-made archive; the name is written into the header as is, so hostile
/// names (which `tar::Builder` refuses) can be made.
struct Entry<'a> {
    name: &'a str,
    kind: tar::EntryType,
    mode: u32,
    link: &'a str,
    data: &'a [u8],
    mtime: u64,
}

fn entry(name: &str, kind: tar::EntryType) -> Entry<'_> {
    Entry {
        name,
        kind,
        mode: if kind.is_dir() { 0o755 } else { 0o644 },
        link: "",
        data: b"",
        mtime: 1_600_000_000,
    }
}

fn archive(entries: &[Entry<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        let mut header = tar::Header::new_old();
        let old = header.as_old_mut();
        old.name[..e.name.len()].copy_from_slice(e.name.as_bytes());
        old.linkname[..e.link.len()].copy_from_slice(e.link.as_bytes());
        header.set_entry_type(e.kind);
        header.set_mode(e.mode);
        header.set_size(e.data.len() as u64);
        header.set_mtime(e.mtime);
        header.set_uid(0);
        header.set_gid(0);
        header.set_cksum();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(e.data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

fn dir_fd(path: &Path) -> OwnedFd {
    rfs::open(path, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap()
}

/// Unpacks into `root/target`, with `root/outside` beside it for escapes to aim at.
fn unpack_beside(
    entries: &[Entry<'_>],
) -> (tempfile::TempDir, Result<unpack::Unpacked, UnpackError>) {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("target")).unwrap();
    std::fs::create_dir(root.path().join("outside")).unwrap();
    let fd = dir_fd(&root.path().join("target"));
    let result = unpack(&archive(entries)[..], fd.as_fd(), "usr", BIG);
    (root, result)
}

fn nothing_outside(root: &Path) {
    let outside: Vec<_> = std::fs::read_dir(root.join("outside")).unwrap().collect();
    assert!(
        outside.is_empty(),
        "written outside the target: {outside:?}"
    );
    let top: Vec<_> = std::fs::read_dir(root).unwrap().collect();
    assert_eq!(top.len(), 2, "only target and outside: {top:?}");
}

#[test]
fn a_plain_tree_is_unpacked_with_its_modes_links_and_times() {
    use tar::EntryType as T;
    let (root, result) = unpack_beside(&[
        entry("usr/", T::Directory),
        entry("usr/bin/", T::Directory),
        Entry {
            mode: 0o755,
            data: b"#!/bin/sh\n",
            ..entry("usr/bin/tool", T::Regular)
        },
        Entry {
            link: "tool",
            ..entry("usr/bin/alias", T::Symlink)
        },
        Entry {
            link: "usr/bin/tool",
            ..entry("usr/bin/hard", T::Link)
        },
        Entry {
            mode: 0o555,
            ..entry("usr/ro/", T::Directory)
        },
        Entry {
            data: b"x",
            ..entry("usr/ro/file", T::Regular)
        },
    ]);
    let done = result.unwrap();
    assert_eq!(done.files, 2);
    let usr = root.path().join("target/usr");
    let tool = std::fs::metadata(usr.join("bin/tool")).unwrap();
    assert_eq!(tool.permissions().mode() & 0o7777, 0o755);
    assert_eq!(
        tool.mtime(),
        1_600_000_000,
        "mtimes kept (Python's .pyc checks)"
    );
    assert_eq!(
        std::fs::read_link(usr.join("bin/alias")).unwrap(),
        Path::new("tool")
    );
    assert_eq!(
        std::fs::metadata(usr.join("bin/hard")).unwrap().ino(),
        tool.ino()
    );
    assert_eq!(std::fs::read(usr.join("ro/file")).unwrap(), b"x");
    // A read-only directory keeps its read and execute bits (and its owner may remove it).
    let ro = std::fs::metadata(usr.join("ro"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(ro & 0o055, 0o055);
}

#[test]
fn parent_directory_names_are_refused() {
    use tar::EntryType as T;
    let (root, result) = unpack_beside(&[
        entry("usr/", T::Directory),
        Entry {
            data: b"owned",
            ..entry("usr/../../outside/evil", T::Regular)
        },
    ]);
    assert!(
        matches!(result, Err(UnpackError::Escapes { .. })),
        "{result:?}"
    );
    nothing_outside(root.path());
}

#[test]
fn absolute_names_are_refused() {
    use tar::EntryType as T;
    let (root, result) = unpack_beside(&[Entry {
        data: b"owned",
        ..entry("/tmp/cem-absolute-evil", T::Regular)
    }]);
    assert!(
        matches!(result, Err(UnpackError::Escapes { .. })),
        "{result:?}"
    );
    assert!(!Path::new("/tmp/cem-absolute-evil").exists());
    nothing_outside(root.path());
}

#[test]
fn entries_outside_the_served_directory_are_refused() {
    use tar::EntryType as T;
    let (root, result) = unpack_beside(&[entry("etc/", T::Directory)]);
    assert!(
        matches!(result, Err(UnpackError::OutsideTop { .. })),
        "{result:?}"
    );
    nothing_outside(root.path());
}

#[test]
fn a_file_through_a_symlink_is_refused() {
    use tar::EntryType as T;
    let root = tempfile::tempdir().unwrap();
    let outside = root.path().join("outside");
    let link = outside.to_str().unwrap();
    let (root, result) = {
        std::fs::create_dir(root.path().join("target")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        let fd = dir_fd(&root.path().join("target"));
        let tar = archive(&[
            entry("usr/", T::Directory),
            Entry {
                link,
                ..entry("usr/lib", T::Symlink)
            },
            Entry {
                data: b"owned",
                ..entry("usr/lib/evil", T::Regular)
            },
        ]);
        let result = unpack(&tar[..], fd.as_fd(), "usr", BIG);
        (root, result)
    };
    assert!(
        matches!(result, Err(UnpackError::ThroughLink { .. })),
        "{result:?}"
    );
    nothing_outside(root.path());
    // A directory entry over the link does not turn it into a way out either.
    let tar = archive(&[
        entry("usr/", T::Directory),
        Entry {
            link,
            ..entry("usr/lib", T::Symlink)
        },
        entry("usr/lib/", T::Directory),
    ]);
    let other = tempfile::tempdir().unwrap();
    let result = unpack(&tar[..], dir_fd(other.path()).as_fd(), "usr", BIG);
    assert!(
        matches!(result, Err(UnpackError::ThroughLink { .. })),
        "{result:?}"
    );
}

#[test]
fn the_served_directory_itself_must_be_a_directory() {
    use tar::EntryType as T;
    let (root, result) = unpack_beside(&[Entry {
        link: "/etc",
        ..entry("usr", T::Symlink)
    }]);
    assert!(
        matches!(result, Err(UnpackError::TopNotADirectory { .. })),
        "{result:?}"
    );
    nothing_outside(root.path());
}

#[test]
fn a_hard_link_to_a_file_outside_is_refused() {
    use tar::EntryType as T;
    let (root, result) = unpack_beside(&[
        entry("usr/", T::Directory),
        Entry {
            link: "../outside/secret",
            ..entry("usr/stolen", T::Link)
        },
    ]);
    assert!(
        matches!(result, Err(UnpackError::Escapes { .. })),
        "{result:?}"
    );
    nothing_outside(root.path());
    let (_root, result) = unpack_beside(&[
        entry("usr/", T::Directory),
        Entry {
            link: "/etc/shadow",
            ..entry("usr/stolen", T::Link)
        },
    ]);
    assert!(
        matches!(result, Err(UnpackError::Escapes { .. })),
        "{result:?}"
    );
}

#[test]
fn device_nodes_are_left_out_and_setuid_bits_dropped() {
    use tar::EntryType as T;
    let (root, result) = unpack_beside(&[
        entry("usr/", T::Directory),
        entry("usr/mem", T::Char),
        entry("usr/disk", T::Block),
        entry("usr/pipe", T::Fifo),
        Entry {
            mode: 0o4755,
            data: b"suid",
            ..entry("usr/su", T::Regular)
        },
        Entry {
            mode: 0o2755,
            ..entry("usr/shared/", T::Directory)
        },
    ]);
    let done = result.unwrap();
    assert_eq!(done.skipped, 3);
    assert_eq!(done.privileges_dropped, 2);
    let usr = root.path().join("target/usr");
    for name in ["mem", "disk", "pipe"] {
        assert!(!usr.join(name).exists(), "{name} was created");
    }
    let mode = |p: &str| std::fs::metadata(usr.join(p)).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode("su"), 0o755);
    assert_eq!(mode("shared") & 0o6000, 0);
}

#[test]
fn the_bounds_stop_a_large_archive() {
    use tar::EntryType as T;
    let data = vec![b'x'; 4096];
    let root = tempfile::tempdir().unwrap();
    let tar = archive(&[
        entry("usr/", T::Directory),
        Entry {
            data: &data,
            ..entry("usr/big", T::Regular)
        },
    ]);
    let small = Bounds {
        bytes: 1000,
        entries: 100,
    };
    let result = unpack(&tar[..], dir_fd(root.path()).as_fd(), "usr", small);
    assert!(
        matches!(result, Err(UnpackError::TooLarge(1000))),
        "{result:?}"
    );
    let few = Bounds {
        bytes: 1 << 20,
        entries: 1,
    };
    let other = tempfile::tempdir().unwrap();
    let result = unpack(&tar[..], dir_fd(other.path()).as_fd(), "usr", few);
    assert!(
        matches!(result, Err(UnpackError::TooManyEntries(1))),
        "{result:?}"
    );
}

#[test]
fn auto_serves_from_the_host_only_on_a_driver_in_user_space() {
    let on = |driver: &str, rootless| EngineStorage {
        driver: driver.into(),
        rootless,
    };
    assert!(choose(ImageTreeMode::Auto, &on("fuse-overlayfs", false)).host);
    assert!(choose(ImageTreeMode::Auto, &on("fuse-overlayfs", true)).host);
    for driver in ["overlay2", "overlay", "vfs", "btrfs", ""] {
        assert!(
            !choose(ImageTreeMode::Auto, &on(driver, true)).host,
            "{driver}"
        );
    }
    assert!(choose(ImageTreeMode::Host, &on("overlay2", false)).host);
    let engine = choose(ImageTreeMode::Engine, &on("fuse-overlayfs", false));
    assert!(!engine.host);
    assert!(
        engine.reason.contains("fuse-overlayfs"),
        "{}",
        engine.reason
    );
}

#[test]
fn short_ids_are_hex() {
    assert_eq!(
        short_id("sha256:0123456789abcdef0000"),
        Some("0123456789ab")
    );
    assert_eq!(short_id("0123456789abcdef"), Some("0123456789ab"));
    assert_eq!(short_id("sha256:../../etc/x"), None);
    assert_eq!(short_id("abc"), None);
}
