//! The embedder and the QA models of a run, from the environment (`ProviderConfig`), each
//! wrapped in a `CachingProvider` over one on-disk cache file so a rerun costs nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cortex_core::{LLMProvider, Tier};
use cortex_providers::{CachingProvider, LlmProviderKind, ProviderConfig, ResponseCache};

use crate::bench::report::CacheStats;
use crate::error::BenchError;

type Cached = CachingProvider<Arc<dyn LLMProvider>>;

/// What the user asked of the QA models.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QaModelChoice {
    pub reader_model: Option<String>,
    pub judge_model: Option<String>,
}

/// The providers of a run and the handles that count their cache hits.
#[derive(Debug)]
pub struct RunProviders {
    pub embedder: Arc<dyn LLMProvider>,
    /// Whether `embedder` answers from a cache (worth warming in batches).
    pub cached: bool,
    /// Reader, its model; judge, its model.
    pub qa: Option<QaModels>,
    cache: Option<Arc<ResponseCache>>,
    counted: Vec<Arc<Cached>>,
}

/// The two QA models.
#[derive(Debug, Clone)]
pub struct QaModels {
    pub reader: Arc<dyn LLMProvider>,
    pub reader_model: String,
    pub judge: Arc<dyn LLMProvider>,
    pub judge_model: String,
}

impl RunProviders {
    /// Builds the providers from `env` (a variable lookup). `cache` is the cache file, or
    /// `None` for no cache; `qa` asks for the reader and judge too.
    pub fn from_env(
        env: &dyn Fn(&str) -> Option<String>,
        cache: Option<&Path>,
        tier: Tier,
        qa: Option<&QaModelChoice>,
    ) -> Result<Self, BenchError> {
        let mut config = ProviderConfig::from_env_map(env)?;
        // The harness owns the one cache; CORTEX_PROVIDER_CACHE must not wrap twice.
        config.cache_path = None;
        let cache = match cache {
            Some(path) => Some(Arc::new(ResponseCache::open(path)?)),
            None => None,
        };
        let mut counted = Vec::new();
        let mut wrap = |provider: Arc<dyn LLMProvider>, model: &str| -> Arc<dyn LLMProvider> {
            match &cache {
                Some(cache) => {
                    let cached = Arc::new(CachingProvider::new(provider, cache.clone(), model));
                    counted.push(cached.clone());
                    cached
                }
                None => provider,
            }
        };
        let embedder = wrap(config.build_embedder()?, "");
        let qa = match qa {
            None => None,
            Some(choice) => {
                if config.llm_provider == LlmProviderKind::None {
                    return Err(BenchError::NoLlm);
                }
                let explicit = env("CORTEX_LLM_MODEL").filter(|m| !m.trim().is_empty());
                let reader_model = choice
                    .reader_model
                    .clone()
                    .or(explicit)
                    .unwrap_or_else(|| default_reader_model(&config, tier));
                let judge_model = choice
                    .judge_model
                    .clone()
                    .unwrap_or_else(|| reader_model.clone());
                let reader = build_llm(&config, &reader_model)?;
                let judge = build_llm(&config, &judge_model)?;
                Some(QaModels {
                    reader: wrap(reader, &reader_model),
                    reader_model,
                    judge: wrap(judge, &judge_model),
                    judge_model,
                })
            }
        };
        Ok(Self {
            embedder,
            cached: cache.is_some(),
            qa,
            cache,
            counted,
        })
    }

    /// Cache hits and misses so far, over every provider.
    pub fn cache_stats(&self) -> Option<CacheStats> {
        let cache = self.cache.as_ref()?;
        Some(CacheStats {
            path: cache.path().map(|p| p.display().to_string()),
            hits: self.counted.iter().map(|c| c.hits()).sum(),
            misses: self.counted.iter().map(|c| c.misses()).sum(),
        })
    }
}

/// The tier profile names Gemini models; other services keep their configured model.
fn default_reader_model(config: &ProviderConfig, tier: Tier) -> String {
    match config.llm_provider {
        LlmProviderKind::Gemini => tier.profile().reader_model.to_owned(),
        _ => config.llm_model.clone(),
    }
}

fn build_llm(config: &ProviderConfig, model: &str) -> Result<Arc<dyn LLMProvider>, BenchError> {
    let mut config = config.clone();
    config.llm_model = model.to_owned();
    config.build_llm()?.ok_or(BenchError::NoLlm)
}

/// The default cache file, under the working directory like the test model.
pub fn default_cache_path() -> PathBuf {
    PathBuf::from(".cache").join("bench-cache.db")
}
