//! A reranker over the hosted `/rerank` APIs that share one shape: Cohere, Jina and
//! Voyage. They differ only in the path, the name of the result-count field and the key of
//! the result list, so one adapter with a [`RerankStyle`] covers all three.
//!
//! Shapes: <https://docs.cohere.com/reference/rerank> (v2),
//! <https://jina.ai/reranker/> and <https://docs.voyageai.com/reference/reranker-api>.

use async_trait::async_trait;
use cortex_core::{error::ProviderError, reranker::RerankHit, reranker::Reranker};
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::http::{HttpClient, HttpOptions};
use crate::secret::ApiKey;

/// Which service's dialect to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerankStyle {
    /// `POST {base}/v2/rerank`, `top_n`, answer `results`.
    Cohere,
    /// `POST {base}/v1/rerank`, `top_n`, answer `results`.
    Jina,
    /// `POST {base}/v1/rerank`, `top_k`, answer `data`.
    Voyage,
}

impl RerankStyle {
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_lowercase().as_str() {
            "cohere" => Some(Self::Cohere),
            "jina" => Some(Self::Jina),
            "voyage" => Some(Self::Voyage),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Cohere => "cohere",
            Self::Jina => "jina",
            Self::Voyage => "voyage",
        }
    }

    fn default_base_url(self) -> &'static str {
        match self {
            Self::Cohere => "https://api.cohere.com",
            Self::Jina => "https://api.jina.ai",
            Self::Voyage => "https://api.voyageai.com",
        }
    }

    fn default_model(self) -> &'static str {
        match self {
            Self::Cohere => "rerank-v3.5",
            Self::Jina => "jina-reranker-v2-base-multilingual",
            Self::Voyage => "rerank-2.5-lite",
        }
    }

    /// The variable the key is read from.
    pub fn key_variable(self) -> &'static str {
        match self {
            Self::Cohere => "COHERE_API_KEY",
            Self::Jina => "JINA_API_KEY",
            Self::Voyage => "VOYAGE_API_KEY",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Self::Cohere => "/v2/rerank",
            Self::Jina | Self::Voyage => "/v1/rerank",
        }
    }

    fn limit_field(self) -> &'static str {
        match self {
            Self::Voyage => "top_k",
            Self::Cohere | Self::Jina => "top_n",
        }
    }
}

/// Everything an [`HttpReranker`] needs.
#[derive(Debug, Clone)]
pub struct RerankConfig {
    pub style: RerankStyle,
    pub api_key: ApiKey,
    /// Scheme and host, without the API path (`https://api.cohere.com`).
    pub base_url: String,
    pub model: String,
    pub http: HttpOptions,
}

impl RerankConfig {
    pub fn new(style: RerankStyle, api_key: ApiKey) -> Self {
        Self {
            style,
            api_key,
            base_url: style.default_base_url().to_owned(),
            model: style.default_model().to_owned(),
            http: HttpOptions::default(),
        }
    }

    /// `CORTEX_RERANK_PROVIDER` (cohere | jina | voyage; unset or `none` for no reranker),
    /// `CORTEX_RERANK_MODEL`, `CORTEX_RERANK_BASE_URL`, and the service's key variable.
    pub fn from_env_map(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, ProviderError> {
        let Some(name) = get("CORTEX_RERANK_PROVIDER").filter(|v| !v.trim().is_empty()) else {
            return Ok(None);
        };
        if name.trim().eq_ignore_ascii_case("none") {
            return Ok(None);
        }
        let style = RerankStyle::parse(&name).ok_or_else(|| {
            ProviderError::Config(format!(
                "CORTEX_RERANK_PROVIDER={name:?} is not a reranker; use cohere, jina, voyage or none"
            ))
        })?;
        let key = get(style.key_variable())
            .filter(|k| !k.trim().is_empty())
            .ok_or(ProviderError::MissingKey {
                provider: style.name(),
                variable: style.key_variable(),
            })?;
        let mut config = Self::new(style, ApiKey::new(key));
        if let Some(model) = get("CORTEX_RERANK_MODEL").filter(|v| !v.trim().is_empty()) {
            config.model = model;
        }
        if let Some(url) = get("CORTEX_RERANK_BASE_URL").filter(|v| !v.trim().is_empty()) {
            config.base_url = url;
        }
        Ok(Some(config))
    }
}

/// A hosted cross-encoder reranker.
#[derive(Debug)]
pub struct HttpReranker {
    config: RerankConfig,
    http: HttpClient,
}

impl HttpReranker {
    pub fn new(mut config: RerankConfig) -> Result<Self, ProviderError> {
        config.base_url = config.base_url.trim_end_matches('/').to_owned();
        let http = HttpClient::new(config.style.name(), &config.http)?;
        Ok(Self { config, http })
    }
}

#[derive(Deserialize)]
struct Scored {
    index: usize,
    relevance_score: f64,
}

#[async_trait]
impl Reranker for HttpReranker {
    fn name(&self) -> &str {
        self.config.style.name()
    }

    async fn rerank(
        &self,
        query: &str,
        documents: &[String],
        top_n: usize,
    ) -> Result<Vec<RerankHit>, ProviderError> {
        let style = self.config.style;
        let mut body = Map::new();
        body.insert("model".into(), json!(self.config.model));
        body.insert("query".into(), json!(query));
        body.insert("documents".into(), json!(documents));
        body.insert(
            style.limit_field().into(),
            json!(top_n.min(documents.len())),
        );
        // Only indexes are needed; texts echoed back would double the payload. Cohere's
        // v2 never echoes them and has no such field.
        if style != RerankStyle::Cohere {
            body.insert("return_documents".into(), json!(false));
        }
        let (name, value) = self.http.secret_header(
            "authorization",
            &format!("Bearer {}", self.config.api_key.expose()),
        )?;
        let mut headers = HeaderMap::new();
        headers.insert(name, value);
        let url = format!("{}{}", self.config.base_url, style.path());
        let answer: Map<String, Value> = self
            .http
            .post_json(
                &url,
                headers,
                &Value::Object(body),
                Some(&self.config.api_key),
            )
            .await?;
        let list_key = match style {
            RerankStyle::Voyage => "data",
            RerankStyle::Cohere | RerankStyle::Jina => "results",
        };
        let list = answer
            .get(list_key)
            .cloned()
            .ok_or_else(|| invalid(style, &format!("no {list_key:?} list")))?;
        let scored: Vec<Scored> =
            serde_json::from_value(list).map_err(|e| invalid(style, &e.to_string()))?;
        if let Some(bad) = scored.iter().find(|s| s.index >= documents.len()) {
            return Err(invalid(
                style,
                &format!("index {} for {} documents", bad.index, documents.len()),
            ));
        }
        Ok(scored
            .into_iter()
            .map(|s| RerankHit {
                index: s.index,
                score: s.relevance_score,
            })
            .collect())
    }
}

fn invalid(style: RerankStyle, message: &str) -> ProviderError {
    ProviderError::InvalidResponse {
        provider: style.name(),
        message: message.to_owned(),
    }
}
