//! Each operation meant to renew the root does: after a failover (the directory replaced at its
//! path and the old handle stale, [`Workspace::inject_stale_handle`]) it reopens the root and
//! answers from the new copy. An operation that skipped [`Workspace::renewing`] would fail with
//! `ESTALE` here; each test runs one operation after the failover, so its failure names it.

use super::*;

/// A workspace over `old`'s files, then failed over: the directory moved aside, a new one at
/// the configured path holding `new`'s files, the workspace's handle stale.
struct FailedOver {
    f: Fixture,
    ws: Workspace,
}

impl FailedOver {
    fn new(old: &[(&str, &[u8])], new: &[(&str, &[u8])]) -> Self {
        let f = Fixture::new();
        write_all(&f.root, old);
        let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
        fs::rename(&f.root, f.root.with_file_name("ws-old")).unwrap();
        fs::create_dir(&f.root).unwrap();
        write_all(&f.root, new);
        ws.inject_stale_handle();
        Self { f, ws }
    }

    fn old(&self, rel: &str) -> PathBuf {
        self.f.root.with_file_name("ws-old").join(rel)
    }
}

fn write_all(dir: &Path, files: &[(&str, &[u8])]) {
    for (rel, bytes) in files {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
}

#[test]
fn read_file_renews_a_stale_root() {
    let t = FailedOver::new(&[("a.txt", b"old")], &[("a.txt", b"new copy")]);
    assert_eq!(t.ws.read_file("a.txt").unwrap().bytes, b"new copy");
}

#[test]
fn file_size_renews_a_stale_root() {
    let t = FailedOver::new(&[("a.txt", b"old")], &[("a.txt", b"new copy")]);
    assert_eq!(t.ws.file_size("a.txt").unwrap(), 8);
}

#[test]
fn write_file_renews_a_stale_root() {
    let t = FailedOver::new(&[], &[]);
    assert!(
        !t.ws.limits().soft_quota,
        "no usage walk renews in its place"
    );
    assert_eq!(t.ws.write_file("out/w.txt", b"written").unwrap(), 7);
    assert_eq!(fs::read(t.f.p("out/w.txt")).unwrap(), b"written");
    assert!(!t.old("out").exists(), "written into the lost copy");
}

#[test]
fn delete_file_renews_a_stale_root() {
    let t = FailedOver::new(&[("d.txt", b"old")], &[("d.txt", b"new")]);
    t.ws.delete_file("d.txt").unwrap();
    assert!(!t.f.p("d.txt").exists());
    assert!(t.old("d.txt").exists(), "deleted from the lost copy");
}

#[test]
fn list_files_renews_a_stale_root() {
    let t = FailedOver::new(&[("old.txt", b"")], &[("new.txt", b""), ("sub/n.txt", b"")]);
    assert_eq!(t.ws.list_files("").unwrap().files, ["new.txt", "sub/n.txt"]);
}

#[test]
fn usage_renews_a_stale_root() {
    let t = FailedOver::new(&[], &[("a.txt", b"1"), ("sub/b.txt", b"2")]);
    assert_eq!(t.ws.usage().unwrap().files, 2);
}

#[test]
fn the_changes_snapshot_renews_a_stale_root() {
    let t = FailedOver::new(&[("old.txt", b"")], &[("made.txt", b"abc")]);
    let changes = t.ws.snapshot().unwrap().changes_since(&Snapshot::default());
    assert_eq!(
        changes,
        [FileChange {
            path: "made.txt".into(),
            size: 3,
            created: true
        }]
    );
}

#[test]
fn a_stale_root_stays_stale_until_an_operation_renews_it() {
    let t = FailedOver::new(&[], &[("a.txt", b"x")]);
    // What an operation that skipped the renewal would meet: every use of the handle fails.
    let err = t.ws.root_fd().unwrap_err();
    assert!(err.is_stale(), "{err}");
    assert!(
        t.ws.root_fd().unwrap_err().is_stale(),
        "stale until renewed"
    );
    assert_eq!(t.ws.list_files("").unwrap().files, ["a.txt"]);
    t.ws.root_fd().expect("renewed by the listing");
}
