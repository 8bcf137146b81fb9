//! Which ranker discovery uses, and the model behind it, loaded once and shared.
//!
//! The model loads at the first search that needs it (its file checked, 42 MB of layers
//! widened: about 70 ms on one core), so a server that is never asked to search (a pipeline
//! that only runs code) never holds it, and start-up does not wait for it. Concurrent first
//! searches wait for the same load, never a second one. A model that cannot be loaded is
//! logged once as a warning, and every search is then lexical;
//! [`Ranking::status`] says which ranker is on and why, for `doctor` and
//! `get_execution_stats`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::vectors::{Loaded, SHIPPED, ShippedVectors};
use super::{ModelError, SentenceModel};

/// Where the model comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// The file the binary carries.
    Builtin,
    /// `--discovery-model PATH`.
    File(PathBuf),
}

/// A model, loaded on first use, with the shipped catalog's vectors when they are its own.
#[derive(Debug)]
struct Slot {
    source: ModelSource,
    loaded: OnceLock<Result<Loaded, ModelError>>,
}

/// How discovery ranks: BM25F alone, or the sentence model fused with it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Ranking(Option<Arc<Slot>>);

/// What `doctor` and `get_execution_stats` show of the ranker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RankingStatus {
    /// `semantic` (the sentence model fused with BM25F) or `lexical` (BM25F alone).
    pub ranker: String,
    /// The sentence model, when it is on.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub model: Option<String>,
    /// Why the ranker is lexical when it was not asked to be, or that the model is not loaded yet.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
    /// Tool vectors taken from those the binary ships, once made.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub vectors_shipped: Option<usize>,
    /// Tool vectors embedded when the registry loaded (tools not in the shipped catalog).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub vectors_embedded: Option<usize>,
}

impl Ranking {
    /// BM25F alone (`--discovery lexical`).
    pub fn lexical() -> Ranking {
        Ranking(None)
    }

    /// The sentence model from `source`, fused with BM25F; the model loads on first use.
    pub fn semantic(source: ModelSource) -> Ranking {
        Ranking(Some(Arc::new(Slot {
            source,
            loaded: OnceLock::new(),
        })))
    }

    /// The model, loading it if this is the first use; `None` when lexical or unloadable.
    pub(crate) fn model(&self) -> Option<&Loaded> {
        self.0.as_ref()?.get().ok()
    }

    pub fn status(&self) -> RankingStatus {
        let Some(slot) = &self.0 else {
            return RankingStatus::new("lexical", None, None);
        };
        match slot.loaded.get() {
            Some(Ok(l)) => RankingStatus::new("semantic", Some(l.model.name().to_owned()), None),
            Some(Err(e)) => RankingStatus::new(
                "lexical",
                None,
                Some(format!("{e}; searches rank lexically (BM25F)")),
            ),
            None => RankingStatus::new(
                "semantic",
                None,
                Some("the sentence model loads at the first search".into()),
            ),
        }
    }
}

impl RankingStatus {
    fn new(ranker: &str, model: Option<String>, note: Option<String>) -> RankingStatus {
        RankingStatus {
            ranker: ranker.to_owned(),
            model,
            note,
            vectors_shipped: None,
            vectors_embedded: None,
        }
    }
}

impl Slot {
    fn get(&self) -> Result<&Loaded, &ModelError> {
        self.loaded.get_or_init(|| self.load()).as_ref()
    }

    fn load(&self) -> Result<Loaded, ModelError> {
        let started = std::time::Instant::now();
        let model = match &self.source {
            ModelSource::Builtin => SentenceModel::builtin(),
            ModelSource::File(path) => SentenceModel::from_file(path).map(Arc::new),
        };
        let model = model.inspect_err(|e| {
            tracing::warn!(
                "discovery: {e}; searches rank lexically (BM25F). Leave out --discovery-model to \
                 use the built-in model, or give a file made by tools_registry/model/convert.py"
            )
        })?;
        let shipped = ShippedVectors::read(SHIPPED, &model);
        tracing::info!(
            model = model.name(),
            shipped_vectors = shipped.len(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            "discovery's sentence model loaded"
        );
        Ok(Loaded {
            model,
            shipped,
            embedded: Mutex::new(HashMap::new()),
            last_query: Mutex::new(None),
        })
    }
}
