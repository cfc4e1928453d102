//! MPNet (all-mpnet-base-v2) in candle, which has no MPNet of its own.
//!
//! MPNet is BERT's encoder with three differences, each of which changes the vectors:
//! - positions count from `pad_token_id + 1` (RoBERTa's layout: the table has two rows
//!   before the first real position), and there are no segment embeddings;
//! - every layer adds one **relative position bias** to its attention scores: a learned
//!   value per head for each of 32 buckets of the distance between two tokens (T5's
//!   log-spaced buckets, exact below 8, saturating at 128), computed once per batch and
//!   shared by all layers;
//! - the weights are named `attention.attn.{q,k,v,o}` and `attention.LayerNorm`.
//!
//! The forward pass follows Hugging Face's `MPNetModel` in inference mode (no dropout,
//! no pooler): checked against reference vectors in `providers/tests/local_mpnet.rs`.

use candle_core::{D, Device, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder, embedding, layer_norm, linear};
use serde::Deserialize;

/// The fields of an MPNet `config.json` the forward pass reads.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MpNetConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_buckets")]
    pub relative_attention_num_buckets: usize,
    #[serde(default = "default_pad")]
    pub pad_token_id: usize,
    #[serde(default)]
    pub hidden_act: Option<String>,
}

fn default_eps() -> f64 {
    1e-5
}
fn default_buckets() -> usize {
    32
}
fn default_pad() -> usize {
    1
}

/// The distance at which the relative buckets stop growing (Hugging Face's constant).
const MAX_DISTANCE: f32 = 128.0;

/// The bucket of `relative = key position - query position`, as Hugging Face's
/// `MPNetEncoder.relative_position_bucket` computes it in float32: half the buckets for
/// each direction, exact distances below a quarter of them, log-spaced above.
pub(crate) fn relative_position_bucket(relative: i64, num_buckets: usize) -> usize {
    let half = num_buckets / 2;
    let n = -relative;
    let base = if n < 0 { half } else { 0 };
    let n = n.unsigned_abs() as usize;
    let max_exact = half / 2;
    if n < max_exact {
        return base + n;
    }
    let scaled = (n as f32 / max_exact as f32).ln() / (MAX_DISTANCE / max_exact as f32).ln()
        * (half - max_exact) as f32;
    // Truncation toward zero, as torch's `.to(torch.long)`.
    base + (max_exact + scaled as usize).min(half - 1)
}

struct Attention {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    norm: LayerNorm,
    heads: usize,
    head_size: usize,
}

impl Attention {
    fn load(vb: VarBuilder, c: &MpNetConfig) -> Result<Self> {
        let h = c.hidden_size;
        let attn = vb.pp("attn");
        Ok(Self {
            q: linear(h, h, attn.pp("q"))?,
            k: linear(h, h, attn.pp("k"))?,
            v: linear(h, h, attn.pp("v"))?,
            o: linear(h, h, attn.pp("o"))?,
            norm: layer_norm(h, c.layer_norm_eps, vb.pp("LayerNorm"))?,
            heads: c.num_attention_heads,
            head_size: h / c.num_attention_heads,
        })
    }

    /// `[batch, tokens, heads * head_size]` -> `[batch, heads, tokens, head_size]`.
    fn split_heads(&self, xs: &Tensor) -> Result<Tensor> {
        let (b, t, _) = xs.dims3()?;
        xs.reshape((b, t, self.heads, self.head_size))?
            .transpose(1, 2)?
            .contiguous()
    }

    /// `bias` is the position bias plus the padding mask, `[batch, heads, t, t]`.
    fn forward(&self, xs: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let q = self.split_heads(&self.q.forward(xs)?)?;
        let k = self.split_heads(&self.k.forward(xs)?)?;
        let v = self.split_heads(&self.v.forward(xs)?)?;
        let scores = (q.matmul(&k.t()?)? / (self.head_size as f64).sqrt())?;
        let probs = candle_nn::ops::softmax_last_dim(&scores.broadcast_add(bias)?)?;
        let context = probs.matmul(&v)?.transpose(1, 2)?.flatten_from(D::Minus2)?;
        self.norm.forward(&(self.o.forward(&context)? + xs)?)
    }
}

struct Layer {
    attention: Attention,
    intermediate: Linear,
    output: Linear,
    norm: LayerNorm,
}

impl Layer {
    fn load(vb: VarBuilder, c: &MpNetConfig) -> Result<Self> {
        Ok(Self {
            attention: Attention::load(vb.pp("attention"), c)?,
            intermediate: linear(
                c.hidden_size,
                c.intermediate_size,
                vb.pp("intermediate").pp("dense"),
            )?,
            output: linear(
                c.intermediate_size,
                c.hidden_size,
                vb.pp("output").pp("dense"),
            )?,
            norm: layer_norm(
                c.hidden_size,
                c.layer_norm_eps,
                vb.pp("output").pp("LayerNorm"),
            )?,
        })
    }

    fn forward(&self, xs: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let attended = self.attention.forward(xs, bias)?;
        let inner = self.intermediate.forward(&attended)?.gelu_erf()?;
        self.norm
            .forward(&(self.output.forward(&inner)? + attended)?)
    }
}

/// An MPNet encoder without its pooler: token ids in, last hidden states out.
pub(crate) struct MpNetModel {
    words: Embedding,
    positions: Embedding,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
    /// `[buckets, heads]`: one learned bias per distance bucket and head.
    relative_bias: Tensor,
    buckets: usize,
    heads: usize,
    pad_id: usize,
    device: Device,
}

impl MpNetModel {
    pub(crate) fn load(vb: VarBuilder, c: &MpNetConfig) -> Result<Self> {
        if let Some(act) = c.hidden_act.as_deref()
            && act != "gelu"
        {
            candle_core::bail!("hidden_act {act:?} is not supported; MPNet uses \"gelu\"");
        }
        if c.num_attention_heads == 0 || !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            candle_core::bail!("hidden_size is not a multiple of num_attention_heads");
        }
        let e = vb.pp("embeddings");
        let encoder = vb.pp("encoder");
        let layers = (0..c.num_hidden_layers)
            .map(|i| Layer::load(encoder.pp("layer").pp(i.to_string()), c))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            words: embedding(c.vocab_size, c.hidden_size, e.pp("word_embeddings"))?,
            positions: embedding(
                c.max_position_embeddings,
                c.hidden_size,
                e.pp("position_embeddings"),
            )?,
            embedding_norm: layer_norm(c.hidden_size, c.layer_norm_eps, e.pp("LayerNorm"))?,
            layers,
            relative_bias: encoder.pp("relative_attention_bias").get(
                (c.relative_attention_num_buckets, c.num_attention_heads),
                "weight",
            )?,
            buckets: c.relative_attention_num_buckets,
            heads: c.num_attention_heads,
            pad_id: c.pad_token_id,
            device: vb.device().clone(),
        })
    }

    /// `ids` and `mask` are `[batch, tokens]` row-major, padded on the right; returns the
    /// last hidden states, `[batch, tokens, hidden]`.
    pub(crate) fn forward(
        &self,
        ids: &[u32],
        mask: &[u32],
        rows: usize,
        tokens: usize,
    ) -> Result<Tensor> {
        let shape = (rows, tokens);
        let ids = Tensor::from_slice(ids, shape, &self.device)?;
        // Real tokens sit at pad_id + 1 + index; padding at pad_id (Hugging Face's
        // `create_position_ids_from_input_ids` for right-padded input).
        let position_ids: Vec<u32> = mask
            .iter()
            .enumerate()
            .map(|(i, &m)| {
                let at = if m == 0 {
                    self.pad_id
                } else {
                    self.pad_id + 1 + i % tokens.max(1)
                };
                at as u32
            })
            .collect();
        let positions = Tensor::from_vec(position_ids, shape, &self.device)?;
        let embedded = (self.words.forward(&ids)? + self.positions.forward(&positions)?)?;
        let mut hidden = self.embedding_norm.forward(&embedded)?;

        let bias = self
            .position_bias(tokens)?
            .broadcast_add(&self.padding_mask(mask, rows, tokens)?)?;
        for layer in &self.layers {
            hidden = layer.forward(&hidden, &bias)?;
        }
        Ok(hidden)
    }

    /// `[1, heads, t, t]`: the learned bias of each query-key distance, by head.
    fn position_bias(&self, tokens: usize) -> Result<Tensor> {
        let mut buckets = Vec::with_capacity(tokens * tokens);
        for query in 0..tokens as i64 {
            for key in 0..tokens as i64 {
                buckets.push(relative_position_bucket(key - query, self.buckets) as u32);
            }
        }
        let buckets = Tensor::from_vec(buckets, tokens * tokens, &self.device)?;
        self.relative_bias
            .index_select(&buckets, 0)?
            .reshape((tokens, tokens, self.heads))?
            .permute((2, 0, 1))?
            .unsqueeze(0)?
            .contiguous()
    }

    /// `[batch, 1, 1, t]`: 0 where a key is a real token, a large negative where padding.
    fn padding_mask(&self, mask: &[u32], rows: usize, tokens: usize) -> Result<Tensor> {
        let values: Vec<f32> = mask
            .iter()
            .map(|&m| if m == 0 { f32::MIN } else { 0.0 })
            .collect();
        Tensor::from_vec(values, (rows, 1, 1, tokens), &self.device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_hugging_face_at_their_edges() {
        // Worked by hand from transformers' MPNetEncoder.relative_position_bucket with
        // 32 buckets: exact below 8 each way, log-spaced to 128, the far side offset by 16.
        let cases = [
            (0, 0),
            (-1, 1),
            (-7, 7),
            (-8, 8),
            (-11, 8),
            (-12, 9),
            (-16, 10),
            (-128, 15),
            (-400, 15),
            (1, 17),
            (7, 23),
            (8, 24),
            (16, 26),
            (500, 31),
        ];
        for (relative, bucket) in cases {
            assert_eq!(
                relative_position_bucket(relative, 32),
                bucket,
                "relative {relative}"
            );
        }
    }
}
