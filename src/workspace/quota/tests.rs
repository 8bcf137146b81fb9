//! Tests of the quota: mountinfo parsing, where the image lives, the refusals and soft mode, and
//! (as root, with the tools) a loop-mounted workspace that the kernel keeps within its size.

use super::super::{Workspace, WorkspaceError, WorkspaceLimits};
use super::*;
use std::io::Write;

const MIB: u64 = 1024 * 1024;

#[test]
fn mountinfo_parsing_handles_escapes_and_optional_fields() {
    let text = b"22 27 0:21 / /proc rw,relatime - proc proc rw\n\
36 35 98:0 /mnt1 /mnt/with\\040space\\011tab rw,noatime master:1 shared:2 - ext3 /dev/root rw,errors=continue\n\
43 27 7:0 / /tmp/a\\134b\\012c rw,nosuid,nodev,noexec,relatime - ext4 /dev/loop0 rw\n\
garbage line\n\
44 27 7:1 / /tmp/bad\\999 rw - tmpfs tmp\\040fs rw\n";
    let m = parse_mountinfo(text);
    assert_eq!(m.len(), 4);
    assert_eq!(m[0].mount_point, Path::new("/proc"));
    assert_eq!(m[1].mount_point, Path::new("/mnt/with space\ttab"));
    assert_eq!(m[1].fstype, "ext3");
    assert_eq!(m[1].source, "/dev/root");
    assert_eq!(m[2].mount_point, Path::new("/tmp/a\\b\nc"));
    assert_eq!(m[2].fstype, "ext4");
    assert_eq!(m[3].mount_point, Path::new("/tmp/bad\\999"));
    assert_eq!(m[3].source, "tmp fs");
    assert_eq!(unescape_octal(b"\\0"), b"\\0");
    assert_eq!(unescape_octal(b"x\\"), b"x\\");
}

#[test]
fn real_mountinfo_knows_the_root() {
    assert!(is_mountpoint(Path::new("/")).unwrap());
    let tmp = tempfile::tempdir().unwrap();
    assert!(!is_mountpoint(tmp.path()).unwrap());
    unmount(tmp.path()).unwrap(); // not mounted: nothing to do
    unmount(&tmp.path().join("missing")).unwrap();
}

#[test]
fn image_lives_beside_the_workspace() {
    assert_eq!(
        image_path(Path::new("/srv/ws")),
        Path::new("/srv/ws.quota.ext4")
    );
}

#[test]
fn small_quota_and_non_directory_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(matches!(
        ensure(tmp.path(), MIB),
        Err(QuotaError::TooSmall { .. })
    ));
    let file = tmp.path().join("file");
    fs::write(&file, b"x").unwrap();
    assert!(matches!(
        ensure(&file, 32 * MIB),
        Err(QuotaError::NotADirectory { .. })
    ));
}

#[test]
fn non_empty_unmounted_workspace_gets_a_soft_quota_with_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    fs::create_dir(&root).unwrap();
    fs::write(root.join("precious.txt"), b"mine").unwrap();
    let mode = ensure(&root, 32 * MIB).unwrap();
    let QuotaMode::Soft { reason } = &mode else {
        panic!("{mode:?}");
    };
    if rustix::process::geteuid().is_root() && Tools::find().is_some() {
        assert!(reason.contains("move the files out"), "{reason}");
        assert!(reason.contains(".quota.ext4"), "{reason}");
    }
    assert!(!mode.kernel_enforced(32 * MIB));
    assert!(!is_mountpoint(&root).unwrap());
    assert!(!image_path(&fs::canonicalize(&root).unwrap()).exists());
    assert_eq!(fs::read(root.join("precious.txt")).unwrap(), b"mine");
}

fn loop_mount_cannot_run() -> Option<&'static str> {
    if !rustix::process::geteuid().is_root() {
        return Some("it needs root to mount (run as root with `cargo test -- --include-ignored`)");
    }
    if Tools::find().is_none() {
        return Some("mkfs.ext4/mount/umount not installed");
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no /dev/loop-control");
    }
    if private_mount_namespace().is_some() {
        return Some("the tests run in a private mount namespace");
    }
    None
}

/// Unmounts on drop, so a failing assertion does not leave a mount behind.
struct Unmount(PathBuf);
impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = unmount(&self.0);
    }
}

fn allocated(p: &Path) -> u64 {
    fs::metadata(p).unwrap().blocks() * 512
}

#[test]
#[ignore = "needs root, mkfs.ext4 and loop devices: loop-mounts an ext4 image"]
fn loop_mount_bounds_the_workspace() {
    if let Some(why) = loop_mount_cannot_run() {
        panic!("the loop-mount quota test cannot run here: {why}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    let _guard = Unmount(root.clone());
    let quota = 32 * MIB;

    let (image, small_fs) = first_mount(&root, quota);
    writes_past_the_quota_fail(&root, &image, quota);
    unmount(&root).unwrap();
    assert!(!is_mountpoint(&root).unwrap());
    assert_eq!(fs::read_dir(&root).unwrap().count(), 0);
    unmount(&root).unwrap();

    remounts_and_resizes(&root, quota, small_fs);
}

/// The first `ensure` makes and mounts the image; the second finds it mounted. Returns the
/// image and the size of its file system.
fn first_mount(root: &Path, quota: u64) -> (PathBuf, u64) {
    let mode = ensure(root, quota).unwrap();
    let image = image_path(&fs::canonicalize(root).unwrap());
    assert_eq!(
        mode,
        QuotaMode::LoopMount {
            image: image.clone(),
            size_bytes: quota,
            note: None
        }
    );
    assert!(mode.kernel_enforced(quota));
    assert!(is_mountpoint(root).unwrap());
    assert_eq!(fs::read_dir(root).unwrap().count(), 0, "lost+found removed");
    assert_eq!(fs::metadata(&image).unwrap().mode() & 0o777, 0o600);
    let again = ensure(root, quota).unwrap();
    assert_eq!(again.kind(), "loop_mount", "{again:?}");
    assert_eq!(mode.kind(), "loop_mount");
    let small_fs = match again {
        QuotaMode::AlreadyMounted {
            fstype, size_bytes, ..
        } => {
            assert_eq!(fstype, "ext4");
            assert!(
                size_bytes <= quota && size_bytes > quota / 2,
                "{size_bytes}"
            );
            size_bytes
        }
        other => panic!("{other:?}"),
    };

    (image, small_fs)
}

/// Writes past the quota fail: through the tool with a clear error, and directly with ENOSPC.
fn writes_past_the_quota_fail(root: &Path, image: &Path, quota: u64) {
    // Through the tool: a clear quota error, no temp file left behind.
    let limits = WorkspaceLimits {
        max_file_bytes: 64 * MIB,
        quota_bytes: quota,
        ..WorkspaceLimits::default()
    };
    let ws = Workspace::open(root, limits).unwrap();
    let err = ws
        .write_file("big.bin", &vec![0xAB; 40 * MIB as usize])
        .unwrap_err();
    assert!(matches!(err, WorkspaceError::Full { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        "workspace is full (quota 32 MiB): delete files to free space"
    );
    assert_eq!(fs::read_dir(root).unwrap().count(), 0, "no temp file left");

    // Directly, as sandbox code would: ENOSPC, and the host file stays bounded.
    let mut file = fs::File::create(root.join("fill.bin")).unwrap();
    let chunk = vec![0x5Au8; MIB as usize];
    let mut enospc = None;
    for _ in 0..40 {
        if let Err(e) = file.write_all(&chunk).and_then(|()| file.sync_data()) {
            enospc = Some(e);
            break;
        }
    }
    let e = enospc.expect("40 MiB fit into a 32 MiB quota");
    assert_eq!(e.raw_os_error(), Some(28), "{e}");
    drop(file);
    assert!(allocated(image) <= quota, "image grew past the quota");
    // The kernel enforces the quota: executions are not refused, so cleanup code can run.
    assert!(ws.check_quota().is_ok());
    drop(ws); // the root fd would keep the mount busy
}

/// After a "reboot" the image is mounted again with its data; a larger quota grows it, a
/// smaller one keeps it.
fn remounts_and_resizes(root: &Path, quota: u64, small_fs: u64) {
    // After a "reboot": the image is mounted again with its data.
    let mode = ensure(root, quota).unwrap();
    assert!(
        matches!(mode, QuotaMode::LoopMount { note: None, .. }),
        "{mode:?}"
    );
    assert!(root.join("fill.bin").exists());
    unmount(root).unwrap();

    // A larger quota grows the image; a smaller one keeps it and says so.
    let mode = ensure(root, 48 * MIB).unwrap();
    let QuotaMode::LoopMount {
        size_bytes, note, ..
    } = &mode
    else {
        panic!("{mode:?}");
    };
    assert_eq!(*size_bytes, 48 * MIB);
    assert!(note.as_deref().unwrap_or("").contains("grew"), "{mode:?}");
    let vfs = rustix::fs::statvfs(root).unwrap();
    let grown_fs = vfs.f_blocks * vfs.f_frsize;
    assert!(grown_fs >= small_fs + 12 * MIB, "{small_fs} -> {grown_fs}");
    assert!(root.join("fill.bin").exists());
    unmount(root).unwrap();
    let mode = ensure(root, 32 * MIB).unwrap();
    let QuotaMode::LoopMount {
        size_bytes, note, ..
    } = &mode
    else {
        panic!("{mode:?}");
    };
    assert_eq!(*size_bytes, 48 * MIB);
    assert!(note.as_deref().unwrap_or("").contains("kept"), "{mode:?}");
    unmount(root).unwrap();
    assert!(!is_mountpoint(root).unwrap());
}
