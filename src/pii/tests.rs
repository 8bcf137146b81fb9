//! Tests of the PII engine: sanitize/restore round trips, JSON walking, the vault bound and the
//! restore rules, kept apart from `mod.rs` so the engine reads on its own.

use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use serde_json::json;

use super::*;

fn engine() -> &'static PiiEngine {
    static E: OnceLock<PiiEngine> = OnceLock::new();
    E.get_or_init(|| PiiEngine::new([42; 32], DEFAULT_VAULT_CAPACITY))
}

fn token_shape(kind: &str) -> regex::Regex {
    regex::Regex::new(&format!(r"^\[{kind}_[0-9a-f]{{8}}\]$")).unwrap()
}

const SAMPLE: &str = "Contact ann.lee@example.com or 415-555-0132; card 4111 1111 1111 1111, \
    SSN 123-45-6789, from 10.0.0.1 and 2001:db8::1, key AKIAIOSFODNN7EXAMPLE, \
    IBAN DE89 3704 0044 0532 0130 00.";

#[test]
fn engine_is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<PiiEngine>();
}

#[test]
fn sanitize_replaces_every_kind_with_well_formed_tokens() {
    let s = engine().sanitize(SAMPLE);
    for value in [
        "ann.lee@example.com",
        "415-555-0132",
        "4111 1111 1111 1111",
        "123-45-6789",
        "10.0.0.1",
        "2001:db8::1",
        "AKIAIOSFODNN7EXAMPLE",
        "DE89 3704",
    ] {
        assert!(!s.text.contains(value), "{value} left in {}", s.text);
    }
    assert_eq!(s.tokens.len(), 8);
    assert_eq!(s.total(), 8);
    assert_eq!(s.counts[&PiiKind::IpAddress], 2);
    for (token, value) in &s.tokens {
        let kind = token[1..].rsplit_once('_').unwrap().0;
        assert!(token_shape(kind).is_match(token), "{token}");
        assert_eq!(engine().detect(value).len(), 1, "{value}");
    }
    assert!(s.text.starts_with("Contact [EMAIL_"));
}

#[test]
fn the_leads_examples() {
    let s = engine().sanitize("Contact john@example.com at 555-123-4567");
    let kinds: Vec<PiiKind> = s.counts.keys().copied().collect();
    assert_eq!(kinds, vec![PiiKind::Email, PiiKind::Phone]);
    assert_eq!(s.tokens.len(), 2);
    let s = engine().sanitize("mail x@example.com now");
    assert!(s.text.starts_with("mail [EMAIL_") && s.text.ends_with("] now"));
    assert_eq!(
        engine().restore_with(&s.text, &s.tokens).text,
        "mail x@example.com now"
    );
}

#[test]
fn no_pii_means_no_change() {
    let text = "v1.2.3 released on 2024-01-15 (build 4521, commit 9fceb02)";
    let s = engine().sanitize(text);
    assert_eq!(s.text, text);
    assert!(s.tokens.is_empty() && s.counts.is_empty());
    let r = engine().restore(text);
    assert_eq!((r.text.as_str(), r.restored, r.unknown), (text, 0, 0));
}

#[test]
fn tokens_are_deterministic_per_secret_and_differ_across_secrets() {
    let a1 = PiiEngine::new([1; 32], 100);
    let a2 = PiiEngine::new([1; 32], 100);
    let b = PiiEngine::new([2; 32], 100);
    let text = "ann@example.com and ann@example.com";
    let t1 = a1.sanitize(text).text;
    assert_eq!(t1, a1.sanitize(text).text, "same engine, same token");
    assert_eq!(t1, a2.sanitize(text).text, "same secret, same token");
    assert_ne!(t1, b.sanitize(text).text, "another secret, another token");
    let tok = &t1[..t1.find(' ').unwrap()];
    assert_eq!(t1, format!("{tok} and {tok}"));
    // The token is not an unkeyed hash of the value.
    let unkeyed = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"ann@example.com"));
    assert!(!tok.contains(&unkeyed[..8]));
    // Same digits, different kinds: different tokens.
    assert_ne!(
        a1.tokenize_value(PiiKind::Phone, "4155550132"),
        a1.tokenize_value(PiiKind::Ssn, "4155550132")
    );
}

#[test]
fn random_secrets_differ() {
    let a = PiiEngine::with_random_secret(10).unwrap();
    let b = PiiEngine::with_random_secret(10).unwrap();
    assert_ne!(
        a.sanitize("ann@example.com").text,
        b.sanitize("ann@example.com").text
    );
}

#[test]
fn restore_round_trips_and_counts() {
    let s = engine().sanitize(SAMPLE);
    let r = engine().restore(&s.text);
    assert_eq!(r.text, SAMPLE);
    assert_eq!((r.restored, r.unknown), (8, 0));
    // Tokens can be moved around and repeated by the model.
    let first = s.tokens.keys().next().unwrap();
    let r = engine().restore(&format!("{first}, again {first}!"));
    assert_eq!(r.restored, 2);
    assert_eq!(r.text, format!("{0}, again {0}!", s.tokens[first]));
}

#[test]
fn forged_and_foreign_tokens_are_not_restored() {
    let other = PiiEngine::new([7; 32], 100);
    let foreign = other.sanitize("ann@example.com").text;
    for text in [
        "[EMAIL_deadbeef]",
        foreign.as_str(),
        "[CREDIT_CARD_0123456789ab]",
        "[NAME_deadbeef]",
    ] {
        let r = engine().restore(text);
        assert_eq!(r.text, text);
        assert_eq!(r.restored, 0);
    }
    assert_eq!(
        engine()
            .restore("[EMAIL_deadbeef] [PHONE_00000000]")
            .unknown,
        2
    );
    // A token of this engine relabelled as another kind is not its token either.
    let mine = engine().sanitize("ann@example.com").text;
    let relabelled = mine.replace("[EMAIL_", "[PHONE_");
    assert_eq!(engine().restore(&relabelled).text, relabelled);
}

#[test]
fn restore_with_applies_only_pairs_this_engine_minted() {
    let e = PiiEngine::new([5; 32], 100);
    let s = e.sanitize("mail ann@example.com, call 415-555-0132");
    let r = e.restore_with(&s.text, &s.tokens);
    assert_eq!(r.text, "mail ann@example.com, call 415-555-0132");
    assert_eq!((r.restored, r.unknown), (2, 0));
    // A map pointing a real token at other text: not applied.
    let mut planted = s.tokens.clone();
    for v in planted.values_mut() {
        *v = "attacker text".into();
    }
    let r = e.restore_with(&s.text, &planted);
    assert_eq!(r.text, s.text);
    assert_eq!((r.restored, r.unknown), (0, 2));
    // A forged token with a value: not applied.
    let forged = BTreeMap::from([("[EMAIL_deadbeef]".to_string(), "x@y.io".to_string())]);
    assert_eq!(
        e.restore_with("[EMAIL_deadbeef]", &forged).text,
        "[EMAIL_deadbeef]"
    );
    // Another server's pair: not applied.
    let other = PiiEngine::new([6; 32], 100);
    let o = other.sanitize("ann@example.com");
    assert_eq!(e.restore_with(&o.text, &o.tokens).text, o.text);
    // Tokens missing from the map stay, even if the vault knows them.
    let r = e.restore_with(&s.text, &BTreeMap::new());
    assert_eq!((r.text.as_str(), r.unknown), (s.text.as_str(), 2));
}

#[test]
fn vault_is_bounded_and_evicted_tokens_no_longer_restore() {
    let e = PiiEngine::new([8; 32], 3);
    let texts = ["a1@x.io", "b2@x.io", "c3@x.io", "d4@x.io", "e5@x.io"];
    let sanitized: Vec<Sanitized> = texts.iter().map(|t| e.sanitize(t)).collect();
    assert_eq!(e.vault_len(), 3);
    for (i, s) in sanitized.iter().enumerate() {
        let r = e.restore(&s.text);
        if i < 2 {
            assert_eq!(
                (r.text.as_str(), r.unknown),
                (s.text.as_str(), 1),
                "evicted"
            );
            // The sandbox kept the pair: it still verifies without the vault.
            assert_eq!(e.restore_with(&s.text, &s.tokens).text, texts[i]);
        } else {
            assert_eq!(r.text, texts[i]);
        }
    }
}

#[test]
fn concurrent_use_is_consistent() {
    let e = Arc::new(PiiEngine::new([9; 32], 1000));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let e = e.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    let text = format!("u{}@example.com and user{t}@example.org", i % 50);
                    let s = e.sanitize(&text);
                    assert_eq!(e.restore(&s.text).text, text);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert!(e.vault_len() <= 1000);
}

#[test]
fn sanitize_json_tokenizes_values_keys_and_numbers() {
    let v = json!({
        "name": "Ann",
        "email": "ann@example.com",
        "ann@example.com": {"visits": 3},
        "card_number": 4111111111111111u64,
        "ssn": "123456789",
        "api_key": "a1b2c3d4e5f6a7b8c9d0",
        "phone": 4155550132u64,
        "count": 4155550132u64,
        "nested": [{"ip": "10.0.0.1"}, ["415-555-0132", true, null, 1.5]],
    });
    let out = engine().sanitize_json(&v, &crate::pii::Origin::Sandbox);
    let text = out.to_string();
    for leak in [
        "ann@example.com",
        "4111111111111111",
        "123456789",
        "a1b2c3d4e5f6",
        "10.0.0.1",
        "415-555-0132",
    ] {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
    assert_eq!(out["name"], "Ann");
    assert!(out["email"].as_str().unwrap().starts_with("[EMAIL_"));
    assert!(
        out["card_number"]
            .as_str()
            .unwrap()
            .starts_with("[CREDIT_CARD_")
    );
    assert!(out["ssn"].as_str().unwrap().starts_with("[SSN_"));
    assert!(out["api_key"].as_str().unwrap().starts_with("[API_KEY_"));
    assert!(out["phone"].as_str().unwrap().starts_with("[PHONE_"));
    assert_eq!(
        out["count"], 4155550132u64,
        "no phone word in the key: a number stays a number"
    );
    assert_eq!(out["nested"][1][1], true);
    assert_eq!(out["nested"][1][3], 1.5);
    let email_token = out["email"].as_str().unwrap();
    assert_eq!(
        out[email_token]["visits"], 3,
        "keys are tokenized with the same token"
    );
    // Everything restores.
    let back: Value = serde_json::from_str(&engine().restore(&text).text).unwrap();
    assert_eq!(back["ann@example.com"]["visits"], 3);
    assert_eq!(back["card_number"], "4111111111111111");
}

#[test]
fn sanitize_json_keeps_colliding_keys_apart() {
    let token = engine().tokenize_value(PiiKind::Email, "bob@example.com");
    let v = json!({ token.clone(): 1, "bob@example.com": 2 });
    let out = engine().sanitize_json(&v, &crate::pii::Origin::Sandbox);
    let obj = out.as_object().unwrap();
    assert_eq!(obj.len(), 2);
    assert!(obj.contains_key(&token) && obj.contains_key(&format!("{token}#2")));
}

#[test]
fn sanitize_json_survives_deep_nesting() {
    let mut v = json!("ann@example.com");
    for _ in 0..300 {
        v = json!([v]);
    }
    let out = engine()
        .sanitize_json(&v, &crate::pii::Origin::Sandbox)
        .to_string();
    assert!(!out.contains("ann@example.com"));
}

#[test]
fn unicode_text_never_panics() {
    let text =
        "Zoë 🙂 ann@example.com — 電話 +86 138 0013 8000 ключ=Пароль123456 é\u{301} 10.0.0.1\u{0}";
    let s = engine().sanitize(text);
    assert_eq!(engine().restore(&s.text).text, text);
    for d in engine().detect(text) {
        assert!(text.is_char_boundary(d.start) && text.is_char_boundary(d.end));
    }
}

const PII: &[&str] = &[
    "ann.lee@example.com",
    "jörg@müller.de",
    "415-555-0132",
    "+44 20 7946 0958",
    "123-45-6789",
    "4111 1111 1111 1111",
    "378282246310005",
    "10.0.0.1",
    "fe80::1ff:fe23:4567:890a",
    "AKIAIOSFODNN7EXAMPLE",
    "password=hunter2x",
    "DE89 3704 0044 0532 0130 00",
    "Bearer abcDEF123456ghiJKL789",
    "SSN: 078051120",
];

fn text_with_pii() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            any::<String>(),
            "[ -~]{0,20}",
            prop::sample::select(PII).prop_map(str::to_owned),
            "[0-9 .:()+\\-]{0,24}",
        ],
        0..8,
    )
    .prop_map(|parts| parts.join(" "))
}

proptest! {
    #[test]
    fn restore_inverts_sanitize(text in text_with_pii()) {
        prop_assume!(!text.contains('[') || engine().restore(&text).restored == 0);
        let s = engine().sanitize(&text);
        prop_assert_eq!(&engine().restore(&s.text).text, &text);
        prop_assert_eq!(&engine().restore_with(&s.text, &s.tokens).text, &text);
    }

    #[test]
    fn tokens_are_never_detected_again(text in text_with_pii()) {
        let once = engine().sanitize(&text).text;
        let twice = engine().sanitize(&once);
        prop_assert_eq!(&twice.text, &once);
        prop_assert!(twice.tokens.is_empty());
    }

    #[test]
    fn detections_are_sorted_disjoint_char_aligned(text in any::<String>()) {
        let ds = engine().detect(&text);
        for w in ds.windows(2) {
            prop_assert!(w[0].end <= w[1].start);
        }
        for d in &ds {
            prop_assert!(d.start < d.end && text.is_char_boundary(d.start) && text.is_char_boundary(d.end));
        }
    }

    #[test]
    fn arbitrary_bytes_as_lossy_text_round_trip(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let s = engine().sanitize(&text);
        prop_assert_eq!(engine().restore(&s.text).text, text);
    }
}

/// Inputs the fuzzer found where sanitized text held a value the original did not show:
/// sanitizing changes what surrounds a value, and the detectors must not read more into it.
#[test]
fn sanitized_fuzz_findings_hold_nothing_new() {
    let inputs: [&[u8]; 2] = [
        include_bytes!("../../tests/fuzz/corpus/pii/phones-stray-paren.txt"),
        include_bytes!("../../tests/fuzz/corpus/pii/url-password-far-from-scheme.txt"),
    ];
    let e = PiiEngine::new([0x5a; 32], 1000);
    for input in inputs {
        let text = String::from_utf8_lossy(input);
        let s = e.sanitize(&text);
        let found: Vec<&str> = e
            .detect(&s.text)
            .iter()
            .map(|d| &s.text[d.start..d.end])
            .collect();
        assert!(found.is_empty(), "{found:?} in {:?}", s.text);
    }
}

#[test]
fn a_cut_never_leaves_part_of_a_value() {
    let pii = engine();
    let value = "margarethe.vonstrelitz@example-mail.org";
    let text = format!("{} {value} and more", "x".repeat(9));
    for cut in 10..=10 + value.len() {
        let shown = pii.sanitize_cut(&text, cut, &crate::pii::Origin::Sandbox);
        let (head, rest) = shown.split_at(10);
        assert_eq!(head, format!("{} ", "x".repeat(9)), "cut {cut}: {shown}");
        assert!(
            (cut == 10 && rest.is_empty()) || token_shape("EMAIL").is_match(rest),
            "cut {cut}: the value is its token whole, or absent: {shown}"
        );
    }
    assert_eq!(
        pii.sanitize_cut(&text, 5, &crate::pii::Origin::Sandbox),
        "[withheld up to the cut]",
        "before the value, inside a run: the run is withheld"
    );
    assert_eq!(
        pii.sanitize_cut(&text, 9, &crate::pii::Origin::Sandbox),
        "xxxxxxxxx",
        "before the value, after a run: a plain cut"
    );
    let card = "card 4111 1111 1111 1111 ok";
    assert!(
        pii.sanitize_cut(card, 12, &crate::pii::Origin::Sandbox)
            .starts_with("card [CREDIT_CARD_")
    );
}
