//! Bounded accumulation of what an execution prints. The container can print without end; the
//! server keeps the first `limit` bytes of each stream, counts the rest, and says so in the
//! response. Memory per execution is therefore bounded whatever the code does.

use crate::text::floor_char_boundary;

/// Receives each piece of output the code prints, as it arrives, for whoever reports on a
/// running execution (progress notifications). Called on the execution's own task: it must
/// return at once and keep a bounded amount.
pub trait OutputTap: Send + Sync + std::fmt::Debug {
    fn offer(&self, data: &str);
}

/// Bytes kept past a cut and never shown: whoever rewrites a cut text (the PII engine) reads
/// them too, so a value the cut splits is seen whole (the email whose name part would be left
/// before the cut, a card's first digits) and replaced whole. 4 KiB holds any value the
/// engine detects but the longest private-key blocks.
pub const EDGE_BYTES: usize = 4096;

/// One stream's text, cut at `limit` bytes (on a character boundary), and the [`EDGE_BYTES`]
/// that came after the cut.
#[derive(Debug, Clone)]
pub struct BoundedText {
    text: String,
    /// What followed the cut, up to [`EDGE_BYTES`]; not part of the text.
    edge: String,
    limit: usize,
    dropped_bytes: u64,
}

impl BoundedText {
    pub fn new(limit: usize) -> Self {
        Self {
            text: String::new(),
            edge: String::new(),
            limit,
            dropped_bytes: 0,
        }
    }

    pub fn push(&mut self, s: &str) {
        // Once something was cut, everything after it is edge or dropped, so the text stays
        // the stream's beginning even when a cut fell short before a wide character.
        let room = if self.dropped_bytes > 0 {
            0
        } else {
            self.limit - self.text.len()
        };
        if s.len() <= room {
            self.text.push_str(s);
            return;
        }
        let cut = floor_char_boundary(s.as_bytes(), room);
        self.text.push_str(&s[..cut]);
        let rest = &s[cut..];
        let kept = floor_char_boundary(rest.as_bytes(), EDGE_BYTES - self.edge.len());
        self.edge.push_str(&rest[..kept]);
        self.dropped_bytes += rest.len() as u64;
    }

    /// Pushes bytes that may not be UTF-8 (decoded lossily).
    pub fn push_bytes(&mut self, b: &[u8]) {
        self.push(&String::from_utf8_lossy(b));
    }

    /// Records bytes dropped before they reached the server (the harness's own cap).
    pub fn note_dropped(&mut self, bytes: u64) {
        self.dropped_bytes = self.dropped_bytes.saturating_add(bytes.max(1));
    }

    /// What followed the cut (empty when nothing was cut).
    pub fn edge(&self) -> &str {
        &self.edge
    }

    pub fn truncated(&self) -> bool {
        self.dropped_bytes > 0
    }

    pub fn dropped_bytes(&self) -> u64 {
        self.dropped_bytes
    }

    /// Rewrites the kept text (e.g. PII tokenization) given the text and what followed its cut;
    /// the edge is gone afterwards, truncation marks stay as they were.
    pub fn map_text(&mut self, f: impl FnOnce(&str, &str) -> String) {
        self.text = f(&self.text, &self.edge);
        self.edge = String::new();
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn into_string(self) -> String {
        self.text
    }

    /// The text as the original project's `output` field: one entry per printed line.
    pub fn lines(&self) -> Vec<String> {
        let text = self.text.strip_suffix('\n').unwrap_or(&self.text);
        if text.is_empty() {
            return Vec::new();
        }
        text.split('\n').map(str::to_owned).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_bytes_and_counts_the_rest() {
        let mut t = BoundedText::new(5);
        t.push("abc");
        t.push("defgh");
        assert_eq!(t.as_str(), "abcde");
        assert_eq!(t.dropped_bytes(), 3);
        assert!(t.truncated());
    }

    #[test]
    fn never_splits_a_character() {
        let mut t = BoundedText::new(4);
        t.push("aé€");
        assert_eq!(t.as_str(), "aé");
        assert_eq!(t.dropped_bytes(), 3);
        t.push("b");
        assert_eq!(t.as_str(), "aé", "nothing joins the text after a cut");
        assert_eq!(t.edge(), "€b");
    }

    #[test]
    fn keeps_an_edge_past_the_cut_for_the_rewrite_only() {
        let mut t = BoundedText::new(6);
        t.push("mail: ann@");
        t.push("example.com");
        t.push(&"x".repeat(2 * EDGE_BYTES));
        assert_eq!(t.as_str(), "mail: ");
        assert_eq!(t.edge().len(), EDGE_BYTES);
        assert!(t.edge().starts_with("ann@example.com"));
        assert_eq!(t.dropped_bytes() as usize, 15 + 2 * EDGE_BYTES);
        t.map_text(|text, edge| format!("{text}<{}>", &edge[..15]));
        assert_eq!(t.as_str(), "mail: <ann@example.com>");
        assert_eq!(t.edge(), "", "the edge is used once");
        assert!(t.truncated());
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily() {
        let mut t = BoundedText::new(100);
        t.push_bytes(b"ok\xff\n");
        assert_eq!(t.as_str(), "ok\u{fffd}\n");
    }

    #[test]
    fn lines_match_print_calls() {
        let mut t = BoundedText::new(100);
        assert!(t.lines().is_empty());
        t.push("a\nb\n\nc\n");
        assert_eq!(t.lines(), vec!["a", "b", "", "c"]);
    }
}
