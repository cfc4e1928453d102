//! A provider wrapper that answers repeated requests from a [`ResponseCache`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use cortex_core::{
    error::ProviderError, provider::EmbedResult, provider::EmbedTask, provider::GenResult,
    provider::LLMProvider, provider::TokenUsage, signature::EmbeddingSignature,
};

use cortex_providers::check_vectors;

use crate::response_cache::{EmbedKey, GenKey, ResponseCache};

/// Memoizes `inner`'s embeddings per text, keyed by (provider name, embedding model,
/// dimension, task, text), and its generations, keyed by (provider name, generation
/// model, temperature, max output tokens, prompt).
///
/// A batch whose texts are partly cached sends only the misses, in one call. Usage
/// reports what this call spent: cached texts and answers cost 0 tokens.
///
/// The generation model is given explicitly because the provider trait exposes only
/// the embedding model; without it two generation models would share answers.
#[derive(Debug)]
pub struct CachingProvider<P> {
    inner: P,
    cache: Arc<ResponseCache>,
    generation_model: String,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl<P: LLMProvider> CachingProvider<P> {
    pub fn new(inner: P, cache: Arc<ResponseCache>, generation_model: impl Into<String>) -> Self {
        Self {
            inner,
            cache,
            generation_model: generation_model.into(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    pub fn inner(&self) -> &P {
        &self.inner
    }

    pub fn cache(&self) -> &Arc<ResponseCache> {
        &self.cache
    }

    /// Texts and prompts answered from the cache so far.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Texts and prompts sent to the provider so far.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    fn embed_key(&self, signature: &EmbeddingSignature, task: EmbedTask, text: &str) -> EmbedKey {
        EmbedKey {
            provider: self.inner.name().to_owned(),
            model: signature.model.clone(),
            dimension: signature.dimension,
            task,
            text: text.to_owned(),
        }
    }
}

#[async_trait]
impl<P: LLMProvider> LLMProvider for CachingProvider<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn embedding_signature(&self) -> EmbeddingSignature {
        self.inner.embedding_signature()
    }

    async fn embed(&self, texts: &[String], task: EmbedTask) -> Result<EmbedResult, ProviderError> {
        let signature = self.inner.embedding_signature();
        let mut vectors: Vec<Option<Vec<f32>>> = Vec::with_capacity(texts.len());
        // Distinct uncached texts, and for each output slot that needs one, which.
        let mut misses: Vec<String> = Vec::new();
        let mut miss_index: HashMap<&str, usize> = HashMap::new();
        let mut pending: Vec<(usize, usize)> = Vec::new();
        let keys: Vec<EmbedKey> = texts
            .iter()
            .map(|text| self.embed_key(&signature, task, text))
            .collect();
        let cached = self.cache.get_embeddings(&keys).await;
        for ((slot, text), cached) in texts.iter().enumerate().zip(cached) {
            match cached {
                Some(vector) => vectors.push(Some(vector)),
                None => {
                    let index = *miss_index.entry(text.as_str()).or_insert_with(|| {
                        misses.push(text.clone());
                        misses.len() - 1
                    });
                    pending.push((slot, index));
                    vectors.push(None);
                }
            }
        }
        let hits = texts.len() - pending.len();
        self.hits.fetch_add(hits as u64, Ordering::Relaxed);
        self.misses
            .fetch_add(misses.len() as u64, Ordering::Relaxed);

        let mut usage = TokenUsage::default();
        if !misses.is_empty() {
            let fresh = self.inner.embed(&misses, task).await?;
            // Never cache (or index into) an answer that does not fit the request.
            check_vectors("cache", &fresh.vectors, misses.len(), signature.dimension)?;
            usage = fresh.usage;
            for (slot, index) in pending {
                vectors[slot] = fresh.vectors.get(index).cloned();
            }
            let entries = misses
                .into_iter()
                .zip(fresh.vectors)
                .map(|(text, vector)| (self.embed_key(&signature, task, &text), vector))
                .collect();
            self.cache.put_embeddings(entries).await;
        }
        let vectors = vectors
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| ProviderError::InvalidResponse {
                provider: "cache",
                message: "a text was left without a vector".into(),
            })?;
        Ok(EmbedResult { vectors, usage })
    }

    async fn generate(
        &self,
        prompt: &str,
        temperature: f32,
        max_output_tokens: u32,
    ) -> Result<GenResult, ProviderError> {
        let key = GenKey {
            provider: self.inner.name().to_owned(),
            model: self.generation_model.clone(),
            temperature_bits: temperature.to_bits(),
            max_output_tokens,
            prompt: prompt.to_owned(),
        };
        if let Some(text) = self.cache.get_generation(&key).await {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(GenResult {
                text,
                usage: TokenUsage::default(),
            });
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let answer = self
            .inner
            .generate(prompt, temperature, max_output_tokens)
            .await?;
        self.cache
            .put_generation(key, answer.text.clone(), answer.usage)
            .await;
        Ok(answer)
    }
}
