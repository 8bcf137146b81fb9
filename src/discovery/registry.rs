//! `Registry`: one loaded catalog with its index, immutable once built.
//!
//! Immutable on purpose: a reload builds a new `Registry` next to the old one and swaps an
//! `Arc` (`reload.rs`), so a search never sees half a catalog and never waits for a rebuild.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use serde::Serialize;

use super::catalog::{Catalog, Category, LoadProblem, ToolEntry};
use super::error::DiscoveryError;
use super::files;
use super::fuzzy::TrigramIndex;
use super::index::{Index, analyze};
use super::query::{Analyzer, SearchOptions};
use super::rank::{RankQuery, Ranker, Scored, top};
use super::semantic::{self, Ranking, RankingStatus, ToolVectors};
use super::synonyms::Synonyms;
use super::words;
use crate::shipped::ShippedFile;

/// Results per search at most; more is noise to a model and tokens to pay for.
pub const MAX_LIMIT: usize = 50;

/// A category as `list_tool_categories` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CategoryInfo {
    pub name: String,
    pub description: String,
    pub tool_count: usize,
}

/// One search result.
#[derive(Debug, Clone, Serialize)]
pub struct Hit<'r> {
    pub id: &'r str,
    pub score: f32,
    pub tool: &'r ToolEntry,
}

/// Ranked hits, best first; `suggestions` says what to try when there are none.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SearchResults<'r> {
    pub hits: Vec<Hit<'r>>,
    pub suggestions: Vec<String>,
}

/// The loaded catalog and everything needed to search it.
#[derive(Debug)]
pub struct Registry {
    pub(super) dir: PathBuf,
    /// All tools in load order (files in order, categories and keys sorted within a file).
    pub(super) tools: Vec<ToolEntry>,
    /// Sorted by name.
    pub(super) categories: Vec<CategoryInfo>,
    /// Tool position → position of its category in `categories`.
    pub(super) tool_category: Vec<u32>,
    /// Lowercased id → tool; lowercased name → tools with that name.
    pub(super) by_id: HashMap<String, u32>,
    pub(super) by_name: HashMap<String, Vec<u32>>,
    pub(super) index: Index,
    pub(super) trigrams: TrigramIndex,
    pub(super) synonyms: Synonyms,
    pub(super) problems: Vec<LoadProblem>,
    pub(super) fingerprint: u64,
    /// Lexical, or the sentence model beside BM25F ([`Registry::ranked_by`]).
    pub(super) ranking: Ranking,
    /// The tools' vectors under the ranking's model: made at the first search, or `None`.
    pub(super) vectors: OnceLock<Option<ToolVectors>>,
}

impl Registry {
    /// Loads every registry file under `dir` and builds the index. A missing directory gives an
    /// empty registry (logged as a warning); a bad file, category or tool is skipped and logged
    /// (see [`Registry::problems`]). Fails only when `dir` exists but cannot be read.
    pub fn load(dir: &Path) -> Result<Registry, DiscoveryError> {
        Registry::load_over(&[], dir)
    }

    /// Like [`Registry::load`], on top of `base` (the catalog embedded in the binary): the
    /// files under `dir` add tools and override definitions of the same id. A missing `dir` is
    /// then no warning: it is where a user's additions go, and there may be none.
    pub fn load_over(base: &[ShippedFile], dir: &Path) -> Result<Registry, DiscoveryError> {
        let started = Instant::now();
        let listing = files::list(dir).map_err(|source| DiscoveryError::Registry {
            path: dir.to_owned(),
            source,
        })?;
        let fingerprint = files::fingerprint_of(&listing);
        let files = listing.unwrap_or_else(|| {
            if base.is_empty() {
                tracing::warn!(dir = %dir.display(), "tool registry directory does not exist: no tools to discover");
            }
            Vec::new()
        });
        let registry = Registry::build(dir, Catalog::read(base, &files), fingerprint);
        tracing::info!(
            dir = %dir.display(),
            tools = registry.tools.len(),
            built_in_files = base.len(),
            files = files.len(),
            skipped = registry.problems.len(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            "tool registry loaded"
        );
        Ok(registry)
    }

    /// A registry of the given tools, not read from files: the live tools of upstream servers,
    /// each category named after its server. Ids must be unique (later duplicates are dropped).
    pub fn from_tools(tools: Vec<ToolEntry>) -> Registry {
        let mut seen = std::collections::HashSet::new();
        let tools: Vec<ToolEntry> = tools
            .into_iter()
            .filter(|t| seen.insert(t.id.clone()))
            .collect();
        let mut categories: Vec<Category> = Vec::new();
        for t in &tools {
            if !categories.iter().any(|c| c.name == t.category) {
                categories.push(Category {
                    name: t.category.clone(),
                    description: format!("Tools of the upstream MCP server `{}`", t.category),
                });
            }
        }
        Registry::build(
            Path::new(""),
            Catalog {
                tools,
                categories,
                problems: Vec::new(),
            },
            0,
        )
    }

    fn build(dir: &Path, catalog: Catalog, fingerprint: u64) -> Registry {
        let Catalog {
            tools,
            categories: declared,
            problems,
        } = catalog;
        let mut categories: Vec<CategoryInfo> = declared
            .into_iter()
            .map(|c| CategoryInfo {
                name: c.name,
                description: c.description,
                tool_count: 0,
            })
            .collect();
        categories.sort_by(|a, b| a.name.cmp(&b.name));
        let position: HashMap<&str, u32> = categories
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_str(), i as u32))
            .collect();
        let tool_category: Vec<u32> = tools
            .iter()
            .map(|t| position[t.category.as_str()])
            .collect();
        for &c in &tool_category {
            categories[c as usize].tool_count += 1;
        }

        let mut by_id = HashMap::with_capacity(tools.len());
        let mut by_name: HashMap<String, Vec<u32>> = HashMap::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            by_id.entry(t.id.to_lowercase()).or_insert(i as u32);
            by_name
                .entry(t.name.to_lowercase())
                .or_default()
                .push(i as u32);
        }
        let index = Index::build(&tools);
        let trigrams = TrigramIndex::build(index.vocab.stems());
        let synonyms = Synonyms::build(|phrase| {
            let mut stems = Vec::new();
            analyze(phrase, |_, s| stems.push(s));
            stems
        });
        Registry {
            dir: dir.to_owned(),
            tools,
            categories,
            tool_category,
            by_id,
            by_name,
            index,
            trigrams,
            synonyms,
            problems,
            fingerprint,
            ranking: Ranking::lexical(),
            vectors: OnceLock::new(),
        }
    }

    /// This registry ranked as `ranking` says (a new registry is lexical).
    pub fn ranked_by(mut self, ranking: Ranking) -> Registry {
        self.ranking = ranking;
        self.vectors = OnceLock::new();
        self
    }

    /// Which ranker searches use, and (once a search or [`Registry::prepare`] made them) how
    /// many tool vectors were shipped or embedded at load. Never waits for the model.
    pub fn ranking(&self) -> RankingStatus {
        let vectors = self.vectors.get().and_then(Option::as_ref);
        RankingStatus {
            vectors_shipped: vectors.map(|v| v.shipped),
            vectors_embedded: vectors.map(|v| v.embedded),
            ..self.ranking.status()
        }
    }

    /// Whether searches rank by meaning: the ranking has a model and it loaded (this waits for
    /// the model if it is loading).
    pub fn ranks_by_meaning(&self) -> bool {
        self.ranking.model().is_some()
    }

    /// Loads the sentence model and makes the tools' vectors now, if the ranking has a model
    /// and they are not made yet.
    pub fn prepare(&self) {
        self.tool_vectors();
    }

    /// The tools' vectors, made on first use; `None` when the ranking is lexical.
    fn tool_vectors(&self) -> Option<&ToolVectors> {
        self.vectors
            .get_or_init(|| {
                let loaded = self.ranking.model()?;
                Some(ToolVectors::build(loaded, &self.tools))
            })
            .as_ref()
    }

    /// Searches with synonyms and typo tolerance on; see [`Registry::search_with`].
    pub fn search(
        &self,
        query: &str,
        category: Option<&str>,
        limit: usize,
    ) -> Result<SearchResults<'_>, DiscoveryError> {
        self.search_with(query, category, limit, SearchOptions::default())
    }

    /// Ranked search. `category` filters exactly (case-insensitive; unknown → error listing
    /// the categories); `limit` is clamped to 1..=50. A query that is exactly a tool id, or a
    /// name of several words (`get_weather`), puts that tool first. Any text is safe (cut to
    /// 8 KiB and 64 terms). No hits → `suggestions` says what to try instead.
    pub fn search_with(
        &self,
        query: &str,
        category: Option<&str>,
        limit: usize,
        options: SearchOptions,
    ) -> Result<SearchResults<'_>, DiscoveryError> {
        let category = self.category_position(category)?;
        let limit = limit.clamp(1, MAX_LIMIT);
        let analyzer = Analyzer {
            vocab: &self.index.vocab,
            trigrams: &self.trigrams,
            synonyms: &self.synonyms,
        };
        let analyzed = analyzer.analyze(query, options);
        let allow = |doc: u32| category.is_none_or(|c| self.tool_category[doc as usize] == c);
        let rank_query = RankQuery {
            text: analyzed.text,
            terms: &analyzed.terms,
            allow: &allow,
        };
        let mut ranked = self.rank(&rank_query, limit, options);
        self.exact_first(analyzed.text, &allow, &mut ranked, limit);

        let hits: Vec<Hit<'_>> = ranked
            .into_iter()
            .map(|s| {
                let tool = &self.tools[s.doc as usize];
                Hit {
                    id: &tool.id,
                    score: s.score,
                    tool,
                }
            })
            .collect();
        let suggestions = if hits.is_empty() {
            self.suggestions(&analyzed, category)
        } else {
            Vec::new()
        };
        Ok(SearchResults { hits, suggestions })
    }

    /// BM25F's best, or (with a sentence model) BM25F's and the model's scores fused.
    fn rank(&self, query: &RankQuery<'_>, limit: usize, options: SearchOptions) -> Vec<Scored> {
        // A blank query means nothing to the model either: BM25F's empty answer brings hints.
        let blank = query.text.trim().is_empty();
        let model = self.ranking.model().filter(|_| !blank);
        let (Some(loaded), Some(vectors)) = (model, self.tool_vectors()) else {
            return self.index.bm25.rank(query, limit);
        };
        let lexical = self.index.bm25.rank(query, semantic::SEMANTIC_CANDIDATES);
        let cosine = vectors.similarities(&loaded.query_vector(query.text));
        semantic::fuse(
            &cosine,
            &lexical,
            query.allow,
            limit,
            options.lexical_weight,
        )
    }

    /// A query that is a tool's exact id, or exact name of more than one word (`get_weather`,
    /// not `search`, which names a dozen tools and is better ranked), comes first (any case).
    fn exact_first(
        &self,
        text: &str,
        allow: &dyn Fn(u32) -> bool,
        ranked: &mut Vec<Scored>,
        limit: usize,
    ) {
        let key = text.trim().to_lowercase();
        let exact: Vec<u32> = match self.by_id.get(&key) {
            Some(&doc) => vec![doc],
            None if is_compound(&key) => self.by_name.get(&key).cloned().unwrap_or_default(),
            None => Vec::new(),
        };
        let exact: Vec<u32> = exact.into_iter().filter(|&d| allow(d)).collect();
        if exact.is_empty() {
            return;
        }
        let best = ranked.first().map_or(0.0, |s| s.score);
        ranked.retain(|s| !exact.contains(&s.doc));
        let mut front: Vec<Scored> = exact
            .into_iter()
            .map(|doc| Scored {
                doc,
                score: best + 1.0,
            })
            .collect();
        top(&mut front, limit);
        front.append(ranked);
        front.truncate(limit);
        *ranked = front;
    }

    /// The tool with id `server/name`, or with bare name `name` if exactly one tool (in
    /// `category`, when given) has it. An id is unique, so `category` does not restrict it.
    pub fn get(&self, tool: &str, category: Option<&str>) -> Result<&ToolEntry, DiscoveryError> {
        let category_pos = self.category_position(category)?;
        let key = tool.trim().to_lowercase();
        if let Some(&doc) = self.by_id.get(&key) {
            return Ok(&self.tools[doc as usize]);
        }
        let named: Vec<u32> = self
            .by_name
            .get(&key)
            .map(|docs| {
                docs.iter()
                    .copied()
                    .filter(|&d| category_pos.is_none_or(|c| self.tool_category[d as usize] == c))
                    .collect()
            })
            .unwrap_or_default();
        match named.as_slice() {
            [doc] => Ok(&self.tools[*doc as usize]),
            [] => Err(DiscoveryError::ToolNotFound {
                given: echo(tool),
                category: category_pos.map(|c| self.categories[c as usize].name.clone()),
                closest: self.closest_ids(tool, category_pos),
            }),
            many => Err(DiscoveryError::AmbiguousTool {
                given: echo(tool),
                ids: many
                    .iter()
                    .map(|&d| self.tools[d as usize].id.clone())
                    .collect(),
            }),
        }
    }

    /// Every category with its description and number of tools, sorted by name.
    pub fn categories(&self) -> Vec<CategoryInfo> {
        self.categories.clone()
    }

    pub fn total_tools(&self) -> usize {
        self.tools.len()
    }

    /// All tools in load order.
    pub fn tools(&self) -> &[ToolEntry] {
        &self.tools
    }

    /// Files, categories and tools skipped while loading, and why.
    pub fn problems(&self) -> &[LoadProblem] {
        &self.problems
    }

    /// The directory this registry was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Position of `category` in `categories` (case-insensitive), or an error listing them.
    /// An empty category is no filter: clients often send `""` for "not given".
    fn category_position(&self, category: Option<&str>) -> Result<Option<u32>, DiscoveryError> {
        let Some(given) = category.map(str::trim).filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        let wanted = given.to_lowercase();
        self.categories
            .iter()
            .position(|c| c.name.to_lowercase() == wanted)
            .map(|p| Some(p as u32))
            .ok_or_else(|| DiscoveryError::UnknownCategory {
                given: echo(given),
                known: self.categories.iter().map(|c| c.name.clone()).collect(),
            })
    }
}

/// Whether a name is made of several words (`get_weather`, `files.read`, `getWeather`).
fn is_compound(name: &str) -> bool {
    let mut words = 0;
    words::tokenize(name, |_| words += 1);
    words > 1
}

/// What the caller gave, trimmed and cut short enough to quote back in an error message.
fn echo(given: &str) -> String {
    const MAX: usize = 200;
    crate::text::cut_chars(given.trim(), MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_of_several_words_count_as_exact_queries() {
        assert!(
            is_compound("get_weather") && is_compound("getWeather") && is_compound("files.read")
        );
        assert!(!is_compound("search") && !is_compound("fetch"));
    }

    #[test]
    fn echoed_input_is_cut() {
        assert_eq!(echo("  x  "), "x");
        let long = echo(&"é".repeat(1000));
        assert!(long.chars().count() == 201 && long.ends_with('…'));
    }
}
