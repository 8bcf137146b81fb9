//! Values wrapped over lines: a card, an IBAN or a phone number that a table, `textwrap` or a
//! narrow column printed in two or three pieces (`card on file: 4111 1111` / `1111 1111, exp …`).
//! Each piece alone is no value, so the single pass finds nothing; this pass looks at the line
//! breaks where a value may continue, joins the lines there and runs the same candidates and
//! validators (Luhn and issuer ranges, mod-97, phone shapes) on the joined text.
//!
//! Only these kinds are joined: their values are digit groups that wrapping splits at a space, and
//! their validators are strict enough that joining two unrelated lines rarely makes one (a
//! random 16 digits must pass Luhn and an issuer range; an IBAN mod-97 and its country's length).
//! A break is a candidate only where the line before ends in a value-like run (digits, capitals,
//! spaces, `()+.-`, with at least two digits) and the line after starts with one (at least two
//! digits, seven in both, and not a date): prose, log lines and most code never pay for the
//! join.
//!
//! A value found across breaks becomes one detection spanning them, line breaks included: its
//! token stands on the first line, and the lines it joined become one. The token's value is the
//! text as printed (with its line break), so restoring gives back exactly what was printed.

use super::Detectors;
use crate::pii::types::{Detection, PiiKind};

/// How far from a break a value's pieces may reach, in bytes, on each side (the longest IBAN
/// is 34 characters, 42 with its spaces).
const REACH: usize = 48;

/// A line break where a value may continue, in the original text.
struct Break {
    /// After the last non-blank byte of the line before.
    a: usize,
    /// The first non-blank byte of the line after.
    b: usize,
    /// Where the value-like run before the break starts.
    run_start: usize,
    /// Where the value-like run after the break ends.
    run_end: usize,
}

/// One joined line break: where it is in the joined text and what it replaced in the original.
struct Gap {
    /// Offset in the joined text where the separator starts.
    joined_at: usize,
    /// Bytes of separator in the joined text (0 or 1).
    sep_len: usize,
    /// The original bytes the separator replaced (blanks, `\r`, `\n`, indentation).
    orig_len: usize,
}

fn in_run(b: u8) -> bool {
    b.is_ascii_digit()
        || b.is_ascii_uppercase()
        || matches!(b, b' ' | b'\t' | b'(' | b')' | b'+' | b'-' | b'.')
}

/// Where the value-like run that ends at `end` starts (at most [`REACH`] bytes back), and its
/// digits.
fn run_before(hay: &[u8], end: usize) -> (usize, usize) {
    let floor = end.saturating_sub(REACH);
    let mut start = end;
    while start > floor && in_run(hay[start - 1]) {
        start -= 1;
    }
    let digits = hay[start..end]
        .iter()
        .filter(|b| b.is_ascii_digit())
        .count();
    (start, digits)
}

/// Where the value-like run that starts at `start` ends (at most [`REACH`] bytes on), and its
/// digits.
fn run_after(hay: &[u8], start: usize) -> (usize, usize) {
    let ceiling = (start + REACH).min(hay.len());
    let mut end = start;
    while end < ceiling && in_run(hay[end]) {
        end += 1;
    }
    let digits = hay[start..end]
        .iter()
        .filter(|b| b.is_ascii_digit())
        .count();
    (end, digits)
}

/// Whether `run` starts with an ISO date, `YYYY-MM-DD`.
fn starts_with_date(run: &[u8]) -> bool {
    run.len() >= 10
        && run[..10].iter().enumerate().all(|(i, b)| match i {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
}

/// How many digits stand right before `end`.
fn digit_run_before(hay: &[u8], end: usize) -> usize {
    hay[..end]
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count()
}

impl Detectors {
    /// Detections of wrapped cards, IBANs and phone numbers, merged into `found` (sorted,
    /// non-overlapping): a wrapped value replaces detections lying inside it, and is dropped
    /// when it would cut one that reaches past it.
    pub(super) fn add_wrapped(&self, text: &str, found: &mut Vec<Detection>) {
        let hay = text.as_bytes();
        let breaks = candidate_breaks(hay);
        if breaks.is_empty() {
            return;
        }
        // The text with each candidate break replaced by one space, or by nothing inside a long
        // unspaced number (`41111111` / `11111111`).
        let mut joined: Vec<u8> = Vec::with_capacity(hay.len());
        let mut gaps: Vec<Gap> = Vec::with_capacity(breaks.len());
        // The runs around each gap, in the joined text: what the detectors look at.
        let mut windows: Vec<(usize, usize)> = Vec::with_capacity(breaks.len());
        let mut copied = 0;
        for br in &breaks {
            joined.extend_from_slice(&hay[copied..br.a]);
            let unspaced = digit_run_before(hay, br.a) >= 5 && hay[br.b].is_ascii_digit();
            let sep_len = usize::from(!unspaced);
            let joined_at = joined.len();
            gaps.push(Gap {
                joined_at,
                sep_len,
                orig_len: br.b - br.a,
            });
            // The run may reach back over this line's indentation into the previous gap, which
            // the joined text no longer holds: it starts at this line's first byte at most.
            let run_start = br.run_start.max(copied);
            windows.push((
                joined_at - (br.a - run_start),
                joined_at + sep_len + (br.run_end - br.b),
            ));
            if sep_len == 1 {
                joined.push(b' ');
            }
            copied = br.b;
        }
        joined.extend_from_slice(&hay[copied..]);
        // Scan the windows (merged where they meet: a value over three lines), keep what
        // crosses a gap.
        let mut candidates: Vec<Detection> = Vec::new();
        let mut i = 0;
        while i < gaps.len() {
            let (start, mut end) = windows[i];
            let mut j = i + 1;
            while j < gaps.len() && windows[j].0 <= end {
                end = windows[j].1;
                j += 1;
            }
            let mut found_here = Vec::new();
            self.scan(&joined, start, end, &mut found_here);
            candidates.extend(found_here.into_iter().filter(|d| {
                matches!(d.kind, PiiKind::CreditCard | PiiKind::Iban | PiiKind::Phone)
                    && gaps[i..j]
                        .iter()
                        .any(|g| d.start < g.joined_at && d.end > g.joined_at + g.sep_len)
            }));
            i = j;
        }
        let wrapped = candidates.into_iter().map(|d| Detection {
            kind: d.kind,
            start: to_original(&gaps, d.start),
            end: to_original(&gaps, d.end),
        });
        merge(found, wrapped);
    }
}

/// Candidate breaks: the value-like runs on each side (start of the one before, end of the
/// one after) and the blanks between them (end of the line's last non-blank, start of the next
/// line's first).
fn candidate_breaks(hay: &[u8]) -> Vec<Break> {
    let mut breaks: Vec<Break> = Vec::new();
    for nl in memchr::memchr_iter(b'\n', hay) {
        let mut a = nl;
        while a > 0 && matches!(hay[a - 1], b' ' | b'\t' | b'\r') {
            a -= 1;
        }
        let mut b = nl + 1;
        while b < hay.len() && matches!(hay[b], b' ' | b'\t') {
            b += 1;
        }
        let (Some(&last), Some(&first)) = (a.checked_sub(1).map(|i| &hay[i]), hay.get(b)) else {
            continue;
        };
        let ends_like_value = last.is_ascii_digit() || last.is_ascii_uppercase() || last == b')';
        let starts_like_value =
            first.is_ascii_digit() || first.is_ascii_uppercase() || first == b'(';
        if !(ends_like_value && starts_like_value) {
            continue;
        }
        let ((run_start, digits_before), (run_end, digits_after)) =
            (run_before(hay, a), run_after(hay, b));
        // Every joined kind has at least 7 digits; a line that starts with a date
        // (`2024-10-12`, as log lines do) continues no value.
        if digits_before >= 2
            && digits_after >= 2
            && digits_before + digits_after >= 7
            && !starts_with_date(&hay[b..run_end])
        {
            breaks.push(Break {
                a,
                b,
                run_start,
                run_end,
            });
        }
    }
    breaks
}

/// The original offset of joined offset `j` (outside any separator).
fn to_original(gaps: &[Gap], j: usize) -> usize {
    let before = gaps.partition_point(|g| g.joined_at + g.sep_len <= j);
    gaps[..before]
        .iter()
        .fold(j, |o, g| o + g.orig_len - g.sep_len)
}

/// Merges `wrapped` (sorted, non-overlapping) into the sorted, non-overlapping `found`, in one
/// pass: a wrapped value takes the place of the detections inside it, and is dropped when it
/// overlaps one that reaches past it.
fn merge(found: &mut Vec<Detection>, wrapped: impl Iterator<Item = Detection>) {
    let mut rest = std::mem::take(found).into_iter().peekable();
    let mut overlapping = Vec::new();
    for w in wrapped {
        while let Some(f) = rest.next_if(|f| f.end <= w.start) {
            found.push(f);
        }
        overlapping.clear();
        while let Some(f) = rest.next_if(|f| f.start < w.end) {
            overlapping.push(f);
        }
        let cut_short = found.last().is_some_and(|f| f.end > w.start)
            || overlapping
                .iter()
                .any(|f| f.start < w.start || f.end > w.end);
        if cut_short {
            found.append(&mut overlapping);
        } else {
            found.push(w);
        }
    }
    found.extend(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(start: usize, end: usize) -> Detection {
        Detection {
            kind: PiiKind::CreditCard,
            start,
            end,
        }
    }

    #[test]
    fn an_indented_line_between_two_breaks_stays_inside_the_text() {
        let detectors = Detectors::new();
        for text in [
            "123\n      4567\n890",
            "1 2\n\t \t 3 4 5\n 6 7 8 9\n0",
            "card 4111\n  1111 1111\n  1111 ok",
        ] {
            let mut found = Vec::new();
            detectors.add_wrapped(text, &mut found);
            assert!(found.iter().all(|d| d.end <= text.len()), "{text:?}");
        }
    }

    #[test]
    fn a_wrapped_value_replaces_what_lies_inside_it_and_yields_to_what_reaches_past_it() {
        let mut found = vec![d(0, 5), d(10, 12), d(20, 30), d(40, 45)];
        merge(
            &mut found,
            [d(8, 14), d(18, 25), d(28, 35), d(50, 60)].into_iter(),
        );
        assert_eq!(found, [d(0, 5), d(8, 14), d(20, 30), d(40, 45), d(50, 60)]);
    }
}
