//! One ranking from two: the sentence model's cosine plus a small share of BM25F's score.
//!
//! The two fail differently. BM25F is near its ceiling when the query shares a word with the
//! tool, and returns noise when it shares none ("is it going to rain" matches any tool whose
//! text says "going"); the model ranks by meaning but can miss the one exact word that matters
//! (a product name, an API verb) and cannot read a misspelt one, which typo tolerance can.
//! Rank fusion with equal weights lets that noise push the right tools out of the top five,
//! so the lexical side gets a small weight on its raw score: enough to order tools the model
//! finds equally close, and to lift a tool that shares a rare word, not enough to outvote the
//! model. The weight was chosen on the development query set
//! (`benches/data/discovery_queries.jsonl`) and checked on the held-out one
//! (`discovery_heldout.jsonl`); `cargo bench --bench discovery` prints both.

use crate::discovery::rank::{Scored, top};

/// What one point of BM25F counts beside one point of cosine similarity.
pub const LEXICAL_WEIGHT: f32 = 0.002;

/// What a callable (live upstream) tool's score gains when it is listed among the catalog's:
/// it comes first unless a catalog tool is clearly closer to the query (by more than this much
/// cosine similarity), so weak matches among a few live tools do not hide the catalog's answer.
pub const CALLABLE_BONUS: f32 = 0.1;

/// How many of BM25F's best tools take part (the rest count 0 on the lexical side).
pub const SEMANTIC_CANDIDATES: usize = 200;

/// A tool the model finds less similar than this, and BM25F does not find at all, is no
/// match.
pub const MIN_SIMILARITY: f32 = 0.2;

/// When BM25F finds nothing at all (no word of the query is in the catalog), only tools at
/// least this similar count: a query of nonsense gets suggestions, not five random tools
/// (unrelated texts score up to about 0.3 under this model).
pub const MIN_SIMILARITY_ALONE: f32 = 0.35;

/// The best `limit` allowed tools by `cosine[doc] + weight · bm25[doc]`; `lexical` holds BM25F's
/// best tools with their scores.
pub fn fuse(
    cosine: &[f32],
    lexical: &[Scored],
    allow: &dyn Fn(u32) -> bool,
    limit: usize,
    weight: f32,
) -> Vec<Scored> {
    let min = if lexical.is_empty() {
        MIN_SIMILARITY_ALONE
    } else {
        MIN_SIMILARITY
    };
    let mut scores: Vec<f32> = cosine
        .iter()
        .map(|&c| if c >= min { c } else { f32::NEG_INFINITY })
        .collect();
    for s in lexical {
        if let (Some(f), Some(&c)) = (scores.get_mut(s.doc as usize), cosine.get(s.doc as usize)) {
            *f = c + weight * s.score;
        }
    }
    let mut hits: Vec<Scored> = scores
        .into_iter()
        .enumerate()
        .map(|(doc, score)| Scored {
            doc: doc as u32,
            score,
        })
        .filter(|s| s.score > f32::NEG_INFINITY && (allow)(s.doc))
        .collect();
    top(&mut hits, limit);
    hits
}
