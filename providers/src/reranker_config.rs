//! Which reranker recall uses (`CORTEX_RERANK_PROVIDER`): a hosted `/rerank` API or the
//! local cross-encoder, or none.

use std::path::PathBuf;
use std::sync::Arc;

use cortex_core::{error::ProviderError, reranker::Reranker};

use crate::local::expand_home;
use crate::rerank::{HttpReranker, RerankConfig};

/// Where the local reranker's model is looked for when no path is given:
/// `~/.cortex/models/<this>`, where `scripts/fetch-reranker-model.sh` puts it.
pub const DEFAULT_LOCAL_RERANK_MODEL: &str = "ms-marco-MiniLM-L-12-v2";

/// A configured reranker, not yet built.
#[derive(Debug, Clone)]
pub enum RerankerConfig {
    /// Cohere, Jina or Voyage over HTTP.
    Hosted(RerankConfig),
    /// A cross-encoder in this directory, run on the CPU.
    Local { model_dir: PathBuf },
}

impl RerankerConfig {
    /// `CORTEX_RERANK_PROVIDER`: `local` (model directory `CORTEX_RERANK_MODEL_PATH`,
    /// default `~/.cortex/models/ms-marco-MiniLM-L-12-v2`), a hosted service (see
    /// [`RerankConfig::from_env_map`]), or unset / `none` for no reranker.
    pub fn from_env_map(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, ProviderError> {
        let set = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let is_local =
            set("CORTEX_RERANK_PROVIDER").is_some_and(|p| p.trim().eq_ignore_ascii_case("local"));
        if !is_local {
            return Ok(RerankConfig::from_env_map(get)?.map(Self::Hosted));
        }
        let home = set("HOME")
            .or_else(|| set("USERPROFILE"))
            .map(PathBuf::from);
        let model_dir = match set("CORTEX_RERANK_MODEL_PATH") {
            Some(path) => expand_home(path.trim(), home.as_deref()),
            None => home
                .map(|h| {
                    h.join(".cortex")
                        .join("models")
                        .join(DEFAULT_LOCAL_RERANK_MODEL)
                })
                .ok_or_else(|| {
                    ProviderError::Config(
                        "CORTEX_RERANK_PROVIDER=local needs CORTEX_RERANK_MODEL_PATH when \
                         HOME is not set"
                            .into(),
                    )
                })?,
        };
        Ok(Some(Self::Local { model_dir }))
    }

    /// The model, for logs: the hosted model's name or the local directory.
    pub fn model(&self) -> String {
        match self {
            Self::Hosted(config) => config.model.clone(),
            Self::Local { model_dir } => model_dir.display().to_string(),
        }
    }

    /// Builds the reranker; a local one loads its model here.
    pub async fn build(&self) -> Result<Arc<dyn Reranker>, ProviderError> {
        match self {
            Self::Hosted(config) => Ok(Arc::new(HttpReranker::new(config.clone())?)),
            Self::Local { model_dir } => build_local(model_dir.clone()).await,
        }
    }
}

#[cfg(feature = "local")]
async fn build_local(model_dir: PathBuf) -> Result<Arc<dyn Reranker>, ProviderError> {
    if !model_dir.join("config.json").is_file() {
        return Err(ProviderError::Config(format!(
            "CORTEX_RERANK_PROVIDER=local: no cross-encoder in {}; \
             `bash scripts/fetch-reranker-model.sh` puts one there, or set \
             CORTEX_RERANK_MODEL_PATH",
            model_dir.display()
        )));
    }
    Ok(Arc::new(
        crate::local::LocalReranker::load_async(model_dir).await?,
    ))
}

#[cfg(not(feature = "local"))]
async fn build_local(_model_dir: PathBuf) -> Result<Arc<dyn Reranker>, ProviderError> {
    Err(ProviderError::Config(
        "CORTEX_RERANK_PROVIDER=local: this build has no local models (cargo feature \
         `local` of cortex-providers)"
            .into(),
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<Option<RerankerConfig>, ProviderError> {
        let vars: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        RerankerConfig::from_env_map(|name| vars.get(name).cloned())
    }

    #[test]
    fn local_reads_its_directory_or_the_default_one() {
        let config = read(&[("CORTEX_RERANK_PROVIDER", "Local"), ("HOME", "/home/ada")]);
        match config.unwrap() {
            Some(RerankerConfig::Local { model_dir }) => assert_eq!(
                model_dir,
                PathBuf::from("/home/ada/.cortex/models/ms-marco-MiniLM-L-12-v2")
            ),
            other => panic!("expected the local reranker, got {other:?}"),
        }
        let config = read(&[
            ("CORTEX_RERANK_PROVIDER", "local"),
            ("CORTEX_RERANK_MODEL_PATH", "~/m/ce"),
            ("HOME", "/home/ada"),
        ]);
        match config.unwrap() {
            Some(RerankerConfig::Local { model_dir }) => {
                assert_eq!(model_dir, PathBuf::from("/home/ada/m/ce"));
            }
            other => panic!("expected the local reranker, got {other:?}"),
        }
        assert!(matches!(
            read(&[("CORTEX_RERANK_PROVIDER", "local")]),
            Err(ProviderError::Config(_))
        ));
    }

    #[test]
    fn hosted_and_none_are_read_as_before() {
        assert!(read(&[]).unwrap().is_none());
        assert!(
            read(&[("CORTEX_RERANK_PROVIDER", "none")])
                .unwrap()
                .is_none()
        );
        let hosted = read(&[("CORTEX_RERANK_PROVIDER", "jina"), ("JINA_API_KEY", "k")]);
        assert!(matches!(hosted.unwrap(), Some(RerankerConfig::Hosted(_))));
    }

    #[tokio::test]
    async fn a_missing_local_model_is_a_config_error_that_says_how_to_get_one() {
        let dir = tempfile::tempdir().unwrap();
        let config = RerankerConfig::Local {
            model_dir: dir.path().to_owned(),
        };
        match config.build().await {
            Err(ProviderError::Config(message)) => assert!(
                message.contains("fetch-reranker-model.sh") || message.contains("`local`"),
                "{message}"
            ),
            Ok(_) => panic!("an empty directory built a reranker"),
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
}
