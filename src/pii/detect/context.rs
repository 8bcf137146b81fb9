//! Context helpers: byte-level looks at what surrounds a candidate (word characters, the digit
//! before or after a number, a context word before it, a token's kind name) and a char-boundary
//! floor. Every detector family uses them, so they live apart from all of them.

pub(super) fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

pub(super) fn at(hay: &[u8], i: usize) -> Option<u8> {
    hay.get(i).copied()
}

pub(super) fn before(hay: &[u8], s: usize, back: usize) -> Option<u8> {
    s.checked_sub(back).map(|i| hay[i])
}

/// A number is not part of a longer one: no word character next to it, and no `.`, `-` or `/`
/// joining it to another digit (`2024-555-123-4567`, `1.2.3.4.5`, `12/555 …`).
pub(super) fn numeric_left_ok(hay: &[u8], s: usize) -> bool {
    match before(hay, s, 1) {
        None => true,
        Some(b) if is_word(b) => false,
        Some(b'.' | b'-' | b'/') => !before(hay, s, 2).is_some_and(|d| d.is_ascii_digit()),
        Some(_) => true,
    }
}

pub(super) fn numeric_right_ok(hay: &[u8], e: usize) -> bool {
    match at(hay, e) {
        None => true,
        Some(b) if is_word(b) => false,
        Some(b'.' | b'-' | b'/') => !at(hay, e + 1).is_some_and(|d| d.is_ascii_digit()),
        Some(_) => true,
    }
}

pub(super) fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.len() >= needle.len()
        && hay
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

/// A context word: the word, and whether letters may follow it (`phones`, `phonenumber`).
pub(super) type ContextWord = (&'static [u8], bool);

/// One of `words` (case-insensitive) within `window` bytes before `s`, not glued to a word
/// character before it (`syscall`, `hotel`, `VRING_CALL`; but `user_phone` for words that take
/// suffixes) nor, unless allowed, after it (`telemetry`).
pub(super) fn context_before(hay: &[u8], s: usize, window: usize, words: &[ContextWord]) -> bool {
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
pub(super) fn is_token_kind(hay: &[u8], at: usize, len: usize) -> bool {
    at > 0 && hay[at - 1] == b'[' && hay.get(at + len) == Some(&b'_')
}
