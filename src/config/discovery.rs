//! How `search_tools` ranks: the sentence model built into the binary beside BM25F (the
//! default), or BM25F alone.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::discovery::semantic::{ModelSource, Ranking};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Ranker {
    /// The sentence model (all-MiniLM-L6-v2, in the binary) fused with BM25F: finds tools
    /// described in other words.
    Semantic,
    /// BM25F with synonyms and typo tolerance only: no model in memory.
    Lexical,
}

#[derive(Debug, Clone, Args)]
pub struct DiscoveryConfig {
    /// How search_tools ranks: semantic (a sentence model fused with BM25F) or lexical
    /// (BM25F alone, about 100 MB less memory). A model that cannot be loaded falls back to
    /// lexical with a warning.
    #[arg(long, env = "CEM_DISCOVERY", value_enum, default_value_t = Ranker::Semantic)]
    pub discovery: Ranker,

    /// A sentence model file to use instead of the built-in one (the format
    /// tools_registry/model/convert.py writes). The shipped catalog's vectors are the built-in
    /// model's, so with another model every tool is embedded when the registry loads.
    #[arg(long, env = "CEM_DISCOVERY_MODEL")]
    pub discovery_model: Option<PathBuf>,
}

impl DiscoveryConfig {
    /// The ranking these flags ask for.
    pub fn ranking(&self) -> Ranking {
        match (self.discovery, &self.discovery_model) {
            (Ranker::Lexical, _) => Ranking::lexical(),
            (Ranker::Semantic, Some(path)) => Ranking::semantic(ModelSource::File(path.clone())),
            (Ranker::Semantic, None) => Ranking::semantic(ModelSource::Builtin),
        }
    }
}
