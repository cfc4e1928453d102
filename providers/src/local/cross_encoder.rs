//! A BERT cross-encoder (ms-marco-MiniLM-L-12-v2 and its kin) run through candle: it
//! reads the query and one memory as a single input, `[CLS] query [SEP] memory [SEP]`,
//! and scores how well the memory answers the query. The score is the
//! sequence-classification head's one logit: the pooler (dense + tanh on `[CLS]`), then
//! a linear layer to one value.

use std::fmt;
use std::path::Path;

use candle_core::{Device, IndexOp};
use candle_nn::{Linear, Module, linear};
use candle_transformers::models::bert::BertModel;
use cortex_core::error::ProviderError;
use tokenizers::{EncodeInput, Encoding, Tokenizer};

use super::bert::{Padded, invalid, pad_id, read_config, read_weights, weights_error};
use super::files::{TOKENIZER, config_error};
use super::tokenize::load_tokenizer;

/// A loaded cross-encoder.
pub(crate) struct CrossEncoder {
    model: BertModel,
    pooler: Linear,
    classifier: Linear,
    tokenizer: Tokenizer,
    pad_id: u32,
    device: Device,
}

impl fmt::Debug for CrossEncoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrossEncoder").finish_non_exhaustive()
    }
}

impl CrossEncoder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`; the
    /// weights must hold the encoder under `bert.`, `bert.pooler.dense` and a
    /// one-label `classifier`, as Hugging Face's `BertForSequenceClassification` saves.
    pub(crate) fn load(dir: &Path) -> Result<Self, ProviderError> {
        let config = read_config(dir)?;
        let tokenizer = load_tokenizer(&dir.join(TOKENIZER), Some(config.max_position_embeddings))?;
        let pad_id = pad_id(dir, &config)?;
        let device = Device::Cpu;
        let vars = read_weights(dir, &device)?;
        let hidden = config.hidden_size;
        let heads = (|| {
            let pooler = linear(hidden, hidden, vars.pp("bert.pooler.dense"))?;
            let classifier = linear(hidden, 1, vars.pp("classifier"))?;
            Ok::<_, candle_core::Error>((pooler, classifier))
        })();
        let (pooler, classifier) = heads.map_err(|e| {
            config_error(format!(
                "{} holds no one-label classification head (bert.pooler.dense and \
                 classifier): is it a cross-encoder? {e}",
                dir.display()
            ))
        })?;
        let model = BertModel::load(vars, &config).map_err(weights_error(dir))?;
        Ok(Self {
            model,
            pooler,
            classifier,
            tokenizer,
            pad_id,
            device,
        })
    }

    /// One relevance logit per document, in the documents' order (higher is more
    /// relevant), and the number of tokens the model read. A pair longer than the
    /// model's limit is cut, the longer of query and document first.
    pub(crate) fn scores(
        &self,
        query: &str,
        documents: &[&str],
        batch_size: usize,
    ) -> Result<(Vec<f32>, u64), ProviderError> {
        let pairs: Vec<EncodeInput<'_>> = documents
            .iter()
            .map(|&document| (query, document).into())
            .collect();
        let encodings = self
            .tokenizer
            .encode_batch(pairs, true)
            .map_err(|e| invalid(format!("tokenization failed: {e}")))?;
        let tokens = encodings.iter().map(|e| e.len() as u64).sum();
        // Pairs of similar length share a batch, so a batch pads little.
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut scores = vec![0.0; encodings.len()];
        for chunk in order.chunks(batch_size.max(1)) {
            let batch: Vec<&Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
            for (&i, score) in chunk.iter().zip(self.score_batch(&batch)?) {
                scores[i] = score;
            }
        }
        Ok((scores, tokens))
    }

    fn score_batch(&self, batch: &[&Encoding]) -> Result<Vec<f32>, ProviderError> {
        let padded = Padded::new(batch, self.pad_id);
        let logits = padded
            .forward(&self.model, &self.device)
            .and_then(|hidden| hidden.i((.., 0))?.contiguous())
            .and_then(|cls| self.pooler.forward(&cls)?.tanh())
            .and_then(|pooled| self.classifier.forward(&pooled)?.squeeze(1))
            .and_then(|logits| logits.to_vec1::<f32>())
            .map_err(|e| invalid(format!("cross-encoder inference failed: {e}")))?;
        if let Some(bad) = logits.iter().find(|l| !l.is_finite()) {
            return Err(invalid(format!("the cross-encoder scored {bad}")));
        }
        Ok(logits)
    }
}
