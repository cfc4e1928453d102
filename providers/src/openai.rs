//! OpenAI-compatible adapter: `/embeddings` and `/chat/completions` under a base URL.
//!
//! One adapter serves OpenAI itself and the servers that copy its API: Ollama's `/v1`
//! endpoint, vLLM, llama.cpp's `llama-server` and LM Studio. Shapes follow
//! <https://platform.openai.com/docs/api-reference/embeddings> and
//! <https://platform.openai.com/docs/api-reference/chat/create>; Ollama's subset is
//! <https://docs.ollama.com/api/openai-compatibility>.

use std::str::FromStr;

use async_trait::async_trait;
use cortex_core::{
    error::ProviderError, provider::EmbedResult, provider::EmbedTask, provider::GenResult,
    provider::LLMProvider, provider::TokenUsage, signature::EmbeddingSignature,
};
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};

use crate::http::{HttpClient, HttpOptions};
use crate::secret::ApiKey;
use crate::vectors::check_vectors;

/// OpenAI's public endpoint.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// A local Ollama's OpenAI-compatible endpoint.
pub const OLLAMA_BASE_URL: &str = "http://localhost:11434/v1";
pub const OPENAI_EMBED_MODEL: &str = "text-embedding-3-small";
pub const OPENAI_EMBED_DIM: usize = 1536;
pub const OPENAI_LLM_MODEL: &str = "gpt-4o-mini";
pub const OLLAMA_EMBED_MODEL: &str = "nomic-embed-text";
pub const OLLAMA_EMBED_DIM: usize = 768;
pub const OLLAMA_LLM_MODEL: &str = "llama3.2";
/// Texts per `/embeddings` request. OpenAI accepts 2048 inputs but also caps a request
/// at 300k tokens; 256 texts stay under that for memory-sized inputs and keep local
/// servers' request sizes reasonable.
pub const OPENAI_MAX_BATCH: usize = 256;

/// Which request field carries the output-token limit.
///
/// OpenAI deprecated `max_tokens` in favour of `max_completion_tokens`, and its
/// reasoning models refuse `max_tokens`; but Ollama silently ignores
/// `max_completion_tokens` and older llama.cpp builds do too. `max_tokens` works on
/// every server that is not an OpenAI reasoning model, so it is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MaxTokensField {
    #[default]
    MaxTokens,
    MaxCompletionTokens,
}

impl MaxTokensField {
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

impl FromStr for MaxTokensField {
    type Err = ProviderError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "max_tokens" => Ok(MaxTokensField::MaxTokens),
            "max_completion_tokens" => Ok(MaxTokensField::MaxCompletionTokens),
            other => Err(ProviderError::Config(format!(
                "unknown max-tokens field {other:?}; valid: max_tokens, max_completion_tokens"
            ))),
        }
    }
}

/// Everything an [`OpenAiProvider`] needs.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Reported by `name()` and in errors: "openai", "ollama", …
    pub name: &'static str,
    /// Up to and including the version, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set; local servers need none.
    pub api_key: Option<ApiKey>,
    pub embed_model: String,
    /// The vectors' length, checked on every answer.
    pub dimension: usize,
    /// Whether to send `dimensions` (only text-embedding-3 and later accept it).
    pub send_dimensions: bool,
    pub generation_model: String,
    pub max_tokens_field: MaxTokensField,
    /// Whether `generate` sends `temperature` (reasoning models refuse it).
    pub send_temperature: bool,
    pub max_batch: usize,
    pub http: HttpOptions,
}

impl OpenAiConfig {
    /// OpenAI's own API with its default models.
    pub fn openai(api_key: Option<ApiKey>) -> Self {
        Self {
            name: "openai",
            base_url: OPENAI_BASE_URL.to_owned(),
            api_key,
            embed_model: OPENAI_EMBED_MODEL.to_owned(),
            dimension: OPENAI_EMBED_DIM,
            send_dimensions: false,
            generation_model: OPENAI_LLM_MODEL.to_owned(),
            max_tokens_field: MaxTokensField::MaxTokens,
            send_temperature: true,
            max_batch: OPENAI_MAX_BATCH,
            http: HttpOptions::default(),
        }
    }

    /// A local Ollama with its default models; no key.
    pub fn ollama() -> Self {
        Self {
            name: "ollama",
            base_url: OLLAMA_BASE_URL.to_owned(),
            embed_model: OLLAMA_EMBED_MODEL.to_owned(),
            dimension: OLLAMA_EMBED_DIM,
            generation_model: OLLAMA_LLM_MODEL.to_owned(),
            ..Self::openai(None)
        }
    }
}

/// An OpenAI-compatible server.
#[derive(Debug)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    http: HttpClient,
}

impl OpenAiProvider {
    pub fn new(mut config: OpenAiConfig) -> Result<Self, ProviderError> {
        if config.dimension == 0 {
            return Err(ProviderError::Config(format!(
                "{}: the embedding dimension must be at least 1",
                config.name
            )));
        }
        config.max_batch = config.max_batch.max(1);
        config.base_url = config.base_url.trim_end_matches('/').to_owned();
        let http = HttpClient::new(config.name, &config.http)?;
        Ok(Self { config, http })
    }

    pub fn generation_model(&self) -> &str {
        &self.config.generation_model
    }

    fn headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.config.api_key {
            let (name, value) = self
                .http
                .secret_header("authorization", &format!("Bearer {}", key.expose()))?;
            headers.insert(name, value);
        }
        Ok(headers)
    }

    async fn embed_batch(&self, texts: &[String]) -> Result<(Vec<Vec<f32>>, u64), ProviderError> {
        let body = EmbeddingsRequest {
            model: &self.config.embed_model,
            input: texts,
            // The API default is float, but some proxies copy the Python SDK's base64.
            encoding_format: "float",
            dimensions: self.config.send_dimensions.then_some(self.config.dimension),
        };
        let url = format!("{}/embeddings", self.config.base_url);
        let answer: EmbeddingsResponse = self
            .http
            .post_json(&url, self.headers()?, &body, self.config.api_key.as_ref())
            .await?;
        let vectors = order_by_index(self.config.name, answer.data, texts.len())?;
        check_vectors(
            self.config.name,
            &vectors,
            texts.len(),
            self.config.dimension,
        )?;
        Ok((vectors, answer.usage.map_or(0, |u| u.prompt_tokens)))
    }
}

/// The vectors in input order. `data[].index` is authoritative, not array order, and
/// every index from 0 to n-1 must appear exactly once.
fn order_by_index(
    provider: &'static str,
    mut data: Vec<EmbeddingItem>,
    expected: usize,
) -> Result<Vec<Vec<f32>>, ProviderError> {
    if data.len() != expected {
        return Err(ProviderError::InvalidResponse {
            provider,
            message: format!("expected {expected} vectors, got {}", data.len()),
        });
    }
    data.sort_by_key(|item| item.index);
    if let Some((position, item)) = data.iter().enumerate().find(|(i, item)| item.index != *i) {
        return Err(ProviderError::InvalidResponse {
            provider,
            message: format!(
                "embedding indices are not 0..{expected}: found {} at position {position}",
                item.index
            ),
        });
    }
    Ok(data.into_iter().map(|item| item.embedding).collect())
}

#[async_trait]
impl LLMProvider for OpenAiProvider {
    fn name(&self) -> &str {
        self.config.name
    }

    fn embedding_signature(&self) -> EmbeddingSignature {
        EmbeddingSignature::new(self.config.embed_model.clone(), self.config.dimension)
    }

    /// Embeds in batches of `max_batch` texts, one request per batch. The task is
    /// ignored: the OpenAI API has no document/query distinction.
    async fn embed(
        &self,
        texts: &[String],
        _task: EmbedTask,
    ) -> Result<EmbedResult, ProviderError> {
        let mut vectors = Vec::with_capacity(texts.len());
        let mut usage = TokenUsage::default();
        for batch in texts.chunks(self.config.max_batch) {
            let (batch_vectors, tokens) = self.embed_batch(batch).await?;
            vectors.extend(batch_vectors);
            usage.input_tokens += tokens;
        }
        Ok(EmbedResult { vectors, usage })
    }

    async fn generate(
        &self,
        prompt: &str,
        temperature: f32,
        max_output_tokens: u32,
    ) -> Result<GenResult, ProviderError> {
        let limit = Some(max_output_tokens);
        let body = ChatRequest {
            model: &self.config.generation_model,
            messages: [ChatRequestMessage {
                role: "user",
                content: prompt,
            }],
            temperature: self.config.send_temperature.then_some(temperature),
            max_tokens: limit.filter(|_| self.config.max_tokens_field == MaxTokensField::MaxTokens),
            max_completion_tokens: limit
                .filter(|_| self.config.max_tokens_field == MaxTokensField::MaxCompletionTokens),
        };
        let url = format!("{}/chat/completions", self.config.base_url);
        let answer: ChatResponse = self
            .http
            .post_json(&url, self.headers()?, &body, self.config.api_key.as_ref())
            .await?;
        answer.into_result(self.config.name)
    }
}

#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    model: &'a str,
    input: &'a [String],
    encoding_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<usize>,
}

/// Exactly one of the two limit fields is set, per [`MaxTokensField`].
#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: [ChatRequestMessage<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
}

#[derive(Serialize)]
struct ChatRequestMessage<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    #[serde(default)]
    data: Vec<EmbeddingItem>,
    #[serde(default)]
    usage: Option<EmbeddingsUsage>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    index: usize,
    embedding: Vec<f32>,
}

#[derive(Deserialize)]
struct EmbeddingsUsage {
    #[serde(default)]
    prompt_tokens: u64,
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ChatUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChatMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChatMessage {
    /// `null` with tool calls or a refusal.
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl ChatResponse {
    fn into_result(self, provider: &'static str) -> Result<GenResult, ProviderError> {
        let usage = self.usage.map_or_else(TokenUsage::default, |u| TokenUsage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
        });
        let Some(choice) = self.choices.into_iter().next() else {
            return Err(ProviderError::InvalidResponse {
                provider,
                message: "no choices in the answer".into(),
            });
        };
        match choice.message.content {
            Some(text) => Ok(GenResult { text, usage }),
            None => {
                let why = match (choice.message.refusal, choice.finish_reason) {
                    (Some(refusal), _) => format!("the model refused: {refusal}"),
                    (None, Some(reason)) => {
                        format!("no text in the answer (finish_reason {reason})")
                    }
                    (None, None) => "no text in the answer".into(),
                };
                Err(ProviderError::InvalidResponse {
                    provider,
                    message: why,
                })
            }
        }
    }
}
