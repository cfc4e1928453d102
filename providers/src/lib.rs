//! Model providers for Cortex, behind core's [`LLMProvider`](cortex_core::provider::LLMProvider).
//!
//! - [`GeminiProvider`]: Google's Gemini API, embeddings and generation.
//! - [`OpenAiProvider`]: any OpenAI-compatible server (OpenAI, Ollama, vLLM, llama.cpp,
//!   LM Studio), embeddings and generation.
//! - [`AnthropicProvider`]: Claude, generation only.
//! - [`FakeProvider`]: deterministic and offline, for tests and demos (not semantic).
//! - `LocalProvider`: in-process embeddings (BERT through candle, or model2vec) from a
//!   model directory; no key, no network. Behind the default cargo feature `local`.
//! - [`HttpReranker`]: the Cohere / Jina / Voyage `/rerank` APIs, and `LocalReranker`, a
//!   cross-encoder on the CPU: the optional reranker, chosen by [`RerankerConfig`].
//! - [`ProviderConfig`]: picks and builds them from `CORTEX_*` environment variables.
//!
//! Every HTTP adapter shares one request path ([`HttpOptions`], [`RetryPolicy`]):
//! timeouts, bounded retries with backoff that honour the provider's retry hints, and
//! error messages that carry the provider's explanation but never the key.

pub mod anthropic;
mod blocking;
pub mod config;
pub mod fake;
pub mod gemini;
pub mod http;
pub mod local;
pub mod openai;
pub mod rerank;
pub mod reranker_config;
pub mod retry;
pub mod secret;
mod vectors;

pub use anthropic::{AnthropicConfig, AnthropicProvider};
pub use config::{
    EmbedProviderKind, EmbedSettings, LlmProviderKind, LlmSettings, ProviderConfig, Service,
};
pub use fake::FakeProvider;
pub use gemini::{GeminiConfig, GeminiProvider};
pub use http::HttpOptions;
pub use local::{LocalModelKind, LocalSettings};
#[cfg(feature = "local")]
pub use local::{LocalOptions, LocalProvider, LocalReranker};
pub use openai::{MaxTokensField, OpenAiConfig, OpenAiProvider};
pub use rerank::{HttpReranker, RerankConfig, RerankStyle};
pub use reranker_config::{DEFAULT_LOCAL_RERANK_MODEL, RerankerConfig};
pub use retry::{RetryPolicy, SleepFuture, Sleeper, TokioSleeper};
pub use secret::ApiKey;
pub use vectors::check_vectors;
