//! Typo tolerance: finding vocabulary terms within a small edit distance of a query term.
//!
//! A brute-force scan of the vocabulary (tens of thousands of terms) per unknown word would
//! cost milliseconds; a trigram index narrows it to the few terms that share enough
//! three-letter pieces with the word, and only those get an edit-distance check. Distance is
//! optimal string alignment (Levenshtein plus adjacent transposition: "wether" → "weather",
//! "serach" → "search" are one edit each).

use super::hash::FastMap;

/// Trigram → ids of the terms containing it (terms padded as `^term$`).
#[derive(Debug, Default)]
pub struct TrigramIndex {
    grams: FastMap<u64, Vec<u32>>,
}

/// Words shorter than this are not corrected: at three letters every edit makes another word.
pub const MIN_TYPO_CHARS: usize = 4;

/// Largest edit distance tolerated for a word of `chars` characters.
pub fn max_edits(chars: usize) -> usize {
    match chars {
        0..MIN_TYPO_CHARS => 0,
        4..=7 => 1,
        _ => 2,
    }
}

impl TrigramIndex {
    /// Indexes `terms` (position = term id). Terms with a CJK character or of fewer than three
    /// characters are left out: typo correction is for alphabetic words.
    pub fn build<'a>(terms: impl Iterator<Item = &'a str>) -> TrigramIndex {
        let mut grams: FastMap<u64, Vec<u32>> = FastMap::default();
        let mut chars = Vec::new();
        for (id, term) in terms.enumerate() {
            padded(term, &mut chars);
            if chars.len() < 5 || chars.iter().copied().any(super::words::is_cjk) {
                continue;
            }
            let mut seen = Vec::with_capacity(chars.len());
            for g in chars.windows(3).map(pack) {
                if !seen.contains(&g) {
                    seen.push(g);
                    grams.entry(g).or_default().push(id as u32);
                }
            }
        }
        TrigramIndex { grams }
    }

    /// Terms within `max_dist` edits of `word`, closest first; `term_text` resolves an id.
    pub fn near<'t>(
        &self,
        word: &str,
        max_dist: usize,
        term_text: impl Fn(u32) -> &'t str,
    ) -> Vec<(u32, usize)> {
        let mut chars = Vec::new();
        padded(word, &mut chars);
        let word_grams: Vec<u64> = {
            let mut g: Vec<u64> = chars.windows(3).map(pack).collect();
            g.sort_unstable();
            g.dedup();
            g
        };
        // One edit changes at most three trigrams of the padded word.
        let need = word_grams.len().saturating_sub(3 * max_dist).max(1);
        let mut shared: FastMap<u32, usize> = FastMap::default();
        for g in &word_grams {
            for &id in self.grams.get(g).map(Vec::as_slice).unwrap_or_default() {
                *shared.entry(id).or_default() += 1;
            }
        }
        let word_chars: Vec<char> = word.chars().collect();
        let mut out: Vec<(u32, usize)> = shared
            .into_iter()
            .filter(|&(_, n)| n >= need)
            .filter_map(|(id, _)| {
                let cand: Vec<char> = term_text(id).chars().collect();
                osa_within(&word_chars, &cand, max_dist).map(|d| (id, d))
            })
            .filter(|&(_, d)| d > 0)
            .collect();
        out.sort_by_key(|&(id, d)| (d, id));
        out
    }
}

/// Optimal-string-alignment distance between `a` and `b` if it is at most `max`.
pub fn osa_within(a: &[char], b: &[char], max: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > max {
        return None;
    }
    let w = b.len() + 1;
    let mut prev2 = vec![0usize; w];
    let mut prev: Vec<usize> = (0..w).collect();
    let mut cur = vec![0usize; w];
    for i in 1..=a.len() {
        cur[0] = i;
        let mut row_min = cur[0];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(prev2[j - 2] + 1);
            }
            cur[j] = d;
            row_min = row_min.min(d);
        }
        if row_min > max {
            return None;
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    Some(prev[b.len()]).filter(|&d| d <= max)
}

/// Edit distance of two strings, `None` when above `max`.
pub fn distance_within(a: &str, b: &str, max: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    osa_within(&a, &b, max)
}

fn padded(term: &str, out: &mut Vec<char>) {
    out.clear();
    out.push('^');
    out.extend(term.chars());
    out.push('$');
}

fn pack(g: &[char]) -> u64 {
    (g[0] as u64) << 42 | (g[1] as u64) << 21 | g[2] as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance_within("wether", "weather", 2), Some(1));
        assert_eq!(distance_within("serach", "search", 2), Some(1));
        assert_eq!(distance_within("kitten", "sitting", 3), Some(3));
        assert_eq!(distance_within("kitten", "sitting", 2), None);
        assert_eq!(distance_within("", "abc", 3), Some(3));
        assert_eq!(distance_within("天气", "天汽", 1), Some(1));
    }

    #[test]
    fn finds_near_terms_closest_first() {
        let vocab = ["weather", "whether", "feather", "forecast", "wet", "天气"];
        let idx = TrigramIndex::build(vocab.iter().copied());
        let near = idx.near("wether", 1, |id| vocab[id as usize]);
        let words: Vec<&str> = near.iter().map(|&(id, _)| vocab[id as usize]).collect();
        assert_eq!(words, ["weather", "whether"]);
        let near2 = idx.near("wheather", 2, |id| vocab[id as usize]);
        assert_eq!(vocab[near2[0].0 as usize], "weather");
        assert!(
            idx.near("forecast", 2, |id| vocab[id as usize])
                .iter()
                .all(|&(_, d)| d > 0)
        );
    }

    #[test]
    fn typo_budget_grows_with_length() {
        assert_eq!(max_edits(3), 0);
        assert_eq!(max_edits(6), 1);
        assert_eq!(max_edits(10), 2);
    }
}
