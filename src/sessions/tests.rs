use super::*;
use serde_json::json;

fn store(dir: &Path, idle_secs: u64) -> SessionStore {
    SessionStore::new(
        dir.join("sessions"),
        SessionLimits {
            max_bytes: 1024,
            max_count: 2,
            idle: Duration::from_secs(idle_secs),
            history: 3,
        },
    )
}

/// The newest state: each variable's name and bytes.
fn state(store: &SessionStore, handle: &str) -> Option<Vec<(String, Vec<u8>)>> {
    let manifest = store.manifest(handle, None).unwrap()?;
    let read = |v: &revisions::Variable| {
        let path = store.blob_path(&v.blob).unwrap();
        (v.name.clone(), std::fs::read(path).unwrap())
    };
    Some(manifest.vars.iter().map(read).collect())
}

fn var(name: &str, bytes: &[u8]) -> (String, Vec<u8>) {
    (name.to_string(), bytes.to_vec())
}

/// Saves one variable `x` holding `bytes`, sent as a new blob, over `parent`.
fn save(store: &SessionStore, h: &str, bytes: &[u8]) -> std::io::Result<Manifest> {
    let parent = store.manifest(h, None).unwrap();
    let mut w = store.writer(h, parent, store.reserve(h).unwrap()).unwrap();
    w.blob(bytes.len() as u64)?;
    w.write(bytes)?;
    let sizes = [bytes.len()];
    w.commit(
        json!({"modules": {}, "vars": [{"name": "x", "sizes": sizes, "sent": 0, "type": "bytes"}]}),
    )
}

#[test]
fn handles_are_fresh_and_checked_before_any_path() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 60);
    let a = store.create().unwrap();
    let b = store.create().unwrap();
    assert_ne!(a, b);
    assert!(valid_handle(&a) && valid_handle(&b), "{a} {b}");
    for bad in [
        "../x",
        "ses_",
        "new",
        "ses_../../../../etc/passwd",
        &a.to_uppercase(),
    ] {
        assert!(
            matches!(store.open(bad), Err(SessionError::Malformed { .. })),
            "{bad}"
        );
    }
    let unknown = format!("ses_{}", "0".repeat(32));
    let err = store.open(&unknown).unwrap_err();
    assert!(matches!(err, SessionError::Unknown { .. }));
    assert!(
        err.to_string().contains(&unknown),
        "names the session: {err}"
    );
    assert!(err.to_string().contains("session=\"new\""), "{err}");
}

#[test]
fn a_tenant_holds_a_bounded_number_of_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 60);
    store.create().unwrap();
    store.create().unwrap();
    let err = store.create().unwrap_err();
    assert!(matches!(err, SessionError::TooMany { max: 2 }), "{err}");
    assert_eq!(store.counts().sessions, 2);
}

#[test]
fn a_snapshot_becomes_a_revision_only_when_committed_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 60);
    let h = store.create().unwrap();
    assert_eq!(state(&store, &h), None, "a new session has no state");
    assert_eq!(save(&store, &h, b"first").unwrap().revision, 1);
    assert_eq!(state(&store, &h), Some(vec![var("x", b"first")]));
    // Dropped half-way (a crash mid-snapshot): the state stays, no temp file left.
    let mut w = store.writer(&h, None, store.reserve(&h).unwrap()).unwrap();
    w.blob(3).unwrap();
    w.write(b"sec").unwrap();
    drop(w);
    // A blob shorter than announced, a manifest naming a blob it never had: refused.
    let mut w = store.writer(&h, None, store.reserve(&h).unwrap()).unwrap();
    w.blob(6).unwrap();
    w.write(b"sec").unwrap();
    assert!(w.commit(json!({"modules": {}, "vars": []})).is_err());
    let w = store.writer(&h, None, store.reserve(&h).unwrap()).unwrap();
    let foreign =
        json!({"modules": {}, "vars": [{"name": "x", "sizes": [5], "blob": "a".repeat(64)}]});
    assert!(w.commit(foreign).is_err());
    // Over the bound: refused while writing.
    let mut w = store.writer(&h, None, store.reserve(&h).unwrap()).unwrap();
    let err = w.blob(1025).unwrap_err();
    w.abort(err.to_string());
    assert_eq!(state(&store, &h), Some(vec![var("x", b"first")]));
    assert_eq!(store.newest(&h).unwrap(), 1);
    // What the refused snapshots sent is gone, and why the last was refused is kept.
    assert_eq!(store.counts().state_bytes, 5);
    let blobs = std::fs::read_dir(dir.path().join("sessions/.blobs")).unwrap();
    assert_eq!(blobs.count(), 1);
    let unsaved = store.view(&h).unwrap().unsaved.unwrap();
    assert!(unsaved.contains("over the session's bound"), "{unsaved}");
    // Numbers are never given twice: the refused calls' are unused.
    assert_eq!(save(&store, &h, b"again").unwrap().revision, 6);
    assert_eq!(store.view(&h).unwrap().unsaved, None);
}

#[test]
fn an_unchanged_variable_is_named_not_sent_and_revisions_share_its_blob() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 60);
    let h = store.create().unwrap();
    let first = save(&store, &h, b"shared").unwrap();
    let blob = first.vars[0].blob.clone();
    let w = store
        .writer(&h, Some(first), store.reserve(&h).unwrap())
        .unwrap();
    let named =
        json!({"modules": {"np": "numpy"}, "vars": [{"name": "y", "sizes": [6], "blob": blob}]});
    let second = w.commit(named).unwrap();
    assert_eq!((second.revision, second.parent.unwrap().revision), (2, 1));
    assert_eq!(state(&store, &h), Some(vec![var("y", b"shared")]));
    assert_eq!(store.counts().state_bytes, 6, "one blob for both");
}

#[test]
fn history_is_bounded_and_a_rewound_revision_is_there_until_then() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 60);
    let h = store.create().unwrap();
    for n in 1..=5u8 {
        save(&store, &h, &[n; 10]).unwrap();
    }
    let held: Vec<u64> = store.revisions(&h).iter().map(|m| m.revision).collect();
    assert_eq!(held, vec![3, 4, 5], "--session-history 3");
    assert!(store.manifest(&h, Some(3)).unwrap().is_some());
    let err = store.manifest(&h, Some(1)).unwrap_err();
    assert!(
        matches!(err, SessionError::NoRevision { revision: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("revisions 3, 4 and 5"), "{err}");
    // The byte bound (1024) removes the oldest, never the newest.
    save(&store, &h, &[9; 600]).unwrap();
    let held: Vec<u64> = store.revisions(&h).iter().map(|m| m.revision).collect();
    assert_eq!(held, vec![4, 5, 6]);
    save(&store, &h, &[8; 700]).unwrap();
    let held: Vec<u64> = store.revisions(&h).iter().map(|m| m.revision).collect();
    assert_eq!(held, vec![7]);
}

#[test]
fn a_fork_shares_the_state_keeps_the_source_and_counts_against_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 60);
    let src = store.create().unwrap();
    let err = store.fork(&src, None).unwrap_err();
    assert!(matches!(err, SessionError::NothingToFork { .. }), "{err}");
    save(&store, &src, b"one").unwrap();
    save(&store, &src, b"two").unwrap();
    store.set_packages(&src, &["humanize".into()]).unwrap();
    let (fork, from) = store.fork(&src, Some(1)).unwrap();
    assert_eq!(from, format!("{src}@1"));
    assert_eq!(state(&store, &fork), Some(vec![var("x", b"one")]));
    assert_eq!(store.newest(&fork).unwrap(), 1);
    assert_eq!(store.packages(&fork), vec!["humanize".to_string()]);
    save(&store, &fork, b"three").unwrap();
    assert_eq!(
        state(&store, &src),
        Some(vec![var("x", b"two")]),
        "the source is unchanged"
    );
    let err = store.fork(&src, None).unwrap_err();
    assert!(matches!(err, SessionError::TooMany { max: 2 }), "{err}");
}

#[test]
fn an_idle_session_expires_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 0);
    let h = store.create().unwrap();
    // Back-date its last use.
    let d = dir.path().join("sessions").join(&h);
    write_meta(
        &d,
        Meta {
            created_unix: 1,
            used_unix: 1,
            bytes: 0,
            revision: 0,
            last: 0,
            unsaved: None,
        },
    )
    .unwrap();
    let err = store.open(&h).unwrap_err();
    assert!(matches!(err, SessionError::Expired { .. }), "{err}");
    assert!(err.to_string().contains(&h));
    assert!(!d.exists(), "its state is removed");
    assert!(matches!(store.open(&h), Err(SessionError::Unknown { .. })));
}

#[test]
fn a_restarted_store_finds_its_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let h = {
        let store = store(dir.path(), 60);
        let h = store.create().unwrap();
        save(&store, &h, b"kept").unwrap();
        h
    };
    let store = store(dir.path(), 60);
    assert_eq!(store.open(&h).unwrap().bytes, 4);
    assert_eq!(state(&store, &h), Some(vec![var("x", b"kept")]));
}
