//! What to tell a model that found nothing: a search without hits, a tool name that does not
//! exist. An empty answer makes a model guess; a near name, a catalog word that looks like its
//! own, or a category to look in lets it try again with a better chance.

use super::catalog::MAX_NAME_CHARS;
use super::fuzzy::{distance_within, max_edits, osa_within};
use super::index::analyze;
use super::query::{AnalyzedQuery, MAX_QUERY_BYTES};
use super::rank::{RankQuery, Ranker};
use super::registry::Registry;

const EMPTY_QUERY: &str = "Describe the tool you need in a few words, e.g. \"send an email\", \
     \"query a postgres database\" or \"weather forecast for a city\".";
const REPHRASE: &str = "Describe the task in other words: what the tool does (\"convert\", \
     \"send\", \"list\"), what it works on (\"invoice\", \"pull request\"), or the service's name \
     (\"stripe\", \"github\").";
const MAX_SUGGESTED: usize = 5;

impl Registry {
    /// Suggestions for a search that returned nothing.
    pub(super) fn suggestions(&self, q: &AnalyzedQuery<'_>, category: Option<u32>) -> Vec<String> {
        if q.words.is_empty() {
            return vec![EMPTY_QUERY.to_owned()];
        }
        let mut out = Vec::new();
        if category.is_some() {
            let elsewhere = self.index.bm25.rank(
                &RankQuery {
                    text: q.text,
                    terms: &q.terms,
                    allow: &|_| true,
                },
                20,
            );
            let mut cats: Vec<&str> = Vec::new();
            for s in elsewhere {
                let c = self.categories[self.tool_category[s.doc as usize] as usize]
                    .name
                    .as_str();
                if !cats.contains(&c) && cats.len() < 3 {
                    cats.push(c);
                }
            }
            if !cats.is_empty() {
                out.push(format!(
                    "Nothing in this category matches; without the category filter there are matches in: {}.",
                    cats.join(", ")
                ));
            }
        }
        let similar = self.similar_words(&q.words);
        if !similar.is_empty() {
            out.push(format!(
                "Words the catalog uses that look like yours: {}.",
                similar.join(", ")
            ));
        }
        let cats = self.related_categories(&q.words);
        if !cats.is_empty() {
            out.push(format!(
                "Categories that may fit: {}. Search inside one with `category`, or see them all with list_tool_categories.",
                cats.join(", ")
            ));
        }
        out.push(REPHRASE.to_owned());
        out
    }

    /// Catalog words (as the catalog spells them) within two edits of the query's words.
    fn similar_words(&self, words: &[String]) -> Vec<String> {
        let vocab = &self.index.vocab;
        let mut found: Vec<(usize, u32, String)> = Vec::new();
        for word in words {
            let mut stem = String::new();
            analyze(word, |_, s| stem = s);
            let max = (max_edits(stem.chars().count()) + 1).min(2);
            for (id, d) in self.trigrams.near(&stem, max, |id| vocab.stem(id)) {
                found.push((d, u32::MAX - vocab.df(id), vocab.surface(id).to_owned()));
            }
        }
        found.sort();
        let mut out: Vec<String> = Vec::new();
        for (_, _, w) in found {
            if !out.contains(&w) && out.len() < MAX_SUGGESTED {
                out.push(w);
            }
        }
        out
    }

    /// Categories whose name or description shares a word with the query, or whose name is a
    /// near spelling of one of its words, most shared words first.
    fn related_categories(&self, words: &[String]) -> Vec<String> {
        let mut query_stems = Vec::new();
        for w in words {
            analyze(w, |_, s| query_stems.push(s));
        }
        let mut scored: Vec<(usize, &str)> = Vec::new();
        for c in &self.categories {
            let mut stems = Vec::new();
            analyze(&format!("{} {}", c.name, c.description), |_, s| {
                stems.push(s)
            });
            let shared = query_stems.iter().filter(|q| stems.contains(q)).count();
            let near_name = words.iter().any(|w| {
                c.name
                    .split('-')
                    .any(|part| part.len() > 3 && distance_within(w, part, 2).is_some())
            });
            let score = shared + usize::from(near_name);
            if score > 0 {
                scored.push((score, &c.name));
            }
        }
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        scored
            .into_iter()
            .take(3)
            .map(|(_, n)| n.to_owned())
            .collect()
    }

    /// Ids close to an unknown tool name: near spellings first, then tools sharing its words.
    pub(super) fn closest_ids(&self, given: &str, category: Option<u32>) -> Vec<String> {
        let given = crate::text::prefix(given.trim(), MAX_QUERY_BYTES).to_lowercase();
        let allowed = |doc: usize| category.is_none_or(|c| self.tool_category[doc] == c);
        let whole_id = given.contains('/');
        let chars: Vec<char> = given.chars().collect();
        let budget = (chars.len() / 3).clamp(1, 4);
        let mut near: Vec<(usize, usize)> = Vec::new();
        // Names are at most a few hundred characters; a longer input is no misspelled name.
        if chars.len() <= 2 * MAX_NAME_CHARS {
            for (doc, t) in self
                .tools
                .iter()
                .enumerate()
                .filter(|&(doc, _)| allowed(doc))
            {
                let target = if whole_id { &t.id } else { &t.name };
                let target: Vec<char> = target.chars().flat_map(char::to_lowercase).collect();
                if let Some(d) = osa_within(&chars, &target, budget) {
                    near.push((d, doc));
                }
            }
        }
        near.sort();
        let mut out: Vec<String> = near
            .into_iter()
            .map(|(_, doc)| self.tools[doc].id.clone())
            .collect();
        out.truncate(MAX_SUGGESTED);

        let category_name = category.map(|c| self.categories[c as usize].name.as_str());
        if let Ok(found) = self.search(&given, category_name, MAX_SUGGESTED) {
            for hit in found.hits {
                if out.len() < MAX_SUGGESTED && !out.iter().any(|id| id == hit.id) {
                    out.push(hit.id.to_owned());
                }
            }
        }
        out
    }
}
