//! PII engine: finds personal data and secrets in text and swaps them for keyed tokens.
//!
//! What it is for: with `--pii-output tokenize` everything `execute_code` returns to the model
//! (printed lines, the result, error text) goes through [`PiiEngine::sanitize`] /
//! [`PiiEngine::sanitize_json`], so the model sees `[EMAIL_3f9a0c12]` where the sandbox saw
//! `ann@example.com`. The model can still reason about the data (equal values get equal tokens
//! within a server) and hand tokens back; [`PiiEngine::restore`] (the `restore_pii` tool and
//! `detokenize_pii(text)` in the sandbox) turns them into values again on the trusted side.
//!
//! - Detection (`detect/`): email, phone (NANP and `+` international), SSN, credit card (Luhn +
//!   issuer ranges), IPv4/IPv6, API keys and secrets (AWS, GitHub, Slack, OpenAI-style, Stripe,
//!   Google, JWT, private-key blocks, `key=value`, `Bearer` and URL-password secrets), IBAN
//!   (mod-97). An email glued to the text before it (`id=qqq…ann@example.com`) is its domain and
//!   at most the last 64 characters before its `@`, whatever the length of the glue; other kinds
//!   need a word boundary before them (`ref:DE89…` is an IBAN, `refDE89…` is not), and digits
//!   glued to a number are part of it. One multi-pattern regex pass (linear time, no backtracking) plus validators; the
//!   overlap priority is documented there. Offsets are bytes; spans always fall on `char`
//!   boundaries.
//! - Tokens (`token.rs`): `[KIND_hex8]` from HMAC-SHA256 under a per-server random secret, or
//!   with `--pii-key-file` a per-tenant secret derived from the key (`key.rs`); a longer hex part
//!   only if a different value already holds the 8-digit one.
//! - Vault: token → value, bounded (`vault_capacity`, least recently minted forgotten first; a
//!   forgotten token no longer restores through `restore`). Behind one `Mutex`, taken once per
//!   `sanitize` call after the detection and MACs are done outside it.
//! - With a key, the vault is also kept on disk (`vault_file.rs`, driven by `store.rs`): values
//!   new to the vault are appended, encrypted, once per sanitize call, before it returns; the file
//!   is replayed at open, and read again before `restore` calls a token unknown. So every server
//!   sharing the key and the storage restores the tokens any of them minted for the tenant.
//! - Origins (`origin.rs`): the vault keeps where each value entered (an upstream's tool, the
//!   user, the workspace, the sandbox), named by the caller of [`PiiEngine::sanitize_from`] and
//!   [`PiiEngine::together`], kept in the vault file with the value; the gateway's flow rules
//!   decide on them through [`PiiEngine::restore_where`] (`restore.rs`).
//! - Cuts (`cut.rs`): a text cut before the model sees it is read with the bytes past its cut, so
//!   a value the cut splits becomes its token whole; when none does and the cut falls inside a
//!   run of non-space characters, the run's last bytes before the cut (at most 4 KiB) are
//!   withheld behind a marker, so a value glued to text that hides it from the detectors never
//!   shows its first characters either.
//!
//! Restore rules (what can turn a token back into a value):
//! - [`PiiEngine::restore`]: only tokens in this engine's vault (with a vault file, also those
//!   another server of the same tenant appended to it). Forged tokens, tokens of another server
//!   (of another tenant, or without the shared key) and tokens already evicted stay as they are and
//!   are counted as `unknown`.
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

mod cut;
mod detect;
mod key;
mod origin;
mod restore;
mod store;
mod token;
mod types;
mod vault_file;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use regex::Regex;
use serde_json::{Map, Value};

pub use key::{KeyFileError, PiiKey, Scope};
pub use origin::{MAX_ORIGINS, Origin, describe as describe_origins};
pub use restore::{Checked, TokenUse};
pub use store::PersistenceStats;
pub use types::{Detection, PiiKind, Restored, Sanitized};
pub use vault_file::VaultFileError;

use detect::Detectors;
use store::Store;
use token::{Entry, Keyed, TokenId, Vault};

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
    #[error("PII vault file: {0}")]
    VaultFile(#[from] VaultFileError),
}

/// Locks `m`. A panic while holding one of the engine's locks cannot leave its state
/// half-updated in a way that matters (worst case one token missing), so keep serving.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The PII engine of one server: compiled detectors, the secret, the vault. `Send + Sync`; share
/// it behind an `Arc`.
pub struct PiiEngine {
    detectors: Detectors,
    keyed: Keyed,
    vault: Mutex<Vault>,
    /// The vault file (with `--pii-key-file`).
    store: Option<Store>,
    token_re: Regex,
    /// Values tokenized so far, per kind in [`PiiKind::ALL`]'s order (for the metrics).
    tokenized: [std::sync::atomic::AtomicU64; PiiKind::ALL.len()],
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
            store: None,
            token_re: Regex::new(
                r"\[(?:EMAIL|PHONE|SSN|CREDIT_CARD|IP_ADDRESS|API_KEY|IBAN)_[0-9a-f]{8,64}\]",
            )
            .expect("token pattern"),
            tokenized: Default::default(),
        }
    }

    /// Values tokenized since the engine started, per kind (a value shown twice counts twice).
    pub fn tokenized_by_kind(&self) -> Vec<(PiiKind, u64)> {
        (PiiKind::ALL.iter().zip(&self.tokenized))
            .map(|(k, n)| (*k, n.load(std::sync::atomic::Ordering::Relaxed)))
            .collect()
    }

    fn count_tokenized(&self, kind: PiiKind, n: u64) {
        let i = PiiKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
        self.tokenized[i].fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// An engine with a fresh secret from the operating system's randomness: tokens differ
    /// between server runs and between servers.
    pub fn with_random_secret(vault_capacity: usize) -> Result<Self, PiiError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| PiiError::Randomness(e.to_string()))?;
        Ok(Self::new(secret, vault_capacity))
    }

    /// An engine for `scope` whose secret is derived from `key` (every server with the key mints
    /// the same tokens for the scope) and whose vault is kept in the encrypted file at
    /// `vault_path`, read now: tokens minted before, by this server or another sharing the file,
    /// restore. Fails only if the file cannot be opened or is not a vault file; a file written
    /// with another key is logged and left alone, and the engine keeps its vault in memory.
    pub fn with_key(
        key: &PiiKey,
        scope: Scope<'_>,
        vault_capacity: usize,
        vault_path: &Path,
    ) -> Result<Self, PiiError> {
        let mut engine = Self::new(key.token_secret(scope), vault_capacity);
        let vault = engine.vault.get_mut().unwrap_or_else(|p| p.into_inner());
        engine.store = Some(Store::open(
            vault_path.to_path_buf(),
            &key.vault_key(scope),
            scope,
            vault,
            &engine.keyed,
        )?);
        Ok(engine)
    }

    fn vault(&self) -> MutexGuard<'_, Vault> {
        lock(&self.vault)
    }

    /// The vault file's state and counters (`None` without a key file).
    pub fn persistence(&self) -> Option<PersistenceStats> {
        self.store.as_ref().map(Store::stats)
    }

    /// Writes the values (and origins) new to the vault to its file (one write; nothing
    /// without a file).
    fn persist(&self, minted: Minting) {
        if let Some(store) = &self.store
            && !minted.fresh.is_empty()
        {
            store.append(&minted.fresh, &self.vault, &self.keyed);
        }
    }

    /// Tokens currently remembered.
    pub fn vault_len(&self) -> usize {
        self.vault().len()
    }

    /// Everything the detectors find in `text`: byte offsets, sorted, non-overlapping.
    pub fn detect(&self, text: &str) -> Vec<Detection> {
        self.detectors.detect(text)
    }

    /// The token `value` gets as a `kind` (recorded in the vault, of unknown origin).
    pub fn tokenize_value(&self, kind: PiiKind, value: &str) -> String {
        let mac = self.keyed.mac(kind, value);
        self.count_tokenized(kind, 1);
        let (id, fresh) = self.vault().mint_from(kind, value, &mac, None);
        if fresh {
            let mut minted = Minting::new(None);
            minted.note(kind, value);
            self.persist(minted);
        }
        id.to_string()
    }

    /// Replaces every detected value with its token and records token → value in the vault,
    /// with no origin (tests and tools; the server names one: [`PiiEngine::sanitize_from`]).
    pub fn sanitize(&self, text: &str) -> Sanitized {
        self.sanitize_with(text, None)
    }

    /// [`PiiEngine::sanitize`] of a text whose values entered from `origin`.
    pub fn sanitize_from(&self, text: &str, origin: &Origin) -> Sanitized {
        self.sanitize_with(text, Some(origin))
    }

    fn sanitize_with(&self, text: &str, origin: Option<&Origin>) -> Sanitized {
        let found = self.detect(text);
        if found.is_empty() {
            return Sanitized {
                text: text.to_owned(),
                ..Sanitized::default()
            };
        }
        let mut minted = Minting::new(origin);
        let sanitized = self.replace(text, &found, &mut minted);
        self.persist(minted);
        sanitized
    }

    /// `text` sanitized as shown up to byte `cut` (a char boundary): the detectors see all of
    /// `text`, so a value that the cut would split is found whole and its token takes its place
    /// (ending past `cut`); nothing else after `cut` is kept. When no value is found across the
    /// cut and the cut falls inside a run of non-space characters, the run's last bytes before
    /// it (at most 4 KiB) are withheld and a marker says so (`cut.rs`). For every place a text
    /// is cut before it reaches the model: the bytes after the cut are kept for this look, so no
    /// partial value (the name part of an email, a card's first digits) survives a cut.
    pub fn sanitize_cut(&self, text: &str, cut: usize, origin: &Origin) -> String {
        let mut minted = Minting::new(Some(origin));
        let out = self.cut_and_replace(text, cut, &mut minted);
        self.persist(minted);
        out
    }

    /// Replaces `found` in `text`; values new to the vault are added to `fresh` (when there is a
    /// vault file) for the caller to persist in one write.
    fn replace(&self, text: &str, found: &[Detection], fresh: &mut Minting) -> Sanitized {
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
                .map(|(&(k, v), mac)| {
                    let (id, new) = vault.mint_from(k, v, mac, fresh.origin.as_ref());
                    if new && self.store.is_some() {
                        fresh.note(k, v);
                    }
                    id
                })
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
        for (&kind, &n) in &counts {
            self.count_tokenized(kind, n as u64);
        }
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

    /// Tokenizes every string in a JSON value before it reaches the model: string values, object
    /// keys (a dict keyed by email would otherwise leak), and integers that are PII as a whole
    /// (a card or phone number stored as a number becomes its token string). Why keys too: the
    /// output is for a model, not for a program, so a renamed key costs nothing while a leaked one
    /// defeats the purpose. The key of a value is used as context: `{"ssn": "123456789"}` and
    /// `{"api_key": "…"}` are detected as `ssn: 123456789` and `api_key: …` would be. If two keys
    /// of one object sanitize to the same string, later ones get a `#2`, `#3`… suffix.
    pub fn sanitize_json(&self, v: &Value, origin: &Origin) -> Value {
        self.together(origin, |batch| batch.json(v))
    }

    /// Sanitizes several texts and JSON values as one call: the values new to the vault are
    /// written to its file once, when `f` returns (one `fdatasync` for a whole execution's
    /// outcome rather than one per part).
    pub fn together<R>(&self, origin: &Origin, f: impl FnOnce(&mut Batch<'_>) -> R) -> R {
        let mut batch = Batch {
            engine: self,
            fresh: Minting::new(Some(origin)),
        };
        let r = f(&mut batch);
        self.persist(batch.fresh);
        r
    }

    fn json(&self, v: &Value, key: Option<&str>, depth: usize, fresh: &mut Minting) -> Value {
        if depth > MAX_JSON_DEPTH {
            return Value::String("[nested too deep to check for PII]".into());
        }
        match v {
            Value::String(s) => Value::String(self.sanitize_in_context(key, s, fresh)),
            Value::Number(n) if n.is_i64() || n.is_u64() => {
                let s = n.to_string();
                let t = self.sanitize_in_context(key, &s, fresh);
                if t == s { v.clone() } else { Value::String(t) }
            }
            Value::Array(items) => {
                let items = items.iter().map(|x| self.json(x, key, depth + 1, fresh));
                Value::Array(items.collect())
            }
            Value::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (k, x) in map {
                    let nk = self.key(k, &out, fresh);
                    let value = self.json(x, Some(k), depth + 1, fresh);
                    out.insert(nk, value);
                }
                Value::Object(out)
            }
            _ => v.clone(),
        }
    }

    /// An object's key `k` as it is shown: tokenized (a dict keyed by email addresses holds
    /// personal data in its keys), with `#2`, `#3`… when its token is already a key of `out`.
    /// A schema's field names hold none, so they stay as they are.
    fn key(&self, k: &str, out: &Map<String, Value>, fresh: &mut Minting) -> String {
        let mut nk = self.sanitize_in_context(None, k, fresh);
        if out.contains_key(&nk) {
            let base = nk.clone();
            let mut i = 2;
            while out.contains_key(&nk) {
                nk = format!("{base}#{i}");
                i += 1;
            }
        }
        nk
    }

    /// Sanitizes `s`, letting its JSON key serve as the label in front of it when that key names
    /// a kind whose detector needs context (SSN, phone, secret keys).
    fn sanitize_in_context(&self, key: Option<&str>, s: &str, fresh: &mut Minting) -> String {
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
            let found = self.detect(s);
            if found.is_empty() {
                return s.to_owned();
            }
            return self.replace(s, &found, fresh).text;
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
        self.replace(s, &found, fresh).text
    }
}

/// Sanitizing as one call (see [`PiiEngine::together`]).
pub struct Batch<'a> {
    engine: &'a PiiEngine,
    fresh: Minting,
}

/// Where one sanitize call's values entered, and those the vault file does not hold yet.
pub(crate) struct Minting {
    origin: Option<Origin>,
    fresh: Vec<Entry>,
}

impl Minting {
    fn new(origin: Option<&Origin>) -> Self {
        Minting {
            origin: origin.cloned(),
            fresh: Vec::new(),
        }
    }

    /// `value` (or this origin of it) is new to the vault.
    fn note(&mut self, kind: PiiKind, value: &str) {
        self.fresh.push(Entry {
            kind,
            value: value.to_owned(),
            origins: self.origin.iter().cloned().collect(),
        });
    }
}

impl Batch<'_> {
    /// [`PiiEngine::sanitize`]'s text.
    pub fn text(&mut self, text: &str) -> String {
        self.engine.sanitize_in_context(None, text, &mut self.fresh)
    }

    /// [`Batch::text`] of `text`, which was cut from a longer text whose next bytes are `edge`
    /// (see [`PiiEngine::sanitize_cut`]).
    pub fn text_with_edge(&mut self, text: &str, edge: &str) -> String {
        if edge.is_empty() {
            return self.text(text);
        }
        let whole = format!("{text}{edge}");
        self.engine
            .cut_and_replace(&whole, text.len(), &mut self.fresh)
    }

    /// [`PiiEngine::sanitize_json`].
    pub fn json(&mut self, v: &Value) -> Value {
        self.engine.json(v, None, 0, &mut self.fresh)
    }

    /// An object's key as [`PiiEngine::sanitize_json`] shows it, given the keys `out` already
    /// holds: the one policy for keys, wherever JSON goes to the model.
    pub fn key(&mut self, k: &str, out: &Map<String, Value>) -> String {
        self.engine.key(k, out, &mut self.fresh)
    }
}

#[cfg(test)]
mod tests;
