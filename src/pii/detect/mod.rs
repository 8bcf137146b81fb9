//! Detectors: one multi-pattern regex pass over the text, then a validator per pattern.
//!
//! Why this shape: the `regex` engines guarantee linear time (no backtracking, so no catastrophic
//! patterns on hostile output) but have no look-around and no back-references. So the regex only
//! finds *candidates*, and a validator in plain Rust decides with what a regex cannot express:
//! Luhn and issuer ranges for cards, mod-97 and per-country lengths for IBANs, SSN area/group/
//! serial rules, octet ranges, the characters around a number (is `1.2.3.4` part of `1.2.3.4.5`?),
//! a context word before a bare number, and whether a `password=` value looks like a secret or
//! like a word. Validators may shrink a candidate (an IBAN followed by a word, a card followed by
//! an expiry group, the local part of an email after `..` or to its last 64 bytes when it is
//! glued to the text before it).
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
//!
//! Layout: this file holds the candidate patterns, the single pass and the `key=value` value
//! extraction; `context.rs` the byte-level helpers the validators share; `contact.rs` email and
//! phone, `finance.rs` SSN, card and IBAN, `network.rs` IPv4 and IPv6, `secret.rs` prefixed API
//! keys and whether a `key=value` value looks like a secret; `wrapped.rs` a second look at line
//! breaks, for cards, IBANs and phone numbers printed over two or three lines.

mod contact;
mod context;
mod finance;
mod network;
mod secret;
#[cfg(test)]
mod tests;
mod wrapped;

use regex_automata::meta::Regex;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input};

use super::types::{Detection, PiiKind};
use crate::text::floor_char_boundary;
use contact::{validate_email, validate_intl, validate_nanp};
use context::{contains_ci, is_token_kind};
use finance::{validate_card, validate_iban, validate_ssn};
use network::{validate_ipv4, validate_ipv6};
use secret::{looks_like_secret, validate_prefixed_key};

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

// A table: one entry per pattern, its regex with the comments that explain it.
#[allow(clippy::too_many_lines)]
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

    /// All detections in `text`, values wrapped over lines included (`wrapped.rs`): sorted by
    /// start, non-overlapping. Allocates nothing when nothing is found and no line break looks
    /// like the middle of a value.
    pub(crate) fn detect(&self, text: &str) -> Vec<Detection> {
        let mut out = Vec::new();
        self.scan(text.as_bytes(), 0, text.len(), &mut out);
        self.add_wrapped(text, &mut out);
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
