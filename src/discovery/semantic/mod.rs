//! The second ranker: a small sentence model that places a query and each tool's text in the
//! same vector space, so "who has been editing this file lately" lands near a `blame` tool with
//! no word in common.
//!
//! ```text
//! model_file.rs  the model's file: checked (magic, SHA-256, tensor table), cut into tensors
//! wordpiece.rs   BERT's uncased WordPiece tokenizer, as the model was trained with
//! encoder.rs     the forward pass (six BERT layers, mean pooling, unit length)
//! vectors.rs     one vector per tool: the shipped catalog's, made once; others embedded at load
//! ranking.rs     lexical or semantic; the model loaded once, at the first search
//! fuse.rs        how the sentence model's and BM25F's scores become one ranking
//! ```
//!
//! The model is all-MiniLM-L6-v2 (Apache-2.0; `tools_registry/model/` holds the converted file,
//! its license, notice and provenance), embedded in the binary: nothing is downloaded, at build
//! or at run time. It loads once per process, at the first search ([`SentenceModel::builtin`]).

mod encoder;
mod fuse;
mod model_file;
mod ranking;
mod vectors;
mod wordpiece;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

pub use fuse::{CALLABLE_BONUS, LEXICAL_WEIGHT, MIN_SIMILARITY, SEMANTIC_CANDIDATES, fuse};
pub use ranking::{ModelSource, Ranking, RankingStatus};
pub use vectors::{ShippedVectors, ToolVectors, tool_text};

use encoder::Encoder;
use model_file::ModelFile;
use wordpiece::WordPiece;

/// Tokens of a query or a tool's text the model reads at most (the rest is cut): its training
/// length, and where a tool's first sentences have said what it does.
pub const MAX_TOKENS: usize = 128;

/// The largest model file `--discovery-model` reads (the built-in one is 24 MB; a BERT-base
/// sized model in this format is about 110 MB).
pub const MAX_MODEL_BYTES: u64 = 512 << 20;

/// The model file the binary carries (`tools_registry/model/convert.py` made it).
pub static BUILTIN_MODEL: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tools_registry/model/all-MiniLM-L6-v2.q8"
));

/// Why a model could not be used; discovery then ranks lexically and says so.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    #[error("cannot read the sentence model file {}: {message}", path.display())]
    Missing { path: PathBuf, message: String },
    #[error("the sentence model file is damaged: {0}")]
    Damaged(String),
}

/// The loaded sentence model: tokenizer and encoder.
#[derive(Debug)]
pub struct SentenceModel {
    words: WordPiece,
    encoder: Encoder,
    name: String,
    digest: [u8; 32],
}

impl SentenceModel {
    /// The model the binary carries, loaded once per process.
    pub fn builtin() -> Result<Arc<SentenceModel>, ModelError> {
        static MODEL: OnceLock<Result<Arc<SentenceModel>, ModelError>> = OnceLock::new();
        MODEL
            .get_or_init(|| SentenceModel::from_bytes(BUILTIN_MODEL).map(Arc::new))
            .clone()
    }

    /// A model file of the same format (`--discovery-model`), of at most [`MAX_MODEL_BYTES`].
    pub fn from_file(path: &Path) -> Result<SentenceModel, ModelError> {
        let missing = |e: std::io::Error| ModelError::Missing {
            path: path.to_owned(),
            message: e.to_string(),
        };
        let size = std::fs::metadata(path).map_err(missing)?.len();
        if size > MAX_MODEL_BYTES {
            return Err(ModelError::Damaged(format!(
                "{} is {size} bytes, more than a model of this kind ({MAX_MODEL_BYTES} at most)",
                path.display()
            )));
        }
        let bytes = std::fs::read(path).map_err(missing)?;
        SentenceModel::from_bytes(&bytes)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<SentenceModel, ModelError> {
        let mut file = ModelFile::parse(bytes)?;
        let words = WordPiece::from_vocab(&file.vocab).ok_or_else(|| {
            ModelError::Damaged("its vocabulary lacks [CLS], [SEP] or [UNK]".into())
        })?;
        let encoder = Encoder::load(&mut file, words.len())?;
        Ok(SentenceModel {
            words,
            encoder,
            name: file.architecture.model.clone(),
            digest: file.digest,
        })
    }

    /// The model's vector for `text` (unit length; cut to [`MAX_TOKENS`] tokens).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let max = MAX_TOKENS.min(self.encoder.max_positions());
        self.encoder.embed(&self.words.encode(text, max))
    }

    /// The length of its vectors.
    pub fn width(&self) -> usize {
        self.encoder.width()
    }

    /// Its name, as its file's header gives it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The SHA-256 of its file's payload: which model made a set of vectors.
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }
}

#[cfg(test)]
mod tests;
