//! The local embedder behind core's provider trait.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use cortex_core::{
    error::ProviderError, provider::EmbedResult, provider::EmbedTask, provider::GenResult,
    provider::LLMProvider, provider::TokenUsage, signature::EmbeddingSignature,
};

use super::bert::BertEncoder;
use super::files::inspect;
use super::model2vec::StaticModel;
use super::settings::{DEFAULT_LOCAL_BATCH_SIZE, LocalModelKind};
use crate::vectors::check_vectors;

/// How to load a model directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalOptions {
    /// Forces the kind instead of detecting it from the files.
    pub kind: Option<LocalModelKind>,
    /// Texts per forward pass (BERT only).
    pub batch_size: usize,
    /// The name in the signature; the directory's name when `None`.
    pub model_name: Option<String>,
    /// The dimension the caller expects; loading fails if the model's differs.
    pub dimension: Option<usize>,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            kind: None,
            batch_size: DEFAULT_LOCAL_BATCH_SIZE,
            model_name: None,
            dimension: None,
        }
    }
}

// Built once and only ever held behind an Arc, so the variants' sizes never matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Encoder {
    Bert(BertEncoder),
    Static(StaticModel),
}

/// An in-process embedder: no key, no network, CPU only. Embedding only; `generate`
/// is [`ProviderError::Unsupported`]. The task (document or query) is ignored, as the
/// supported models embed both alike. Cloning shares the loaded model.
#[derive(Debug, Clone)]
pub struct LocalProvider {
    encoder: Arc<Encoder>,
    kind: LocalModelKind,
    signature: EmbeddingSignature,
    batch_size: usize,
}

impl LocalProvider {
    /// Loads the model in `dir`: reads every weight, so this takes a moment (0.25 s for
    /// all-MiniLM-L6-v2 in a release build) and should happen once, at startup.
    pub fn load(dir: &Path, options: &LocalOptions) -> Result<Self, ProviderError> {
        let info = inspect(dir, options.kind)?;
        check_dimension(dir, info.dimension, options.dimension)?;
        let encoder = match info.kind {
            LocalModelKind::Bert => Encoder::Bert(BertEncoder::load(dir)?),
            LocalModelKind::Model2Vec => Encoder::Static(StaticModel::load(dir)?),
        };
        let model = options.model_name.clone().unwrap_or(info.name);
        Ok(Self {
            encoder: Arc::new(encoder),
            kind: info.kind,
            signature: EmbeddingSignature::new(model, info.dimension),
            batch_size: options.batch_size.max(1),
        })
    }

    /// The same loaded model with another batch size.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    pub fn kind(&self) -> LocalModelKind {
        self.kind
    }

    /// The longest input in tokens; the rest of a longer text is ignored.
    pub fn max_tokens(&self) -> usize {
        match &*self.encoder {
            Encoder::Bert(bert) => bert.max_tokens(),
            Encoder::Static(model) => model.max_tokens(),
        }
    }

    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Embeds on the calling thread. [`LLMProvider::embed`] runs this on tokio's
    /// blocking pool; call it directly only from synchronous code.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<EmbedResult, ProviderError> {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (vectors, input_tokens) = match &*self.encoder {
            Encoder::Bert(bert) => bert.embed(&texts, self.batch_size)?,
            Encoder::Static(model) => model.embed(&texts)?,
        };
        check_vectors("local", &vectors, texts.len(), self.signature.dimension)?;
        Ok(EmbedResult {
            vectors,
            usage: TokenUsage {
                input_tokens,
                output_tokens: 0,
            },
        })
    }
}

pub(crate) fn check_dimension(
    dir: &Path,
    actual: usize,
    expected: Option<usize>,
) -> Result<(), ProviderError> {
    match expected {
        Some(expected) if expected != actual => Err(ProviderError::Config(format!(
            "CORTEX_EMBED_DIM={expected}, but the local model in {} produces {actual}-dimensional \
             vectors; set CORTEX_EMBED_DIM={actual} or unset it",
            dir.display()
        ))),
        _ => Ok(()),
    }
}

#[async_trait]
impl LLMProvider for LocalProvider {
    fn name(&self) -> &str {
        "local"
    }

    fn embedding_signature(&self) -> EmbeddingSignature {
        self.signature.clone()
    }

    async fn embed(
        &self,
        texts: &[String],
        _task: EmbedTask,
    ) -> Result<EmbedResult, ProviderError> {
        if texts.is_empty() {
            return Ok(EmbedResult {
                vectors: Vec::new(),
                usage: TokenUsage::default(),
            });
        }
        // Inference takes milliseconds to seconds of CPU: on a runtime worker it would
        // stall every other task, so it goes to the blocking pool when there is one.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return self.embed_blocking(texts);
        };
        let this = self.clone();
        let texts = texts.to_vec();
        runtime
            .spawn_blocking(move || this.embed_blocking(&texts))
            .await
            .map_err(|e| ProviderError::InvalidResponse {
                provider: "local",
                message: format!("the embedding task failed: {e}"),
            })?
    }

    async fn generate(
        &self,
        _prompt: &str,
        _temperature: f32,
        _max_output_tokens: u32,
    ) -> Result<GenResult, ProviderError> {
        Err(ProviderError::Unsupported {
            provider: "local",
            operation: "generation",
        })
    }
}
