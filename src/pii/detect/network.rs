//! Validators for IP addresses: IPv4 (octet ranges, not part of a longer dotted number, not a
//! version) and IPv6 (full, `::`-compressed and IPv4-mapped forms). Each validator takes (hay,
//! start, end) of the regex match and returns the accepted span, or None.

use super::context::{ContextWord, at, before, context_before, is_word};

const VERSION_CONTEXT: &[ContextWord] = &[
    (b"version", true),
    (b"ver", false),
    (b"release", true),
    (b"firmware", true),
];

pub(super) fn validate_ipv4(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
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

pub(super) fn validate_ipv6(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
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
