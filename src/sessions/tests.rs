use super::*;

fn store(dir: &Path, idle_secs: u64) -> SessionStore {
    SessionStore::new(
        dir.join("sessions"),
        SessionLimits {
            max_bytes: 1024,
            max_count: 2,
            idle: Duration::from_secs(idle_secs),
        },
    )
}

fn state(store: &SessionStore, handle: &str) -> Option<Vec<u8>> {
    let mut file = store.current(handle).unwrap()?;
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut data).unwrap();
    Some(data)
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
fn a_snapshot_replaces_the_state_only_when_committed_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 60);
    let h = store.create().unwrap();
    assert_eq!(state(&store, &h), None, "a new session has no state");
    let mut w = store.writer(&h).unwrap();
    w.write(b"first").unwrap();
    assert_eq!(w.commit(5).unwrap(), 5);
    assert_eq!(state(&store, &h).as_deref(), Some(&b"first"[..]));
    // Dropped half-way (a crash mid-snapshot): the previous state stays, no temp file left.
    let mut w = store.writer(&h).unwrap();
    w.write(b"sec").unwrap();
    drop(w);
    // Announced and written lengths differ: refused.
    let mut w = store.writer(&h).unwrap();
    w.write(b"second").unwrap();
    assert!(w.commit(99).is_err());
    // Over the bound: refused while writing.
    let mut w = store.writer(&h).unwrap();
    assert!(w.write(&[0; 1025]).is_err());
    drop(w);
    assert_eq!(state(&store, &h).as_deref(), Some(&b"first"[..]));
    let names: Vec<String> = std::fs::read_dir(dir.path().join("sessions").join(&h))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| n == "state" || n == "meta.json"),
        "{names:?}"
    );
    assert_eq!(store.counts().state_bytes, 5);
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
        let mut w = store.writer(&h).unwrap();
        w.write(b"kept").unwrap();
        w.commit(4).unwrap();
        h
    };
    let store = store(dir.path(), 60);
    assert_eq!(store.open(&h).unwrap().bytes, 4);
    assert_eq!(state(&store, &h).as_deref(), Some(&b"kept"[..]));
}
