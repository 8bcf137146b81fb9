//! Keyed tokens and the bounded vault.
//!
//! A token is `[KIND_hex]` where `hex` is a prefix (8 hex digits, longer only on collision) of
//! HMAC-SHA256(secret, KIND ‖ 0x00 ‖ value). Why keyed: the original hashed the value alone, so
//! anyone could confirm a guess (`md5("ann@example.com")[:8]`) offline and tokens of two servers
//! were interchangeable. With a per-server 32-byte random secret the same value still gets the
//! same token within one server (so the model can count, join and compare tokens), but without
//! the secret a token reveals nothing and cannot be forged, and a token minted by another server
//! (another tenant) is just unknown here. The kind is inside the MAC so that a token's prefix is
//! bound to its value: `[PHONE_x]` cannot be relabelled `[EMAIL_x]`.
//!
//! HMAC is written out over `sha2` (RFC 2104; the key is one 32-byte block, so no key hashing):
//! the inner and outer states are precomputed once and cloned per value.
//!
//! The vault maps token → value for `restore`. It is bounded: when it holds `capacity` tokens,
//! minting a new one forgets the least recently minted (minting an existing value again counts
//! as minting, so a value in active use stays). A forgotten token no longer restores through
//! `restore` (its value is gone from memory by design); `restore_with` can still verify a
//! token/value pair the caller kept, because that needs only the secret.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use sha2::{Digest, Sha256};

use super::origin::{self, Origin};
use super::types::PiiKind;

/// One value of the vault as the vault file keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub kind: PiiKind,
    pub value: String,
    pub origins: Vec<Origin>,
}

/// Hex lengths a token may have: 8 normally; the next one when a shorter token is already taken
/// by a different value (about one chance in 4·10⁹ per pair of values at 8).
pub(crate) const TOKEN_HEX_LENGTHS: [usize; 6] = [8, 12, 16, 24, 32, 64];

/// HMAC-SHA256 with a fixed 32-byte key.
#[derive(Clone)]
pub(crate) struct Keyed {
    inner: Sha256,
    outer: Sha256,
}

impl fmt::Debug for Keyed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Keyed(<secret>)")
    }
}

impl Keyed {
    pub(crate) fn new(secret: &[u8; 32]) -> Self {
        let mut ipad = [0x36u8; 64];
        let mut opad = [0x5cu8; 64];
        for (i, k) in secret.iter().enumerate() {
            ipad[i] ^= k;
            opad[i] ^= k;
        }
        let mut inner = Sha256::new();
        inner.update(ipad);
        let mut outer = Sha256::new();
        outer.update(opad);
        Keyed { inner, outer }
    }

    pub(crate) fn mac_parts(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut inner = self.inner.clone();
        for p in parts {
            inner.update(p);
        }
        let mut outer = self.outer.clone();
        outer.update(inner.finalize());
        outer.finalize().into()
    }

    /// The MAC of a value of `kind`; a token shows a prefix of it in hex.
    pub(crate) fn mac(&self, kind: PiiKind, value: &str) -> [u8; 32] {
        self.mac_parts(&[kind.as_str().as_bytes(), &[0], value.as_bytes()])
    }
}

/// A token in binary form: kind, number of hex digits shown, and the MAC bytes those digits show
/// (the rest zeroed). Copy and allocation-free, so the vault and the restore path never format
/// or hash strings.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct TokenId {
    kind: PiiKind,
    hex_len: u8,
    bytes: [u8; 32],
}

impl TokenId {
    pub(crate) fn new(kind: PiiKind, mac: &[u8; 32], hex_len: usize) -> Self {
        let mut bytes = [0u8; 32];
        bytes[..hex_len / 2].copy_from_slice(&mac[..hex_len / 2]);
        TokenId {
            kind,
            hex_len: hex_len as u8,
            bytes,
        }
    }

    /// Whether this token is a prefix of `mac` (i.e. the value with that MAC gets this token).
    pub(crate) fn matches(&self, kind: PiiKind, mac: &[u8; 32]) -> bool {
        let n = usize::from(self.hex_len) / 2;
        self.kind == kind && self.bytes[..n] == mac[..n]
    }

    pub(crate) fn kind(&self) -> PiiKind {
        self.kind
    }

    /// Parses `[KIND_hex]` (lowercase hex of one of the token lengths).
    pub(crate) fn parse(token: &str) -> Option<Self> {
        let inner = token.strip_prefix('[')?.strip_suffix(']')?;
        let (kind, hex) = inner.rsplit_once('_')?;
        let kind = PiiKind::from_name(kind)?;
        if !TOKEN_HEX_LENGTHS.contains(&hex.len()) || hex.bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex, &mut bytes[..hex.len() / 2]).ok()?;
        Some(TokenId {
            kind,
            hex_len: hex.len() as u8,
            bytes,
        })
    }

    /// Appends `[KIND_hex]` to `out`.
    pub(crate) fn write(&self, out: &mut String) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        out.push('[');
        out.push_str(self.kind.as_str());
        out.push('_');
        for b in &self.bytes[..usize::from(self.hex_len) / 2] {
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
        out.push(']');
    }
}

/// The MAC bytes are already uniformly distributed (and keyed, so not chosen by an attacker):
/// eight of them are the hash.
impl Hash for TokenId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut first = [0u8; 8];
        first.copy_from_slice(&self.bytes[..8]);
        state.write_u64(
            u64::from_le_bytes(first) ^ (u64::from(self.hex_len) << 56) ^ self.kind as u64,
        );
    }
}

/// Passes `TokenId`'s one `write_u64` through.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl fmt::Display for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::with_capacity(80);
        self.write(&mut s);
        f.write_str(&s)
    }
}

struct Slot {
    value: Box<str>,
    seq: u64,
    /// Where the value entered (empty: unknown, as in a vault file from before origins).
    origins: Vec<Origin>,
}

/// token → value, bounded, forgetting the least recently minted token first.
///
/// Recency is a queue of (sequence number, token); minting a known value again pushes a new entry
/// and the old one goes stale (it is skipped on eviction, and the queue is compacted when stale
/// entries outnumber live ones), so every operation is amortized O(1).
pub(crate) struct Vault {
    capacity: usize,
    next_seq: u64,
    slots: HashMap<TokenId, Slot, BuildHasherDefault<IdHasher>>,
    order: VecDeque<(u64, TokenId)>,
}

impl Vault {
    pub(crate) fn new(capacity: usize) -> Self {
        Vault {
            capacity: capacity.max(1),
            next_seq: 0,
            slots: HashMap::default(),
            order: VecDeque::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The token for `value` (whose MAC is `mac`), recording it as the most recently minted,
    /// with no origin (tests, and values whose origin is unknown).
    #[cfg(test)]
    pub(crate) fn mint(&mut self, kind: PiiKind, value: &str, mac: &[u8; 32]) -> TokenId {
        self.mint_with(kind, value, mac, &[], true).0
    }

    /// [`Vault::mint`] of a value that entered from `origin` (if known); whether the vault file needs a
    /// record of it (the value, or this origin of it, is new). [`Origin::Sandbox`] is added
    /// only to a value new to the vault (`origin.rs`).
    pub(crate) fn mint_from(
        &mut self,
        kind: PiiKind,
        value: &str,
        mac: &[u8; 32],
        origin: Option<&Origin>,
    ) -> (TokenId, bool) {
        let origins = origin.map_or(&[][..], std::slice::from_ref);
        self.mint_with(kind, value, mac, origins, false)
    }

    /// [`Vault::mint`] of a value read from the vault file with the origins its record names.
    pub(crate) fn replay(
        &mut self,
        kind: PiiKind,
        value: &str,
        mac: &[u8; 32],
        origins: &[Origin],
    ) {
        self.mint_with(kind, value, mac, origins, true);
    }

    fn mint_with(
        &mut self,
        kind: PiiKind,
        value: &str,
        mac: &[u8; 32],
        origins: &[Origin],
        replayed: bool,
    ) -> (TokenId, bool) {
        for n in TOKEN_HEX_LENGTHS {
            let id = TokenId::new(kind, mac, n);
            let seq = self.next_seq;
            match self.slots.get_mut(&id) {
                Some(slot) if &*slot.value == value => {
                    slot.seq = seq;
                    let mut added = false;
                    for o in origins {
                        if replayed || *o != Origin::Sandbox {
                            added |= origin::add(&mut slot.origins, o);
                        }
                    }
                    self.next_seq += 1;
                    self.order.push_back((seq, id));
                    self.compact();
                    return (id, added);
                }
                Some(_) => continue, // a different value owns this prefix: take a longer one
                None => {
                    let mut slot = Slot {
                        value: value.into(),
                        seq,
                        origins: Vec::new(),
                    };
                    for o in origins {
                        origin::add(&mut slot.origins, o);
                    }
                    self.slots.insert(id, slot);
                    self.next_seq += 1;
                    self.order.push_back((seq, id));
                    self.evict();
                    self.compact();
                    return (id, true);
                }
            }
        }
        // 64 hex digits are the whole MAC: equal MACs of different values do not happen.
        unreachable!("HMAC-SHA256 collision on the full digest")
    }

    fn evict(&mut self) {
        while self.slots.len() > self.capacity {
            let Some((seq, id)) = self.order.pop_front() else {
                break;
            };
            if self.slots.get(&id).is_some_and(|s| s.seq == seq) {
                self.slots.remove(&id);
            }
        }
    }

    fn compact(&mut self) {
        if self.order.len() > 2 * self.slots.len() + 1024 {
            let slots = &self.slots;
            self.order
                .retain(|(seq, id)| slots.get(id).is_some_and(|s| s.seq == *seq));
        }
    }

    #[cfg(test)]
    pub(crate) fn get(&self, id: &TokenId) -> Option<&str> {
        self.slots.get(id).map(|s| &*s.value)
    }

    /// The value behind `id` and where it entered.
    pub(crate) fn get_with_origins(&self, id: &TokenId) -> Option<(&str, &[Origin])> {
        self.slots
            .get(id)
            .map(|s| (&*s.value, s.origins.as_slice()))
    }

    /// Every remembered value with its kind and origins, least recently minted first (what a
    /// rewrite of the vault file keeps, in the order that replays to the same recency).
    pub(crate) fn entries(&self) -> Vec<Entry> {
        self.order
            .iter()
            .filter_map(|(seq, id)| {
                let slot = self.slots.get(id).filter(|s| s.seq == *seq)?;
                Some(Entry {
                    kind: id.kind(),
                    value: slot.value.to_string(),
                    origins: slot.origins.clone(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2: key "Jefe" (zero-padded, as HMAC pads any short key).
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let mac = Keyed::new(&key).mac_parts(&[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn token_format_and_parse_round_trip() {
        let keyed = Keyed::new(&[9; 32]);
        let mac = keyed.mac(PiiKind::CreditCard, "4111111111111111");
        let id = TokenId::new(PiiKind::CreditCard, &mac, 8);
        let s = id.to_string();
        assert!(
            s.starts_with("[CREDIT_CARD_")
                && s.ends_with(']')
                && s.len() == "[CREDIT_CARD_]".len() + 8
        );
        assert_eq!(&s[13..21], &hex::encode(mac)[..8]);
        assert_eq!(TokenId::parse(&s), Some(id));
        assert!(id.matches(PiiKind::CreditCard, &mac));
        assert!(!id.matches(PiiKind::Phone, &mac));
        for bad in [
            "[EMAIL_ABCDEF12]",
            "[EMAIL_abcdef1]",
            "[EMAIL_abcdef123]",
            "[NAME_abcdef12]",
            "EMAIL_abcdef12",
            "[EMAIL_abcdefgh]",
        ] {
            assert_eq!(TokenId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn kind_is_part_of_the_mac() {
        let keyed = Keyed::new(&[1; 32]);
        assert_ne!(
            keyed.mac(PiiKind::Phone, "5551234567"),
            keyed.mac(PiiKind::Ssn, "5551234567")
        );
    }

    #[test]
    fn vault_evicts_least_recently_minted() {
        let keyed = Keyed::new(&[2; 32]);
        let mut v = Vault::new(3);
        let mint =
            |v: &mut Vault, s: &str| v.mint(PiiKind::Email, s, &keyed.mac(PiiKind::Email, s));
        let a = mint(&mut v, "a@x.io");
        let b = mint(&mut v, "b@x.io");
        let c = mint(&mut v, "c@x.io");
        assert_eq!(mint(&mut v, "a@x.io"), a); // minted again: now the most recent
        let d = mint(&mut v, "d@x.io");
        assert_eq!(v.len(), 3);
        assert_eq!(v.get(&b), None, "b was the least recently minted");
        assert_eq!(v.get(&a), Some("a@x.io"));
        assert_eq!(v.get(&c), Some("c@x.io"));
        assert_eq!(v.get(&d), Some("d@x.io"));
    }

    #[test]
    fn vault_stays_bounded_under_churn_and_repeats() {
        let keyed = Keyed::new(&[3; 32]);
        let mut v = Vault::new(100);
        for i in 0..10_000 {
            let s = format!("user{}@x.io", i % 250);
            v.mint(PiiKind::Email, &s, &keyed.mac(PiiKind::Email, &s));
            assert!(v.len() <= 100);
            assert!(v.order.len() <= 2 * 100 + 1024 + 1);
        }
    }

    #[test]
    fn prefix_collision_extends_the_token_instead_of_overwriting() {
        let mac = [0xabu8; 32];
        let mut v = Vault::new(10);
        let first = v.mint(PiiKind::Email, "first@x.io", &mac);
        // A different value whose MAC shares the first 8 hex digits (forced here).
        let mut mac2 = mac;
        mac2[10] ^= 1;
        let second = v.mint(PiiKind::Email, "second@x.io", &mac2);
        assert_eq!(first.to_string().len(), "[EMAIL_]".len() + 8);
        assert_eq!(second.to_string().len(), "[EMAIL_]".len() + 12);
        assert_eq!(v.get(&first), Some("first@x.io"));
        assert_eq!(v.get(&second), Some("second@x.io"));
        // Both keep their tokens when minted again.
        assert_eq!(v.mint(PiiKind::Email, "first@x.io", &mac), first);
        assert_eq!(v.mint(PiiKind::Email, "second@x.io", &mac2), second);
    }
}
