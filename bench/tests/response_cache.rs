//! The benchmark's response cache: repeated embeddings and generations are answered
//! from memory or the SQLite file, never sent twice, and the key never reaches the cache.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use async_trait::async_trait;
use cortex_bench::caching_provider::CachingProvider;
use cortex_bench::response_cache::ResponseCache;
use cortex_core::{
    error::ProviderError, provider::EmbedResult, provider::EmbedTask, provider::GenResult,
    provider::LLMProvider, provider::TokenUsage, signature::EmbeddingSignature,
};
use cortex_providers::{ApiKey, FakeProvider, GeminiConfig, GeminiProvider, HttpOptions};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "test-key-5f2a9c1e";

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn cached_fake(cache: Arc<ResponseCache>) -> CachingProvider<FakeProvider> {
    CachingProvider::new(FakeProvider::new(16), cache, "fake-llm")
}

#[tokio::test]
async fn only_uncached_texts_are_sent_in_one_call() {
    let p = cached_fake(Arc::new(ResponseCache::in_memory()));
    let first = p
        .embed(&texts(&["red fox", "blue whale"]), EmbedTask::Document)
        .await
        .unwrap();
    assert_eq!(first.usage.input_tokens, 4);

    let second = p
        .embed(
            &texts(&["blue whale", "green frog", "red fox", "green frog"]),
            EmbedTask::Document,
        )
        .await
        .unwrap();
    // One call carrying the one new distinct text.
    assert_eq!(p.inner().embed_calls(), 2);
    assert_eq!(p.inner().embedded_texts(), 3);
    // Usage is what this call spent: only "green frog".
    assert_eq!(second.usage.input_tokens, 2);
    let fake = FakeProvider::new(16);
    assert_eq!(
        second.vectors,
        vec![
            fake.vector("blue whale"),
            fake.vector("green frog"),
            fake.vector("red fox"),
            fake.vector("green frog")
        ]
    );

    let third = p
        .embed(&texts(&["red fox", "green frog"]), EmbedTask::Document)
        .await
        .unwrap();
    assert_eq!(
        p.inner().embed_calls(),
        2,
        "a fully cached batch calls nothing"
    );
    assert_eq!(third.usage, TokenUsage::default());
    // Hits: 2 in the second call, 2 in the third; the repeated "green frog" was
    // deduplicated, not a hit.
    assert_eq!(p.hits(), 4);
    assert_eq!(p.misses(), 3);

    // The task is part of the key.
    p.embed(&texts(&["red fox"]), EmbedTask::Query)
        .await
        .unwrap();
    assert_eq!(p.inner().embed_calls(), 3);
}

#[tokio::test]
async fn generations_are_keyed_by_parameters() {
    let p = cached_fake(Arc::new(ResponseCache::in_memory()));
    p.inner().push_answer("forty two");
    p.inner().push_answer("something else");
    let a = p.generate("the answer?", 0.0, 50).await.unwrap();
    let b = p.generate("the answer?", 0.0, 50).await.unwrap();
    assert_eq!(a.text, "forty two");
    assert_eq!(b.text, "forty two");
    assert!(a.usage.input_tokens > 0);
    assert_eq!(
        b.usage,
        TokenUsage::default(),
        "a cached answer costs nothing"
    );
    assert_eq!(p.inner().generate_calls(), 1);

    let c = p.generate("the answer?", 0.5, 50).await.unwrap();
    assert_eq!(c.text, "something else");
    assert_eq!(p.inner().generate_calls(), 2);
    // Failures are not cached.
    assert!(p.generate("the answer?", 0.0, 60).await.is_err());
    assert!(p.generate("the answer?", 0.0, 60).await.is_err());
    assert_eq!(p.inner().generate_calls(), 4);
}

#[tokio::test]
async fn the_disk_cache_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    // The harness may name a directory that does not exist yet.
    let file = dir.path().join("runs").join("provider-cache.sqlite");
    let inputs = texts(&["persisted text", "another one"]);
    let first_vectors = {
        let p = cached_fake(Arc::new(ResponseCache::open(&file).unwrap()));
        p.inner().push_answer("stored answer");
        p.generate("prompt", 0.0, 10).await.unwrap();
        p.embed(&inputs, EmbedTask::Document).await.unwrap().vectors
    };

    let cache = Arc::new(ResponseCache::open(&file).unwrap());
    assert_eq!(cache.path(), Some(file.as_path()));
    let p = cached_fake(cache);
    let again = p.embed(&inputs, EmbedTask::Document).await.unwrap();
    assert_eq!(again.vectors, first_vectors);
    assert_eq!(p.inner().embed_calls(), 0);
    let answer = p.generate("prompt", 0.0, 10).await.unwrap();
    assert_eq!(answer.text, "stored answer");
    assert_eq!(p.inner().generate_calls(), 0);

    // Another model does not see those entries.
    let other = CachingProvider::new(
        FakeProvider::new(16).with_model("other-model"),
        Arc::new(ResponseCache::open(&file).unwrap()),
        "other-llm",
    );
    other.embed(&inputs, EmbedTask::Document).await.unwrap();
    assert_eq!(other.inner().embed_calls(), 1);
}

#[tokio::test]
async fn a_second_identical_http_call_makes_no_request() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "embeddings": [{"values": [1.0, 0.0]}, {"values": [0.0, 1.0]}]
        })))
        .expect(1)
        .mount(&server)
        .await;
    let http = HttpOptions::default();
    let gemini = GeminiProvider::new(GeminiConfig {
        base_url: format!("{}/v1beta", server.uri()),
        dimension: 2,
        http,
        ..GeminiConfig::new(ApiKey::new(KEY))
    })
    .unwrap();
    let p = CachingProvider::new(gemini, Arc::new(ResponseCache::in_memory()), "gemini-llm");
    let inputs = texts(&["a", "b"]);
    let one = p.embed(&inputs, EmbedTask::Document).await.unwrap();
    let two = p.embed(&inputs, EmbedTask::Document).await.unwrap();
    assert_eq!(one.vectors, two.vectors);
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        1
    );
    assert_eq!(p.name(), "gemini");
    assert_eq!(
        p.embedding_signature(),
        EmbeddingSignature::new("gemini-embedding-001", 2)
    );
    let shown = format!("{p:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("ResponseCache"), "{shown}");
}

/// A provider that returns one vector too few.
#[derive(Debug)]
struct ShortChanging;

#[async_trait]
impl LLMProvider for ShortChanging {
    fn name(&self) -> &str {
        "short"
    }
    fn embedding_signature(&self) -> EmbeddingSignature {
        EmbeddingSignature::new("short", 2)
    }
    async fn embed(&self, texts: &[String], _: EmbedTask) -> Result<EmbedResult, ProviderError> {
        Ok(EmbedResult {
            vectors: vec![vec![1.0, 0.0]; texts.len().saturating_sub(1)],
            usage: TokenUsage::default(),
        })
    }
    async fn generate(&self, _: &str, _: f32, _: u32) -> Result<GenResult, ProviderError> {
        Err(ProviderError::Unsupported {
            provider: "short",
            operation: "generation",
        })
    }
}

#[tokio::test]
async fn a_wrong_sized_answer_is_an_error_and_is_not_cached() {
    let cache = Arc::new(ResponseCache::in_memory());
    let p = CachingProvider::new(ShortChanging, cache, "none");
    let err = p
        .embed(&texts(&["a", "b"]), EmbedTask::Document)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("expected 2 vectors, got 1"),
        "{err}"
    );
    let err = p
        .embed(&texts(&["a"]), EmbedTask::Document)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("expected 1 vectors, got 0"),
        "{err}"
    );
}
