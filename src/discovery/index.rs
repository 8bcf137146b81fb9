//! The inverted index: vocabulary and postings with precomputed BM25F impacts.
//!
//! BM25F (Robertson & Zaragoza) scores a term once per tool over all fields, each field's
//! count weighted and length-normalised on its own, then saturated once:
//!
//! ```text
//! tf' = Σ_f weight_f · tf_f / (1 − b_f + b_f · len_f / avg_len_f)
//! impact = idf · tf' · (k1 + 1) / (k1 + tf')      idf = ln(1 + (N − df + 0.5) / (df + 0.5))
//! ```
//!
//! Everything in that formula is known when the catalog is loaded, so each posting stores its
//! final impact and a query only adds numbers (`rank.rs`): that is what keeps search well under
//! a millisecond at 10,000 tools. The price is a rebuild when weights change, which a reload
//! does anyway.
//!
//! Field weights: a name word counts 3×, a server word 1.5×, description and use cases 1×,
//! parameters 0.5×; `b` is low for the short name field (a short name is not "more relevant").

use super::catalog::ToolEntry;
use super::fields::{FIELD_COUNT, field_texts};
use super::hash::FastMap;
use super::rank::{Bm25, Posting};
use super::{stem, words};

const K1: f32 = 1.2;
/// (weight, b) per field, in `Field` order: name, server, description, use cases, params.
const FIELD_PARAMS: [(f32, f32); FIELD_COUNT] =
    [(3.0, 0.3), (1.5, 0.0), (1.0, 0.75), (1.0, 0.5), (0.5, 0.5)];

/// Every term of the catalog: its stem, a surface form to show people, its document frequency.
#[derive(Debug, Default)]
pub struct Vocabulary {
    ids: FastMap<String, u32>,
    stems: Vec<String>,
    surface: Vec<String>,
    df: Vec<u32>,
}

impl Vocabulary {
    pub fn id(&self, stem: &str) -> Option<u32> {
        self.ids.get(stem).copied()
    }
    pub fn stem(&self, id: u32) -> &str {
        &self.stems[id as usize]
    }
    /// A word of the catalog that has this stem (the first seen), for suggestions.
    pub fn surface(&self, id: u32) -> &str {
        &self.surface[id as usize]
    }
    /// How many tools contain the term.
    pub fn df(&self, id: u32) -> u32 {
        self.df[id as usize]
    }
    pub fn stems(&self) -> impl Iterator<Item = &str> {
        self.stems.iter().map(String::as_str)
    }

    fn intern(&mut self, stem: String, surface: &str) -> u32 {
        if let Some(&id) = self.ids.get(&stem) {
            return id;
        }
        let id = self.stems.len() as u32;
        self.ids.insert(stem.clone(), id);
        self.stems.push(stem);
        self.surface.push(surface.to_owned());
        self.df.push(0);
        id
    }
}

/// The vocabulary and the BM25F ranker over its postings.
#[derive(Debug, Default)]
pub struct Index {
    pub vocab: Vocabulary,
    pub bm25: Bm25,
}

/// Turns a query or text into index terms: tokens without stop words, stemmed.
pub fn analyze(text: &str, mut emit: impl FnMut(&str, String)) {
    words::tokenize(text, |tok| {
        if !words::is_stop_word(tok) {
            emit(tok, stem::stem(tok));
        }
    });
}

impl Index {
    pub fn build(tools: &[ToolEntry]) -> Index {
        let mut vocab = Vocabulary::default();
        // Surface token → term (None for stop words): stemming each distinct word once.
        let mut memo: FastMap<String, Option<u32>> = FastMap::default();
        let mut doc_terms: Vec<Vec<(u32, [u16; FIELD_COUNT])>> = Vec::with_capacity(tools.len());
        let mut doc_lens: Vec<[u32; FIELD_COUNT]> = Vec::with_capacity(tools.len());
        let mut occurrences: Vec<(u32, usize)> = Vec::new();

        for tool in tools {
            let mut lens = [0u32; FIELD_COUNT];
            occurrences.clear();
            for (f, field) in field_texts(tool).iter().enumerate() {
                words::tokenize(field, |tok| {
                    let term = match memo.get(tok) {
                        Some(&t) => t,
                        None => {
                            let t = (!words::is_stop_word(tok))
                                .then(|| vocab.intern(stem::stem(tok), tok));
                            memo.insert(tok.to_owned(), t);
                            t
                        }
                    };
                    if let Some(t) = term {
                        occurrences.push((t, f));
                        lens[f] += 1;
                    }
                });
            }
            let terms = counts_per_field(&mut occurrences);
            for &(t, _) in &terms {
                vocab.df[t as usize] += 1;
            }
            doc_terms.push(terms);
            doc_lens.push(lens);
        }

        let n = tools.len() as f32;
        let avg = average_lengths(&doc_lens, n);

        let idf: Vec<f32> = vocab
            .df
            .iter()
            .map(|&df| (1.0 + (n - df as f32 + 0.5) / (df as f32 + 0.5)).ln())
            .collect();
        let mut postings: Vec<Vec<Posting>> = vocab
            .df
            .iter()
            .map(|&df| Vec::with_capacity(df as usize))
            .collect();
        for (doc, (terms, lens)) in doc_terms.iter().zip(&doc_lens).enumerate() {
            for &(t, counts) in terms {
                let mut tf = 0.0;
                for f in 0..FIELD_COUNT {
                    if counts[f] > 0 {
                        let (w, b) = FIELD_PARAMS[f];
                        let norm = 1.0 - b + b * lens[f] as f32 / avg[f];
                        tf += w * counts[f] as f32 / norm;
                    }
                }
                let impact = idf[t as usize] * tf * (K1 + 1.0) / (K1 + tf);
                postings[t as usize].push(Posting {
                    doc: doc as u32,
                    impact,
                });
            }
        }
        Index {
            vocab,
            bm25: Bm25::new(postings, tools.len()),
        }
    }
}

/// A document's (term, field) occurrences, sorted, as a count per field for each term.
fn counts_per_field(occurrences: &mut [(u32, usize)]) -> Vec<(u32, [u16; FIELD_COUNT])> {
    occurrences.sort_unstable();
    let mut terms: Vec<(u32, [u16; FIELD_COUNT])> = Vec::new();
    for &(t, f) in occurrences.iter() {
        match terms.last_mut() {
            Some((last, counts)) if *last == t => counts[f] = counts[f].saturating_add(1),
            _ => {
                let mut counts = [0; FIELD_COUNT];
                counts[f] = 1;
                terms.push((t, counts));
            }
        }
    }
    terms
}

/// Each field's average length over the `n` documents (at least 1, so an empty field divides
/// nothing by zero).
fn average_lengths(doc_lens: &[[u32; FIELD_COUNT]], n: f32) -> [f32; FIELD_COUNT] {
    let mut avg = [0f32; FIELD_COUNT];
    for lens in doc_lens {
        for f in 0..FIELD_COUNT {
            avg[f] += lens[f] as f32;
        }
    }
    avg.iter_mut().for_each(|a| *a = (*a / n.max(1.0)).max(1.0));
    avg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::rank::{QueryTerm, RankQuery, Ranker};

    fn tool(name: &str, description: &str) -> ToolEntry {
        ToolEntry {
            id: format!("s/{name}"),
            name: name.into(),
            mcp_server: "s".into(),
            category: "c".into(),
            description: description.into(),
            functions: vec![],
            use_cases: vec![],
            input_schema: None,
            source_file: Default::default(),
        }
    }

    #[test]
    fn vocabulary_holds_stems_with_surface_forms_and_document_frequencies() {
        let idx = Index::build(&[
            tool("list_repos", "Lists the repositories"),
            tool("x", "repositories"),
        ]);
        let repo = idx.vocab.id("repositori").expect("stemmed");
        assert_eq!(idx.vocab.surface(repo), "repositories");
        assert_eq!(idx.vocab.df(repo), 2);
        assert!(idx.vocab.id("the").is_none(), "stop words are not indexed");
        assert_eq!(idx.vocab.id("list"), idx.vocab.id(&stem::stem("lists")));
    }

    fn score(idx: &Index, word: &str, doc: u32) -> f32 {
        let terms = [QueryTerm {
            term: idx.vocab.id(word).unwrap(),
            weight: 1.0,
        }];
        let q = RankQuery {
            text: word,
            terms: &terms,
            allow: &|d| d == doc,
        };
        idx.bm25.rank(&q, 1).first().map_or(0.0, |s| s.score)
    }

    #[test]
    fn a_name_match_weighs_more_than_a_description_match() {
        let idx = Index::build(&[
            tool("get_weather", "Returns data"),
            tool("get_data", "Weather data"),
        ]);
        assert!(score(&idx, "weather", 0) > score(&idx, "weather", 1));
    }

    #[test]
    fn rarer_terms_weigh_more() {
        let idx = Index::build(&[tool("a", "get weather"), tool("b", "get"), tool("c", "get")]);
        assert!(score(&idx, "weather", 0) > score(&idx, "get", 0));
    }
}
