//! model2vec static models (potion-base-8M, …): every token has a fixed vector, and a
//! text is the mean of its tokens' vectors. No transformer runs, so it is orders of
//! magnitude faster than BERT, for somewhat lower quality.
//!
//! Follows the reference implementation (the `model2vec` package and `model2vec-rs`):
//! no special tokens, the unknown token skipped, at most 512 tokens (after cutting the
//! text to 512 × the vocabulary's median token length), optional per-token `weights`
//! and a `mapping` from token to matrix row (vocabulary-quantized models). Vectors are
//! always L2-normalised, whatever `config.json` says, because every Cortex embedder
//! returns unit vectors.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use cortex_core::error::ProviderError;
use serde_json::Value;
use tokenizers::Tokenizer;

use super::files::{STATIC_EMBEDDING_TENSORS, TOKENIZER, WEIGHTS, config_error, read_json_object};
use super::tokenize::{encode, load_tokenizer};
use crate::vectors::l2_normalize;

/// model2vec's default `max_length`.
pub(crate) const STATIC_MAX_TOKENS: usize = 512;

/// A loaded static model.
#[derive(Debug)]
pub(crate) struct StaticModel {
    tokenizer: Tokenizer,
    /// Row-major, `dimension` columns.
    matrix: Vec<f32>,
    dimension: usize,
    weights: Option<Vec<f32>>,
    mapping: Option<Vec<usize>>,
    unk_id: Option<u32>,
    max_chars: usize,
}

impl StaticModel {
    pub(crate) fn load(dir: &Path) -> Result<Self, ProviderError> {
        let tokenizer_path = dir.join(TOKENIZER);
        let tokenizer = load_tokenizer(&tokenizer_path, None)?;
        let weights_path = dir.join(WEIGHTS);
        let fail = |what: String| config_error(format!("{}: {what}", weights_path.display()));
        let bytes = std::fs::read(&weights_path).map_err(|e| fail(format!("cannot read: {e}")))?;
        let tensors = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
            .map_err(|e| fail(format!("not a safetensors file candle can read: {e}")))?;

        let matrix = STATIC_EMBEDDING_TENSORS
            .iter()
            .find_map(|name| tensors.get(*name))
            .ok_or_else(|| fail("no `embeddings` tensor".into()))?;
        let (rows, dimension) = matrix
            .dims2()
            .map_err(|_| fail("`embeddings` is not a matrix".into()))?;
        if rows == 0 || dimension == 0 {
            return Err(fail("`embeddings` is empty".into()));
        }
        let matrix = floats(matrix).map_err(|e| fail(format!("`embeddings`: {e}")))?;
        let weights = optional(&tensors, "weights", floats).map_err(fail)?;
        let mapping = optional(&tensors, "mapping", indices).map_err(fail)?;

        // Checked once here so that encoding can index without bounds failures.
        let vocabulary = tokenizer.get_vocab_size(true);
        let lookup_len = mapping.as_ref().map_or(rows, Vec::len);
        if vocabulary > lookup_len {
            return Err(fail(format!(
                "the tokenizer has {vocabulary} tokens but the model covers only {lookup_len}"
            )));
        }
        if let Some(mapping) = &mapping
            && let Some(bad) = mapping.iter().find(|row| **row >= rows)
        {
            return Err(fail(format!("`mapping` points at row {bad} of {rows}")));
        }
        if let Some(weights) = &weights
            && weights.len() < vocabulary
        {
            return Err(fail(format!(
                "`weights` has {} entries for {vocabulary} tokens",
                weights.len()
            )));
        }

        let unk_id = unknown_token_id(&tokenizer, &tokenizer_path)?;
        let max_chars = STATIC_MAX_TOKENS * median_token_length(&tokenizer);
        Ok(Self {
            tokenizer,
            matrix,
            dimension,
            weights,
            mapping,
            unk_id,
            max_chars,
        })
    }

    pub(crate) fn max_tokens(&self) -> usize {
        STATIC_MAX_TOKENS
    }

    /// Unit vectors for `texts` in order, and the number of tokens averaged.
    pub(crate) fn embed(&self, texts: &[&str]) -> Result<(Vec<Vec<f32>>, u64), ProviderError> {
        // As model2vec does: cutting the text to 512 × the median token length first
        // bounds the tokenizer's work on huge inputs.
        let cut: Vec<&str> = texts
            .iter()
            .map(|text| truncate_chars(text, self.max_chars))
            .collect();
        let encodings = encode(&self.tokenizer, &cut, false)?;
        let mut tokens = 0u64;
        let mut vectors = Vec::with_capacity(encodings.len());
        for (i, encoding) in encodings.iter().enumerate() {
            let ids = encoding.get_ids();
            let ids = &ids[..ids.len().min(STATIC_MAX_TOKENS)];
            tokens += ids.len() as u64;
            let mut vector = self.mean(ids.iter().copied().filter(|id| Some(*id) != self.unk_id));
            if vector.iter().all(|x| *x == 0.0)
                && let Some(unk) = self.unk_id
            {
                // A text of nothing but unknown tokens (emoji, a script the vocabulary
                // lacks) or no tokens at all still needs a vector: the unknown token's
                // own one, rather than an error for the whole batch.
                vector = self.mean(std::iter::once(unk));
            }
            if vector.iter().all(|x| *x == 0.0) {
                return Err(ProviderError::InvalidResponse {
                    provider: "local",
                    message: format!("text {i} has no token the model2vec model knows"),
                });
            }
            l2_normalize(&mut vector);
            vectors.push(vector);
        }
        Ok((vectors, tokens))
    }

    /// The (weighted) mean of the token vectors; zeros for no tokens.
    fn mean(&self, ids: impl Iterator<Item = u32>) -> Vec<f32> {
        let mut sum = vec![0.0f32; self.dimension];
        let mut count = 0usize;
        for id in ids {
            let id = id as usize;
            let row = self
                .mapping
                .as_ref()
                .and_then(|m| m.get(id).copied())
                .unwrap_or(id);
            let scale = self
                .weights
                .as_ref()
                .and_then(|w| w.get(id).copied())
                .unwrap_or(1.0);
            let start = row * self.dimension;
            let Some(values) = self.matrix.get(start..start + self.dimension) else {
                continue;
            };
            for (s, v) in sum.iter_mut().zip(values) {
                *s += v * scale;
            }
            count += 1;
        }
        let count = count.max(1) as f32;
        sum.iter_mut().for_each(|s| *s /= count);
        sum
    }
}

fn optional<T>(
    tensors: &HashMap<String, Tensor>,
    name: &str,
    read: fn(&Tensor) -> Result<Vec<T>, candle_core::Error>,
) -> Result<Option<Vec<T>>, String> {
    tensors
        .get(name)
        .map(|t| read(t).map_err(|e| format!("`{name}`: {e}")))
        .transpose()
}

fn floats(tensor: &Tensor) -> Result<Vec<f32>, candle_core::Error> {
    tensor.to_dtype(DType::F32)?.flatten_all()?.to_vec1()
}

fn indices(tensor: &Tensor) -> Result<Vec<usize>, candle_core::Error> {
    tensor
        .to_dtype(DType::I64)?
        .flatten_all()?
        .to_vec1::<i64>()?
        .into_iter()
        .map(|i| {
            usize::try_from(i).map_err(|_| candle_core::Error::Msg(format!("negative index {i}")))
        })
        .collect()
}

/// The id of the model's unknown token, read from `tokenizer.json` because the
/// `tokenizers` crate does not expose it uniformly across model types.
fn unknown_token_id(tokenizer: &Tokenizer, path: &Path) -> Result<Option<u32>, ProviderError> {
    let json = read_json_object(path)?;
    let model = json.get("model");
    if let Some(token) = model
        .and_then(|m| m.get("unk_token"))
        .and_then(Value::as_str)
    {
        return Ok(tokenizer.token_to_id(token));
    }
    // Unigram models give the id directly.
    Ok(model
        .and_then(|m| m.get("unk_id"))
        .and_then(Value::as_u64)
        .and_then(|id| u32::try_from(id).ok()))
}

/// The median byte length of the vocabulary's tokens (at least 1).
fn median_token_length(tokenizer: &Tokenizer) -> usize {
    let mut lengths: Vec<usize> = tokenizer.get_vocab(false).keys().map(String::len).collect();
    lengths.sort_unstable();
    lengths.get(lengths.len() / 2).copied().unwrap_or(1).max(1)
}

fn truncate_chars(text: &str, max_chars: usize) -> &str {
    text.char_indices()
        .nth(max_chars)
        .map_or(text, |(byte, _)| &text[..byte])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(truncate_chars("héllo", 2), "hé");
        assert_eq!(truncate_chars("hi", 10), "hi");
        assert_eq!(truncate_chars("", 3), "");
    }
}
