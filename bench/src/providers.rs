//! The embedder and the QA models of a run, from the environment (`ProviderConfig`), each
//! wrapped in a `CachingProvider` over one on-disk cache file so a rerun costs nothing.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cortex_core::{profile::Tier, provider::LLMProvider};
use cortex_providers::{LlmProviderKind, ProviderConfig};

use crate::caching_provider::CachingProvider;
use crate::response_cache::ResponseCache;

use crate::error::BenchError;
use crate::report::CacheStats;

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
    pub async fn from_env(
        env: &dyn Fn(&str) -> Option<String>,
        cache: Option<&Path>,
        tier: Tier,
        qa: Option<&QaModelChoice>,
    ) -> Result<Self, BenchError> {
        let config = ProviderConfig::from_env_map(env)?;
        let cache = match cache {
            Some(path) => Some(Arc::new(ResponseCache::open_async(path).await?)),
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
        let embedder = wrap(config.build_embedder_async().await?, "");
        let qa = match qa {
            None => None,
            Some(choice) => {
                if config.llm.provider == LlmProviderKind::None {
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
                let reader = build_llm(&config, &reader_model).await?;
                let judge = build_llm(&config, &judge_model).await?;
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
    match config.llm.provider {
        LlmProviderKind::Gemini => tier.profile().reader_model.to_owned(),
        _ => config.llm.model.clone(),
    }
}

async fn build_llm(
    config: &ProviderConfig,
    model: &str,
) -> Result<Arc<dyn LLMProvider>, BenchError> {
    let mut config = config.clone();
    config.llm.model = model.to_owned();
    config.build_llm_async().await?.ok_or(BenchError::NoLlm)
}

/// The default cache file: `bench-providers.sqlite` in the user's cache directory,
/// `$XDG_CACHE_HOME/cortex/` or else `~/.cache/cortex/`, so runs from any directory share
/// it and none leaves a `.cache/` behind in the working directory.
pub fn default_cache_path() -> PathBuf {
    default_cache_path_from(|name| std::env::var_os(name))
}

/// [`default_cache_path`] reading the environment through `var`.
fn default_cache_path_from(var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    // The XDG spec says a relative XDG_CACHE_HOME is invalid and must be ignored.
    let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let cache_dir = set("XDG_CACHE_HOME")
        .filter(|dir| dir.is_absolute())
        .or_else(|| set("HOME").map(|home| home.join(".cache")));
    match cache_dir {
        Some(dir) => dir.join("cortex").join("bench-providers.sqlite"),
        // No home (a service account, a test's cleared environment): the working
        // directory, as before there was a default per user. Not the temporary
        // directory, which other users share (they could read or plant answers), and
        // not "no cache", which would silently pay every provider call again on reruns.
        None => PathBuf::from(".cache").join("bench-cache.db"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn path_with(vars: &[(&str, &str)]) -> PathBuf {
        let vars: HashMap<&str, OsString> = vars.iter().map(|(k, v)| (*k, (*v).into())).collect();
        default_cache_path_from(|name| vars.get(name).cloned())
    }

    #[test]
    fn the_default_cache_is_in_the_users_cache_directory() {
        assert_eq!(
            path_with(&[("HOME", "/home/ada")]),
            Path::new("/home/ada/.cache/cortex/bench-providers.sqlite")
        );
        assert_eq!(
            path_with(&[("HOME", "/home/ada"), ("XDG_CACHE_HOME", "/var/cache/ada")]),
            Path::new("/var/cache/ada/cortex/bench-providers.sqlite")
        );
        // A relative or empty XDG_CACHE_HOME is ignored.
        for xdg in ["relative/cache", ""] {
            assert_eq!(
                path_with(&[("HOME", "/home/ada"), ("XDG_CACHE_HOME", xdg)]),
                Path::new("/home/ada/.cache/cortex/bench-providers.sqlite"),
                "{xdg:?}"
            );
        }
    }

    #[test]
    fn without_a_home_the_cache_falls_back_to_the_working_directory() {
        assert_eq!(path_with(&[]), Path::new(".cache/bench-cache.db"));
        assert_eq!(
            path_with(&[("HOME", "")]),
            Path::new(".cache/bench-cache.db")
        );
    }
}
