//! Bounded accumulation of what an execution prints. The container can print without end; the
//! server keeps the first `limit` bytes of each stream, counts the rest, and says so in the
//! response. Memory per execution is therefore bounded whatever the code does.

/// Receives each piece of output the code prints, as it arrives, for whoever reports on a
/// running execution (progress notifications). Called on the execution's own task: it must
/// return at once and keep a bounded amount.
pub trait OutputTap: Send + Sync + std::fmt::Debug {
    fn offer(&self, data: &str);
}

/// One stream's text, cut at `limit` bytes (on a character boundary).
#[derive(Debug, Clone)]
pub struct BoundedText {
    text: String,
    limit: usize,
    dropped_bytes: u64,
}

impl BoundedText {
    pub fn new(limit: usize) -> Self {
        Self {
            text: String::new(),
            limit,
            dropped_bytes: 0,
        }
    }

    pub fn push(&mut self, s: &str) {
        let room = self.limit - self.text.len();
        if s.len() <= room {
            self.text.push_str(s);
            return;
        }
        let mut cut = room;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        self.text.push_str(&s[..cut]);
        self.dropped_bytes += (s.len() - cut) as u64;
    }

    /// Pushes bytes that may not be UTF-8 (decoded lossily).
    pub fn push_bytes(&mut self, b: &[u8]) {
        self.push(&String::from_utf8_lossy(b));
    }

    /// Records bytes dropped before they reached the server (the harness's own cap).
    pub fn note_dropped(&mut self, bytes: u64) {
        self.dropped_bytes = self.dropped_bytes.saturating_add(bytes.max(1));
    }

    pub fn truncated(&self) -> bool {
        self.dropped_bytes > 0
    }

    pub fn dropped_bytes(&self) -> u64 {
        self.dropped_bytes
    }

    /// Rewrites the kept text (e.g. PII tokenization); truncation marks stay as they were.
    pub fn map_text(&mut self, f: impl FnOnce(&str) -> String) {
        self.text = f(&self.text);
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
