//! The blob sweep past its grace: after each way revisions go (a history trim, a byte-bound
//! trim, an idle expiry, a fork's source expiring), the blobs left on disk are exactly those
//! some revision of some session still names. The grace stays a constant: the tests move the
//! blobs' last write back instead of waiting for it.

use std::collections::BTreeSet;

use super::*;
use serde_json::json;

fn store(dir: &Path, idle_secs: u64) -> SessionStore {
    SessionStore::new(
        dir.join("sessions"),
        SessionLimits {
            max_bytes: 1024,
            max_count: 3,
            idle: Duration::from_secs(idle_secs),
            history: 3,
        },
    )
}

/// Saves a revision of `h` whose variables hold `vars`' bytes, each sent as a blob.
fn save(store: &SessionStore, h: &str, vars: &[(&str, &[u8])]) -> Manifest {
    let parent = store.manifest(h, None).unwrap();
    let mut w = store.writer(h, parent, store.reserve(h).unwrap()).unwrap();
    let mut described = Vec::new();
    for (i, (name, bytes)) in vars.iter().enumerate() {
        w.blob(bytes.len() as u64).unwrap();
        w.write(bytes).unwrap();
        described.push(json!({"name": name, "sizes": [bytes.len()], "sent": i}));
    }
    w.commit(json!({"modules": {}, "vars": described})).unwrap()
}

/// The blob of `bytes` (its sha256).
fn blob(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Moves every blob's last write back past the sweep's grace.
fn age_blobs(dir: &Path) {
    let then = SystemTime::now() - blobs::SWEEP_GRACE - Duration::from_secs(5);
    for entry in std::fs::read_dir(dir.join("sessions").join(BLOBS)).unwrap() {
        let file = std::fs::File::options()
            .append(true)
            .open(entry.unwrap().path())
            .unwrap();
        file.set_modified(then).unwrap();
    }
}

/// The blobs on disk.
fn on_disk(dir: &Path) -> BTreeSet<String> {
    (std::fs::read_dir(dir.join("sessions").join(BLOBS)).unwrap())
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// The blobs the revisions of every session name.
fn named(store: &SessionStore) -> BTreeSet<String> {
    (store.handles().iter())
        .flat_map(|h| store.revisions(h))
        .flat_map(|m| m.vars.into_iter().map(|v| v.blob))
        .collect()
}

/// Every revision of every session reads back whole: each variable's blob is there, with the
/// bytes its sizes say.
fn assert_every_revision_reads(store: &SessionStore) {
    for h in store.handles() {
        for m in store.revisions(&h) {
            for v in &m.vars {
                let path = store.blob_path(&v.blob).unwrap();
                let len = std::fs::metadata(&path)
                    .unwrap_or_else(|e| panic!("{h}@{} lost {}: {e}", m.revision, v.name))
                    .len();
                assert_eq!(len, v.bytes(), "{h}@{} {}", m.revision, v.name);
            }
        }
    }
}

fn held(store: &SessionStore, h: &str) -> Vec<u64> {
    store.revisions(h).iter().map(|m| m.revision).collect()
}

/// Moves a session's last use back past the idle limit.
fn idle(dir: &Path, h: &str) {
    let d = dir.join("sessions").join(h);
    let meta = read_meta(&d).unwrap();
    write_meta(
        &d,
        Meta {
            used_unix: 1,
            ..meta
        },
    )
    .unwrap();
}

#[test]
fn a_history_trim_sweeps_what_no_revision_of_any_session_names_once_past_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 3600);
    let (a, b) = (store.create().unwrap(), store.create().unwrap());
    for n in 1..=3u8 {
        save(&store, &a, &[("x", &[n; 10]), ("k", b"kept")]);
    }
    // Another session holds the bytes of a's first revision: the same blob.
    save(&store, &b, &[("y", &[1; 10])]);
    save(&store, &a, &[("x", &[4; 10]), ("k", b"kept")]);
    save(&store, &a, &[("x", &[5; 10]), ("k", b"kept")]);
    assert_eq!(held(&store, &a), vec![3, 4, 5], "--session-history 3");
    // Revision 2's `x` is named by nothing now, but was written within the grace: kept.
    let mut expected = named(&store);
    expected.insert(blob(&[2; 10]));
    assert_eq!(on_disk(dir.path()), expected);
    // Past the grace, the next trim (of revision 3) takes 2's and 3's, and nothing else.
    age_blobs(dir.path());
    save(&store, &a, &[("x", &[6; 10]), ("k", b"kept")]);
    assert_eq!(held(&store, &a), vec![4, 5, 6]);
    let disk = on_disk(dir.path());
    assert_eq!(disk, named(&store), "exactly the blobs some revision names");
    assert!(!disk.contains(&blob(&[2; 10])) && !disk.contains(&blob(&[3; 10])));
    assert!(disk.contains(&blob(&[1; 10])), "another session names it");
    assert!(
        disk.contains(&blob(b"kept")),
        "every kept revision names it"
    );
    assert_every_revision_reads(&store);
}

#[test]
fn a_byte_bound_trim_sweeps_the_trimmed_revisions_blobs_but_not_the_shared_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 3600);
    let h = store.create().unwrap();
    save(&store, &h, &[("x", &[1; 400]), ("k", &[7; 100])]);
    save(&store, &h, &[("x", &[2; 400]), ("k", &[7; 100])]);
    age_blobs(dir.path());
    // 400 + 400 + 300 + 100 distinct bytes are over 1024: revision 1 goes, within the history.
    save(&store, &h, &[("x", &[3; 300]), ("k", &[7; 100])]);
    assert_eq!(held(&store, &h), vec![2, 3]);
    let disk = on_disk(dir.path());
    assert_eq!(disk, named(&store));
    assert!(!disk.contains(&blob(&[1; 400])));
    assert!(
        disk.contains(&blob(&[7; 100])),
        "the kept revisions name it"
    );
    assert_every_revision_reads(&store);
}

#[test]
fn an_idle_expiry_sweeps_the_blobs_only_the_expired_session_named() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 3600);
    let (gone, stays) = (store.create().unwrap(), store.create().unwrap());
    save(&store, &gone, &[("x", b"only mine"), ("s", b"shared")]);
    save(&store, &gone, &[("x", b"only mine too"), ("s", b"shared")]);
    save(&store, &stays, &[("s", b"shared")]);
    age_blobs(dir.path());
    idle(dir.path(), &gone);
    assert_eq!(store.expire_idle(), 1);
    assert_eq!(store.handles(), vec![stays.clone()]);
    let disk = on_disk(dir.path());
    assert_eq!(disk, named(&store));
    assert_eq!(disk, BTreeSet::from([blob(b"shared")]));
    assert_every_revision_reads(&store);
}

#[test]
fn a_fork_keeps_the_blobs_it_shares_when_its_source_expires() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 3600);
    let source = store.create().unwrap();
    save(&store, &source, &[("x", b"one"), ("s", b"shared")]);
    save(&store, &source, &[("x", b"two"), ("s", b"shared")]);
    save(&store, &source, &[("x", b"three"), ("s", b"shared")]);
    let (fork, _) = store.fork(&source, Some(2)).unwrap();
    save(&store, &fork, &[("y", b"the fork's own"), ("s", b"shared")]);
    age_blobs(dir.path());
    idle(dir.path(), &source);
    assert_eq!(store.expire_idle(), 1);
    assert_eq!(held(&store, &fork), vec![1, 2]);
    let disk = on_disk(dir.path());
    assert_eq!(disk, named(&store));
    let expected = [&b"two"[..], b"shared", b"the fork's own"];
    assert_eq!(disk, expected.iter().map(|b| blob(b)).collect());
    assert_every_revision_reads(&store);
    // The fork's first revision is the source's second, whole.
    let first = store.manifest(&fork, Some(1)).unwrap().unwrap();
    let x = first.vars.iter().find(|v| v.name == "x").unwrap();
    assert_eq!(
        std::fs::read(store.blob_path(&x.blob).unwrap()).unwrap(),
        b"two"
    );
}
