//! Secrets: the validator for provider-prefixed API keys, and whether the value of a `key=value`
//! pair looks like a credential rather than a word, a number, a path, an identifier in code, a
//! date or a template placeholder.

use super::MAX_GENERIC_VALUE;
use super::context::{at, contains_ci, is_word};

pub(super) fn validate_prefixed_key(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
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
pub(super) fn looks_like_secret(v: &[u8], password: bool) -> bool {
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
