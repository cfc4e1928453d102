//! sentence-transformers encoders run through candle on the CPU: BERT models
//! (all-MiniLM-L6-v2, BGE, …) and MPNet (all-mpnet-base-v2). Tokenize, sort by length,
//! pad each batch to its longest input, run the encoder, pool over the attention mask,
//! L2-normalise.

use std::fmt;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use cortex_core::error::ProviderError;
use tokenizers::{Encoding, Tokenizer};

use super::files::{CONFIG, TOKENIZER, WEIGHTS, config_error, read_json_object_if_present};
use super::mpnet::{MpNetConfig, MpNetModel};
use super::pooling::Pooling;
use super::tokenize::{encode, load_tokenizer};
use crate::vectors::l2_normalize;

/// The transformer under a sentence encoder, by `config.json`'s `model_type`.
pub(crate) enum Network {
    Bert(BertModel),
    MpNet(MpNetModel),
}

/// A `config.json` the local embedder can run.
pub(crate) enum NetworkConfig {
    Bert(Config),
    MpNet(MpNetConfig),
}

impl NetworkConfig {
    fn hidden_size(&self) -> usize {
        match self {
            Self::Bert(c) => c.hidden_size,
            Self::MpNet(c) => c.hidden_size,
        }
    }

    /// The positions a text may use: MPNet's first real position is `pad_token_id + 1`.
    fn max_positions(&self) -> usize {
        match self {
            Self::Bert(c) => c.max_position_embeddings,
            Self::MpNet(c) => c.max_position_embeddings.saturating_sub(c.pad_token_id + 1),
        }
    }

    fn pad_token_id(&self) -> usize {
        match self {
            Self::Bert(c) => c.pad_token_id,
            Self::MpNet(c) => c.pad_token_id,
        }
    }

    fn load(&self, vars: VarBuilder) -> candle_core::Result<Network> {
        match self {
            Self::Bert(c) => BertModel::load(vars, c).map(Network::Bert),
            Self::MpNet(c) => MpNetModel::load(vars, c).map(Network::MpNet),
        }
    }
}

/// A loaded sentence encoder.
pub(crate) struct BertEncoder {
    model: Network,
    tokenizer: Tokenizer,
    pooling: Pooling,
    max_tokens: usize,
    pad_id: u32,
    dimension: usize,
    device: Device,
}

// BertModel has no Debug; the shape is what matters when printing a provider.
impl fmt::Debug for BertEncoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BertEncoder")
            .field("dimension", &self.dimension)
            .field("max_tokens", &self.max_tokens)
            .field("pooling", &self.pooling)
            .finish_non_exhaustive()
    }
}

impl BertEncoder {
    pub(crate) fn load(dir: &Path) -> Result<Self, ProviderError> {
        let config = read_network_config(dir)?;
        let max_tokens = max_sequence_length(dir, config.max_positions())?;
        let pooling = Pooling::from_model_dir(dir)?;
        let tokenizer = load_tokenizer(&dir.join(TOKENIZER), Some(max_tokens))?;
        let pad_id = to_token_id(dir, config.pad_token_id())?;
        let device = Device::Cpu;
        let vars = read_weights(dir, &device)?;
        let model = config.load(vars).map_err(weights_error(dir))?;
        Ok(Self {
            model,
            tokenizer,
            pooling,
            max_tokens,
            pad_id,
            dimension: config.hidden_size(),
            device,
        })
    }

    /// The longest input, in tokens with `[CLS]` and `[SEP]`; longer texts are cut.
    pub(crate) fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Unit vectors for `texts` in order, and the number of tokens the model saw.
    pub(crate) fn embed(
        &self,
        texts: &[&str],
        batch_size: usize,
    ) -> Result<(Vec<Vec<f32>>, u64), ProviderError> {
        let encodings = encode(&self.tokenizer, texts, true)?;
        if let Some(i) = encodings.iter().position(|e| e.is_empty()) {
            return Err(invalid(format!("text {i} produced no tokens")));
        }
        let tokens = encodings.iter().map(|e| e.len() as u64).sum();

        // Sorting by length keeps texts of similar size together, so a batch pads little.
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut vectors = vec![Vec::new(); encodings.len()];
        for chunk in order.chunks(batch_size.max(1)) {
            let batch: Vec<&Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
            for (&i, vector) in chunk.iter().zip(self.embed_batch(&batch)?) {
                vectors[i] = vector;
            }
        }
        Ok((vectors, tokens))
    }

    fn embed_batch(&self, batch: &[&Encoding]) -> Result<Vec<Vec<f32>>, ProviderError> {
        let padded = Padded::new(batch, self.pad_id);
        let hidden = match &self.model {
            Network::Bert(model) => padded.forward(model, &self.device),
            Network::MpNet(model) => {
                model.forward(&padded.ids, &padded.mask, padded.rows, padded.longest)
            }
        }
        .and_then(|hidden| hidden.to_vec3::<f32>())
        .map_err(|e| invalid(format!("encoder inference failed: {e}")))?;
        Ok(hidden
            .iter()
            .zip(padded.mask.chunks(padded.longest.max(1)))
            .map(|(tokens, mask)| {
                let mut vector = self.pooling.pool(tokens, mask);
                l2_normalize(&mut vector);
                vector
            })
            .collect())
    }
}

/// A batch of encodings padded to its longest: token ids, segment ids and the mask.
pub(crate) struct Padded {
    ids: Vec<u32>,
    type_ids: Vec<u32>,
    pub(crate) mask: Vec<u32>,
    pub(crate) longest: usize,
    rows: usize,
}

impl Padded {
    pub(crate) fn new(batch: &[&Encoding], pad_id: u32) -> Self {
        let longest = batch.iter().map(|e| e.len()).max().unwrap_or(0);
        let cells = batch.len() * longest;
        let (mut ids, mut type_ids, mut mask) = (
            Vec::with_capacity(cells),
            Vec::with_capacity(cells),
            Vec::with_capacity(cells),
        );
        for encoding in batch {
            let padding = longest - encoding.len();
            ids.extend_from_slice(encoding.get_ids());
            ids.extend(std::iter::repeat_n(pad_id, padding));
            type_ids.extend_from_slice(encoding.get_type_ids());
            type_ids.extend(std::iter::repeat_n(0, padding));
            mask.extend_from_slice(encoding.get_attention_mask());
            mask.extend(std::iter::repeat_n(0, padding));
        }
        Self {
            ids,
            type_ids,
            mask,
            longest,
            rows: batch.len(),
        }
    }

    /// The encoder's last hidden states, `[rows, longest, hidden]`.
    pub(crate) fn forward(
        &self,
        model: &BertModel,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        let shape = (self.rows, self.longest);
        let tensor = |data: &[u32]| Tensor::from_vec(data.to_vec(), shape, device);
        model.forward(
            &tensor(&self.ids)?,
            &tensor(&self.type_ids)?,
            Some(&tensor(&self.mask)?),
        )
    }
}

/// `dir/config.json` of a sentence encoder: BERT, or MPNet (`model_type` "mpnet").
fn read_network_config(dir: &Path) -> Result<NetworkConfig, ProviderError> {
    let config_path = dir.join(CONFIG);
    let object = super::files::read_json_object(&config_path)?;
    if object.get("model_type").and_then(serde_json::Value::as_str) != Some("mpnet") {
        return read_config(dir).map(NetworkConfig::Bert);
    }
    serde_json::from_value(serde_json::Value::Object(object))
        .map(NetworkConfig::MpNet)
        .map_err(|e| {
            config_error(format!(
                "{} is not an MPNet config this build can load: {e}",
                config_path.display()
            ))
        })
}

/// `dir/config.json`, refused unless it is a BERT config candle can run.
pub(crate) fn read_config(dir: &Path) -> Result<Config, ProviderError> {
    let config_path = dir.join(CONFIG);
    let text = std::fs::read_to_string(&config_path)
        .map_err(|e| config_error(format!("cannot read {}: {e}", config_path.display())))?;
    let config: Config = serde_json::from_str(&text).map_err(|e| {
        config_error(format!(
            "{} is not a BERT config candle can load: {e}",
            config_path.display()
        ))
    })?;
    // RoBERTa, DistilBERT and friends read the same fields but lay their weights
    // or positions out differently: refusing beats producing plausible garbage.
    if let Some(model_type) = config.model_type.as_deref()
        && model_type != "bert"
    {
        return Err(config_error(format!(
            "{}: model_type {model_type:?} is not supported; the local models are \
             BERT and MPNet models (model_type \"bert\" or \"mpnet\") and model2vec \
             static models",
            config_path.display()
        )));
    }
    Ok(config)
}

/// The padding token's id, as the tokenizer's ids are typed.
pub(crate) fn pad_id(dir: &Path, config: &Config) -> Result<u32, ProviderError> {
    to_token_id(dir, config.pad_token_id)
}

fn to_token_id(dir: &Path, id: usize) -> Result<u32, ProviderError> {
    u32::try_from(id).map_err(|_| {
        config_error(format!(
            "{}: pad_token_id is too large",
            dir.join(CONFIG).display()
        ))
    })
}

/// `dir/model.safetensors`, in float32 on `device`.
pub(crate) fn read_weights(
    dir: &Path,
    device: &Device,
) -> Result<VarBuilder<'static>, ProviderError> {
    let weights_path = dir.join(WEIGHTS);
    // Read rather than memory-mapped: mapping needs `unsafe`, which this crate forbids,
    // and a sentence model is small enough to hold.
    let weights = std::fs::read(&weights_path)
        .map_err(|e| config_error(format!("cannot read {}: {e}", weights_path.display())))?;
    VarBuilder::from_buffered_safetensors(weights, DType::F32, device).map_err(weights_error(dir))
}

/// The error for weights that do not load as the config describes.
pub(crate) fn weights_error(dir: &Path) -> impl Fn(candle_core::Error) -> ProviderError + '_ {
    move |e| {
        config_error(format!(
            "cannot load the encoder's weights in {}: {e}",
            dir.join(WEIGHTS).display()
        ))
    }
}

/// The model's position limit, lowered to sentence-transformers' `max_seq_length` when
/// the model ships one (256 for all-MiniLM-L6-v2): the model was trained at that length
/// and its reference vectors are computed with it.
fn max_sequence_length(dir: &Path, max_position_embeddings: usize) -> Result<usize, ProviderError> {
    let path = dir.join("sentence_bert_config.json");
    let configured = read_json_object_if_present(&path)?
        .and_then(|c| c.get("max_seq_length").and_then(serde_json::Value::as_u64))
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n > 0);
    let limit = configured.map_or(max_position_embeddings, |n| n.min(max_position_embeddings));
    if limit < 2 {
        return Err(config_error(format!(
            "{}: a sequence limit of {limit} tokens leaves no room for text",
            dir.display()
        )));
    }
    Ok(limit)
}

pub(crate) fn invalid(message: String) -> ProviderError {
    ProviderError::InvalidResponse {
        provider: "local",
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_limit_takes_the_smaller_of_model_and_sentence_config() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(max_sequence_length(dir.path(), 512).unwrap(), 512);
        std::fs::write(
            dir.path().join("sentence_bert_config.json"),
            r#"{"max_seq_length": 256, "do_lower_case": false}"#,
        )
        .unwrap();
        assert_eq!(max_sequence_length(dir.path(), 512).unwrap(), 256);
        assert_eq!(max_sequence_length(dir.path(), 128).unwrap(), 128);
        assert!(max_sequence_length(dir.path(), 1).is_err());
    }
}
