//! The sentence model's file: read, checked, and cut into named tensors.
//!
//! The binary carries the file (`tools_registry/model/`, made by its `convert.py`), and
//! `--discovery-model` may name another of the same format. Either could be damaged (a partial
//! copy, a Git LFS pointer where the file should be), so nothing is trusted before it is
//! checked: the magic, a JSON header of bounded size, the payload's SHA-256 against the
//! header's, and every tensor's range and length against its shape. A file that fails any
//! check is refused with a [`ModelError`] that says which, and discovery stays lexical.
//!
//! Layout: `CEMSENT1`, a little-endian u32 header length, the header, the payload (the
//! vocabulary as `vocab.txt`'s text, then the tensors). A `q8` tensor is `rows × cols` int8
//! values then one f32 scale per row; an `f32` tensor is its values, little-endian.

use std::collections::HashMap;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::ModelError;

const MAGIC: &[u8; 8] = b"CEMSENT1";
/// A header past this is not one of ours.
const MAX_HEADER_BYTES: usize = 1 << 20;

/// The architecture the header declares.
#[derive(Debug, Clone, Deserialize)]
pub struct Architecture {
    pub model: String,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub max_positions: usize,
    pub layer_norm_eps: f32,
}

#[derive(Debug, Deserialize)]
struct Header {
    #[serde(flatten)]
    architecture: Architecture,
    vocab_bytes: usize,
    tensors: Vec<TensorEntry>,
    payload_sha256: String,
}

#[derive(Debug, Deserialize)]
struct TensorEntry {
    name: String,
    shape: Vec<usize>,
    kind: String,
    offset: usize,
    len: usize,
}

/// One tensor's values: f32 as stored, or int8 rows with their scales.
#[derive(Debug, Clone)]
pub enum Tensor {
    F32 {
        shape: Vec<usize>,
        values: Vec<f32>,
    },
    Q8 {
        rows: usize,
        cols: usize,
        values: Vec<i8>,
        scales: Vec<f32>,
    },
}

/// A checked model file: its architecture, vocabulary text and tensors by name.
#[derive(Debug)]
pub struct ModelFile {
    pub architecture: Architecture,
    pub vocab: String,
    pub tensors: HashMap<String, Tensor>,
    /// The payload's SHA-256: which model the shipped vectors were made with.
    pub digest: [u8; 32],
}

impl ModelFile {
    pub fn parse(bytes: &[u8]) -> Result<ModelFile, ModelError> {
        let (header, payload) = split(bytes)?;
        let digest: [u8; 32] = Sha256::digest(payload).into();
        if hex::encode(digest) != header.payload_sha256 {
            return Err(ModelError::Damaged(
                "its checksum does not match (a partial or altered copy)".into(),
            ));
        }
        let vocab = payload
            .get(..header.vocab_bytes)
            .and_then(|v| std::str::from_utf8(v).ok())
            .ok_or_else(|| ModelError::Damaged("its vocabulary is not text".into()))?
            .to_owned();
        let tensors = header
            .tensors
            .iter()
            .map(|t| Ok((t.name.clone(), tensor(t, payload)?)))
            .collect::<Result<_, ModelError>>()?;
        Ok(ModelFile {
            architecture: header.architecture,
            vocab,
            tensors,
            digest,
        })
    }

    /// Takes a tensor out, checking its shape.
    pub fn take(&mut self, name: &str, shape: &[usize]) -> Result<Tensor, ModelError> {
        let t = self
            .tensors
            .remove(name)
            .ok_or_else(|| ModelError::Damaged(format!("it has no tensor {name}")))?;
        let got = match &t {
            Tensor::F32 { shape, .. } => shape.clone(),
            Tensor::Q8 { rows, cols, .. } => vec![*rows, *cols],
        };
        if got != shape {
            return Err(ModelError::Damaged(format!(
                "tensor {name} has shape {got:?}, not {shape:?}"
            )));
        }
        Ok(t)
    }
}

fn split(bytes: &[u8]) -> Result<(Header, &[u8]), ModelError> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| ModelError::Damaged("it does not start with CEMSENT1".into()))?;
    let (len, rest) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| ModelError::Damaged("it ends before its header".into()))?;
    let len = u32::from_le_bytes(*len) as usize;
    if len > MAX_HEADER_BYTES || len > rest.len() {
        return Err(ModelError::Damaged(format!(
            "its header length {len} is out of range"
        )));
    }
    let (head, payload) = rest.split_at(len);
    let header: Header = serde_json::from_slice(head)
        .map_err(|e| ModelError::Damaged(format!("its header is not valid: {e}")))?;
    Ok((header, payload))
}

fn tensor(entry: &TensorEntry, payload: &[u8]) -> Result<Tensor, ModelError> {
    let bad = |why: &str| ModelError::Damaged(format!("tensor {}: {why}", entry.name));
    let bytes = entry
        .offset
        .checked_add(entry.len)
        .and_then(|end| payload.get(entry.offset..end))
        .ok_or_else(|| bad("its range is outside the file"))?;
    let count = entry
        .shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| bad("its shape overflows"))?;
    match (entry.kind.as_str(), entry.shape.as_slice()) {
        ("f32", _) if bytes.len() == count * 4 => Ok(Tensor::F32 {
            shape: entry.shape.clone(),
            values: floats(bytes),
        }),
        ("q8", &[rows, cols]) if bytes.len() == count + rows * 4 => {
            let (values, scales) = bytes.split_at(count);
            Ok(Tensor::Q8 {
                rows,
                cols,
                values: values.iter().map(|&b| b as i8).collect(),
                scales: floats(scales),
            })
        }
        _ => Err(bad("its kind, shape and length disagree")),
    }
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
