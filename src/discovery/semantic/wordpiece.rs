//! The sentence model's tokenizer: BERT's uncased WordPiece, as the model was trained with.
//!
//! A model only understands the token ids it was trained on, so this must cut text exactly as
//! the reference tokenizer (`tokenizer.json` of all-MiniLM-L6-v2: `BertNormalizer`,
//! `BertPreTokenizer`, `WordPiece`) does:
//! 1. clean: drop NUL, U+FFFD and control characters, turn every white space into a space;
//! 2. put spaces around CJK ideographs, so each is a word of its own;
//! 3. strip accents (NFD, then drop non-spacing marks) and lowercase;
//! 4. split on white space, and make every punctuation character a word of its own;
//! 5. cut each word into the longest pieces of the vocabulary, left to right, later pieces
//!    prefixed `##`; a word that cannot be cut (or is over 100 characters) is `[UNK]`.
//!
//! The unit tests hold ids the reference tokenizer gives for the same strings.

use std::collections::HashMap;

use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};

/// A word longer than this is one `[UNK]` (the reference's `max_input_chars_per_word`).
const MAX_WORD_CHARS: usize = 100;

/// The vocabulary and the ids of its special tokens.
#[derive(Debug)]
pub struct WordPiece {
    ids: HashMap<String, u32>,
    pub cls: u32,
    pub sep: u32,
    unk: u32,
}

impl WordPiece {
    /// From `vocab.txt`'s text: one token a line, its id the line's number.
    pub fn from_vocab(text: &str) -> Option<WordPiece> {
        let ids: HashMap<String, u32> = text
            .lines()
            .enumerate()
            .map(|(i, t)| (t.to_owned(), i as u32))
            .collect();
        Some(WordPiece {
            cls: *ids.get("[CLS]")?,
            sep: *ids.get("[SEP]")?,
            unk: *ids.get("[UNK]")?,
            ids,
        })
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// `[CLS]`, the text's pieces (at most `max_tokens - 2` of them), `[SEP]`.
    pub fn encode(&self, text: &str, max_tokens: usize) -> Vec<u32> {
        let mut out = vec![self.cls];
        let room = max_tokens.saturating_sub(1);
        for word in words(&normalize(text)) {
            if out.len() >= room {
                break;
            }
            self.pieces(&word, &mut out);
        }
        out.truncate(room.max(1));
        out.push(self.sep);
        out
    }

    /// Appends the pieces of one word (or `[UNK]`) to `out`.
    fn pieces(&self, word: &str, out: &mut Vec<u32>) {
        if word.chars().count() > MAX_WORD_CHARS {
            out.push(self.unk);
            return;
        }
        let start_len = out.len();
        let mut rest = word;
        let mut piece = String::new();
        while !rest.is_empty() {
            let found = rest
                .char_indices()
                .map(|(i, c)| i + c.len_utf8())
                .rev()
                .find_map(|end| {
                    piece.clear();
                    if rest.len() != word.len() {
                        piece.push_str("##");
                    }
                    piece.push_str(&rest[..end]);
                    self.ids.get(piece.as_str()).map(|&id| (id, end))
                });
            let Some((id, end)) = found else {
                out.truncate(start_len);
                out.push(self.unk);
                return;
            };
            out.push(id);
            rest = &rest[end..];
        }
    }
}

/// Steps 1 to 3: cleaned, CJK spaced, accents stripped, lowercased.
fn normalize(text: &str) -> String {
    let mut spaced = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || is_control(c) {
            continue;
        }
        if is_space(c) {
            spaced.push(' ');
        } else if is_cjk(c) {
            spaced.extend([' ', c, ' ']);
        } else {
            spaced.push(c);
        }
    }
    spaced
        .nfd()
        .filter(|c| c.general_category() != GeneralCategory::NonspacingMark)
        .flat_map(char::to_lowercase)
        .collect()
}

/// Step 4: white-space separated words, each punctuation character a word of its own.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for chunk in text.split(is_space).filter(|c| !c.is_empty()) {
        let mut word = String::new();
        for c in chunk.chars() {
            if is_punctuation(c) {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                out.push(c.to_string());
            } else {
                word.push(c);
            }
        }
        if !word.is_empty() {
            out.push(word);
        }
    }
    out
}

fn is_space(c: char) -> bool {
    c.is_whitespace()
}

fn is_control(c: char) -> bool {
    if matches!(c, '\t' | '\n' | '\r') {
        return false;
    }
    matches!(
        c.general_category(),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::Unassigned
            | GeneralCategory::PrivateUse
    )
}

fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || c.general_category_group() == GeneralCategoryGroup::Punctuation
}

/// The CJK ideograph blocks BERT spaces out (not Hangul or kana, which it treats as letters).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}
