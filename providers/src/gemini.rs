//! Google Gemini API adapter: embeddings and generation.
//!
//! Request and response shapes follow Google's Gemini API reference:
//! - embeddings: <https://ai.google.dev/api/embeddings> (`models.batchEmbedContents`)
//!   and the guide <https://ai.google.dev/gemini-api/docs/embeddings> (task types,
//!   `outputDimensionality`, and "for other dimensions … you need to normalize");
//! - generation: <https://ai.google.dev/api/generate-content> (`models.generateContent`,
//!   `GenerationConfig`, `UsageMetadata`);
//! - errors: <https://ai.google.dev/gemini-api/docs/troubleshooting> and the Google API
//!   error model <https://cloud.google.com/apis/design/errors>.
//!
//! The key travels in the `x-goog-api-key` header, never in the URL.

use async_trait::async_trait;
use cortex_core::{
    error::ProviderError, provider::EmbedResult, provider::EmbedTask, provider::GenResult,
    provider::LLMProvider, provider::TokenUsage, signature::EmbeddingSignature,
};
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};

use crate::http::{HttpClient, HttpOptions};
use crate::secret::ApiKey;
use crate::vectors::{check_vectors, l2_normalize};

const PROVIDER: &str = "gemini";

/// The public endpoint.
pub const GEMINI_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";
/// Default embedding model: the current stable one (the 2025 guide lists it; the older
/// `text-embedding-004` and `embedding-001` are gone or deprecated).
pub const GEMINI_EMBED_MODEL: &str = "gemini-embedding-001";
/// Default dimension: one of Google's three recommended sizes (768, 1536, 3072); a
/// quarter of the native 3072 floats per memory for a small loss in quality.
pub const GEMINI_EMBED_DIM: usize = 768;
/// Default generation model: Google's fast, low-cost stable Flash-Lite model.
pub const GEMINI_LLM_MODEL: &str = "gemini-3.5-flash-lite";
/// `batchEmbedContents` refuses more than 100 requests in one batch (undocumented;
/// the server answers 400 "at most 100 requests can be in one batch").
pub const GEMINI_MAX_BATCH: usize = 100;

/// Everything a [`GeminiProvider`] needs.
#[derive(Debug, Clone)]
pub struct GeminiConfig {
    pub api_key: ApiKey,
    /// Up to and including the API version, e.g. `https://…/v1beta`.
    pub base_url: String,
    pub embed_model: String,
    /// Sent as `outputDimensionality`; the vectors' length.
    pub dimension: usize,
    pub generation_model: String,
    /// Whether `generate` sends `temperature` at all.
    pub send_temperature: bool,
    pub http: HttpOptions,
}

impl GeminiConfig {
    pub fn new(api_key: ApiKey) -> Self {
        Self {
            api_key,
            base_url: GEMINI_BASE_URL.to_owned(),
            embed_model: GEMINI_EMBED_MODEL.to_owned(),
            dimension: GEMINI_EMBED_DIM,
            generation_model: GEMINI_LLM_MODEL.to_owned(),
            send_temperature: true,
            http: HttpOptions::default(),
        }
    }
}

/// The native (untruncated) dimension of the Gemini embedding models we know. Google
/// normalises only the full-size vector, so anything shorter needs normalising here.
fn native_dimension(model: &str) -> Option<usize> {
    match model {
        "gemini-embedding-001" => Some(3072),
        _ => None,
    }
}

/// Gemini through its REST API.
#[derive(Debug)]
pub struct GeminiProvider {
    config: GeminiConfig,
    http: HttpClient,
    normalize: bool,
}

impl GeminiProvider {
    pub fn new(mut config: GeminiConfig) -> Result<Self, ProviderError> {
        if config.dimension == 0 {
            return Err(ProviderError::Config(
                "gemini: the embedding dimension must be at least 1".into(),
            ));
        }
        config.base_url = config.base_url.trim_end_matches('/').to_owned();
        config.embed_model = strip_models_prefix(&config.embed_model);
        config.generation_model = strip_models_prefix(&config.generation_model);
        // Unknown models are normalised too: it is harmless for unit vectors.
        let normalize = native_dimension(&config.embed_model).is_none_or(|n| config.dimension < n);
        let http = HttpClient::new(PROVIDER, &config.http)?;
        Ok(Self {
            config,
            http,
            normalize,
        })
    }

    pub fn generation_model(&self) -> &str {
        &self.config.generation_model
    }

    fn headers(&self) -> Result<HeaderMap, ProviderError> {
        let (name, value) = self
            .http
            .secret_header("x-goog-api-key", self.config.api_key.expose())?;
        let mut headers = HeaderMap::new();
        headers.insert(name, value);
        Ok(headers)
    }

    async fn embed_batch(
        &self,
        texts: &[String],
        task: EmbedTask,
    ) -> Result<(Vec<Vec<f32>>, u64), ProviderError> {
        let model = format!("models/{}", self.config.embed_model);
        let task_type = match task {
            EmbedTask::Document => "RETRIEVAL_DOCUMENT",
            EmbedTask::Query => "RETRIEVAL_QUERY",
        };
        let body = BatchEmbedRequest {
            requests: texts
                .iter()
                .map(|text| EmbedRequest {
                    model: &model,
                    content: Content::text(text),
                    task_type,
                    output_dimensionality: self.config.dimension,
                })
                .collect(),
        };
        let url = format!("{}/{model}:batchEmbedContents", self.config.base_url);
        let answer: BatchEmbedResponse = self
            .http
            .post_json(&url, self.headers()?, &body, Some(&self.config.api_key))
            .await?;
        let vectors: Vec<Vec<f32>> = answer.embeddings.into_iter().map(|e| e.values).collect();
        check_vectors(PROVIDER, &vectors, texts.len(), self.config.dimension)?;
        let tokens = answer.usage_metadata.map_or(0, |u| u.prompt_token_count);
        Ok((vectors, tokens))
    }
}

fn strip_models_prefix(model: &str) -> String {
    model.strip_prefix("models/").unwrap_or(model).to_owned()
}

#[async_trait]
impl LLMProvider for GeminiProvider {
    fn name(&self) -> &str {
        PROVIDER
    }

    fn embedding_signature(&self) -> EmbeddingSignature {
        EmbeddingSignature::new(self.config.embed_model.clone(), self.config.dimension)
    }

    /// Embeds in batches of [`GEMINI_MAX_BATCH`], one request per batch, in order.
    ///
    /// Token usage: `batchEmbedContents` documents no usage field; newer API revisions
    /// add an optional `usageMetadata.promptTokenCount`, which is summed when present.
    /// Without it the input count is 0 (unknown), not an estimate.
    async fn embed(&self, texts: &[String], task: EmbedTask) -> Result<EmbedResult, ProviderError> {
        let mut vectors = Vec::with_capacity(texts.len());
        let mut usage = TokenUsage::default();
        for batch in texts.chunks(GEMINI_MAX_BATCH) {
            let (batch_vectors, tokens) = self.embed_batch(batch, task).await?;
            vectors.extend(batch_vectors);
            usage.input_tokens += tokens;
        }
        if self.normalize {
            vectors.iter_mut().for_each(|v| l2_normalize(v));
        }
        Ok(EmbedResult { vectors, usage })
    }

    async fn generate(
        &self,
        prompt: &str,
        temperature: f32,
        max_output_tokens: u32,
    ) -> Result<GenResult, ProviderError> {
        let body = GenerateRequest {
            contents: vec![Content::user_text(prompt)],
            generation_config: GenerationConfig {
                temperature: self.config.send_temperature.then_some(temperature),
                max_output_tokens,
            },
        };
        let url = format!(
            "{}/models/{}:generateContent",
            self.config.base_url, self.config.generation_model
        );
        let answer: GenerateResponse = self
            .http
            .post_json(&url, self.headers()?, &body, Some(&self.config.api_key))
            .await?;
        answer.into_result()
    }
}

#[derive(Serialize)]
struct Content<'a> {
    /// Set for a conversation turn; an embedding's content has no role.
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    parts: [Part<'a>; 1],
}

impl<'a> Content<'a> {
    fn user_text(text: &'a str) -> Self {
        Self {
            role: Some("user"),
            parts: [Part { text }],
        }
    }

    fn text(text: &'a str) -> Self {
        Self {
            role: None,
            parts: [Part { text }],
        }
    }
}

#[derive(Serialize)]
struct Part<'a> {
    text: &'a str,
}

#[derive(Serialize)]
struct BatchEmbedRequest<'a> {
    requests: Vec<EmbedRequest<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EmbedRequest<'a> {
    /// Must repeat the model of the URL path, as `models/{model}`.
    model: &'a str,
    content: Content<'a>,
    task_type: &'static str,
    output_dimensionality: usize,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BatchEmbedResponse {
    /// Same order as the requests; there is no index field.
    #[serde(default)]
    embeddings: Vec<ContentEmbedding>,
    #[serde(default)]
    usage_metadata: Option<EmbedUsage>,
}

#[derive(Deserialize)]
struct ContentEmbedding {
    values: Vec<f32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EmbedUsage {
    #[serde(default)]
    prompt_token_count: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerateRequest<'a> {
    contents: Vec<Content<'a>>,
    generation_config: GenerationConfig,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    max_output_tokens: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GenerateResponse {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    usage_metadata: Option<GenerateUsage>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<CandidateContent>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct CandidateContent {
    #[serde(default)]
    parts: Vec<CandidatePart>,
}

#[derive(Deserialize)]
struct CandidatePart {
    #[serde(default)]
    text: Option<String>,
    /// Thought summaries of thinking models are not part of the answer.
    #[serde(default)]
    thought: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct GenerateUsage {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    tool_use_prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    /// Thinking is billed as output, so it is counted as output.
    #[serde(default)]
    thoughts_token_count: u64,
}

impl GenerateResponse {
    fn into_result(self) -> Result<GenResult, ProviderError> {
        let usage = self.usage_metadata.unwrap_or_default();
        let usage = TokenUsage {
            input_tokens: usage.prompt_token_count + usage.tool_use_prompt_token_count,
            output_tokens: usage.candidates_token_count + usage.thoughts_token_count,
        };
        let Some(candidate) = self.candidates.into_iter().next() else {
            let reason = self
                .prompt_feedback
                .and_then(|f| f.block_reason)
                .unwrap_or_else(|| "no reason given".into());
            return Err(ProviderError::InvalidResponse {
                provider: PROVIDER,
                message: format!("no candidates; the prompt was blocked ({reason})"),
            });
        };
        let text: String = candidate
            .content
            .map(|c| c.parts)
            .unwrap_or_default()
            .into_iter()
            .filter(|p| !p.thought)
            .filter_map(|p| p.text)
            .collect();
        let finish = candidate.finish_reason.unwrap_or_default();
        if text.is_empty() && !finish.is_empty() && finish != "STOP" {
            // MAX_TOKENS with no text usually means thinking used the whole budget.
            return Err(ProviderError::InvalidResponse {
                provider: PROVIDER,
                message: format!("no text in the answer (finishReason {finish})"),
            });
        }
        Ok(GenResult { text, usage })
    }
}
