//! Anthropic Messages API adapter, for generation only: Anthropic has no embeddings.
//!
//! Shapes follow <https://docs.anthropic.com/en/api/messages> and errors
//! <https://docs.claude.com/en/api/errors>.

use async_trait::async_trait;
use cortex_core::{
    error::ProviderError, provider::EmbedResult, provider::EmbedTask, provider::GenResult,
    provider::LLMProvider, provider::TokenUsage, signature::EmbeddingSignature,
};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use crate::http::{HttpClient, HttpOptions};
use crate::secret::ApiKey;

const PROVIDER: &str = "anthropic";

pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";
/// The API version this adapter speaks, sent as `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// Default model: the small, fast Haiku that still accepts `temperature`. (Claude Haiku
/// 5.5 refuses sampling parameters; to use it, set the model and turn temperature off.)
pub const ANTHROPIC_LLM_MODEL: &str = "claude-haiku-4-5";

/// Everything an [`AnthropicProvider`] needs.
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    pub api_key: ApiKey,
    /// Up to and including the version, e.g. `https://api.anthropic.com/v1`.
    pub base_url: String,
    pub generation_model: String,
    /// Whether `generate` sends `temperature` (newer models refuse it).
    pub send_temperature: bool,
    pub http: HttpOptions,
}

impl AnthropicConfig {
    pub fn new(api_key: ApiKey) -> Self {
        Self {
            api_key,
            base_url: ANTHROPIC_BASE_URL.to_owned(),
            generation_model: ANTHROPIC_LLM_MODEL.to_owned(),
            send_temperature: true,
            http: HttpOptions::default(),
        }
    }
}

/// Claude through the Messages API.
#[derive(Debug)]
pub struct AnthropicProvider {
    config: AnthropicConfig,
    http: HttpClient,
}

impl AnthropicProvider {
    pub fn new(mut config: AnthropicConfig) -> Result<Self, ProviderError> {
        config.base_url = config.base_url.trim_end_matches('/').to_owned();
        let http = HttpClient::new(PROVIDER, &config.http)?;
        Ok(Self { config, http })
    }

    pub fn generation_model(&self) -> &str {
        &self.config.generation_model
    }

    fn headers(&self) -> Result<HeaderMap, ProviderError> {
        let (name, value) = self
            .http
            .secret_header("x-api-key", self.config.api_key.expose())?;
        let mut headers = HeaderMap::new();
        headers.insert(name, value);
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        Ok(headers)
    }
}

#[async_trait]
impl LLMProvider for AnthropicProvider {
    fn name(&self) -> &str {
        PROVIDER
    }

    /// Anthropic embeds nothing; this signature (dimension 0) matches no store.
    fn embedding_signature(&self) -> EmbeddingSignature {
        EmbeddingSignature::new("anthropic-no-embeddings", 0)
    }

    async fn embed(
        &self,
        _texts: &[String],
        _task: EmbedTask,
    ) -> Result<EmbedResult, ProviderError> {
        Err(ProviderError::Unsupported {
            provider: PROVIDER,
            operation: "embeddings",
        })
    }

    async fn generate(
        &self,
        prompt: &str,
        temperature: f32,
        max_output_tokens: u32,
    ) -> Result<GenResult, ProviderError> {
        let body = MessagesRequest {
            model: &self.config.generation_model,
            max_tokens: max_output_tokens,
            temperature: self.config.send_temperature.then_some(temperature),
            messages: [Message {
                role: "user",
                content: prompt,
            }],
        };
        let url = format!("{}/messages", self.config.base_url);
        let answer: MessagesResponse = self
            .http
            .post_json(&url, self.headers()?, &body, Some(&self.config.api_key))
            .await?;
        answer.into_result()
    }
}

#[derive(Serialize)]
struct MessagesRequest<'a> {
    model: &'a str,
    /// Required by the API.
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    messages: [Message<'a>; 1],
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Deserialize)]
struct MessagesResponse {
    #[serde(default)]
    content: Vec<ContentBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<MessagesUsage>,
}

#[derive(Deserialize)]
struct ContentBlock {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct MessagesUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    /// Prompt-cache reads and writes are input too, billed at other rates; they are
    /// not part of `input_tokens`.
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
}

impl MessagesResponse {
    fn into_result(self) -> Result<GenResult, ProviderError> {
        let usage = self.usage.map_or_else(TokenUsage::default, |u| TokenUsage {
            input_tokens: u.input_tokens
                + u.cache_creation_input_tokens
                + u.cache_read_input_tokens,
            output_tokens: u.output_tokens,
        });
        // Thinking and tool-use blocks are not part of the answer.
        let text: String = self
            .content
            .into_iter()
            .filter(|block| block.kind == "text")
            .filter_map(|block| block.text)
            .collect();
        let stop = self.stop_reason.unwrap_or_default();
        if text.is_empty() && stop == "refusal" {
            return Err(ProviderError::InvalidResponse {
                provider: PROVIDER,
                message: "the model refused to answer (stop_reason refusal)".into(),
            });
        }
        if text.is_empty() && stop == "max_tokens" {
            return Err(ProviderError::InvalidResponse {
                provider: PROVIDER,
                message: "no text in the answer (stop_reason max_tokens)".into(),
            });
        }
        Ok(GenResult { text, usage })
    }
}
