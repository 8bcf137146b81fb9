//! Tests of the root fd's renewal: a stale handle is reopened from the configured path once per
//! operation, and nothing else makes it reopen.

use super::*;
use rustix::io::Errno;
use std::cell::Cell;

fn stale() -> WorkspaceError {
    WorkspaceError::io("open", Errno::STALE)
}

/// Runs an operation that always fails stale; returns the error and how often it ran.
fn always_stale(ws: &Workspace) -> (WorkspaceError, usize) {
    let runs = Cell::new(0);
    let err = ws
        .renewing(|| -> Result<()> {
            runs.set(runs.get() + 1);
            Err(stale())
        })
        .unwrap_err();
    (err, runs.get())
}

#[test]
fn a_stale_root_is_reopened_from_its_path_and_the_operation_runs_again() {
    let f = Fixture::new();
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    // The directory is replaced under the open fd, as a lost replica's is after a failover.
    fs::rename(&f.root, f.root.with_file_name("ws-old")).unwrap();
    fs::create_dir(&f.root).unwrap();
    fs::write(f.p("moved.txt"), b"on the new copy").unwrap();
    assert!(
        ws.read_file("moved.txt").is_err(),
        "the old fd still reaches the old directory"
    );

    let runs = Cell::new(0);
    let got = ws
        .renewing(|| {
            runs.set(runs.get() + 1);
            if runs.get() == 1 {
                Err(stale())
            } else {
                ws.read_file("moved.txt")
            }
        })
        .unwrap();
    assert_eq!(runs.get(), 2);
    assert_eq!(got.bytes, b"on the new copy");
    // Later operations get the renewed fd.
    assert_eq!(ws.list_files("").unwrap().files, ["moved.txt"]);
    ws.write_file("new.txt", b"x").unwrap();
    assert!(f.p("new.txt").exists());
    assert!(!f.root.with_file_name("ws-old").join("new.txt").exists());
}

#[test]
fn other_errors_run_once_and_a_second_stale_is_returned() {
    let f = Fixture::new();
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    let before = Arc::as_ptr(&ws.root.fd().unwrap());

    let runs = Cell::new(0);
    let err = ws
        .renewing(|| -> Result<()> {
            runs.set(runs.get() + 1);
            ws.read_file("missing.txt").map(drop)
        })
        .unwrap_err();
    assert!(matches!(err, WorkspaceError::NotFound { .. }), "{err}");
    assert_eq!(runs.get(), 1, "only a stale handle is worth a second run");
    assert_eq!(
        Arc::as_ptr(&ws.root.fd().unwrap()),
        before,
        "nothing was reopened"
    );

    let (err, runs) = always_stale(&ws);
    assert!(err.is_stale(), "{err}");
    assert_eq!(runs, 2, "one renewal per operation, not a loop");
}

#[test]
fn a_root_that_cannot_be_reopened_keeps_the_stale_error() {
    let f = Fixture::new();
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    fs::rename(&f.root, f.root.with_file_name("ws-gone")).unwrap();
    let (err, runs) = always_stale(&ws);
    assert!(err.is_stale(), "{err}");
    assert_eq!(runs, 1, "no second run without a fresh handle");
}
