//! A deterministic, offline provider for tests and demos. Not semantic: embeddings are
//! feature hashes of the core tokens, so only lexical overlap makes texts similar.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use cortex_core::tokenizer::words;
use cortex_core::{
    error::ProviderError, provider::EmbedResult, provider::EmbedTask, provider::GenResult,
    provider::LLMProvider, provider::TokenUsage, signature::EmbeddingSignature,
};

/// Default model name recorded in a store's signature.
pub const FAKE_MODEL: &str = "fake-hash";

/// Feature-hashing embedder with scripted generation and call counters.
#[derive(Debug)]
pub struct FakeProvider {
    model: String,
    dimension: usize,
    answers: Mutex<VecDeque<Result<String, ProviderError>>>,
    fail_embeds: AtomicBool,
    embed_calls: AtomicU64,
    embedded_texts: AtomicU64,
    generate_calls: AtomicU64,
}

impl FakeProvider {
    pub fn new(dimension: usize) -> Self {
        Self {
            model: FAKE_MODEL.to_owned(),
            dimension: dimension.max(1),
            answers: Mutex::new(VecDeque::new()),
            fail_embeds: AtomicBool::new(false),
            embed_calls: AtomicU64::new(0),
            embedded_texts: AtomicU64::new(0),
            generate_calls: AtomicU64::new(0),
        }
    }

    /// The same embedder under another model name (to exercise the signature guard).
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Queues the text the next `generate` call returns.
    pub fn push_answer(&self, text: impl Into<String>) {
        self.queue().push_back(Ok(text.into()));
    }

    /// Queues an error for the next `generate` call.
    pub fn push_failure(&self, error: ProviderError) {
        self.queue().push_back(Err(error));
    }

    /// Makes every following `embed` call fail (or succeed again).
    pub fn set_fail_embeds(&self, fail: bool) {
        self.fail_embeds.store(fail, Ordering::SeqCst);
    }

    pub fn embed_calls(&self) -> u64 {
        self.embed_calls.load(Ordering::SeqCst)
    }

    pub fn embedded_texts(&self) -> u64 {
        self.embedded_texts.load(Ordering::SeqCst)
    }

    pub fn generate_calls(&self) -> u64 {
        self.generate_calls.load(Ordering::SeqCst)
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Result<String, ProviderError>>> {
        self.answers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The vector for one text: each token adds ±1 at a hashed position.
    pub fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dimension];
        for token in words(text) {
            self.add_feature(&mut v, &token);
        }
        if v.iter().all(|x| *x == 0.0) {
            // No tokens (emoji only, say) or cancelling collisions: hash the whole text so
            // every input still gets a usable, deterministic vector.
            self.add_feature(&mut v, text.trim());
            if v.iter().all(|x| *x == 0.0) {
                v[0] = 1.0;
            }
        }
        v
    }

    fn add_feature(&self, v: &mut [f32], feature: &str) {
        let h = fnv1a(feature.as_bytes());
        let slot = (h % self.dimension as u64) as usize;
        let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
        v[slot] += sign;
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[async_trait]
impl LLMProvider for FakeProvider {
    fn name(&self) -> &str {
        "fake"
    }

    fn embedding_signature(&self) -> EmbeddingSignature {
        EmbeddingSignature::new(self.model.clone(), self.dimension)
    }

    async fn embed(
        &self,
        texts: &[String],
        _task: EmbedTask,
    ) -> Result<EmbedResult, ProviderError> {
        self.embed_calls.fetch_add(1, Ordering::SeqCst);
        if self.fail_embeds.load(Ordering::SeqCst) {
            return Err(ProviderError::Transport {
                provider: "fake",
                message: "embedding failure injected by the test".into(),
            });
        }
        self.embedded_texts
            .fetch_add(texts.len() as u64, Ordering::SeqCst);
        let input_tokens = texts.iter().map(|t| words(t).len() as u64).sum();
        Ok(EmbedResult {
            vectors: texts.iter().map(|t| self.vector(t)).collect(),
            usage: TokenUsage {
                input_tokens,
                output_tokens: 0,
            },
        })
    }

    async fn generate(
        &self,
        prompt: &str,
        _temperature: f32,
        _max_output_tokens: u32,
    ) -> Result<GenResult, ProviderError> {
        self.generate_calls.fetch_add(1, Ordering::SeqCst);
        let next = self.queue().pop_front().unwrap_or_else(|| {
            Err(ProviderError::InvalidResponse {
                provider: "fake",
                message: "no scripted answer left".into(),
            })
        });
        let text = next?;
        Ok(GenResult {
            usage: TokenUsage {
                input_tokens: words(prompt).len() as u64,
                output_tokens: words(&text).len() as u64,
            },
            text,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cortex_core::embedding::cosine;

    #[tokio::test]
    async fn embeddings_are_deterministic_and_lexically_similar() {
        let p = FakeProvider::new(256);
        let texts: Vec<String> = [
            "the red fox jumps",
            "a red fox sleeps",
            "quantum chromodynamics",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let a = p.embed(&texts, EmbedTask::Document).await.unwrap();
        let b = p.embed(&texts, EmbedTask::Query).await.unwrap();
        assert_eq!(a.vectors, b.vectors);
        assert_eq!(a.vectors[0].len(), 256);
        let related = cosine(&a.vectors[0], &a.vectors[1]);
        let unrelated = cosine(&a.vectors[0], &a.vectors[2]);
        assert!(
            related > 0.3 && related > unrelated + 0.2,
            "{related} vs {unrelated}"
        );
        assert_eq!(p.embed_calls(), 2);
        assert_eq!(p.embedded_texts(), 6);
        assert_eq!(a.usage.input_tokens, 4 + 4 + 2);
    }

    #[tokio::test]
    async fn tokenless_text_still_gets_a_nonzero_vector() {
        let p = FakeProvider::new(8);
        let v = p.vector("🎉🎉");
        assert!(v.iter().any(|x| *x != 0.0));
        assert_ne!(p.vector("🎉"), p.vector("🎈"));
    }

    #[tokio::test]
    async fn generate_returns_scripted_answers_then_fails() {
        let p = FakeProvider::new(8);
        p.push_answer("first");
        p.push_failure(ProviderError::Config("boom".into()));
        assert_eq!(p.generate("q", 0.0, 10).await.unwrap().text, "first");
        assert!(p.generate("q", 0.0, 10).await.is_err());
        assert!(matches!(
            p.generate("q", 0.0, 10).await,
            Err(ProviderError::InvalidResponse { .. })
        ));
        assert_eq!(p.generate_calls(), 3);
    }

    #[tokio::test]
    async fn injected_embed_failures() {
        let p = FakeProvider::new(8);
        p.set_fail_embeds(true);
        assert!(p.embed(&["x".into()], EmbedTask::Document).await.is_err());
        p.set_fail_embeds(false);
        assert!(p.embed(&["x".into()], EmbedTask::Document).await.is_ok());
    }
}
