//! Sanitizing a text the server cuts before the model sees it, given the bytes past the cut.
//!
//! Two rules, so that no part of a value is shown where a cut falls inside it:
//! - The detectors read the text past the cut too: a value the cut splits is found whole and its
//!   token takes its place (ending past the cut).
//! - When no value is found across the cut but the cut falls inside a run of non-space
//!   characters, the run's part before the cut is withheld, back to the run's start or at most
//!   [`WITHHELD_MAX`] bytes, and [`WITHHELD`] stands there instead. Why: text glued to a value
//!   can make it no value for the detectors (letters before an IBAN, `invoiceDE89…`, make it part
//!   of a word; an email stays one, its value its last 64 characters before the `@`), and the
//!   cut would then show the value's first characters in clear. A value without spaces that the cut splits lies inside the run it falls in and starts
//!   less than its length before the cut, so every such value of up to `WITHHELD_MAX` bytes (the
//!   bytes past a cut the server keeps, the length the engine answers for) is withheld whole. A
//!   detection that reaches into the withheld bytes is withheld with it, and at least as many
//!   bytes as the marker takes are withheld, so the text shown is never longer than the cut.

use super::{Detection, PiiEngine};
use crate::text::floor_char_boundary;

/// Most bytes of a run of non-space characters withheld before a cut: the longest value the
/// engine answers for across a cut (as many bytes as the server keeps past one).
const WITHHELD_MAX: usize = 4096;

/// What stands where the bytes before a cut were withheld.
const WITHHELD: &str = "[withheld up to the cut]";

/// Where the bytes withheld before `cut` in `text` start, if any are: the cut falls between two
/// non-space characters (the last of the text kept and the first past the cut), and the run of
/// non-space characters that ends at the cut starts at the returned offset, or `WITHHELD_MAX`
/// bytes before the cut when it is longer; never fewer than [`WITHHELD`]'s bytes before the cut.
/// On a character boundary.
fn withheld_from(text: &str, cut: usize) -> Option<usize> {
    let non_space = |c: Option<char>| c.is_some_and(|c| !c.is_whitespace());
    if !non_space(text[..cut].chars().next_back()) || !non_space(text[cut..].chars().next()) {
        return None;
    }
    let floor = |i: usize| floor_char_boundary(text.as_bytes(), i);
    let bound = floor(cut.saturating_sub(WITHHELD_MAX));
    let run_start = text[bound..cut]
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map_or(bound, |(i, c)| bound + i + c.len_utf8());
    Some(run_start.min(floor(cut.saturating_sub(WITHHELD.len()))))
}

impl PiiEngine {
    /// `text` sanitized as shown up to byte `cut` (see the module's doc); values new to the vault
    /// go to `fresh`.
    pub(super) fn cut_and_replace(
        &self,
        text: &str,
        cut: usize,
        fresh: &mut super::Minting,
    ) -> String {
        let cut = cut.min(text.len());
        let found = self.detect(text);
        // Sorted and non-overlapping: at most one detection straddles the cut.
        let straddling = found.iter().find(|d| d.start < cut && d.end > cut);
        let (end, withheld) = match straddling {
            Some(d) => (d.end, false),
            None => match withheld_from(text, cut) {
                Some(from) => {
                    let from = found
                        .iter()
                        .find(|d| d.start < from && d.end > from)
                        .map_or(from, |d| d.start);
                    (from, true)
                }
                None => (cut, false),
            },
        };
        let kept: Vec<Detection> = found.into_iter().take_while(|d| d.end <= end).collect();
        let mut shown = if kept.is_empty() {
            text[..end].to_owned()
        } else {
            self.replace(&text[..end], &kept, fresh).text
        };
        if withheld {
            shown.push_str(WITHHELD);
        }
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_between_spaces_withholds_nothing() {
        assert_eq!(withheld_from("ab cd", 2), None);
        assert_eq!(withheld_from("ab cd", 3), None);
        assert_eq!(withheld_from("ab\ncd", 3), None);
    }

    #[test]
    fn a_cut_inside_a_run_withholds_it_back_to_its_start() {
        let run = "c".repeat(40);
        assert_eq!(withheld_from(&format!("ab {run}x gh"), 43), Some(3));
        let wide = format!("x\t{}ab", "é€".repeat(10));
        assert_eq!(withheld_from(&wide, 52), Some(2), "characters, not bytes");
    }

    #[test]
    fn at_least_the_marker_is_withheld() {
        let text = "one two three four five six seven cdef";
        let cut = text.len() - 2;
        assert_eq!(withheld_from(text, cut), Some(cut - WITHHELD.len()));
        assert_eq!(withheld_from("abc def", 5), Some(0));
        // The marker's length falls inside a `€`: the whole character is withheld too.
        let wide = format!("{} abcd", "€".repeat(10));
        assert_eq!(withheld_from(&wide, 34), Some(34 - WITHHELD.len() - 1));
    }

    #[test]
    fn a_long_run_is_withheld_for_at_most_the_bound() {
        let text = format!("{}margarethe", "x".repeat(3 * WITHHELD_MAX));
        let cut = 3 * WITHHELD_MAX + 5;
        assert_eq!(withheld_from(&text, cut), Some(cut - WITHHELD_MAX));
        // The bound falls inside an `é`: the whole character is withheld too.
        let wide = "aé".repeat(WITHHELD_MAX);
        let from = withheld_from(&wide, 6000).unwrap();
        assert_eq!((from, 6000 - from), (1903, WITHHELD_MAX + 1));
    }

    /// 128 KiB of letters glued before an email, cut at every offset from before the email to
    /// just past it, the email followed by a space or a line's end (so a cut right after it
    /// falls between a character and a space): no 4 bytes of it in a row are ever shown, and
    /// from where its value starts (the last 64 characters before the `@`) it is its token.
    #[test]
    fn a_value_glued_to_a_long_run_is_its_token_wherever_the_cut_falls() {
        let pii = PiiEngine::new([7; 32], 100);
        let value = "margarethe.vonstrelitz@example-mail.org";
        let run = 128 * 1024;
        let token_from = run + value.find('@').unwrap() - 64;
        for after in [" end\n", "\n"] {
            let text = format!("{}{value}{after}", "x".repeat(run));
            for cut in run - 100..=run + value.len() + 1 {
                let shown = pii.sanitize_cut(&text, cut, &crate::pii::Origin::Sandbox);
                let tail = &shown[shown.len().saturating_sub(120)..];
                for i in 0..=value.len() - 4 {
                    let part = &value[i..i + 4];
                    assert!(!shown.contains(part), "cut {cut} shows {part:?}: …{tail}");
                }
                if cut > token_from {
                    assert!(tail.contains("[EMAIL_"), "cut {cut}: …{tail}");
                } else {
                    assert!(tail.ends_with(WITHHELD), "cut {cut}: …{tail}");
                }
            }
        }
    }

    #[test]
    fn a_detection_reaching_into_the_withheld_run_is_withheld_with_it() {
        let pii = PiiEngine::new([7; 32], 100);
        // The card is a value of its own (spaces inside); its last group starts the run.
        let text = format!(
            "{} card 4111 1111 1111 1111,{}",
            "x".repeat(30),
            "a".repeat(30)
        );
        let shown = pii.sanitize_cut(&text, text.len() - 2, &crate::pii::Origin::Sandbox);
        assert_eq!(shown, format!("{} card {WITHHELD}", "x".repeat(30)));
    }
}
