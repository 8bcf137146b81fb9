//! Request paths: what form a path must have to be matched and sent, and when a path climbs.
//!
//! Why refuse rather than normalise: `paths` globs match the path as it is sent, not
//! percent-decoded, and the server forwards it unchanged. Servers disagree on how to read
//! `..`, `%2e%2e`, `..%2f`, `..\` or `..;/` (some decode twice, some treat `\` as `/`, some cut
//! a `;param`), so a path holding any of them is refused: what was matched is then what the
//! host receives, whatever it makes of it.

/// A path pattern: starts with `/` or `*`, visible ASCII.
pub(super) fn valid_pattern(pattern: &str) -> bool {
    (pattern.starts_with('/') || pattern.starts_with('*'))
        && pattern.bytes().all(|b| b.is_ascii_graphic())
}

/// A request path the server forwards: origin form, visible ASCII, no segment that climbs
/// however it is encoded.
pub(super) fn check_path(path: &str) -> Result<(), &'static str> {
    if !path.starts_with('/') {
        return Err("a request path starts with '/'");
    }
    if !path.bytes().all(|b| b.is_ascii_graphic() && b != b'#') {
        return Err("a request path holds visible ASCII only, percent-encoded, and no '#'");
    }
    if path.split('/').any(climbs) {
        return Err(
            "it holds a '.' or '..' segment (or one percent-encoded, or behind an encoded separator), which servers read differently: send the path without it",
        );
    }
    Ok(())
}

/// Whether a raw segment is, or hides, a `.` or `..` segment: decoded up to three times
/// (`%252e` is `%2e` once decoded), split at `/` and `\`, each part cut at `;`.
fn climbs(segment: &str) -> bool {
    let mut text = segment.to_owned();
    for _ in 0..4 {
        let dots = text
            .split(['/', '\\'])
            .map(|part| part.split(';').next().unwrap_or(part))
            .any(|part| part == "." || part == "..");
        if dots {
            return true;
        }
        let decoded = percent_encoding::percent_decode_str(&text)
            .decode_utf8_lossy()
            .into_owned();
        if decoded == text {
            return false;
        }
        text = decoded;
    }
    true
}
