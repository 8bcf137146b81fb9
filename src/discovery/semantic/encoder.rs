//! The sentence model's forward pass: BERT's encoder, mean pooling, unit length.
//!
//! all-MiniLM-L6-v2 is six BERT layers of width 384. A query is a dozen tokens, so the work is
//! a few dozen small matrix products: ndarray's `dot` (matrixmultiply's kernels) does those,
//! and the rest (embeddings, layer norms, softmax, GELU) is short loops here.
//!
//! Memory: the dense layers are widened from int8 to f32 once, at load (42 MB); the word
//! embeddings (30,522 rows, the larger half of the model) stay int8 and only the rows of a
//! text's tokens are widened, per call.

use ndarray::{Array1, Array2, ArrayView2, Axis, Slice};

use super::ModelError;
use super::model_file::{Architecture, ModelFile, Tensor};

/// Int8 rows with one scale each: the word embeddings.
#[derive(Debug)]
struct QuantRows {
    cols: usize,
    values: Vec<i8>,
    scales: Vec<f32>,
}

impl QuantRows {
    fn row_into(&self, row: usize, out: &mut [f32]) {
        let scale = self.scales[row];
        let values = &self.values[row * self.cols..(row + 1) * self.cols];
        for (o, &v) in out.iter_mut().zip(values) {
            *o = f32::from(v) * scale;
        }
    }
}

/// `y = x · Wᵀ + b`, with `W` as stored (`out × in`).
#[derive(Debug)]
struct Dense {
    weight: Array2<f32>,
    bias: Array1<f32>,
}

impl Dense {
    fn apply(&self, x: &ArrayView2<'_, f32>) -> Array2<f32> {
        x.dot(&self.weight.t()) + &self.bias
    }
}

#[derive(Debug)]
struct Norm {
    gain: Array1<f32>,
    bias: Array1<f32>,
    eps: f32,
}

impl Norm {
    fn apply(&self, x: &mut Array2<f32>) {
        for mut row in x.rows_mut() {
            let n = row.len() as f32;
            let mean = row.sum() / n;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
            let inv = 1.0 / (var + self.eps).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&self.gain).zip(&self.bias) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

#[derive(Debug)]
struct Layer {
    query: Dense,
    key: Dense,
    value: Dense,
    attention_out: Dense,
    attention_norm: Norm,
    up: Dense,
    down: Dense,
    out_norm: Norm,
}

/// The loaded encoder.
#[derive(Debug)]
pub struct Encoder {
    arch: Architecture,
    words: QuantRows,
    positions: Array2<f32>,
    token_type: Array1<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
}

impl Encoder {
    pub fn load(file: &mut ModelFile, vocab_len: usize) -> Result<Encoder, ModelError> {
        let arch = file.architecture.clone();
        let h = arch.hidden;
        if h == 0 || arch.heads == 0 || !h.is_multiple_of(arch.heads) {
            return Err(ModelError::Damaged(format!(
                "width {h} does not split into {} heads",
                arch.heads
            )));
        }
        let words = match file.take("embeddings.word_embeddings.weight", &[vocab_len, h])? {
            Tensor::Q8 {
                cols,
                values,
                scales,
                ..
            } => QuantRows {
                cols,
                values,
                scales,
            },
            Tensor::F32 { .. } => {
                return Err(ModelError::Damaged("word embeddings are not int8".into()));
            }
        };
        let positions = matrix(
            file,
            "embeddings.position_embeddings.weight",
            [arch.max_positions, h],
        )?;
        let token_type = matrix(file, "embeddings.token_type_embeddings.weight", [2, h])?
            .row(0)
            .to_owned();
        let embedding_norm = norm(file, "embeddings.LayerNorm", h, arch.layer_norm_eps)?;
        let layers = (0..arch.layers)
            .map(|i| layer(file, &arch, &format!("encoder.layer.{i}.")))
            .collect::<Result<_, _>>()?;
        Ok(Encoder {
            arch,
            words,
            positions,
            token_type,
            embedding_norm,
            layers,
        })
    }

    pub fn max_positions(&self) -> usize {
        self.arch.max_positions
    }

    pub fn width(&self) -> usize {
        self.arch.hidden
    }

    /// The unit-length mean of the last layer's token vectors for `ids` (from the tokenizer,
    /// at most [`Encoder::max_positions`] of them).
    pub fn embed(&self, ids: &[u32]) -> Vec<f32> {
        let mut x = self.embeddings(ids);
        for layer in &self.layers {
            x = self.layer(layer, x);
        }
        let mut mean = x.mean_axis(Axis(0)).expect("at least one token").to_vec();
        let norm = mean.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
        mean.iter_mut().for_each(|v| *v /= norm);
        mean
    }

    fn embeddings(&self, ids: &[u32]) -> Array2<f32> {
        let h = self.arch.hidden;
        let ids = &ids[..ids.len().min(self.arch.max_positions)];
        let mut x = Array2::<f32>::zeros((ids.len(), h));
        for (t, (&id, mut row)) in ids.iter().zip(x.rows_mut()).enumerate() {
            let slice = row
                .as_slice_mut()
                .expect("rows of a new array are contiguous");
            self.words.row_into(id as usize, slice);
            row += &self.positions.row(t);
            row += &self.token_type;
        }
        self.embedding_norm.apply(&mut x);
        x
    }

    fn layer(&self, layer: &Layer, x: Array2<f32>) -> Array2<f32> {
        let view = x.view();
        let context = self.attention(
            &layer.query.apply(&view),
            &layer.key.apply(&view),
            &layer.value.apply(&view),
        );
        let mut x = layer.attention_out.apply(&context.view()) + &x;
        layer.attention_norm.apply(&mut x);
        let mut up = layer.up.apply(&x.view());
        up.mapv_inplace(gelu);
        let mut out = layer.down.apply(&up.view()) + &x;
        layer.out_norm.apply(&mut out);
        out
    }

    /// Multi-head self-attention over all tokens (one text, no padding to mask).
    fn attention(&self, q: &Array2<f32>, k: &Array2<f32>, v: &Array2<f32>) -> Array2<f32> {
        let width = self.arch.hidden / self.arch.heads;
        let scale = 1.0 / (width as f32).sqrt();
        let mut context = Array2::<f32>::zeros(q.raw_dim());
        for head in 0..self.arch.heads {
            let cols = Slice::from(head * width..(head + 1) * width);
            let mut scores = q
                .slice_axis(Axis(1), cols)
                .dot(&k.slice_axis(Axis(1), cols).t())
                * scale;
            for mut row in scores.rows_mut() {
                let max = row.fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                row.mapv_inplace(|v| (v - max).exp());
                let sum = row.sum();
                row /= sum;
            }
            context
                .slice_axis_mut(Axis(1), cols)
                .assign(&scores.dot(&v.slice_axis(Axis(1), cols)));
        }
        context
    }
}

fn layer(file: &mut ModelFile, arch: &Architecture, p: &str) -> Result<Layer, ModelError> {
    let (h, i, eps) = (arch.hidden, arch.intermediate, arch.layer_norm_eps);
    Ok(Layer {
        query: dense(file, &format!("{p}attention.self.query"), h, h)?,
        key: dense(file, &format!("{p}attention.self.key"), h, h)?,
        value: dense(file, &format!("{p}attention.self.value"), h, h)?,
        attention_out: dense(file, &format!("{p}attention.output.dense"), h, h)?,
        attention_norm: norm(file, &format!("{p}attention.output.LayerNorm"), h, eps)?,
        up: dense(file, &format!("{p}intermediate.dense"), i, h)?,
        down: dense(file, &format!("{p}output.dense"), h, i)?,
        out_norm: norm(file, &format!("{p}output.LayerNorm"), h, eps)?,
    })
}

fn dense(file: &mut ModelFile, name: &str, out: usize, input: usize) -> Result<Dense, ModelError> {
    Ok(Dense {
        weight: matrix(file, &format!("{name}.weight"), [out, input])?,
        bias: vector(file, &format!("{name}.bias"), out)?,
    })
}

fn norm(file: &mut ModelFile, name: &str, width: usize, eps: f32) -> Result<Norm, ModelError> {
    Ok(Norm {
        gain: vector(file, &format!("{name}.weight"), width)?,
        bias: vector(file, &format!("{name}.bias"), width)?,
        eps,
    })
}

/// A matrix, widened to f32 if stored as int8.
fn matrix(
    file: &mut ModelFile,
    name: &str,
    [rows, cols]: [usize; 2],
) -> Result<Array2<f32>, ModelError> {
    let values = match file.take(name, &[rows, cols])? {
        Tensor::F32 { values, .. } => values,
        Tensor::Q8 { values, scales, .. } => values
            .chunks_exact(cols)
            .zip(&scales)
            .flat_map(|(row, &scale)| row.iter().map(move |&v| f32::from(v) * scale))
            .collect(),
    };
    Ok(Array2::from_shape_vec((rows, cols), values).expect("take checked the shape"))
}

fn vector(file: &mut ModelFile, name: &str, len: usize) -> Result<Array1<f32>, ModelError> {
    match file.take(name, &[len])? {
        Tensor::F32 { values, .. } => Ok(Array1::from_vec(values)),
        Tensor::Q8 { .. } => Err(ModelError::Damaged(format!("{name} is not f32"))),
    }
}

/// GELU as BERT defines it: `x · Φ(x)`, with the normal CDF through [`erf`].
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2))
}

/// The error function to within 1.5e-7 (Abramowitz and Stegun 7.1.26), which is below f32's
/// resolution at the values GELU sees; the standard library has no `erf`.
fn erf(x: f32) -> f32 {
    let x = f64::from(x);
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let y = 1.0 - poly * (-x * x).exp();
    (if x < 0.0 { -y } else { y }) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_is_close_to_known_values() {
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (-1.0, -0.842_700_8),
            (2.0, 0.995_322_3),
            (4.0, 0.999_999_98),
        ] {
            assert!((erf(x) - want).abs() < 2e-7, "erf({x}) = {}", erf(x));
        }
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-6);
    }
}
