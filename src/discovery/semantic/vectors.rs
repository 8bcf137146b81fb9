//! One vector per tool: what the sentence model makes of the tool's text.
//!
//! Embedding the 5,558 shipped tools takes the better part of a minute on one core, so their
//! vectors are made once (`cargo run --release --example embed-catalog`) and shipped beside the
//! model (`tools_registry/model/catalog.vectors`, int8 with a scale per vector, 2 MB). Each
//! vector is filed under the SHA-256 of the text it was made from and of the model that made
//! it, so nothing can be matched to the wrong tool or model: at load, a tool whose text has a
//! shipped vector takes it, and any other (a file dropped into the registry directory, an
//! edited definition, an upstream server's live tools, every tool under another model) is
//! embedded then. A test fails when the catalog and its shipped vectors part ways.
//!
//! File layout: `CEMVECS1`, the model's digest (32 bytes), width and count (u32 LE), then per
//! tool its text's digest (8 bytes), a f32 scale and `width` int8 values.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ndarray::{Array1, Array2, ArrayView1};
use sha2::{Digest, Sha256};

use super::SentenceModel;
use crate::discovery::ToolEntry;

const MAGIC: &[u8; 8] = b"CEMVECS1";
/// Vectors embedded at load that are kept for the next rebuild (a registry file edited, an
/// upstream's tools listed again), at most; past it the store starts over.
const MAX_KEPT: usize = 8192;

/// The vectors the binary carries for the shipped catalog.
pub static SHIPPED: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tools_registry/model/catalog.vectors"
));

/// The text of a tool the model reads: its server's and its own name as words, then its
/// description (the model reads the first [`super::MAX_TOKENS`] tokens). The server's name
/// says what a tool belongs to ("truenas", "hackernews") when its description does not.
pub fn tool_text(tool: &ToolEntry) -> String {
    let mut name = String::new();
    let both = format!("{} {}", tool.mcp_server, tool.name);
    crate::discovery::words::tokenize(&both, |w| {
        if !name.is_empty() {
            name.push(' ');
        }
        name.push_str(w);
    });
    format!("{name}: {}", tool.description)
}

fn text_key(text: &str) -> [u8; 8] {
    let d = Sha256::digest(text.as_bytes());
    d[..8].try_into().expect("8 bytes")
}

/// A loaded model with the shipped vectors that are its own.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub model: Arc<SentenceModel>,
    pub shipped: ShippedVectors,
    /// Vectors of texts that were not shipped, kept across registry rebuilds (bounded).
    pub embedded: Mutex<HashMap<[u8; 8], Vec<f32>>>,
    /// The last query and its vector: `search_tools` with upstreams ranks one query in two
    /// registries (the live tools and the catalog), and the model reads it once.
    pub last_query: Mutex<Option<(String, Vec<f32>)>>,
}

impl Loaded {
    /// The model's vector for a query, read once for consecutive searches of the same text
    /// (the lock is not held while the model reads, so searches of other texts run at once).
    pub fn query_vector(&self, text: &str) -> Vec<f32> {
        let last = || self.last_query.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((t, v)) = last().as_ref()
            && t == text
        {
            return v.clone();
        }
        let v = self.model.embed(text);
        *last() = Some((text.to_owned(), v.clone()));
        v
    }
}

/// Shipped vectors by text digest, for one model.
#[derive(Debug, Default)]
pub struct ShippedVectors {
    by_text: HashMap<[u8; 8], Vec<f32>>,
}

impl ShippedVectors {
    /// The vectors of `bytes` if they were made by `model`; none otherwise (or if damaged).
    pub fn read(bytes: &[u8], model: &SentenceModel) -> ShippedVectors {
        Self::parse(bytes, model).unwrap_or_default()
    }

    fn parse(bytes: &[u8], model: &SentenceModel) -> Option<ShippedVectors> {
        let rest = bytes.strip_prefix(MAGIC)?;
        let (digest, rest) = rest.split_first_chunk::<32>()?;
        let (width, rest) = rest.split_first_chunk::<4>()?;
        let (count, rest) = rest.split_first_chunk::<4>()?;
        let width = u32::from_le_bytes(*width) as usize;
        let count = u32::from_le_bytes(*count) as usize;
        let record = 8 + 4 + width;
        if digest != model.digest() || width != model.width() || rest.len() != count * record {
            return None;
        }
        let by_text = rest
            .chunks_exact(record)
            .map(|r| {
                let key: [u8; 8] = r[..8].try_into().expect("8 bytes");
                let scale = f32::from_le_bytes(r[8..12].try_into().expect("4 bytes"));
                (
                    key,
                    r[12..]
                        .iter()
                        .map(|&b| f32::from(b as i8) * scale)
                        .collect(),
                )
            })
            .collect();
        Some(ShippedVectors { by_text })
    }

    pub fn len(&self) -> usize {
        self.by_text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_text.is_empty()
    }

    /// The file for `tools` under `model`: what `examples/embed-catalog` writes.
    pub fn write(model: &SentenceModel, tools: &[ToolEntry]) -> Vec<u8> {
        let mut records: Vec<([u8; 8], Vec<f32>)> = tools
            .iter()
            .map(|t| {
                let text = tool_text(t);
                (text_key(&text), model.embed(&text))
            })
            .collect();
        records.sort_by_key(|r| r.0);
        records.dedup_by(|a, b| a.0 == b.0);
        let mut out = Vec::with_capacity(48 + records.len() * (12 + model.width()));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(model.digest());
        out.extend_from_slice(&(model.width() as u32).to_le_bytes());
        out.extend_from_slice(&(records.len() as u32).to_le_bytes());
        for (key, v) in records {
            let scale = v
                .iter()
                .fold(0f32, |m, x| m.max(x.abs()))
                .max(f32::MIN_POSITIVE)
                / 127.0;
            out.extend_from_slice(&key);
            out.extend_from_slice(&scale.to_le_bytes());
            out.extend(
                v.iter()
                    .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8 as u8),
            );
        }
        out
    }
}

/// The vectors of one registry's tools, in the registry's order.
#[derive(Debug)]
pub struct ToolVectors {
    matrix: Array2<f32>,
    /// How many were shipped and how many embedded at load.
    pub shipped: usize,
    pub embedded: usize,
}

impl ToolVectors {
    /// Each tool's shipped vector when its text has one, else one embedded now (or earlier:
    /// `loaded` keeps those across rebuilds, up to [`MAX_KEPT`]).
    pub(crate) fn build(loaded: &Loaded, tools: &[ToolEntry]) -> Self {
        let width = loaded.model.width();
        let mut matrix = Array2::<f32>::zeros((tools.len(), width));
        let (mut shipped, mut embedded) = (0, 0);
        let mut kept = loaded.embedded.lock().unwrap_or_else(|e| e.into_inner());
        for (tool, mut row) in tools.iter().zip(matrix.rows_mut()) {
            let text = tool_text(tool);
            let key = text_key(&text);
            if let Some(v) = loaded.shipped.by_text.get(&key) {
                row.assign(&ArrayView1::from(v.as_slice()));
                shipped += 1;
                continue;
            }
            if kept.len() >= MAX_KEPT && !kept.contains_key(&key) {
                kept.clear();
            }
            let v = kept.entry(key).or_insert_with(|| loaded.model.embed(&text));
            row.assign(&ArrayView1::from(v.as_slice()));
            embedded += 1;
        }
        ToolVectors {
            matrix,
            shipped,
            embedded,
        }
    }

    /// Cosine similarity of every tool with `query` (a unit vector), in registry order.
    pub fn similarities(&self, query: &[f32]) -> Vec<f32> {
        self.matrix.dot(&Array1::from_vec(query.to_vec())).to_vec()
    }
}
