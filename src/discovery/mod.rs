//! Tool discovery: the catalog behind `search_tools`, `get_tool_definition` and
//! `list_tool_categories`.
//!
//! Progressive disclosure only works if the agent finds the right tool from a few words of its
//! own. Substring matching (the original project's search) finds a tool only when the query
//! happens to be a literal piece of its text; an agent writes "remove a git branch", a tool says
//! "Delete a branch". So this module ranks, in-process and in well under a millisecond:
//!
//! ```text
//! files.rs     which *.json files, in which order; a stat-only fingerprint of them
//! catalog.rs   read, validate and merge the files into ToolEntry values (bad input is skipped,
//!              logged and kept as LoadProblem, never a panic)
//! fields.rs    the text of a tool per field: name, server, description, use cases, parameters
//! words.rs     tokenizer: snake/camel/kebab/dotted splitting, digits, CJK bigrams, stop words
//! stem.rs      Porter stemmer: word forms meet ("creating" = "create")
//! index.rs     vocabulary + postings with precomputed BM25F impacts
//! rank.rs      the Ranker trait (room for a semantic ranker) and BM25 scoring
//! fuzzy.rs     typo tolerance: trigram candidates, edit-distance check
//! hash.rs      a fast hasher for the index's maps
//! synonyms.rs  the words agents use for the words tool authors used
//! query.rs     query analysis: terms, typo corrections, synonyms, weights, limits
//! registry.rs  Registry: load, search, get, categories
//! suggest.rs   what to say when nothing matches or a name is unknown
//! reload.rs    Discovery: the current Registry, rebuilt when the directory changes
//! ```
//!
//! Typical use by the server:
//!
//! ```no_run
//! use code_execution_mcp::discovery::Discovery;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let discovery = Discovery::open("tools_registry")?;
//! let registry = discovery.current(); // Arc<Registry>, picks up dropped-in files
//! for hit in registry.search("open a ticket in the bug tracker", None, 5)?.hits {
//!     println!("{:.2} {}", hit.score, hit.id);
//! }
//! let tool = registry.get("github/create_issue", None)?;
//! # let _ = tool; Ok(()) }
//! ```
//!
//! How far lexical ranking gets on paraphrases, and what synonyms and typo tolerance add, is
//! measured by `benches/discovery.rs` on a labeled query set.

mod catalog;
mod error;
mod fields;
mod files;
mod fuzzy;
mod hash;
mod index;
mod query;
mod rank;
mod registry;
mod reload;
pub mod semantic;
mod stem;
mod suggest;
mod synonyms;
mod words;

#[cfg(test)]
mod tests;

pub use catalog::{LoadProblem, ToolEntry};
pub use error::DiscoveryError;
pub use query::{MAX_QUERY_BYTES, MAX_QUERY_TERMS, SearchOptions};
pub use rank::{QueryTerm, RankQuery, Ranker, Scored};
pub use registry::{CategoryInfo, Hit, MAX_LIMIT, Registry, SearchResults};
pub use reload::{DEFAULT_CHECK_INTERVAL, Discovery};
