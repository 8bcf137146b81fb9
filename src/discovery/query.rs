//! From what an agent typed to weighted index terms.
//!
//! A query goes through the index's own analyzer (`index::analyze`: tokens, stop words,
//! stems), then gains terms where the catalog uses other words:
//! - a word the vocabulary lacks is read as a typo and replaced by the vocabulary terms within
//!   one or two edits (`fuzzy.rs`), weighted down the further they are; a word the catalog has
//!   but barely uses (one or two tools) also gets its much more common neighbours, since
//!   "wether" may well be a typo that one description shares;
//! - synonyms (`synonyms.rs`) are added at a lower weight.
//!
//! Any input is safe: the text is cut to 8 KiB and to its first 64 terms, so a 100 KB paste
//! costs what a paragraph does; control characters and symbols only separate words.

use std::cmp::Reverse;

use super::fuzzy::{self, TrigramIndex};
use super::index::{Vocabulary, analyze};
use super::rank::QueryTerm;
use super::synonyms::{self, Synonyms};

pub const MAX_QUERY_BYTES: usize = 8 * 1024;
pub const MAX_QUERY_TERMS: usize = 64;
/// Weight of a typo correction at edit distance 1 and 2.
const TYPO_WEIGHT: [f32; 2] = [0.7, 0.4];
/// Corrections kept per word, the closest and most common first.
const MAX_CORRECTIONS: usize = 3;
/// A known word used by at most this many tools may still be a typo of a common word…
const RARE_DF: u32 = 2;
/// …when the common word is used by this many times more tools.
const COMMON_FACTOR: u32 = 10;

/// Switches for the parts of query expansion, so the benchmark can measure what each brings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchOptions {
    pub synonyms: bool,
    pub typos: bool,
    /// What one point of BM25F counts beside one point of cosine similarity.
    pub lexical_weight: f32,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            synonyms: true,
            typos: true,
            lexical_weight: crate::discovery::semantic::LEXICAL_WEIGHT,
        }
    }
}

/// The analysed query.
#[derive(Debug, Default)]
pub struct AnalyzedQuery<'q> {
    /// The query text as ranked (cut to `MAX_QUERY_BYTES`).
    pub text: &'q str,
    /// The query's words (lowercased, stop words removed), as typed.
    pub words: Vec<String>,
    /// Index terms with weights, each term once.
    pub terms: Vec<QueryTerm>,
    /// Words that matched no catalog term, not even as a typo.
    pub unmatched: Vec<String>,
}

/// The analysis needs the vocabulary, its trigram index and the synonym map of a registry.
pub struct Analyzer<'r> {
    pub vocab: &'r Vocabulary,
    pub trigrams: &'r TrigramIndex,
    pub synonyms: &'r Synonyms,
}

impl Analyzer<'_> {
    pub fn analyze<'q>(&self, query: &'q str, opts: SearchOptions) -> AnalyzedQuery<'q> {
        let text = crate::text::prefix(query, MAX_QUERY_BYTES);
        let mut pairs: Vec<(String, String)> = Vec::new();
        analyze(text, |surface, stem| {
            if pairs.len() < MAX_QUERY_TERMS {
                pairs.push((surface.to_owned(), stem));
            }
        });
        let mut q = AnalyzedQuery {
            text,
            ..Default::default()
        };
        for (surface, stem) in &pairs {
            let known = self.vocab.id(stem);
            if let Some(id) = known {
                add(&mut q.terms, id, 1.0);
            }
            if opts.typos {
                let corrections = self.corrections(stem, known);
                for &(id, dist) in &corrections {
                    add(&mut q.terms, id, TYPO_WEIGHT[dist - 1]);
                }
                if known.is_none() && corrections.is_empty() {
                    q.unmatched.push(surface.clone());
                }
            } else if known.is_none() {
                q.unmatched.push(surface.clone());
            }
            q.words.push(surface.clone());
        }
        if opts.synonyms {
            let stems: Vec<String> = pairs.into_iter().map(|(_, s)| s).collect();
            for stem in self.synonyms.expand(&stems) {
                if let Some(id) = self.vocab.id(stem) {
                    add(&mut q.terms, id, synonyms::WEIGHT);
                }
            }
        }
        q
    }

    /// Vocabulary terms `stem` may be a misspelling of: all near terms when `stem` is unknown,
    /// only much more common ones when it is known but rare.
    fn corrections(&self, stem: &str, known: Option<u32>) -> Vec<(u32, usize)> {
        let max = fuzzy::max_edits(stem.chars().count());
        let floor = match known {
            None => 0,
            Some(id) if self.vocab.df(id) <= RARE_DF => self.vocab.df(id) * COMMON_FACTOR,
            Some(_) => return Vec::new(),
        };
        if max == 0 {
            return Vec::new();
        }
        let mut near: Vec<(u32, usize)> = self
            .trigrams
            .near(stem, max, |id| self.vocab.stem(id))
            .into_iter()
            .filter(|&(id, _)| self.vocab.df(id) >= floor.max(1))
            .collect();
        near.sort_by_key(|&(id, d)| (d, Reverse(self.vocab.df(id)), id));
        near.truncate(MAX_CORRECTIONS);
        near
    }
}

/// Adds `term` at `weight`, or raises its weight if it is already there.
fn add(terms: &mut Vec<QueryTerm>, term: u32, weight: f32) {
    match terms.iter_mut().find(|t| t.term == term) {
        Some(t) => t.weight = t.weight.max(weight),
        None => terms.push(QueryTerm { term, weight }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::catalog::ToolEntry;
    use crate::discovery::index::Index;

    fn index(descriptions: &[&str]) -> Index {
        let tools: Vec<ToolEntry> = descriptions
            .iter()
            .enumerate()
            .map(|(i, d)| ToolEntry {
                id: format!("s/t{i}"),
                name: format!("t{i}"),
                mcp_server: "s".into(),
                category: "c".into(),
                description: (*d).into(),
                functions: vec![],
                use_cases: vec![],
                input_schema: None,
                source_file: Default::default(),
            })
            .collect();
        Index::build(&tools)
    }

    fn with_analyzer<R>(idx: &Index, f: impl FnOnce(&Analyzer) -> R) -> R {
        let trigrams = TrigramIndex::build(idx.vocab.stems());
        let synonyms = Synonyms::build(|p| {
            let mut v = Vec::new();
            analyze(p, |_, s| v.push(s));
            v
        });
        f(&Analyzer {
            vocab: &idx.vocab,
            trigrams: &trigrams,
            synonyms: &synonyms,
        })
    }

    fn stems(idx: &Index, q: &AnalyzedQuery) -> Vec<(String, f32)> {
        q.terms
            .iter()
            .map(|t| (idx.vocab.stem(t.term).to_owned(), t.weight))
            .collect()
    }

    #[test]
    fn unknown_words_become_their_near_terms_weighted_down() {
        let idx = index(&["weather forecast for a city"]);
        with_analyzer(&idx, |a| {
            let q = a.analyze("wether forcast", SearchOptions::default());
            let got = stems(&idx, &q);
            assert!(got.contains(&("weather".into(), TYPO_WEIGHT[0])), "{got:?}");
            assert!(
                got.contains(&("forecast".into(), TYPO_WEIGHT[0])),
                "{got:?}"
            );
            assert!(q.unmatched.is_empty());
            let off = a.analyze(
                "wether",
                SearchOptions {
                    typos: false,
                    synonyms: true,
                    ..SearchOptions::default()
                },
            );
            assert!(off.terms.is_empty() && off.unmatched == ["wether"]);
        });
    }

    #[test]
    fn a_rare_known_word_also_gets_a_common_neighbour() {
        let mut docs = vec!["wether sheep"];
        docs.extend(std::iter::repeat_n("weather today", 20));
        let idx = index(&docs);
        with_analyzer(&idx, |a| {
            let got = stems(&idx, &a.analyze("wether", SearchOptions::default()));
            assert!(
                got.contains(&("wether".into(), 1.0)) && got.iter().any(|(s, _)| s == "weather")
            );
        });
    }

    #[test]
    fn synonyms_are_added_below_the_words_typed() {
        let idx = index(&["delete a file", "remove a file"]);
        with_analyzer(&idx, |a| {
            let got = stems(&idx, &a.analyze("remove file", SearchOptions::default()));
            assert!(
                got.contains(&("remov".into(), 1.0))
                    && got.contains(&("delet".into(), synonyms::WEIGHT)),
                "{got:?}"
            );
            let off = a.analyze(
                "remove file",
                SearchOptions {
                    typos: true,
                    synonyms: false,
                    ..SearchOptions::default()
                },
            );
            assert!(stems(&idx, &off).iter().all(|(s, _)| s != "delet"));
        });
    }

    #[test]
    fn long_queries_are_cut() {
        let idx = index(&["x"]);
        with_analyzer(&idx, |a| {
            let long = "word ".repeat(20_000) + "é";
            let q = a.analyze(&long, SearchOptions::default());
            assert!(q.text.len() <= MAX_QUERY_BYTES && q.words.len() == MAX_QUERY_TERMS);
        });
    }
}
