//! The model provider seam: one trait for embedding and generation, bring-your-own-key.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::ProviderError;
use crate::signature::EmbeddingSignature;

/// What an embedding is for. Providers that distinguish the two (Gemini's task types)
/// embed stored documents and search queries differently; others ignore it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EmbedTask {
    Document,
    Query,
}

/// Token counts of one call, as the provider reported them (0 where it reports none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl TokenUsage {
    pub fn add(&mut self, other: TokenUsage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// The vectors of one embed call, one per input text, in input order.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedResult {
    pub vectors: Vec<Vec<f32>>,
    pub usage: TokenUsage,
}

/// The text of one generate call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenResult {
    pub text: String,
    pub usage: TokenUsage,
}

/// A model provider. Implementations read credentials from the environment only and never
/// log them.
#[async_trait]
pub trait LLMProvider: Send + Sync + std::fmt::Debug {
    /// A short stable name ("gemini", "openai", "fake"), used in errors and accounting.
    fn name(&self) -> &str;

    /// The model and dimension of the vectors [`embed`](Self::embed) returns.
    fn embedding_signature(&self) -> EmbeddingSignature;

    /// Embeds `texts` in one logical call, returning one vector per text in order.
    async fn embed(&self, texts: &[String], task: EmbedTask) -> Result<EmbedResult, ProviderError>;

    /// Generates text for `prompt`.
    async fn generate(
        &self,
        prompt: &str,
        temperature: f32,
        max_output_tokens: u32,
    ) -> Result<GenResult, ProviderError>;
}

// Forward every method so a wrapped provider never loses an override.
macro_rules! forward_provider {
    ($($ptr:ident),*) => {$(
        #[async_trait]
        impl<P: LLMProvider + ?Sized> LLMProvider for $ptr<P> {
            fn name(&self) -> &str {
                (**self).name()
            }
            fn embedding_signature(&self) -> EmbeddingSignature {
                (**self).embedding_signature()
            }
            async fn embed(
                &self,
                texts: &[String],
                task: EmbedTask,
            ) -> Result<EmbedResult, ProviderError> {
                (**self).embed(texts, task).await
            }
            async fn generate(
                &self,
                prompt: &str,
                temperature: f32,
                max_output_tokens: u32,
            ) -> Result<GenResult, ProviderError> {
                (**self).generate(prompt, temperature, max_output_tokens).await
            }
        }
    )*};
}

forward_provider!(Arc, Box);
