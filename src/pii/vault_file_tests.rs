//! The vault file and the engines on it: tokens shared by key and tenant, restore after a
//! reopen and across servers, and what damage, another key and a full disk do.

use std::path::{Path, PathBuf};

use crate::pii::{PiiEngine, PiiKey, Scope};

fn key() -> PiiKey {
    PiiKey::new([7; 32])
}

fn engine(path: &Path, scope: Scope<'_>, capacity: usize) -> PiiEngine {
    PiiEngine::with_key(&key(), scope, capacity, path).expect("the vault file opens")
}

fn vault_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("tenants/a/pii/vault")
}

const A: Scope<'static> = Scope::Tenant("a");

#[test]
fn same_key_and_tenant_mint_the_same_tokens_other_tenants_other_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let text = "mail ann@example.com, card 4111 1111 1111 1111";
    let one = engine(&dir.path().join("1/vault"), A, 100)
        .sanitize(text)
        .text;
    let two = engine(&dir.path().join("2/vault"), A, 100)
        .sanitize(text)
        .text;
    assert_eq!(one, two, "two servers with the key, one tenant");
    assert!(one.contains("[EMAIL_"), "{one}");
    let b = engine(&dir.path().join("3/vault"), Scope::Tenant("b"), 100)
        .sanitize(text)
        .text;
    let single = engine(&dir.path().join("4/vault"), Scope::Single, 100)
        .sanitize(text)
        .text;
    let random = PiiEngine::with_random_secret(100)
        .unwrap()
        .sanitize(text)
        .text;
    for other in [&b, &single, &random] {
        assert_ne!(&one, other);
    }
    assert_ne!(b, single);
}

#[test]
fn tokens_restore_after_a_reopen_and_the_file_never_holds_the_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = vault_path(&dir);
    let values = ["ann@example.com", "4111111111111111", "+44 20 7946 0958"];
    let text = format!("{} paid with {} call {}", values[0], values[1], values[2]);
    let first = engine(&path, A, 100);
    let sanitized = first.sanitize(&text);
    assert_eq!(sanitized.tokens.len(), 3, "{sanitized:?}");
    drop(first);

    let next = engine(&path, A, 100);
    assert_eq!(next.vault_len(), 3);
    let restored = next.restore(&sanitized.text);
    assert_eq!(restored.text, text);
    assert_eq!((restored.restored, restored.unknown), (3, 0));

    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let bytes = std::fs::read(&path).unwrap();
    let holds = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    for v in values
        .iter()
        .copied()
        .chain(["ann@", "example.com", "41111111"])
    {
        assert!(!holds(v.as_bytes()), "{v} is in the file");
    }
    for token in sanitized.tokens.keys() {
        assert!(!holds(token.as_bytes()), "{token} is in the file");
        assert!(!holds(&token.as_bytes()[token.len() - 9..token.len() - 1]));
    }
}

#[test]
fn a_token_minted_by_one_server_restores_on_another_sharing_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = vault_path(&dir);
    let a = engine(&path, A, 100);
    let b = engine(&path, A, 100);
    // Minted on A after B opened the file: B has it only by reading the file again.
    let token = a.sanitize("bob@example.com").text;
    assert_eq!(b.vault_len(), 0);
    let restored = b.restore(&format!("write to {token}"));
    assert_eq!(restored.text, "write to bob@example.com");
    assert_eq!((restored.restored, restored.unknown), (1, 0));
    // And B's own tokens reach A.
    let token = b.sanitize("cy@example.com").text;
    assert_eq!(a.restore(&token).text, "cy@example.com");
    // A forged token stays unknown, after the look at the file.
    let forged = a.restore("[EMAIL_00000000]");
    assert_eq!((forged.restored, forged.unknown), (0, 1));
}

#[test]
fn a_record_cut_short_is_ignored_and_dropped_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = vault_path(&dir);
    let first = engine(&path, A, 100);
    let kept = first.sanitize("ann@example.com").text;
    let cut = first.sanitize("bob@example.com").text;
    drop(first);
    let len = std::fs::metadata(&path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(len - 5).unwrap();

    let next = engine(&path, A, 100);
    assert_eq!(next.restore(&kept).text, "ann@example.com");
    assert_eq!(next.restore(&cut).unknown, 1, "the cut record is not read");
    assert_eq!(next.persistence().unwrap().records_rejected, 0);
    // Rewritten without the partial record, so what is appended next reads back.
    let later = next.sanitize("cy@example.com").text;
    drop(next);
    let again = engine(&path, A, 100);
    assert_eq!(
        again.restore(&format!("{kept} {later}")).text,
        "ann@example.com cy@example.com"
    );
}

#[test]
fn a_tampered_record_is_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = vault_path(&dir);
    let first = engine(&path, A, 100);
    let tampered = first.sanitize("ann@example.com").text;
    let intact = first.sanitize("bob@example.com").text;
    drop(first);
    let mut bytes = std::fs::read(&path).unwrap();
    // Header 16, length 4, nonce 24: the first record's ciphertext starts at 44.
    bytes[50] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();

    let next = engine(&path, A, 100);
    let stats = next.persistence().unwrap();
    assert_eq!(stats.records_rejected, 1);
    assert!(stats.persisting);
    assert_eq!(next.restore(&tampered).unknown, 1);
    assert_eq!(next.restore(&intact).text, "bob@example.com");
}

#[test]
fn records_of_another_tenant_do_not_authenticate() {
    let dir = tempfile::tempdir().unwrap();
    let path = vault_path(&dir);
    let token = engine(&path, A, 100).sanitize("ann@example.com").text;
    let other = dir.path().join("tenants/b/pii/vault");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::copy(&path, &other).unwrap();
    let b = engine(&other, Scope::Tenant("b"), 100);
    assert_eq!(b.persistence().unwrap().records_rejected, 1);
    assert_eq!(b.restore(&token).unknown, 1);
}

#[test]
fn a_file_of_another_key_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = vault_path(&dir);
    let token = engine(&path, A, 100).sanitize("ann@example.com").text;
    let before = std::fs::read(&path).unwrap();

    let wrong = PiiEngine::with_key(&PiiKey::new([8; 32]), A, 100, &path).unwrap();
    let stats = wrong.persistence().unwrap();
    assert!(!stats.persisting);
    assert_eq!(stats.records_rejected, 1);
    assert_eq!(wrong.restore(&token).unknown, 1);
    // Served from memory, the file untouched.
    let own = wrong.sanitize("bob@example.com").text;
    assert_eq!(wrong.restore(&own).text, "bob@example.com");
    assert_eq!(std::fs::read(&path).unwrap(), before);

    let right = engine(&path, A, 100);
    assert_eq!(right.restore(&token).text, "ann@example.com");
}

#[test]
fn the_log_is_rewritten_to_what_the_vault_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let path = vault_path(&dir);
    let capacity = 8;
    let pii = engine(&path, A, capacity);
    let mut tokens = Vec::new();
    let mut largest = 0;
    for i in 0..100 {
        tokens.push(pii.sanitize(&format!("user{i}@example.com")).text);
        largest = largest.max(std::fs::metadata(&path).unwrap().len());
    }
    assert_eq!(pii.persistence().unwrap().write_failures, 0);
    // Never much more than twice the capacity in records (16 header, ~70 bytes a record).
    assert!(largest < 16 + 3 * capacity as u64 * 80, "{largest} bytes");
    drop(pii);

    let next = engine(&path, A, capacity);
    assert_eq!(next.vault_len(), capacity);
    for (i, token) in tokens.iter().enumerate().skip(100 - capacity) {
        assert_eq!(next.restore(token).text, format!("user{i}@example.com"));
    }
    assert_eq!(
        next.restore(&tokens[0]).unknown,
        1,
        "forgotten, as in memory"
    );
}

#[test]
fn a_rewrite_by_another_server_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let path = vault_path(&dir);
    let a = engine(&path, A, 1000);
    let b = engine(&path, A, 2);
    let before = std::fs::File::open(&path).unwrap();
    for i in 0..10 {
        b.sanitize(&format!("user{i}@example.com")); // b rewrites the file now and then
    }
    assert!(
        replaced(&before),
        "b rewrote the file (a new file took its name)"
    );
    // A's file was replaced under it: its append goes to the file the path names now.
    let token = a.sanitize("late@example.com").text;
    let c = engine(&path, A, 1000);
    assert_eq!(c.restore(&token).text, "late@example.com");
}

#[test]
fn a_failing_disk_never_fails_sanitize() {
    let dir = tempfile::tempdir().unwrap();
    let path = vault_path(&dir);
    let pii = engine(&path, A, 100);
    // The storage is gone: appends cannot create the file again.
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    let s = pii.sanitize("ann@example.com");
    assert!(s.text.starts_with("[EMAIL_"), "{s:?}");
    assert_eq!(pii.restore(&s.text).text, "ann@example.com", "from memory");
    let stats = pii.persistence().unwrap();
    assert_eq!(stats.write_failures, 1);
    assert!(stats.persisting);
}

#[test]
fn symlinks_and_other_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::write(&outside, b"").unwrap();
    let path = vault_path(&dir);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&outside, &path).unwrap();
    let e = PiiEngine::with_key(&key(), A, 10, &path).unwrap_err();
    assert!(e.to_string().contains("not following a symlink"), "{e}");
    assert_eq!(
        std::fs::read(&outside).unwrap(),
        b"",
        "nothing written through it"
    );

    // A symlinked directory is refused too.
    let linked = dir.path().join("tenants/c/pii");
    std::fs::create_dir_all(linked.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(dir.path(), &linked).unwrap();
    let e = PiiEngine::with_key(&key(), A, 10, &linked.join("vault")).unwrap_err();
    assert!(e.to_string().contains("not a symlink"), "{e}");

    let other = dir.path().join("not-a-vault");
    std::fs::write(&other, b"hello, this is not a vault").unwrap();
    let e = PiiEngine::with_key(&key(), A, 10, &other).unwrap_err();
    assert!(e.to_string().contains("not a PII vault file"), "{e}");
}

#[test]
fn one_sanitize_call_is_one_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = vault_path(&dir);
    let pii = engine(&path, A, 100);
    let empty = std::fs::metadata(&path).unwrap().len();
    assert_eq!(empty, 16, "the header");
    let json = serde_json::json!({"to": ["a@example.com", "b@example.com"], "c@example.com": 1});
    pii.sanitize_json(&json, &crate::pii::Origin::Sandbox);
    let one = std::fs::metadata(&path).unwrap().len();
    // length 4, nonce 24, tag 16, three entries of 5 + 13 bytes, each with its origin
    // (count 1, length 1, "sandbox").
    assert_eq!(one - empty, 4 + 24 + 16 + 3 * (18 + 2 + 7));
    // Values already in the vault write nothing.
    pii.sanitize("a@example.com again");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), one);
    // Several parts sanitized together (an execution's outcome): one record.
    let (text, json) = pii.together(&crate::pii::Origin::Sandbox, |batch| {
        (
            batch.text("from d@example.com"),
            batch.json(&serde_json::json!(["e@example.com"])),
        )
    });
    assert!(text.starts_with("from [EMAIL_") && json[0].as_str().unwrap().starts_with("[EMAIL_"));
    let two = std::fs::metadata(&path).unwrap().len();
    assert_eq!(two - one, 4 + 24 + 16 + 2 * (18 + 2 + 7));
}

#[test]
fn temp_files_of_interrupted_rewrites_are_removed_once_old() {
    let dir = tempfile::tempdir().unwrap();
    let path = vault_path(&dir);
    drop(engine(&path, A, 10));
    let pii_dir = path.parent().unwrap();
    let (old, young) = (
        pii_dir.join(".vault.tmp-0a0a0a"),
        pii_dir.join(".vault.tmp-0b0b0b"),
    );
    std::fs::write(&old, b"x").unwrap();
    std::fs::write(&young, b"x").unwrap();
    let hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(hours_ago)
        .unwrap();
    drop(engine(&path, A, 10));
    assert!(!old.exists(), "an old temp file is removed");
    assert!(
        young.exists(),
        "a young one may be another server's rewrite"
    );
}

/// Two servers opening one tenant's new file at the same moment and appending to it at once
/// (the lock beside the file orders the header's creation and every append): a third server
/// opening it afterwards restores every token either minted, and both files' readers agree.
#[test]
fn servers_opening_and_appending_at_once_lose_no_record() {
    // A small vault, so the file is rewritten again and again while both servers append: a
    // rewrite must first read what the other appended, or the other's newest tokens are lost.
    const CAPACITY: usize = 32;
    const LAST: usize = 8;
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let path = vault_path(&dir);
        drop(engine(&path, A, CAPACITY)); // the file exists before both start
        let created = std::fs::File::open(&path).unwrap();
        // The servers keep step, one value each at a time: the vault keeps the newest CAPACITY
        // values of the file, so a server that ran more than CAPACITY - LAST values ahead would
        // rightly push the other's newest out, and the check below would fail by timing.
        let step = std::sync::Barrier::new(2);
        let minted: Vec<Vec<(String, String)>> = std::thread::scope(|s| {
            let server = |who: &'static str| {
                let (path, step) = (path.clone(), &step);
                s.spawn(move || {
                    let pii = engine(&path, A, CAPACITY);
                    (0..100)
                        .map(|i| {
                            step.wait();
                            let value = format!("{who}{round}x{i}@example.com");
                            (pii.sanitize(&value).text, value)
                        })
                        .collect::<Vec<_>>()
                })
            };
            let (a, b) = (server("a"), server("b"));
            vec![a.join().unwrap(), b.join().unwrap()]
        });
        assert!(replaced(&created), "round {round}: the file was rewritten");
        // Older tokens may be forgotten (the vault keeps CAPACITY), but each server's newest
        // are in the file whoever rewrote it last.
        let third = engine(&path, A, 10_000);
        for (token, value) in minted.iter().flat_map(|m| &m[m.len() - LAST..]) {
            assert_eq!(&third.restore(token).text, value, "round {round}");
        }
        assert_eq!(third.persistence().unwrap().records_rejected, 0);
    }
}

/// Whether the file `held` was opened on has been replaced: a rewrite renames a new file over
/// the path, leaving the old one without a name (held open, its inode cannot be reused).
fn replaced(held: &std::fs::File) -> bool {
    use std::os::unix::fs::MetadataExt;
    held.metadata().expect("an open file has metadata").nlink() == 0
}

/// Two servers sharing the key and the vault file (swarm nodes on a shared volume): a value's
/// origins travel with it, and an origin one server adds reaches the other.
#[test]
fn origins_travel_with_the_vault_file_between_servers() {
    use crate::pii::Origin;
    let dir = tempfile::tempdir().unwrap();
    let path = vault_path(&dir);
    let crm = Origin::upstream("crm", "rows");
    let (one, two) = (engine(&path, A, 100), engine(&path, A, 100));
    let token = one.sanitize_from("ann@example.com", &crm).text;
    let seen = |e: &PiiEngine| {
        let origins = std::cell::RefCell::new(Vec::new());
        e.restore_where(&token, |o| {
            *origins.borrow_mut() = o.to_vec();
            true
        });
        origins.into_inner()
    };
    assert_eq!(
        seen(&two),
        std::slice::from_ref(&crm),
        "minted on one, read on the other"
    );
    two.sanitize_from("ann@example.com", &Origin::User);
    assert_eq!(seen(&two), [Origin::User, crm.clone()]);
    // The other server learns the new origin from the file on its next read of it.
    drop(one);
    let three = engine(&path, A, 100);
    assert_eq!(seen(&three), [Origin::User, crm.clone()]);
    // What the code printed adds `sandbox` only to a value the vault did not know.
    three.sanitize_from("ann@example.com", &Origin::Sandbox);
    assert_eq!(seen(&three), [Origin::User, crm]);
    let fresh = three
        .sanitize_from("new@example.com", &Origin::Sandbox)
        .text;
    let check = three.restore_where(&fresh, |o| o == [Origin::Sandbox]);
    assert_eq!(check.text, "new@example.com");
}

/// A vault file written before origins were kept (records without them) still restores; its
/// values have no origin, which only `*` or `unknown` allow.
#[test]
fn a_vault_from_before_origins_restores_with_unknown_origin() {
    use super::VaultFile;
    use crate::pii::token::Entry;
    use crate::pii::{Origin, PiiKind};
    let dir = tempfile::tempdir().unwrap();
    let path = vault_path(&dir);
    let (mut old, _) = VaultFile::open(&path, &key().vault_key(A), A).unwrap();
    let entry = Entry {
        kind: PiiKind::Email,
        value: "old@example.com".into(),
        origins: Vec::new(),
    };
    old.append(std::slice::from_ref(&entry)).unwrap();
    drop(old);
    let bytes = std::fs::read(&path).unwrap();
    // 16 header, 4 length, 24 nonce, 16 tag, and the entry as format 1 wrote it: kind 0,
    // length, value, nothing after.
    assert_eq!(
        bytes.len(),
        16 + 4 + 24 + 16 + 5 + 15,
        "a record of the old layout"
    );

    let pii = engine(&path, A, 100);
    let token = PiiEngine::with_key(&key(), A, 100, &dir.path().join("other/vault"))
        .unwrap()
        .sanitize("old@example.com")
        .text;
    let origins = std::cell::RefCell::new(None);
    let all = pii.restore_where(&token, |o| {
        *origins.borrow_mut() = Some(o.to_vec());
        true
    });
    assert_eq!(all.text, "old@example.com");
    assert_eq!(origins.into_inner(), Some(Vec::new()), "no origin");
    let crm_only = pii.restore_where(&token, |o| o.iter().any(|o| o.source() == "crm"));
    assert_eq!(
        (crm_only.text.as_str(), crm_only.withheld.len()),
        (token.as_str(), 1)
    );
    // Seen again from an origin, it keeps that one from then on.
    pii.sanitize_from("old@example.com", &Origin::User);
    let user = pii.restore_where(&token, |o| o == [Origin::User]);
    assert_eq!(user.text, "old@example.com");
}

/// A well-formed token the vault never issued is never restored, whatever the rule allows.
#[test]
fn a_forged_token_is_unknown_and_never_restored() {
    let dir = tempfile::tempdir().unwrap();
    let pii = engine(&vault_path(&dir), A, 100);
    // The last one's hex part has a length no token has: it could not even be minted.
    let forged = "[EMAIL_0123abcd] [IBAN_fedcba9876543210] [PHONE_0123abcd9]";
    let checked = pii.restore_where(forged, |_| true);
    assert_eq!(checked.text, forged);
    assert!(checked.restored.is_empty() && checked.withheld.is_empty());
    assert_eq!(checked.unknown.len(), 3);
}
