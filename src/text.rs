//! Cutting text to a limit without splitting a character: the one place the server's bounded
//! strings (fields, labels, excerpts of stderr, shown arguments, cut output) are cut, so every
//! cut is on a UTF-8 boundary and says the same `…` where it cut.

/// The largest character boundary of the UTF-8 `bytes` at or below `i` (clamped to its length).
pub fn floor_char_boundary(bytes: &[u8], i: usize) -> usize {
    let mut i = i.min(bytes.len());
    // A continuation byte (0b10xx_xxxx) is never the start of a character.
    while i > 0 && i < bytes.len() && bytes[i] & 0xC0 == 0x80 {
        i -= 1;
    }
    i
}

/// The longest prefix of `s` of at most `max_bytes` bytes.
pub fn prefix(s: &str, max_bytes: usize) -> &str {
    &s[..floor_char_boundary(s.as_bytes(), max_bytes)]
}

/// The first `max_chars` characters of `s`.
pub fn prefix_chars(s: &str, max_chars: usize) -> &str {
    match s.char_indices().nth(max_chars) {
        Some((end, _)) => &s[..end],
        None => s,
    }
}

/// `s` cut to at most `max_bytes` bytes, with `…` after the cut when there was one.
pub fn cut(s: &str, max_bytes: usize) -> String {
    marked(s, prefix(s, max_bytes))
}

/// `s` cut to at most `max_chars` characters, with `…` after the cut when there was one.
pub fn cut_chars(s: &str, max_chars: usize) -> String {
    marked(s, prefix_chars(s, max_chars))
}

/// `kept`, a prefix of `s`, with `…` when it is shorter.
fn marked(s: &str, kept: &str) -> String {
    if kept.len() == s.len() {
        s.to_owned()
    } else {
        format!("{kept}…")
    }
}

/// `s` cut to at most `max_chars` characters for a label no PII engine reads after the cut (an
/// image's source, a link's description, an upstream's stderr line): the cut never leaves the
/// start of a value behind. It backs off over the word it would split and over the digit groups
/// before it (`4111 1111 11`, `+1 (415) 555`), and says `…` where it cut.
pub fn cut_clean(s: &str, max_chars: usize) -> String {
    let mut cut = prefix_chars(s, max_chars).len();
    if cut == s.len() {
        return s.to_string();
    }
    let before = |cut: usize| s[..cut].chars().next_back();
    while before(cut).is_some_and(|c| !c.is_whitespace()) {
        cut -= before(cut).map_or(1, char::len_utf8);
    }
    while before(cut).is_some_and(|c| c.is_ascii_digit() || " ()+.-".contains(c)) {
        cut -= 1;
    }
    format!("{}…", s[..cut].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let s = "zoë…ł";
        for i in 0..=s.len() + 2 {
            let b = floor_char_boundary(s.as_bytes(), i);
            assert!(b <= i && s.is_char_boundary(b), "at {i}: {b}");
            assert_eq!(prefix(s, i), &s[..b]);
        }
        assert_eq!(prefix_chars(s, 3), "zoë");
        assert_eq!(prefix_chars(s, 9), s);
        assert_eq!(cut("zoë", 3), "zo…");
        assert_eq!(cut("zoë", 4), "zoë");
        assert_eq!(cut_chars("zoë schmidt", 3), "zoë…");
        assert_eq!(cut_chars("zoë", 3), "zoë");
    }

    #[test]
    fn a_clean_cut_leaves_no_start_of_a_value() {
        assert_eq!(cut_clean("short", 10), "short");
        assert_eq!(
            cut_clean("mail margarethe.vonstrelitz@example.org", 16),
            "mail…"
        );
        assert_eq!(cut_clean("card 4111 1111 1111 1111", 17), "card…");
        assert_eq!(cut_clean("call +1 (415) 555-0134 now", 15), "call…");
        assert_eq!(cut_clean("zoë schmidt-łukasz ok", 14), "zoë…");
        assert_eq!(cut_clean("onelongwordwithoutspaces", 5), "…");
    }
}
