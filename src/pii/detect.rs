//! Detectors: one multi-pattern regex pass over the text, then a validator per pattern.
//!
//! Why this shape: the `regex` engines guarantee linear time (no backtracking, so no catastrophic
//! patterns on hostile output) but have no look-around and no back-references. So the regex only
//! finds *candidates*, and a validator in plain Rust decides with what a regex cannot express:
//! Luhn and issuer ranges for cards, mod-97 and per-country lengths for IBANs, SSN area/group/
//! serial rules, octet ranges, the characters around a number (is `1.2.3.4` part of `1.2.3.4.5`?),
//! a context word before a bare number, and whether a `password=` value looks like a secret or
//! like a word. Validators may shrink a candidate (an IBAN followed by a word, a card followed by
//! an expiry group, the local part of an email after `..`).
//!
//! All candidate patterns are compiled into ONE `regex_automata::meta::Regex` (multi-pattern, no
//! capture groups), so the text is scanned once by one lazy DFA and each match says which pattern
//! it is. Separate regexes per type meant twelve passes (about 40 MB/s on log-like text); the
//! single pass is several times faster. Patterns run in ASCII mode (`(?-u)`) on bytes: `\b` is
//! then an ASCII word boundary, which the lazy DFA handles on any input (a Unicode `\b` makes the
//! engine fall back to a slow one at the first non-ASCII byte), and spans always start and end on
//! ASCII bytes, hence on `char` boundaries.
//!
//! Overlaps are settled by the pass itself, and this is the priority:
//! - the leftmost candidate wins, and a match hides everything inside it: an email's digits are
//!   not a phone, an IPv4 tail is part of its IPv6 address, a card number inside a longer
//!   `token=` value is part of that secret (the covering span hides everything);
//! - at the same start, the more specific pattern wins, in this fixed order: provider API keys
//!   (AWS, GitHub, Slack, OpenAI-style, Stripe, Google, JWT) and private-key blocks, EMAIL, IBAN,
//!   CREDIT_CARD, SSN (labelled, then dashed/spaced), IP_ADDRESS (v4, v6), PHONE (NANP, then
//!   international), and last the context-based secrets (`key=value`, `Bearer …`, URL passwords);
//! - the value of a context-based secret that is exactly a more specific kind is that kind:
//!   `card_token=4111111111111111` is a CREDIT_CARD, `secret: ann@example.com` an EMAIL;
//! - a rejected candidate does not hide anything: the scan resumes one byte after its start (after
//!   its end for emails and IPv6 candidates, whose suffixes are not candidates of their own).
//! - a value hides only itself: when a validator moves its start past the candidate's (an email's
//!   local part after other text, a label, a key), the skipped bytes are scanned on their own.

use regex_automata::meta::Regex;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input};

use super::types::{Detection, PiiKind};

/// Longest value a `key=value` secret may have; longer runs are blobs, not credentials.
const MAX_GENERIC_VALUE: usize = 4096;
/// Longest private-key block taken as one value.
const MAX_PRIVATE_KEY: usize = 16 * 1024;

/// The candidate patterns, most specific first (the order is the priority at equal start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pat {
    KeyPrefixed,
    PrivateKey,
    Email,
    Iban,
    Card,
    SsnLabelled,
    Ssn,
    Ipv4,
    Ipv6,
    PhoneNanp,
    PhoneIntl,
    Generic,
}

const IPV6_H: &str = "[0-9A-Fa-f]{1,4}";
const IPV6_V4: &str = r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}";

fn patterns() -> Vec<(Pat, String)> {
    let h = IPV6_H;
    let v4 = IPV6_V4;
    vec![
        (
            Pat::KeyPrefixed,
            concat!(
                r"(?-u)\b(?:",
                // AWS access key ids (AKIA long-term, ASIA temporary, and the other id prefixes)
                r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{16}",
                // GitHub classic / OAuth / user-to-server / server-to-server / refresh; fine-grained
                r"|gh[pousr]_[A-Za-z0-9]{36,}",
                r"|github_pat_[A-Za-z0-9_]{82,}",
                // Slack
                r"|xox[abposr]-[A-Za-z0-9\-]{10,}",
                // OpenAI-style (also sk-proj-, sk-svcacct-, sk-ant-…)
                r"|sk-[A-Za-z0-9_\-]{20,}",
                // Stripe secret and restricted keys (publishable pk_ keys are public by design)
                r"|[sr]k_(?:live|test)_[A-Za-z0-9]{10,}",
                // Google API keys
                r"|AIza[0-9A-Za-z_\-]{35}",
                // JSON Web Tokens
                r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
                // no trailing \b: keys may end in `-`; the validator checks the next byte
                r")",
            )
            .to_owned(),
        ),
        (
            Pat::PrivateKey,
            r"(?s-u)-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
                .to_owned(),
        ),
        (
            Pat::Email,
            concat!(
                // Non-ASCII bytes are taken here and sorted out by the validator: Latin letters with
                // diacritics belong to the address (`jörg@müller.de`), other characters do not
                // (`邮箱ann@example.com` starts at `ann`). `%40` is a URL-encoded `@`
                // (`?email=ann%40example.com` in access logs).
                r"(?-u)[A-Za-z0-9._%+\-\x80-\xFF]+(?:@|%40)",
                r"[A-Za-z0-9\x80-\xFF](?:[A-Za-z0-9\-\x80-\xFF]*[A-Za-z0-9\x80-\xFF])?",
                r"(?:\.[A-Za-z0-9\x80-\xFF](?:[A-Za-z0-9\-\x80-\xFF]*[A-Za-z0-9\x80-\xFF])?)*\.[A-Za-z]{2,}\b",
            )
            .to_owned(),
        ),
        (Pat::Iban, r"(?-u)\b[A-Z]{2}[0-9]{2}(?:\x20?[A-Z0-9]){11,}".to_owned()),
        (
            Pat::Card,
            concat!(
                r"(?-u)\b(?:[0-9]{4}[ \-][0-9]{4}[ \-][0-9]{4}[ \-][0-9]{1,4}(?:[ \-][0-9]{1,3})?",
                r"|[0-9]{4}[ \-][0-9]{6}[ \-][0-9]{4,5}",
                r"|[0-9]{13,19})\b",
            )
            .to_owned(),
        ),
        // A bare 9-digit SSN only right after an SSN / social security label.
        (
            Pat::SsnLabelled,
            concat!(
                r"(?i-u)\b(?:ssn|social[ _\-]?security(?:[ _\-]?(?:number|num|no))?)",
                r"[^0-9\n]{0,16}\b[0-9]{9}\b",
            )
            .to_owned(),
        ),
        (Pat::Ssn, r"(?-u)\b[0-9]{3}(?:-[0-9]{2}-|\x20[0-9]{2}\x20)[0-9]{4}\b".to_owned()),
        (Pat::Ipv4, r"(?-u)\b[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\b".to_owned()),
        // Full, `::`-compressed and IPv4-mapped forms; greedy, so the longest form is taken.
        // Times (`12:30:45`) and MAC addresses (six groups, no `::`) do not match.
        (
            Pat::Ipv6,
            format!(
                "(?-u)(?:(?:{h}:){{6}}{v4}|{h}(?::{h}){{7}}|(?:{h}(?::{h}){{0,6}})?::(?:(?:{h}:){{0,5}}{v4}|{h}(?::{h}){{0,6}})?)"
            ),
        ),
        // NANP: optional +1 / 1 prefix, area code N##, with or without parentheses, separators
        // `-`, `.`, ` ` (or none: then the validator wants +1 or a context word).
        (
            Pat::PhoneNanp,
            concat!(
                r"(?-u)(?:\+1[ .\-]?(?:\([2-9][0-9]{2}\)[ .\-]?|[2-9][0-9]{2}[ .\-]?)",
                r"|(?:\b1[ .\-])?(?:\([2-9][0-9]{2}\)[ .\-]?|\b[2-9][0-9]{2}[ .\-]?))",
                r"[0-9]{3}[ .\-]?[0-9]{4}\b",
            )
            .to_owned(),
        ),
        // International numbers with a leading +, country codes 2-9 (1 is NANP, above):
        // `+44 20 7946 0958`, `+33 (0)1 42 68 53 00`, `+55 (11) 91234-5678`, `+4915112345678`.
        (
            Pat::PhoneIntl,
            concat!(
                r"(?-u)\+[2-9][0-9]{0,2}(?:[ .\-]?\(0\))?",
                r"(?:[ .\-]?\(?[0-9]{1,6}\)?){1,7}",
            )
            .to_owned(),
        ),
        // Passwords in URLs (`scheme://user:password@host`), `key = value` secrets (only the
        // value is tokenized) and `Bearer xyz`. The URL comes first: at the same start it is
        // preferred, so a scheme that begins with a key word (`secret://u:pw@h`) is still a URL.
        (
            Pat::Generic,
            concat!(
                // (the user may be an email, `ftp://ann@example.com:pw@host`; no `[` `]` in the
                // password: RFC 3986 userinfo cannot hold them unencoded, and so a token that
                // replaced a password is not taken for one again)
                r#"(?-u)\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/]+:[^\s/@\[\]]+@"#,
                r#"|(?i-u)(?:api[_\-.]?key|apikey|secret|token|passwd|password|pwd|access[_\-.]?key|auth[_\-.]?key|credentials?)"#,
                // quotes may be backslash-escaped (JSON inside a log line: `\"password\":\"…\"`)
                r#"[a-z0-9_.\-]*(?:\\?["'])?[ \t]*(?:=>|:=|[:=])[ \t]*(?:\\?["'])?[^\s"'`,;&<>(){}\[\]\\]+"#,
                r#"|(?i-u)\bbearer[ \t]+[A-Za-z0-9\-._~+/]+=*"#,
            )
            .to_owned(),
        ),
    ]
}

/// The compiled detectors. Built once per engine; the regex is `Send + Sync` and keeps its
/// scratch space in an internal pool, so one `Detectors` serves every thread.
pub(crate) struct Detectors {
    re: Regex,
    pats: Vec<Pat>,
}

impl Detectors {
    pub(crate) fn new() -> Self {
        let (pats, sources): (Vec<Pat>, Vec<String>) = patterns().into_iter().unzip();
        let re = Regex::builder()
            .syntax(syntax::Config::new().utf8(false))
            .configure(
                Regex::config()
                    .utf8_empty(false)
                    .nfa_size_limit(Some(64 << 20)),
            )
            .build_many(&sources)
            .unwrap_or_else(|e| panic!("built-in PII patterns do not compile: {e}"));
        Detectors { re, pats }
    }

    /// All detections in `text`: sorted by start, non-overlapping. Allocates nothing when nothing
    /// is found.
    pub(crate) fn detect(&self, text: &str) -> Vec<Detection> {
        let mut out = Vec::new();
        self.scan(text.as_bytes(), 0, text.len(), &mut out);
        out
    }

    /// Appends the detections that lie in `hay[pos..end]` to `out`.
    fn scan(&self, hay: &[u8], mut pos: usize, end: usize, out: &mut Vec<Detection>) {
        while pos < end {
            let Some(m) = self.re.search(&Input::new(hay).range(pos..end)) else {
                break;
            };
            let (s, e) = (m.start(), m.end());
            let pat = self.pats[m.pattern().as_usize()];
            match self.validate(pat, hay, s, e) {
                Some((kind, vs, ve)) if ve > vs => {
                    // A value that starts after its candidate (an email's local part after other
                    // text, `邮箱ann@…`; a label; a key) hides only itself: the bytes it skipped
                    // are scanned on their own, or `415-555-0132邮箱ann@example.com` would leak
                    // the phone number. They end before the value, so `out` stays sorted.
                    if vs > s {
                        self.scan(hay, s, vs, out);
                    }
                    out.push(Detection {
                        kind,
                        start: vs,
                        end: ve,
                    });
                    pos = ve;
                }
                _ => {
                    pos = match pat {
                        Pat::Email | Pat::Ipv6 | Pat::PrivateKey => e.max(s + 1),
                        _ => s + 1,
                    };
                }
            }
        }
    }

    fn validate(
        &self,
        pat: Pat,
        hay: &[u8],
        s: usize,
        e: usize,
    ) -> Option<(PiiKind, usize, usize)> {
        let with = |kind: PiiKind, span: Option<(usize, usize)>| span.map(|(a, b)| (kind, a, b));
        match pat {
            Pat::KeyPrefixed => with(PiiKind::ApiKey, validate_prefixed_key(hay, s, e)),
            Pat::PrivateKey => with(
                PiiKind::ApiKey,
                (e - s <= MAX_PRIVATE_KEY).then_some((s, e)),
            ),
            Pat::Email => with(PiiKind::Email, validate_email(hay, s, e)),
            Pat::Iban => with(PiiKind::Iban, validate_iban(hay, s, e)),
            Pat::Card => with(PiiKind::CreditCard, validate_card(hay, s, e)),
            Pat::SsnLabelled if is_token_kind(hay, s, 3) => None,
            Pat::SsnLabelled => with(PiiKind::Ssn, validate_ssn(hay, e - 9, e)),
            Pat::Ssn => with(PiiKind::Ssn, validate_ssn(hay, s, e)),
            Pat::Ipv4 => with(PiiKind::IpAddress, validate_ipv4(hay, s, e)),
            Pat::Ipv6 => with(PiiKind::IpAddress, validate_ipv6(hay, s, e)),
            Pat::PhoneNanp => with(PiiKind::Phone, validate_nanp(hay, s, e)),
            Pat::PhoneIntl => with(PiiKind::Phone, validate_intl(hay, s, e)),
            Pat::Generic => {
                let (vs, ve, password) = generic_value(hay, s, e)?;
                let ve = floor_char_boundary(hay, ve);
                if ve <= vs || !looks_like_secret(&hay[vs..ve], password) {
                    return None;
                }
                Some(
                    self.retype(hay, vs, ve)
                        .unwrap_or((PiiKind::ApiKey, vs, ve)),
                )
            }
        }
    }

    /// The kind of a secret's value when the value, all of it, is a more specific kind.
    fn retype(&self, hay: &[u8], vs: usize, ve: usize) -> Option<(PiiKind, usize, usize)> {
        let m = self
            .re
            .search(&Input::new(hay).range(vs..ve).anchored(Anchored::Yes))?;
        let pat = self.pats[m.pattern().as_usize()];
        if pat == Pat::Generic || m.end() != ve {
            return None;
        }
        let (kind, a, b) = self.validate(pat, hay, m.start(), m.end())?;
        (a == vs && b == ve).then_some((kind, a, b))
    }
}

/// Key-name parts that make a `password…=` / `token…=` pair metadata rather than a secret.
const KEY_METADATA: &[&[u8]] = &[
    b"length",
    b"_len",
    b"count",
    b"_min",
    b"_max",
    b"expir",
    b"_at",
    b"ttl",
    b"timeout",
    b"policy",
    b"_type",
    b"hint",
    b"rotation",
    b"days",
    b"_age",
    b"enabled",
    b"required",
    b"_url",
    b"_uri",
    b"_file",
    b"_path",
    b"_name",
    b"changed",
    b"updated",
    b"created",
    b"_size",
    b"limit",
    b"_id",
];

/// Where the value of a `Generic` match is, and whether it is a password (shorter values allowed).
fn generic_value(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize, bool)> {
    let m = &hay[s..e];
    let scheme_len = m
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-'))
        .count();
    if m[scheme_len..].starts_with(b"://") && m.ends_with(b"@") {
        // scheme://user:password@
        let rest = scheme_len + 3;
        let colon = rest + m[rest..].iter().position(|&b| b == b':')?;
        return Some((s + colon + 1, e - 1, true));
    }
    if m.len() > 6 && m[..6].eq_ignore_ascii_case(b"bearer") {
        let mut i = 6;
        while i < m.len() && matches!(m[i], b' ' | b'\t') {
            i += 1;
        }
        return Some((s + i, e, false));
    }
    // keyword + suffix, optional quote, blanks, separator, blanks, optional quote
    let mut i = 0;
    while i < m.len() && (m[i].is_ascii_alphanumeric() || matches!(m[i], b'_' | b'.' | b'-')) {
        i += 1;
    }
    let key = &m[..i];
    // `password_changed_at: 1705312245`, `token_type=Bearer`, `secret_rotation_days = 90`: the
    // key names something about the secret, not the secret.
    if KEY_METADATA.iter().any(|w| contains_ci(key, w)) {
        return None;
    }
    let password = contains_ci(key, b"pass") || contains_ci(key, b"pwd");
    let skip_quote = |i: usize| -> usize {
        match (m.get(i), m.get(i + 1)) {
            (Some(b'\\'), Some(b'"' | b'\'')) => i + 2,
            (Some(b'"' | b'\''), _) => i + 1,
            _ => i,
        }
    };
    i = skip_quote(i);
    while i < m.len() && matches!(m[i], b' ' | b'\t') {
        i += 1;
    }
    if m[i..].starts_with(b"=>") || m[i..].starts_with(b":=") {
        i += 2;
    } else if i < m.len() && matches!(m[i], b':' | b'=') {
        i += 1;
    } else {
        return None;
    }
    while i < m.len() && matches!(m[i], b' ' | b'\t') {
        i += 1;
    }
    i = skip_quote(i);
    (i < m.len()).then_some((s + i, e, password))
}

// ---------------------------------------------------------------------------------------------
// Context helpers

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn at(hay: &[u8], i: usize) -> Option<u8> {
    hay.get(i).copied()
}

fn before(hay: &[u8], s: usize, back: usize) -> Option<u8> {
    s.checked_sub(back).map(|i| hay[i])
}

/// A number is not part of a longer one: no word character next to it, and no `.`, `-` or `/`
/// joining it to another digit (`2024-555-123-4567`, `1.2.3.4.5`, `12/555 …`).
fn numeric_left_ok(hay: &[u8], s: usize) -> bool {
    match before(hay, s, 1) {
        None => true,
        Some(b) if is_word(b) => false,
        Some(b'.' | b'-' | b'/') => !before(hay, s, 2).is_some_and(|d| d.is_ascii_digit()),
        Some(_) => true,
    }
}

fn numeric_right_ok(hay: &[u8], e: usize) -> bool {
    match at(hay, e) {
        None => true,
        Some(b) if is_word(b) => false,
        Some(b'.' | b'-' | b'/') => !at(hay, e + 1).is_some_and(|d| d.is_ascii_digit()),
        Some(_) => true,
    }
}

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len()
        && hay
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

/// A context word: the word, and whether letters may follow it (`phones`, `phonenumber`).
type ContextWord = (&'static [u8], bool);

/// One of `words` (case-insensitive) within `window` bytes before `s`, not glued to a word
/// character before it (`syscall`, `hotel`, `VRING_CALL`; but `user_phone` for words that take
/// suffixes) nor, unless allowed, after it (`telemetry`).
fn context_before(hay: &[u8], s: usize, window: usize, words: &[ContextWord]) -> bool {
    let from = s.saturating_sub(window);
    let w = &hay[from..s];
    words.iter().any(|&(word, suffix_ok)| {
        if w.len() < word.len() {
            return false;
        }
        (0..=w.len() - word.len()).any(|i| {
            w[i..i + word.len()].eq_ignore_ascii_case(word)
                && !(i == 0 && from > 0 && is_word(hay[from - 1])
                    || i > 0 && is_word(w[i - 1]) && !(w[i - 1] == b'_' && suffix_ok))
                && (suffix_ok || !w.get(i + word.len()).is_some_and(|&b| is_word(b)))
                && !is_token_kind(hay, from + i, word.len())
        })
    })
}

/// Whether the word at `hay[at..at + len]` is the kind name of a token (`[PHONE_…]`,
/// `[SSN_…]`): a token is not a label, or a number after `[PHONE_ab12cd34]` would become a
/// phone when sanitized text is sanitized again.
fn is_token_kind(hay: &[u8], at: usize, len: usize) -> bool {
    at > 0 && hay[at - 1] == b'[' && hay.get(at + len) == Some(&b'_')
}

fn floor_char_boundary(hay: &[u8], mut e: usize) -> usize {
    while e > 0 && e < hay.len() && (hay[e] & 0xC0) == 0x80 {
        e -= 1;
    }
    e
}

// ---------------------------------------------------------------------------------------------
// Validators: (hay, start, end) of the regex match → the accepted span, or None.

fn validate_email(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    let m = &hay[s..e];
    let (at_pos, at_len) = match m.iter().position(|&b| b == b'@') {
        Some(i) => (i, 1),
        None => (m.windows(3).rposition(|w| w == b"%40")?, 3),
    };
    let (local, domain) = (&m[..at_pos], &m[at_pos + at_len..]);
    // Only Latin letters may be non-ASCII: the local part starts after the last other character,
    // and a domain with one is not taken.
    let allowed = |c: char| c.is_ascii() || is_latin_letter(c);
    let local_str = std::str::from_utf8(local).ok()?;
    let mut ls = local_str
        .char_indices()
        .rev()
        .find(|&(_, c)| !allowed(c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    if !std::str::from_utf8(domain).ok()?.chars().all(allowed) {
        return None;
    }
    // Trim the local part to its last clean stretch: no `..`, no leading `.`/`-`/`+`/`%`.
    for i in ls.max(1)..local.len() {
        if local[i] == b'.' && local[i - 1] == b'.' {
            ls = i + 1;
        }
    }
    while ls < local.len() && matches!(local[ls], b'.' | b'-' | b'+' | b'%') {
        ls += 1;
    }
    let local = &local[ls..];
    if in_url_userinfo(hay, s + ls) {
        return None;
    }
    if local.is_empty() || local.len() > 64 || local.ends_with(b".") {
        return None;
    }
    if domain.len() > 253 || domain.split(|&b| b == b'.').any(|l| l.len() > 63) {
        return None;
    }
    // `logo@2x.png`-style asset names.
    if let Some(dot) = domain.iter().position(|&b| b == b'.') {
        let first = &domain[..dot];
        if first.len() >= 2
            && first.ends_with(b"x")
            && first[..first.len() - 1].iter().all(u8::is_ascii_digit)
        {
            return None;
        }
    }
    Some((s + ls, e))
}

/// Letters of the Latin script beyond ASCII (Latin-1, Extended-A/B, Extended Additional) and
/// combining accents.
fn is_latin_letter(c: char) -> bool {
    let u = c as u32;
    (c.is_alphabetic() && matches!(u, 0xC0..=0x24F | 0x1E00..=0x1EFF) && c != '×' && c != '÷')
        || (0x300..=0x36F).contains(&u)
}

/// `scheme://user:password@host`: the part before `@` is a password, not an email's local part.
fn in_url_userinfo(hay: &[u8], s: usize) -> bool {
    if before(hay, s, 1) != Some(b':') {
        return false;
    }
    let from = s.saturating_sub(256);
    let seg = &hay[from..s - 1];
    let seg = match seg
        .iter()
        .rposition(|b| b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'<'))
    {
        Some(i) => &seg[i + 1..],
        None => seg,
    };
    seg.windows(3).any(|w| w == b"://")
}

const PHONE_CONTEXT: &[ContextWord] = &[
    (b"phone", true),
    (b"tel", false),
    (b"mobile", true),
    (b"cell", false),
    (b"fax", false),
    (b"call", false),
    (b"sms", false),
    (b"whatsapp", true),
    (b"contact", true),
];

fn validate_nanp(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    let m = &hay[s..e];
    let plus = m[0] == b'+';
    if !(numeric_left_ok(hay, s) && numeric_right_ok(hay, e)) {
        return None;
    }
    let digits: Vec<u8> = m.iter().copied().filter(u8::is_ascii_digit).collect();
    let national = &digits[digits.len() - 10..];
    let has_prefix = digits.len() == 11;
    // Skip the separator right after the `+1` / `1` prefix when deciding whether the national
    // part itself is written with separators.
    let national_text = if has_prefix {
        let first_digit = m.iter().position(u8::is_ascii_digit).unwrap_or(0);
        let mut i = first_digit + 1;
        while i < m.len() && !m[i].is_ascii_digit() && m[i] != b'(' {
            i += 1;
        }
        &m[i..]
    } else {
        m
    };
    // Separators (or the parentheses) after the area code and after the exchange: both or none
    // (`415114 0911` is two other numbers, not a phone).
    let (area_sep, rest) = match national_text.first() {
        Some(b'(') => (true, &national_text[5..]),
        _ => (!national_text[3].is_ascii_digit(), &national_text[3..]),
    };
    let rest = rest
        .strip_prefix(&[b' '][..])
        .or_else(|| rest.strip_prefix(b"-"))
        .or_else(|| rest.strip_prefix(b"."))
        .unwrap_or(rest);
    let line_sep = !rest[3].is_ascii_digit();
    if area_sep != line_sep {
        return None;
    }
    if !area_sep {
        // Ten bare digits are as often an id or a timestamp: need `+1` or a phone word before,
        // and a valid exchange code.
        if !(plus || context_before(hay, s, 24, PHONE_CONTEXT)) || national[3] < b'2' {
            return None;
        }
    }
    Some((s, e))
}

fn validate_intl(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    if before(hay, s, 1).is_some_and(|b| is_word(b) || b == b'+') {
        return None;
    }
    // The regex takes every digit group it can; drop trailing groups while there are more than
    // 15 digits or the last group is glued to what follows: `+44 20 7946 0958 415-555-0132`
    // (another number), `+44 20 7946 0958 after 3:15` (a time).
    let mut e = e;
    loop {
        // Drop an unbalanced trailing `)` and a trailing separator.
        loop {
            let m = &hay[s..e];
            let open = m.iter().filter(|&&b| b == b'(').count();
            let close = m.iter().filter(|&&b| b == b')').count();
            let unbalanced = close > open && m.ends_with(b")");
            if unbalanced || matches!(m.last(), Some(b' ' | b'.' | b'-' | b'(')) {
                e -= 1;
            } else {
                break;
            }
        }
        let m = &hay[s..e];
        let n = m.iter().filter(|b| b.is_ascii_digit()).count();
        let glued = match at(hay, e) {
            Some(b':' | b'/') => true,
            Some(b'.' | b'-') => at(hay, e + 1).is_some_and(|b| b.is_ascii_digit()),
            Some(b) => is_word(b),
            None => false,
        };
        if n <= 15 && !glued {
            break;
        }
        let cut = m.iter().rposition(|b| matches!(b, b' ' | b'.' | b'-'))?;
        e = s + cut;
    }
    let m = &hay[s..e];
    let n = m.iter().filter(|b| b.is_ascii_digit()).count();
    let open = m.iter().filter(|&&b| b == b'(').count();
    let close = m.iter().filter(|&&b| b == b')').count();
    if !(8..=15).contains(&n) || open != close {
        return None;
    }
    let separated = m[1..].iter().any(|b| !b.is_ascii_digit());
    if !separated && n < 10 {
        return None;
    }
    // `+9999-12-31`: an ISO date with an expanded year.
    if m.len() >= 10
        && m[m.len() - 6] == b'-'
        && m[m.len() - 3] == b'-'
        && m.iter().filter(|&&b| b == b'-').count() == 2
    {
        return None;
    }
    // Written with separators, the country code stands alone: `+44 20 …`, not `+262142-12-31`.
    if separated && m[1..].iter().take_while(|b| b.is_ascii_digit()).count() > 4 {
        return None;
    }
    if !numeric_right_ok(hay, e) {
        return None;
    }
    Some((s, e))
}

fn ssn_parts_ok(d: &[u8]) -> bool {
    let num = |x: &[u8]| x.iter().fold(0u32, |a, &b| a * 10 + u32::from(b - b'0'));
    let (area, group, serial) = (num(&d[0..3]), num(&d[3..5]), num(&d[5..9]));
    area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
}

fn validate_ssn(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    if !(numeric_left_ok(hay, s) && numeric_right_ok(hay, e)) {
        return None;
    }
    let digits: Vec<u8> = hay[s..e]
        .iter()
        .copied()
        .filter(u8::is_ascii_digit)
        .collect();
    (digits.len() == 9 && ssn_parts_ok(&digits)).then_some((s, e))
}

pub(crate) fn luhn_ok(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, &d) in digits.iter().rev().enumerate() {
        let mut v = u32::from(d - b'0');
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum.is_multiple_of(10)
}

/// Known issuer ranges (IIN) and their lengths.
fn card_issuer_ok(d: &[u8]) -> bool {
    let n = d.len();
    let p = |k: usize| {
        d[..k]
            .iter()
            .fold(0u32, |a, &b| a * 10 + u32::from(b - b'0'))
    };
    let (p2, p3, p4, p6) = (p(2), p(3), p(4), p(6));
    let visa = d[0] == b'4' && matches!(n, 13 | 16 | 19);
    let mastercard = ((51..=55).contains(&p2) || (2221..=2720).contains(&p4)) && n == 16;
    let amex = (p2 == 34 || p2 == 37) && n == 15;
    let discover =
        (p4 == 6011 || (644..=649).contains(&p3) || p2 == 65 || (622126..=622925).contains(&p6))
            && (16..=19).contains(&n);
    let diners =
        ((300..=305).contains(&p3) || p2 == 36 || p2 == 38 || p2 == 39) && (14..=19).contains(&n);
    let jcb = (3528..=3589).contains(&p4) && (16..=19).contains(&n);
    let unionpay = p2 == 62 && (16..=19).contains(&n);
    let maestro = matches!(
        p4,
        5018 | 5020 | 5038 | 5893 | 6304 | 6759 | 6761 | 6762 | 6763
    ) && (13..=19).contains(&n);
    let mir = (2200..=2204).contains(&p4) && (16..=19).contains(&n);
    visa || mastercard || amex || discover || diners || jcb || unionpay || maestro || mir
}

fn validate_card(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    if !numeric_left_ok(hay, s) {
        return None;
    }
    // Try the whole candidate, then without its last group (`4111 1111 1111 1111 12/25`).
    let mut e = e;
    loop {
        let m = &hay[s..e];
        let seps: Vec<u8> = m.iter().copied().filter(|b| !b.is_ascii_digit()).collect();
        let consistent = seps.windows(2).all(|w| w[0] == w[1]);
        let digits: Vec<u8> = m.iter().copied().filter(u8::is_ascii_digit).collect();
        if consistent
            && (13..=19).contains(&digits.len())
            && numeric_right_ok(hay, e)
            && card_issuer_ok(&digits)
            && luhn_ok(&digits)
        {
            return Some((s, e));
        }
        let cut = m.iter().rposition(|b| !b.is_ascii_digit())?;
        if m[..cut].iter().filter(|b| b.is_ascii_digit()).count() < 13 {
            return None;
        }
        e = s + cut;
    }
}

const VERSION_CONTEXT: &[ContextWord] = &[
    (b"version", true),
    (b"ver", false),
    (b"release", true),
    (b"firmware", true),
];

fn validate_ipv4(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    for octet in hay[s..e].split(|&b| b == b'.') {
        if octet.len() > 1 && octet[0] == b'0' {
            return None;
        }
        if octet
            .iter()
            .fold(0u32, |a, &b| a * 10 + u32::from(b - b'0'))
            > 255
        {
            return None;
        }
    }
    // Not part of a longer dotted number (`1.2.3.4.5`, `x.10.0.0.1`).
    match before(hay, s, 1) {
        Some(b'.') => return None,
        // `Chrome/120.0.0.0`: a product/version token, not an address (`http://` is fine).
        Some(b'/') if before(hay, s, 2).is_some_and(|b| b.is_ascii_alphanumeric()) => return None,
        _ => {}
    }
    if at(hay, e) == Some(b'.') && at(hay, e + 1).is_some_and(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    if context_before(hay, s, 16, VERSION_CONTEXT) {
        return None;
    }
    Some((s, e))
}

/// Parses `part` (no `::` inside) into hex groups; an IPv4 tail counts as two groups.
/// Returns (groups, longest group) or None.
fn ipv6_groups(part: &[u8], v4_tail_ok: bool) -> Option<(usize, usize)> {
    if part.is_empty() {
        return Some((0, 0));
    }
    let pieces: Vec<&[u8]> = part.split(|&b| b == b':').collect();
    let mut groups = 0;
    let mut longest = 0;
    for (i, p) in pieces.iter().enumerate() {
        let last = i == pieces.len() - 1;
        if p.contains(&b'.') {
            if !(last && v4_tail_ok) {
                return None;
            }
            let octets: Vec<&[u8]> = p.split(|&b| b == b'.').collect();
            if octets.len() != 4
                || octets.iter().any(|o| {
                    o.is_empty()
                        || o.len() > 3
                        || !o.iter().all(u8::is_ascii_digit)
                        || o.iter().fold(0u32, |a, &b| a * 10 + u32::from(b - b'0')) > 255
                })
            {
                return None;
            }
            groups += 2;
            longest = longest.max(4);
        } else {
            if p.is_empty() || p.len() > 4 || !p.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            groups += 1;
            longest = longest.max(p.len());
        }
    }
    Some((groups, longest))
}

fn validate_ipv6(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    let mut e = e;
    // A single trailing `:` is punctuation (`at fe80::1: …`).
    if hay[s..e].ends_with(b":") && !hay[s..e].ends_with(b"::") {
        e -= 1;
    }
    let m = &hay[s..e];
    if before(hay, s, 1).is_some_and(|b| is_word(b) || b == b':' || b == b'.') {
        return None;
    }
    // A `:` right after is punctuation (`from fe80::1: icmp_seq=1`) unless more address follows.
    let colon_punct = at(hay, e) == Some(b':')
        && !at(hay, e + 1).is_some_and(|b| b.is_ascii_hexdigit() || b == b':');
    if at(hay, e).is_some_and(|b| is_word(b) || b == b':') && !colon_punct {
        return None;
    }
    if !m.iter().any(u8::is_ascii_digit) {
        return None;
    }
    let dc = m.windows(2).position(|w| w == b"::");
    match dc {
        Some(i) => {
            let (head, tail) = (&m[..i], &m[i + 2..]);
            if tail.windows(2).any(|w| w == b"::") {
                return None;
            }
            let (h, hl) = ipv6_groups(head, tail.is_empty())?;
            let (t, tl) = ipv6_groups(tail, true)?;
            let groups = h + t;
            // `x[1::2]` is a slice, `::1` is loopback: want two groups and one of 3+ hex digits.
            ((2..=7).contains(&groups) && hl.max(tl) >= 3).then_some((s, e))
        }
        None => {
            let (g, _) = ipv6_groups(m, true)?;
            (g == 8).then_some((s, e))
        }
    }
}

/// IBAN lengths per country (SWIFT IBAN registry).
fn iban_length(cc: &[u8]) -> Option<usize> {
    Some(match cc {
        b"AD" => 24,
        b"AE" => 23,
        b"AL" => 28,
        b"AT" => 20,
        b"AZ" => 28,
        b"BA" => 20,
        b"BE" => 16,
        b"BG" => 22,
        b"BH" => 22,
        b"BI" => 27,
        b"BR" => 29,
        b"BY" => 28,
        b"CH" => 21,
        b"CR" => 22,
        b"CY" => 28,
        b"CZ" => 24,
        b"DE" => 22,
        b"DJ" => 27,
        b"DK" => 18,
        b"DO" => 28,
        b"EE" => 20,
        b"EG" => 29,
        b"ES" => 24,
        b"FI" => 18,
        b"FK" => 18,
        b"FO" => 18,
        b"FR" => 27,
        b"GB" => 22,
        b"GE" => 22,
        b"GI" => 23,
        b"GL" => 18,
        b"GR" => 27,
        b"GT" => 28,
        b"HR" => 21,
        b"HU" => 28,
        b"IE" => 22,
        b"IL" => 23,
        b"IQ" => 23,
        b"IS" => 26,
        b"IT" => 27,
        b"JO" => 30,
        b"KW" => 30,
        b"KZ" => 20,
        b"LB" => 28,
        b"LC" => 32,
        b"LI" => 21,
        b"LT" => 20,
        b"LU" => 20,
        b"LV" => 21,
        b"LY" => 25,
        b"MC" => 27,
        b"MD" => 24,
        b"ME" => 22,
        b"MK" => 19,
        b"MN" => 20,
        b"MR" => 27,
        b"MT" => 31,
        b"MU" => 30,
        b"NI" => 28,
        b"NL" => 18,
        b"NO" => 15,
        b"OM" => 23,
        b"PK" => 24,
        b"PL" => 28,
        b"PS" => 29,
        b"PT" => 25,
        b"QA" => 29,
        b"RO" => 24,
        b"RS" => 22,
        b"RU" => 33,
        b"SA" => 24,
        b"SC" => 31,
        b"SD" => 18,
        b"SE" => 24,
        b"SI" => 19,
        b"SK" => 24,
        b"SM" => 27,
        b"SO" => 23,
        b"ST" => 25,
        b"SV" => 28,
        b"TL" => 23,
        b"TN" => 24,
        b"TR" => 26,
        b"UA" => 29,
        b"VA" => 22,
        b"VG" => 24,
        b"XK" => 20,
        b"YE" => 30,
        _ => return None,
    })
}

pub(crate) fn iban_mod97_ok(compact: &[u8]) -> bool {
    let mut rem = 0u32;
    let rearranged = compact[4..].iter().chain(&compact[..4]);
    for &b in rearranged {
        if b.is_ascii_digit() {
            rem = (rem * 10 + u32::from(b - b'0')) % 97;
        } else if b.is_ascii_uppercase() {
            rem = (rem * 100 + u32::from(b - b'A' + 10)) % 97;
        } else {
            return false;
        }
    }
    rem == 1
}

fn validate_iban(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    if !numeric_left_ok(hay, s) {
        return None;
    }
    let len = iban_length(&hay[s..s + 2])?;
    // Take exactly `len` characters: either no spaces, or one space after every group of four.
    let m = &hay[s..e];
    let spaced = m.get(4) == Some(&b' ');
    let mut compact = Vec::with_capacity(len);
    let mut i = 0;
    while compact.len() < len {
        let b = *m.get(i)?;
        if b == b' ' {
            if !(spaced && compact.len().is_multiple_of(4)) {
                return None;
            }
        } else {
            let group_start = !compact.is_empty() && compact.len().is_multiple_of(4);
            if spaced && group_start && m[i - 1] != b' ' {
                return None;
            }
            compact.push(b);
        }
        i += 1;
    }
    let end = s + i;
    if at(hay, end).is_some_and(is_word) {
        return None;
    }
    iban_mod97_ok(&compact).then_some((s, end))
}

fn validate_prefixed_key(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    if at(hay, e).is_some_and(|b| is_word(b) || b == b'-') {
        return None; // AKIA… followed by more characters: part of a longer string
    }
    let m = &hay[s..e];
    let has = |f: fn(&u8) -> bool| m.iter().any(f);
    if m.starts_with(b"sk-") {
        // Real keys mix cases and digits; `sk-learn-tutorial-notebooks` does not.
        let body = &m[3..];
        let ok = body.iter().any(u8::is_ascii_digit)
            && body.iter().any(u8::is_ascii_uppercase)
            && body.iter().any(u8::is_ascii_lowercase);
        return ok.then_some((s, e));
    }
    if m.starts_with(b"xox") || m.starts_with(b"sk_") || m.starts_with(b"rk_") {
        return has(u8::is_ascii_digit).then_some((s, e));
    }
    Some((s, e))
}

const PLACEHOLDERS: &[&[u8]] = &[
    b"null",
    b"none",
    b"nil",
    b"true",
    b"false",
    b"undefined",
    b"redacted",
    b"changeme",
    b"example",
    b"placeholder",
    b"required",
    b"optional",
    b"string",
    b"dummy",
    b"secret",
    b"password",
    b"token",
    b"hidden",
    b"masked",
    b"default",
    b"empty",
    b"unset",
    b"todo",
];

/// `/home/app/.cache`, `./data`, `~/x` (the shell's `PWD=`), but not base64 that happens to
/// start with `/` (mixed case, `+`).
fn looks_like_path(v: &[u8]) -> bool {
    let rooted = v.starts_with(b"/")
        || v.starts_with(b"./")
        || v.starts_with(b"../")
        || v.starts_with(b"~/");
    if !rooted {
        return false;
    }
    let letters = v.iter().filter(|b| b.is_ascii_alphabetic()).count();
    let uppers = v.iter().filter(|b| b.is_ascii_uppercase()).count();
    !v.contains(&b'+') && uppers * 4 <= letters
}

/// `a.b_c.d1`: two or more identifier segments joined by dots, each starting with a letter or `_`
/// and holding few digits (random secrets with dots, like JWTs, have digits everywhere).
fn is_member_path(v: &[u8]) -> bool {
    let mut segments = 0;
    for seg in v.split(|&b| b == b'.') {
        let ident = seg
            .first()
            .is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_')
            && seg.iter().all(|&b| is_word(b))
            && seg.iter().filter(|b| b.is_ascii_digit()).count() <= 2;
        let index = !seg.is_empty() && seg.len() <= 3 && seg.iter().all(u8::is_ascii_digit);
        if !(ident || index) {
            return false;
        }
        segments += 1;
    }
    segments >= 2
}

/// `_bindgen_ty_5`, `max_retry_count2`, `no-password-required`: lowercase words joined by `_` or
/// `-`, few digits.
fn is_snake_identifier(v: &[u8]) -> bool {
    v.iter().any(|&b| b == b'_' || b == b'-')
        && v.iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        && v.iter().filter(|b| b.is_ascii_digit()).count() <= 3
        && v.split(|&b| b == b'_' || b == b'-').all(|w| w.len() <= 12)
}

/// Whether the value of a `key=value` pair is plausibly a credential rather than a word, a
/// number, a path, an identifier in code, a date or a template placeholder.
fn looks_like_secret(v: &[u8], password: bool) -> bool {
    let n = v.len();
    if n == 0 || n > MAX_GENERIC_VALUE {
        return false;
    }
    if matches!(
        v[0],
        b'$' | b'%' | b'{' | b'<' | b'*' | b'#' | b'&' | b':' | b'='
    ) {
        return false; // ${VAR}, %(x)s, {{x}}, <token>, ****, #ref, &anchor, a::b
    }
    if v.iter().all(|&b| b == v[0]) || contains_ci(v, b"...") || contains_ci(v, b"xxxx") {
        return false;
    }
    if looks_like_path(v) {
        return false;
    }
    if contains_ci(v, b"://") {
        return false;
    }
    if PLACEHOLDERS.iter().any(|p| v.eq_ignore_ascii_case(p)) {
        return false;
    }
    if contains_ci(v, b"your") || contains_ci(v, b"example") || contains_ci(v, b"placeholder") {
        return false;
    }
    // Dates and times: 2024-01-15T12:00:00Z
    if n >= 10 && v[..4].iter().all(u8::is_ascii_digit) && v[4] == b'-' && v[7] == b'-' {
        return false;
    }
    let digits = v.iter().filter(|b| b.is_ascii_digit()).count();
    let letters = v.iter().filter(|b| b.is_ascii_alphabetic()).count();
    let uppers = v.iter().filter(|b| b.is_ascii_uppercase()).count();
    let lowers = letters - uppers;
    // Code: member paths (`node.dot2_token`, `self.0.clone`), Rust paths, snake_case names,
    // macro calls (`format!`).
    let macro_call = n > 1
        && v[n - 1] == b'!'
        && v[..n - 1]
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b == b'_');
    if is_member_path(v) || contains_ci(v, b"::") || is_snake_identifier(v) || macro_call {
        return false;
    }
    // Identifiers in code: `self.token`, `get_secret`, `config.apiKey`.
    let identifier_like = digits == 0
        && v.iter()
            .all(|&b| b.is_ascii_alphabetic() || b == b'_' || b == b'.');
    if password {
        if n < 6 || identifier_like && (v.contains(&b'.') || v.contains(&b'_')) {
            return false;
        }
        // Letters only (`secret`, `Summer`, `CString`) is more likely a word or a type name than
        // a password, unless long and switching case often.
        if letters == n {
            let switches = v
                .windows(2)
                .filter(|w| w[0].is_ascii_uppercase() != w[1].is_ascii_uppercase())
                .count();
            return n >= 12 && switches >= 3;
        }
        return true;
    }
    if n < 12 || identifier_like && (v.contains(&b'.') || v.contains(&b'_')) {
        return false;
    }
    if digits == n || digits + v.iter().filter(|b| matches!(b, b'.' | b'-' | b':')).count() == n {
        return false; // numbers, versions, timestamps
    }
    if digits > 0 && letters > 0 {
        return true;
    }
    // Letters only: random strings switch case about every other letter, camelCase names
    // (`waitForTaskToken`, `ApigwApiKeyIdentifier`) far less.
    if letters == n && uppers >= 3 && lowers >= 3 {
        let switches = v
            .windows(2)
            .filter(|w| w[0].is_ascii_uppercase() != w[1].is_ascii_uppercase())
            .count();
        return n >= 20 && switches * 2 >= n;
    }
    false
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use super::*;
    use PiiKind::*;

    fn detectors() -> &'static Detectors {
        static D: OnceLock<Detectors> = OnceLock::new();
        D.get_or_init(Detectors::new)
    }

    fn found(text: &str) -> Vec<(PiiKind, &str)> {
        detectors()
            .detect(text)
            .into_iter()
            .map(|d| (d.kind, &text[d.start..d.end]))
            .collect()
    }

    /// Each text holds exactly one value: `value`, of `kind`.
    fn assert_single(table: &[(&str, PiiKind, &str)]) {
        for &(text, kind, value) in table {
            assert_eq!(found(text), vec![(kind, value)], "in {text:?}");
        }
    }

    fn assert_none(table: &[&str]) {
        for text in table {
            assert_eq!(found(text), vec![], "in {text:?}");
        }
    }

    #[test]
    fn emails() {
        assert_single(&[
            (
                "contact ann.lee@example.com now",
                Email,
                "ann.lee@example.com",
            ),
            (
                "<bob+news@mail.example.co.uk>",
                Email,
                "bob+news@mail.example.co.uk",
            ),
            ("write to ANN@EXAMPLE.ORG.", Email, "ANN@EXAMPLE.ORG"),
            (
                "mailto:x_y-z@sub-domain.example.io",
                Email,
                "x_y-z@sub-domain.example.io",
            ),
            (
                "E-Mail: jörg.müller@beispiel.de",
                Email,
                "jörg.müller@beispiel.de",
            ),
            ("邮箱ann@example.cn。", Email, "ann@example.cn"),
            ("（联系：li.wei@example.com）", Email, "li.wei@example.com"),
            (
                "GET /u?email=ann%40example.com&x=1",
                Email,
                "ann%40example.com",
            ),
            ("weird..dots@example.com", Email, "dots@example.com"),
            ("{\"email\":\"a.b@c.io\"}", Email, "a.b@c.io"),
        ]);
        assert_none(&[
            "logo@2x.png",
            "icon@3x.jpg is retina",
            "user@localhost",
            "lodash@4.17.21",
            "@mention in chat",
            "a@b",
        ]);
    }

    #[test]
    fn phones() {
        assert_single(&[
            ("call 415-555-0132 today", Phone, "415-555-0132"),
            ("(415) 555-0132", Phone, "(415) 555-0132"),
            ("at 415.555.0132.", Phone, "415.555.0132"),
            ("415 555 0132", Phone, "415 555 0132"),
            ("+1 415 555 0132", Phone, "+1 415 555 0132"),
            ("+1-415-555-0132", Phone, "+1-415-555-0132"),
            ("1-800-555-0199", Phone, "1-800-555-0199"),
            ("tel:+14155550132", Phone, "+14155550132"),
            ("+1 (415) 555-0132 ext. 12", Phone, "+1 (415) 555-0132"),
            ("phone: 4155550132", Phone, "4155550132"),
            ("\"phone_number\": \"4155550132\"", Phone, "4155550132"),
            ("Contact john at 555-123-4567", Phone, "555-123-4567"),
            ("+44 20 7946 0958", Phone, "+44 20 7946 0958"),
            ("+33 (0)1 42 68 53 00", Phone, "+33 (0)1 42 68 53 00"),
            ("+55 (11) 91234-5678", Phone, "+55 (11) 91234-5678"),
            ("+4915112345678", Phone, "+4915112345678"),
            ("+81-3-1234-5678", Phone, "+81-3-1234-5678"),
            ("电话 +86 138 0013 8000，", Phone, "+86 138 0013 8000"),
            (
                "call +44 20 7946 0958 after 3:15",
                Phone,
                "+44 20 7946 0958",
            ),
        ]);
        assert_eq!(
            found("+44 20 7946 0958 415-555-0132"),
            vec![(Phone, "+44 20 7946 0958"), (Phone, "415-555-0132")]
        );
        assert_none(&[
            "order 4829104823", // ten bare digits without a phone word
            "ts=1705312245",    // epoch seconds
            "VRING_CALL: u32 = 2148052769",
            "123-456-7890", // area codes never start with 0 or 1
            "+15% growth, +100 points",
            "+9999-12-31", // expanded-year date
            "+262142-12-31",
            "1-800-FLOWERS",
            "SKU 555-1234",
            "ZIP 94107-1234",
            "2024-555-0132-9",
            "ref 3002 415114 0911", // separators after area and exchange: both or none
            "415-5550132",
        ]);
    }

    #[test]
    fn ssns() {
        assert_single(&[
            ("ssn=123-45-6789;", Ssn, "123-45-6789"),
            ("SSN 123 45 6789", Ssn, "123 45 6789"),
            ("SSN: 123456789", Ssn, "123456789"),
            ("social security number 078051120", Ssn, "078051120"),
            ("{'ssn': '899-99-9999'}", Ssn, "899-99-9999"),
        ]);
        assert_none(&[
            "000-12-3456",
            "666-12-3456",
            "900-12-3456",
            "123-00-4567",
            "123-45-0000",
            "123456789", // bare, no label
            "routing 021000021",
            "1123-45-6789",
            "123-45-67890",
            "2024-01-15",
        ]);
    }

    #[test]
    fn credit_cards() {
        assert_single(&[
            (
                "card 4111 1111 1111 1111 ok",
                CreditCard,
                "4111 1111 1111 1111",
            ),
            ("4111-1111-1111-1111", CreditCard, "4111-1111-1111-1111"),
            ("4111111111111111", CreditCard, "4111111111111111"),
            ("5500 0000 0000 0004", CreditCard, "5500 0000 0000 0004"),
            ("5500-0000-0000-0004", CreditCard, "5500-0000-0000-0004"),
            ("378282246310005", CreditCard, "378282246310005"),
            ("3782 822463 10005", CreditCard, "3782 822463 10005"),
            ("6011111111111117", CreditCard, "6011111111111117"),
            ("30569309025904", CreditCard, "30569309025904"),
            ("3530111333300000", CreditCard, "3530111333300000"),
            ("2221000000000009", CreditCard, "2221000000000009"),
            ("4222222222222", CreditCard, "4222222222222"),
            (
                "4111 1111 1111 1111 12/25",
                CreditCard,
                "4111 1111 1111 1111",
            ),
        ]);
        assert_none(&[
            "4111 1111 1111 1112", // Luhn
            "4111111111111112",
            "1234 5678 9012 3456",
            "0000 0000 0000 0000",  // Luhn-valid, no issuer
            "4111 1111-1111 1111",  // mixed separators
            "41111111111111110000", // 20 digits
            "card ending 4242",
            "ts_ms=1705312245123",
            "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
        ]);
    }

    #[test]
    fn ip_addresses() {
        assert_single(&[
            ("from 10.0.0.1 port 22", IpAddress, "10.0.0.1"),
            ("192.168.1.254:8080", IpAddress, "192.168.1.254"),
            ("http://203.0.113.7/path", IpAddress, "203.0.113.7"),
            ("route 10.0.0.0/8", IpAddress, "10.0.0.0"),
            ("ping 8.8.8.8.", IpAddress, "8.8.8.8"),
            ("x 2001:db8::1 y", IpAddress, "2001:db8::1"),
            (
                "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
                IpAddress,
                "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
            ),
            (
                "fe80::1ff:fe23:4567:890a",
                IpAddress,
                "fe80::1ff:fe23:4567:890a",
            ),
            ("::ffff:192.0.2.128", IpAddress, "::ffff:192.0.2.128"),
            ("[2001:db8::1]:443", IpAddress, "2001:db8::1"),
            ("fe80::1%eth0", IpAddress, "fe80::1"),
            (
                "from 2606:4700:4700::1111: icmp_seq=1",
                IpAddress,
                "2606:4700:4700::1111",
            ),
        ]);
        assert_none(&[
            "version 1.2.3",
            "v10.0.1.2",
            "1.2.3.4.5",
            "OID 1.3.6.1.4.1.311",
            "Version 4.2.0.1 released",
            "Chrome/120.0.0.0 Safari/537.36",
            "256.1.1.1",
            "192.168.1.300",
            "01.02.03.04",
            "12:30:45",
            "2024-01-15T12:30:45.123Z",
            "00:1A:2B:3C:4D:5E",
            "std::collections::HashMap",
            "x[1::2]",
            "a::b",
            "port 8080, localhost:5432",
        ]);
    }

    #[test]
    fn api_keys_and_secrets() {
        let ghp = format!("ghp_{}", "aB3".repeat(12));
        let pat = format!("github_pat_{}", "Zx9_".repeat(20) + "ab");
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
        let pem =
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----";
        let table: Vec<(String, PiiKind, String)> = vec![
            (
                "key AKIAIOSFODNN7EXAMPLE here".into(),
                ApiKey,
                "AKIAIOSFODNN7EXAMPLE".into(),
            ),
            (
                "ASIAY34FZKBOKMUTVV7A".into(),
                ApiKey,
                "ASIAY34FZKBOKMUTVV7A".into(),
            ),
            (format!("token {ghp}"), ApiKey, ghp.clone()),
            (format!("export GITHUB_TOKEN={ghp}"), ApiKey, ghp.clone()),
            (pat.clone(), ApiKey, pat.clone()),
            (
                "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx".into(),
                ApiKey,
                "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx".into(),
            ),
            (
                "OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z".into(),
                ApiKey,
                "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z".into(),
            ),
            (
                "Stripe('sk_live_4eC39HqLyjWDarjtT1zdp7dc')".into(),
                ApiKey,
                "sk_live_4eC39HqLyjWDarjtT1zdp7dc".into(),
            ),
            (
                "rk_test_51H8b2cLkdIwHu7ix".into(),
                ApiKey,
                "rk_test_51H8b2cLkdIwHu7ix".into(),
            ),
            (
                "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q".into(),
                ApiKey,
                "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q".into(),
            ),
            (format!("Authorization: Bearer {jwt}"), ApiKey, jwt.into()),
            (format!("key:\n{pem}\n"), ApiKey, pem.into()),
            ("password=hunter2x".into(), ApiKey, "hunter2x".into()),
            (
                "api_key: 'a1b2c3d4e5f6a7b8c9d0'".into(),
                ApiKey,
                "a1b2c3d4e5f6a7b8c9d0".into(),
            ),
            ("DB_PASSWORD=S3cr3t!x".into(), ApiKey, "S3cr3t!x".into()),
            (
                "\"client_secret\": \"9f8e7d6c5b4a39281706f5e4d3c2b1a0\"".into(),
                ApiKey,
                "9f8e7d6c5b4a39281706f5e4d3c2b1a0".into(),
            ),
            (
                "Authorization: Bearer abcDEF123456ghiJKL789".into(),
                ApiKey,
                "abcDEF123456ghiJKL789".into(),
            ),
            (
                "db=postgres://app:pa55w0rdX@db.internal:5432/x".into(),
                ApiKey,
                "pa55w0rdX".into(),
            ),
            (
                "{\\\"password\\\":\\\"Xy7pq9Lm\\\"}".into(),
                ApiKey,
                "Xy7pq9Lm".into(),
            ),
            (
                "curl 'https://x.io/export?token=8f14e45fceea167a5a36dedd4bea2543&format=csv'"
                    .into(),
                ApiKey,
                "8f14e45fceea167a5a36dedd4bea2543".into(),
            ),
        ];
        for (text, kind, value) in &table {
            assert_eq!(found(text), vec![(*kind, value.as_str())], "in {text:?}");
        }
        assert_none(&[
            "api_key=${OPENAI_API_KEY}",
            "password: ********",
            "token: <your-token>",
            "api_key: your_api_key_here",
            "password = os.environ['DB_PASSWORD']",
            "token = tokenizer.encode(text)",
            "token_count=4096, max_tokens: 1024",
            "secret_santa: true",
            "password: secret",
            "password: CString",
            "password: format!(\"{user}:{pass}\")",
            "token_type=Bearer",
            "dot2_token: node.dot2_token,",
            "secret = proc_macro2::TokenStream::new()",
            "ty: _bindgen_ty_5",
            "token_expiry=2024-01-15T12:00:00Z",
            "password_changed_at: 1705312245",
            "auth_token_ttl=3600abc1234567",
            "secret_name: prod-db-1a2b3c4d5e",
            "pwd=/home/app/project",
            "password_reset_url=https://example.com/reset",
            "headers = {\"Authorization\": f\"Bearer {token}\"}",
            "pip install scikit-learn; see sk-learn-tutorial-notebooks-2024",
            "pk_live_51H8b2cLkdIwHu7ixYz3NqK9a",
            "AKIA1234",
        ]);
    }

    #[test]
    fn ibans() {
        assert_single(&[
            (
                "IBAN DE89 3704 0044 0532 0130 00.",
                Iban,
                "DE89 3704 0044 0532 0130 00",
            ),
            ("DE89370400440532013000", Iban, "DE89370400440532013000"),
            (
                "to GB82 WEST 1234 5698 7654 32 EUR",
                Iban,
                "GB82 WEST 1234 5698 7654 32",
            ),
            ("GB82WEST12345698765432", Iban, "GB82WEST12345698765432"),
            (
                "FR14 2004 1010 0505 0001 3M02 606",
                Iban,
                "FR14 2004 1010 0505 0001 3M02 606",
            ),
            ("NL91ABNA0417164300,", Iban, "NL91ABNA0417164300"),
            (
                "CH93 0076 2011 6238 5295 7",
                Iban,
                "CH93 0076 2011 6238 5295 7",
            ),
            ("NO9386011117947", Iban, "NO9386011117947"),
        ]);
        assert_none(&[
            "DE00 3704 0044 0532 0130 00", // checksum
            "DE89 3704 0044 0532 0130",    // too short
            "XX89370400440532013000",      // no such country
            "DE893704 0044 0532 0130 00",  // irregular grouping
        ]);
        // Two IBANs in a row: the first does not swallow the second.
        assert_eq!(
            found("DE89 3704 0044 0532 0130 00 GB82 WEST 1234 5698 7654 32"),
            vec![
                (Iban, "DE89 3704 0044 0532 0130 00"),
                (Iban, "GB82 WEST 1234 5698 7654 32")
            ]
        );
    }

    #[test]
    fn other_hard_negatives() {
        assert_none(&[
            "550e8400-e29b-41d4-a716-446655440000",
            "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "ORD-2024-004821, order #48213377, PO-7734120, INV-000482",
            "1Z999AA10123456784",
            "color #ff5733 and #FFF",
            "ISBN 978-0-306-40615-7, ISBN 0-306-40615-2",
            "on 2024-01-15, 01/15/2024, 15.01.2024 at 12:30",
            "ts=1705312245 ts_ms=1705312245123",
            "amount $12,345.67, 64 GiB, build 4521",
            "Python 3.11.7, node v20.11.1, nginx/1.25.3, Ubuntu 22.04.3 LTS",
            "rgba(255, 255, 255, 0.5)",
        ]);
    }

    #[test]
    fn overlaps_resolve_to_the_most_specific_or_covering_match() {
        // An email's digits are not a phone.
        assert_eq!(
            found("ann.4155550132@example.com"),
            vec![(Email, "ann.4155550132@example.com")]
        );
        assert_eq!(
            found("4155550132@example.com"),
            vec![(Email, "4155550132@example.com")]
        );
        // A secret whose value is exactly a card number is a card.
        assert_eq!(
            found("card_token=4111111111111111"),
            vec![(CreditCard, "4111111111111111")]
        );
        // …and a value that is exactly an email is an email.
        assert_eq!(
            found("secret: ann.lee99@example.com"),
            vec![(Email, "ann.lee99@example.com")]
        );
        // A provider key as a key=value value: one API_KEY, the value.
        assert_eq!(
            found("\"api_key\": \"sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z\""),
            vec![(ApiKey, "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z")]
        );
        // A card number inside a longer secret value: the covering secret.
        assert_eq!(
            found("password=Visa4111111111111111x"),
            vec![(ApiKey, "Visa4111111111111111x")]
        );
        // An IPv4 tail belongs to its IPv6 address.
        assert_eq!(
            found("::ffff:10.0.0.1"),
            vec![(IpAddress, "::ffff:10.0.0.1")]
        );
        // An IBAN's digit groups are not a card or a phone.
        assert_eq!(
            found("BE68 5390 0754 7034"),
            vec![(Iban, "BE68 5390 0754 7034")]
        );
        // Adjacent values of different kinds are all found, in order.
        assert_eq!(
            found("SSN 123-45-6789, phone 415-555-0132, ip 10.1.2.3, ann@example.com"),
            vec![
                (Ssn, "123-45-6789"),
                (Phone, "415-555-0132"),
                (IpAddress, "10.1.2.3"),
                (Email, "ann@example.com"),
            ]
        );
        // The URL password is a secret and the part after `@` is not an email.
        assert_eq!(
            found("postgres://u:pw12345678@db.example.com/x"),
            vec![(ApiKey, "pw12345678")]
        );
        // What an email's candidate skipped before its local part is still scanned (found by
        // fuzzing: the phone and the card leaked).
        assert_eq!(
            found("电话415-555-0132邮箱ann@example.com"),
            vec![(Phone, "415-555-0132"), (Email, "ann@example.com")]
        );
        assert_eq!(
            found("卡4111-1111-1111-1111邮箱ann@example.com"),
            vec![
                (CreditCard, "4111-1111-1111-1111"),
                (Email, "ann@example.com")
            ]
        );
        assert_eq!(
            found("x 123-45-6789..bob@example.org"),
            vec![(Ssn, "123-45-6789"), (Email, "bob@example.org")]
        );
        // A password after an email as the user is a secret too, and the user an email (found
        // by fuzzing: with the user tokenized, a second pass found the password).
        assert_eq!(
            found("ftp://ann@example.com:s3cretPassw0rd@ftp.example.org/x"),
            vec![(Email, "ann@example.com"), (ApiKey, "s3cretPassw0rd")]
        );
        assert_eq!(
            found("https://ann@example.com:8080/x, bob@example.org").len(),
            2
        );
        // A scheme that begins with a key word is still a URL (found by fuzzing).
        assert_eq!(
            found("SECRETq8tp1s://admin:s3cretPassw0rd@db.example.com/x"),
            vec![(ApiKey, "s3cretPassw0rd")]
        );
        assert_eq!(
            found("secret: x1Yz9Qw7Lm3Kp"),
            vec![(ApiKey, "x1Yz9Qw7Lm3Kp")]
        );
        // A token's kind name is no label: the number after it is not a phone or an SSN (found
        // by fuzzing: sanitizing sanitized text tokenized it).
        assert_eq!(found("[PHONE_a8c0320c]~7777777777"), vec![]);
        assert_eq!(found("[SSN_abcdefab] 078051120"), vec![]);
        assert_eq!(found("phone~7777777777").len(), 1);
        assert_eq!(found("SSN 078051120").len(), 1);
        // A token standing for a URL password is not a password again (found by fuzzing:
        // sanitizing sanitized text wrapped the token in a second one).
        assert_eq!(
            found("https://admin:[API_KEY_868ee805]@db.example.com:5432/prod"),
            vec![]
        );
    }

    #[test]
    fn spans_are_sorted_disjoint_and_on_char_boundaries() {
        let text =
            "Zoë ann@example.com 电话 +86 138 0013 8000 ключ AKIAIOSFODNN7EXAMPLE 🙂 10.0.0.1 é";
        let ds = detectors().detect(text);
        assert_eq!(ds.len(), 4);
        for w in ds.windows(2) {
            assert!(w[0].end <= w[1].start);
        }
        for d in ds {
            assert!(text.is_char_boundary(d.start) && text.is_char_boundary(d.end));
        }
    }

    #[test]
    fn validators() {
        assert!(luhn_ok(b"4111111111111111"));
        assert!(!luhn_ok(b"4111111111111112"));
        assert!(iban_mod97_ok(b"DE89370400440532013000"));
        assert!(!iban_mod97_ok(b"DE00370400440532013000"));
        assert!(ssn_parts_ok(b"123456789"));
        for bad in [
            &b"000456789"[..],
            b"666456789",
            b"900456789",
            b"123006789",
            b"123450000",
        ] {
            assert!(!ssn_parts_ok(bad));
        }
    }

    #[test]
    fn nothing_found_allocates_nothing() {
        let v = detectors().detect("plain words, 2024-01-15, v1.2.3 and nothing else");
        assert!(v.is_empty());
        assert_eq!(v.capacity(), 0);
    }
}
