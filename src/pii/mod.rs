//! PII engine: finds personal data and secrets in text and swaps them for keyed tokens.
//!
//! What it is for: with `--pii-output tokenize` everything `execute_code` returns to the model
//! (printed lines, the result, error text) goes through [`PiiEngine::sanitize`] /
//! [`PiiEngine::sanitize_json`], so the model sees `[EMAIL_3f9a0c12]` where the sandbox saw
//! `ann@example.com`. The model can still reason about the data (equal values get equal tokens
//! within a server) and hand tokens back; [`PiiEngine::restore`] (the `restore_pii` tool and
//! `detokenize_pii(text)` in the sandbox) turns them into values again on the trusted side.
//!
//! - Detection (`detect.rs`): email, phone (NANP and `+` international), SSN, credit card (Luhn +
//!   issuer ranges), IPv4/IPv6, API keys and secrets (AWS, GitHub, Slack, OpenAI-style, Stripe,
//!   Google, JWT, private-key blocks, `key=value`, `Bearer` and URL-password secrets), IBAN
//!   (mod-97). One multi-pattern regex pass (linear time, no backtracking) plus validators; the
//!   overlap priority is documented there. Offsets are bytes; spans always fall on `char`
//!   boundaries.
//! - Tokens (`token.rs`): `[KIND_hex8]` from HMAC-SHA256 under a per-server random secret; a
//!   longer hex part only if a different value already holds the 8-digit one.
//! - Vault: token → value, bounded (`vault_capacity`, least recently minted forgotten first; a
//!   forgotten token no longer restores through `restore`). Behind one `Mutex`, taken once per
//!   `sanitize` call after the detection and MACs are done outside it.
//!
//! Restore rules (what can turn a token back into a value):
//! - [`PiiEngine::restore`]: only tokens in this engine's vault. Forged tokens, tokens of another
//!   server and tokens already evicted stay as they are and are counted as `unknown`.
//! - [`PiiEngine::restore_with`] (sandbox `detokenize_pii(text, tokens)`): only tokens present in
//!   the caller's map *and* whose mapped value this engine would itself mint to exactly that
//!   token (the HMAC is recomputed; the vault is not needed). Why: the map comes from sandbox
//!   code, which is untrusted. With this rule a map can only say what a real `tokenize_pii` said,
//!   so the code cannot make `[EMAIL_…]` "restore" to text of its choosing (a forged pair simply
//!   does not verify), another server's tokens never verify, and a pair the code kept from its own
//!   `tokenize_pii` still restores after the vault forgot it.
//!
//! Known limits: `restore(sanitize(x)) == x` holds unless `x` already contains a token string this
//! engine minted (it is restored too) or one call mints more distinct values than the vault holds.
//! Detection is pattern-based: names and postal addresses are not detected; national phone formats
//! without `+` (other than NANP) and bare 9-digit SSNs without an SSN label are not detected; a
//! `key=value` secret is recognized by its key word and the shape of its value, so a password that
//! is a plain word is missed and a long random-looking identifier after `token=` is taken.

mod detect;
mod token;
mod types;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use regex::Regex;
use serde_json::{Map, Value};

pub use types::{Detection, PiiKind, Restored, Sanitized};

use detect::Detectors;
use token::{Keyed, TokenId, Vault};

/// Default number of tokens the vault remembers.
pub const DEFAULT_VAULT_CAPACITY: usize = 100_000;

/// JSON nesting deeper than this is not walked: the subtree is replaced by a marker string rather
/// than passed through unchecked.
const MAX_JSON_DEPTH: usize = 256;

/// Errors of the engine's constructors.
#[derive(Debug, thiserror::Error)]
pub enum PiiError {
    #[error("no system randomness for the PII secret: {0}")]
    Randomness(String),
}

/// The PII engine of one server: compiled detectors, the secret, the vault. `Send + Sync`; share
/// it behind an `Arc`.
pub struct PiiEngine {
    detectors: Detectors,
    keyed: Keyed,
    vault: Mutex<Vault>,
    token_re: Regex,
}

impl std::fmt::Debug for PiiEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let vault = self.vault();
        f.debug_struct("PiiEngine")
            .field("vault_len", &vault.len())
            .field("vault_capacity", &vault.capacity())
            .finish_non_exhaustive()
    }
}

impl PiiEngine {
    /// An engine keyed with `secret`, remembering at most `vault_capacity` tokens (at least 1).
    pub fn new(secret: [u8; 32], vault_capacity: usize) -> Self {
        PiiEngine {
            detectors: Detectors::new(),
            keyed: Keyed::new(&secret),
            vault: Mutex::new(Vault::new(vault_capacity)),
            token_re: Regex::new(
                r"\[(?:EMAIL|PHONE|SSN|CREDIT_CARD|IP_ADDRESS|API_KEY|IBAN)_[0-9a-f]{8,64}\]",
            )
            .expect("token pattern"),
        }
    }

    /// An engine with a fresh secret from the operating system's randomness: tokens differ
    /// between server runs and between servers.
    pub fn with_random_secret(vault_capacity: usize) -> Result<Self, PiiError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| PiiError::Randomness(e.to_string()))?;
        Ok(Self::new(secret, vault_capacity))
    }

    fn vault(&self) -> MutexGuard<'_, Vault> {
        // A panic while holding the lock cannot leave the vault half-updated in a way that
        // matters (worst case one token missing), so keep serving.
        self.vault.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tokens currently remembered.
    pub fn vault_len(&self) -> usize {
        self.vault().len()
    }

    /// Everything the detectors find in `text`: byte offsets, sorted, non-overlapping.
    pub fn detect(&self, text: &str) -> Vec<Detection> {
        self.detectors.detect(text)
    }

    /// The token `value` gets as a `kind` (recorded in the vault).
    pub fn tokenize_value(&self, kind: PiiKind, value: &str) -> String {
        let mac = self.keyed.mac(kind, value);
        self.vault().mint(kind, value, &mac).to_string()
    }

    /// Replaces every detected value with its token and records token → value in the vault.
    pub fn sanitize(&self, text: &str) -> Sanitized {
        let found = self.detect(text);
        if found.is_empty() {
            return Sanitized {
                text: text.to_owned(),
                ..Sanitized::default()
            };
        }
        self.replace(text, &found)
    }

    fn replace(&self, text: &str, found: &[Detection]) -> Sanitized {
        // Distinct values first: in real output the same address or IP repeats, and the MAC is
        // the costly part. MACs are computed outside the lock; one lock for all the minting.
        let mut index: HashMap<(PiiKind, &str), usize> = HashMap::new();
        let mut distinct: Vec<(PiiKind, &str)> = Vec::with_capacity(found.len());
        let small = found.len() <= 16; // a linear scan beats hashing for a line's worth
        let which: Vec<usize> = found
            .iter()
            .map(|d| {
                let key = (d.kind, &text[d.start..d.end]);
                if small {
                    distinct.iter().position(|k| *k == key).unwrap_or_else(|| {
                        distinct.push(key);
                        distinct.len() - 1
                    })
                } else {
                    *index.entry(key).or_insert_with(|| {
                        distinct.push(key);
                        distinct.len() - 1
                    })
                }
            })
            .collect();
        let macs: Vec<[u8; 32]> = distinct
            .iter()
            .map(|&(k, v)| self.keyed.mac(k, v))
            .collect();
        let ids: Vec<TokenId> = {
            let mut vault = self.vault();
            distinct
                .iter()
                .zip(&macs)
                .map(|(&(k, v), mac)| vault.mint(k, v, mac))
                .collect()
        };
        let mut out = String::with_capacity(text.len() + found.len() * 8);
        let mut counts = BTreeMap::new();
        let mut last = 0;
        for (d, &i) in found.iter().zip(&which) {
            out.push_str(&text[last..d.start]);
            ids[i].write(&mut out);
            last = d.end;
            *counts.entry(d.kind).or_insert(0) += 1;
        }
        out.push_str(&text[last..]);
        let tokens = ids
            .iter()
            .zip(&distinct)
            .map(|(id, &(_, v))| (id.to_string(), v.to_owned()))
            .collect();
        Sanitized {
            text: out,
            tokens,
            counts,
        }
    }

    /// Replaces every token of this engine's vault in `text` by its value. Anything else that
    /// looks like a token (forged, another server's, evicted) is left as is and counted as
    /// `unknown`.
    pub fn restore(&self, text: &str) -> Restored {
        if !text.contains('[') {
            return Restored {
                text: text.to_owned(),
                ..Restored::default()
            };
        }
        let vault = self.vault();
        self.substitute(text, |token| {
            let id = TokenId::parse(token)?;
            vault.get(&id).map(str::to_owned)
        })
    }

    /// Replaces the tokens of `tokens` found in `text` by their values, but only those pairs this
    /// engine would mint itself (HMAC recomputed): see the module docs for why. Tokens missing
    /// from the map or not verifying are left as they are and counted as `unknown`. The vault is
    /// not consulted, so this works for pairs the vault has already forgotten.
    pub fn restore_with(&self, text: &str, tokens: &BTreeMap<String, String>) -> Restored {
        if !text.contains('[') {
            return Restored {
                text: text.to_owned(),
                ..Restored::default()
            };
        }
        self.substitute(text, |token| {
            let value = tokens.get(token)?;
            self.verifies(token, value).then(|| value.clone())
        })
    }

    /// Whether this engine mints exactly `token` for `value` (up to the collision extension).
    fn verifies(&self, token: &str, value: &str) -> bool {
        let Some(id) = TokenId::parse(token) else {
            return false;
        };
        id.matches(id.kind(), &self.keyed.mac(id.kind(), value))
    }

    fn substitute(&self, text: &str, mut lookup: impl FnMut(&str) -> Option<String>) -> Restored {
        let mut out = String::with_capacity(text.len());
        let (mut restored, mut unknown, mut last) = (0, 0, 0);
        for m in self.token_re.find_iter(text) {
            match lookup(m.as_str()) {
                Some(value) => {
                    out.push_str(&text[last..m.start()]);
                    out.push_str(&value);
                    last = m.end();
                    restored += 1;
                }
                None => unknown += 1,
            }
        }
        out.push_str(&text[last..]);
        Restored {
            text: out,
            restored,
            unknown,
        }
    }

    /// Tokenizes every string in a JSON value before it reaches the model: string values, object
    /// keys (a dict keyed by email would otherwise leak), and integers that are PII as a whole
    /// (a card or phone number stored as a number becomes its token string). Why keys too: the
    /// output is for a model, not for a program, so a renamed key costs nothing while a leaked one
    /// defeats the purpose. The key of a value is used as context: `{"ssn": "123456789"}` and
    /// `{"api_key": "…"}` are detected as `ssn: 123456789` and `api_key: …` would be. If two keys
    /// of one object sanitize to the same string, later ones get a `#2`, `#3`… suffix.
    pub fn sanitize_json(&self, v: &Value) -> Value {
        self.json(v, None, 0)
    }

    fn json(&self, v: &Value, key: Option<&str>, depth: usize) -> Value {
        if depth > MAX_JSON_DEPTH {
            return Value::String("[nested too deep to check for PII]".into());
        }
        match v {
            Value::String(s) => Value::String(self.sanitize_in_context(key, s)),
            Value::Number(n) if n.is_i64() || n.is_u64() => {
                let s = n.to_string();
                let t = self.sanitize_in_context(key, &s);
                if t == s { v.clone() } else { Value::String(t) }
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|x| self.json(x, key, depth + 1)).collect())
            }
            Value::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (k, x) in map {
                    let mut nk = self.sanitize(k).text;
                    if out.contains_key(&nk) {
                        let base = nk.clone();
                        let mut i = 2;
                        while out.contains_key(&nk) {
                            nk = format!("{base}#{i}");
                            i += 1;
                        }
                    }
                    let value = self.json(x, Some(k), depth + 1);
                    out.insert(nk, value);
                }
                Value::Object(out)
            }
            _ => v.clone(),
        }
    }

    /// Sanitizes `s`, letting its JSON key serve as the label in front of it when that key names
    /// a kind whose detector needs context (SSN, phone, secret keys).
    fn sanitize_in_context(&self, key: Option<&str>, s: &str) -> String {
        const CONTEXT_KEYS: &[&str] = &[
            "ssn",
            "social",
            "phone",
            "tel",
            "mobile",
            "cell",
            "fax",
            "sms",
            "whatsapp",
            "contact",
            "key",
            "secret",
            "token",
            "pass",
            "pwd",
            "credential",
            "auth",
        ];
        let Some(key) = key.filter(|k| {
            k.len() <= 64 && {
                let lower = k.to_ascii_lowercase();
                CONTEXT_KEYS.iter().any(|c| lower.contains(c))
            }
        }) else {
            return self.sanitize(s).text;
        };
        // Detect on `key: value`, keep the detections inside the value.
        let prefix_len = key.len() + 2;
        let combined = format!("{key}: {s}");
        let found: Vec<Detection> = self
            .detect(&combined)
            .into_iter()
            .filter(|d| d.start >= prefix_len)
            .map(|d| Detection {
                kind: d.kind,
                start: d.start - prefix_len,
                end: d.end - prefix_len,
            })
            .collect();
        if found.is_empty() {
            return s.to_owned();
        }
        self.replace(s, &found).text
    }
}

#[cfg(test)]
mod tests {
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
        let out = engine().sanitize_json(&v);
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
        let out = engine().sanitize_json(&v);
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
        let out = engine().sanitize_json(&v).to_string();
        assert!(!out.contains("ann@example.com"));
    }

    #[test]
    fn unicode_text_never_panics() {
        let text = "Zoë 🙂 ann@example.com — 電話 +86 138 0013 8000 ключ=Пароль123456 é\u{301} 10.0.0.1\u{0}";
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
}
