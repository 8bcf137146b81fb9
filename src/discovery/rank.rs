//! Ranking behind a trait, so lexical search is one ranker among possible others.
//!
//! Agents often describe a need in words no tool description uses ("what did the stock close
//! at" for `get_historical_stock_prices`); lexical ranking, however tuned, cannot bridge every
//! such gap (the benchmark measures how far it gets). A semantic ranker (embeddings of the same
//! field texts, a cross-encoder, a small local model) can be added later as another
//! [`Ranker`]: it gets the raw query text as well as the analysed terms, returns its own best
//! candidates, and `Registry::search` can fuse the lists, e.g. by reciprocal rank fusion
//! (`Σ 1 / (60 + rank)`), which needs no calibration between the rankers' score scales.
//! [`Bm25`] is the ranker shipped today.

/// A tool containing a term, with the term's BM25F contribution for that tool.
#[derive(Debug, Clone, Copy)]
pub struct Posting {
    pub doc: u32,
    pub impact: f32,
}

/// One analysed query term: a vocabulary id and how much it counts (1 for a word the query
/// contains, less for synonyms and typo corrections).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueryTerm {
    pub term: u32,
    pub weight: f32,
}

/// What a ranker is asked: the query as typed (truncated) and as analysed, plus which tools
/// may be returned (the category filter).
pub struct RankQuery<'a> {
    pub text: &'a str,
    pub terms: &'a [QueryTerm],
    pub allow: &'a dyn Fn(u32) -> bool,
}

/// A tool (its position in the registry) and the ranker's score for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    pub doc: u32,
    pub score: f32,
}

/// Scores the catalog for a query; returns at most `limit` allowed tools, best first, only
/// tools with a positive score. Ties are broken by tool position, so results are stable.
pub trait Ranker: Send + Sync {
    fn rank(&self, query: &RankQuery<'_>, limit: usize) -> Vec<Scored>;
}

/// BM25F over the postings of `index.rs`: sums the precomputed impacts of the query terms.
#[derive(Debug, Default)]
pub struct Bm25 {
    postings: Vec<Vec<Posting>>,
    doc_count: usize,
}

impl Bm25 {
    /// `postings[term]` lists the tools containing `term`; tools are numbered `0..doc_count`.
    pub fn new(postings: Vec<Vec<Posting>>, doc_count: usize) -> Self {
        Bm25 {
            postings,
            doc_count,
        }
    }
}

impl Ranker for Bm25 {
    fn rank(&self, query: &RankQuery<'_>, limit: usize) -> Vec<Scored> {
        let mut scores = vec![0f32; self.doc_count];
        let mut touched = Vec::new();
        for qt in query.terms {
            let Some(list) = self.postings.get(qt.term as usize) else {
                continue;
            };
            for p in list {
                let s = &mut scores[p.doc as usize];
                if *s == 0.0 {
                    touched.push(p.doc);
                }
                *s += qt.weight * p.impact;
            }
        }
        let mut hits: Vec<Scored> = touched
            .into_iter()
            .filter(|&doc| scores[doc as usize] > 0.0 && (query.allow)(doc))
            .map(|doc| Scored {
                doc,
                score: scores[doc as usize],
            })
            .collect();
        top(&mut hits, limit);
        hits
    }
}

/// Keeps the best `limit` of `hits`, sorted best first (ties: lower position first).
pub fn top(hits: &mut Vec<Scored>, limit: usize) {
    let order = |a: &Scored, b: &Scored| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc));
    if hits.len() > limit && limit > 0 {
        hits.select_nth_unstable_by(limit - 1, order);
    }
    hits.truncate(limit);
    hits.sort_unstable_by(order);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn postings() -> Vec<Vec<Posting>> {
        vec![
            vec![
                Posting {
                    doc: 0,
                    impact: 1.0,
                },
                Posting {
                    doc: 2,
                    impact: 3.0,
                },
            ],
            vec![
                Posting {
                    doc: 0,
                    impact: 2.5,
                },
                Posting {
                    doc: 1,
                    impact: 0.5,
                },
            ],
        ]
    }

    #[test]
    fn sums_weighted_impacts_and_sorts() {
        let bm25 = Bm25::new(postings(), 3);
        let terms = [
            QueryTerm {
                term: 0,
                weight: 1.0,
            },
            QueryTerm {
                term: 1,
                weight: 0.5,
            },
        ];
        let q = RankQuery {
            text: "",
            terms: &terms,
            allow: &|_| true,
        };
        let got = bm25.rank(&q, 10);
        assert_eq!(got.iter().map(|s| s.doc).collect::<Vec<_>>(), [2, 0, 1]);
        assert_eq!(got[1].score, 1.0 + 0.5 * 2.5);
        assert_eq!(bm25.rank(&q, 1).len(), 1);
    }

    #[test]
    fn respects_the_filter_and_ignores_unknown_terms() {
        let bm25 = Bm25::new(postings(), 3);
        let terms = [
            QueryTerm {
                term: 0,
                weight: 1.0,
            },
            QueryTerm {
                term: 99,
                weight: 1.0,
            },
        ];
        let q = RankQuery {
            text: "",
            terms: &terms,
            allow: &|d| d != 2,
        };
        assert_eq!(bm25.rank(&q, 10), [Scored { doc: 0, score: 1.0 }]);
    }

    #[test]
    fn top_breaks_ties_by_position() {
        let mut hits: Vec<Scored> = (0..6).rev().map(|doc| Scored { doc, score: 1.0 }).collect();
        top(&mut hits, 3);
        assert_eq!(hits.iter().map(|s| s.doc).collect::<Vec<_>>(), [0, 1, 2]);
    }
}
