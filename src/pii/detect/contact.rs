//! Validators for contact data: email addresses (Latin letters with diacritics, `%40`, glued to
//! the text before them, not a URL password nor an scp-style git remote) and phone numbers (NANP, and `+` international). Each validator takes (hay, start,
//! end) of the regex match and returns the accepted span, or None.

use super::context::{
    ContextWord, at, before, context_before, is_word, numeric_left_ok, numeric_right_ok,
};

pub(super) fn validate_email(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
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
    ls = skip_leading_marks(local, ls);
    // Glued to the text before it (`id=qqqq…ann@…`, 128 KiB of letters): no address has a
    // local part past 64 bytes, so the text before its last 64 bytes is not part of it. The
    // value is taken from there, or the glue would hide it whatever its length.
    if local.len() - ls > MAX_LOCAL {
        ls = skip_leading_marks(local, ceil_char_boundary(local, local.len() - MAX_LOCAL));
    }
    let local = &local[ls..];
    if in_url_userinfo(hay, s + ls) {
        return None;
    }
    if local.is_empty() || local.ends_with(b".") || scp_remote(hay, e) {
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

/// Longest local part of an address (RFC 5321), in bytes.
const MAX_LOCAL: usize = 64;

/// `local[from..]` without its leading `.`, `-`, `+` and `%`: where a local part may start.
fn skip_leading_marks(local: &[u8], mut from: usize) -> usize {
    while from < local.len() && matches!(local[from], b'.' | b'-' | b'+' | b'%') {
        from += 1;
    }
    from
}

/// The first character boundary of UTF-8 `b` at or after `i`.
fn ceil_char_boundary(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i] & 0xC0) == 0x80 {
        i += 1;
    }
    i
}

/// Longest path looked at after a `user@host:`.
const SCP_PATH_MAX: usize = 256;

/// `git@github.com:org/repo.git`: a host in an scp-style remote (`user@host:path`), not an
/// address. The path right after the colon holds a `/` or ends in `.git`; a colon followed by
/// a space or a port number (`ann@example.com:8080/x`) leaves the address as it is.
fn scp_remote(hay: &[u8], e: usize) -> bool {
    if at(hay, e) != Some(b':') {
        return false;
    }
    let rest = &hay[e + 1..hay.len().min(e + 1 + SCP_PATH_MAX)];
    let path_len = rest
        .iter()
        .take_while(|&&b| {
            b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-' | b'~')
        })
        .count();
    let path = &rest[..path_len];
    // `https://ann@example.com:8080/x`: a port, in a URL.
    let port = path.iter().take_while(|b| b.is_ascii_digit()).count();
    if port > 0 && matches!(path.get(port), None | Some(b'/')) {
        return false;
    }
    path.contains(&b'/') || path.ends_with(b".git")
}

/// Letters of the Latin script beyond ASCII (Latin-1, Extended-A/B, Extended Additional) and
/// combining accents.
fn is_latin_letter(c: char) -> bool {
    let u = c as u32;
    (c.is_alphabetic() && matches!(u, 0xC0..=0x24F | 0x1E00..=0x1EFF) && c != '×' && c != '÷')
        || (0x300..=0x36F).contains(&u)
}

/// Longest stretch before a candidate searched for the `://` of its URL. Generous on purpose:
/// tokens are longer than the values they replace, so with a window near the URL's length the
/// same text, sanitized, would put the `://` out of reach and find an email it did not find
/// before (the URL's password).
const USERINFO_LOOKBACK: usize = 4096;

/// `scheme://user:password@host`: the part before `@` is a password, not an email's local part.
/// Also after `]//`, where a token took the scheme's colon.
fn in_url_userinfo(hay: &[u8], s: usize) -> bool {
    if before(hay, s, 1) != Some(b':') {
        return false;
    }
    let from = s.saturating_sub(USERINFO_LOOKBACK);
    let seg = &hay[from..s - 1];
    let seg = match seg
        .iter()
        .rposition(|b| b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'<'))
    {
        Some(i) => &seg[i + 1..],
        None => seg,
    };
    // `]//`: a token ends where the scheme's colon was (an IPv6 value such as `fe24::` takes
    // it), so the sanitized text must still read as a URL.
    seg.windows(3).any(|w| w == b"://" || w == b"]//")
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

pub(super) fn validate_nanp(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
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

pub(super) fn validate_intl(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    if before(hay, s, 1).is_some_and(|b| is_word(b) || b == b'+') {
        return None;
    }
    // The regex takes every digit group it can; drop trailing groups while there are more than
    // 15 digits, the last group is glued to what follows, or a `)` closes nothing:
    // `+44 20 7946 0958 415-555-0132` (another number), `+44 20 7946 0958 after 3:15` (a time),
    // `+86 138 015) 555 138 0013` (a number, a stray parenthesis, another number).
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
        let open = m.iter().filter(|&&b| b == b'(').count();
        let close = m.iter().filter(|&&b| b == b')').count();
        if n <= 15 && !glued && close <= open {
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
