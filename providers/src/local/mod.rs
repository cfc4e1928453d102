//! The in-process embedder (`CORTEX_EMBED_PROVIDER=local`): no key, no network, CPU only.
//!
//! Two kinds of model, both loaded from a directory (`CORTEX_EMBED_MODEL_PATH`):
//! - **BERT** and **MPNet** sentence-transformers models such as all-MiniLM-L6-v2 and
//!   all-mpnet-base-v2, run through candle:
//!   `config.json`, `tokenizer.json`, `model.safetensors` (plus the optional
//!   `sentence_bert_config.json` and `1_Pooling/config.json`);
//! - **model2vec** static models: `tokenizer.json` and `model.safetensors`.
//!
//! How the kind is told apart is documented in `files.rs` and `docs/PROVIDERS.md`.
//! Everything that needs candle sits behind the default cargo feature `local`; the
//! settings parse without it, so a slim build can say what it lacks.

mod settings;

#[cfg(feature = "local")]
mod bert;
#[cfg(feature = "local")]
mod cross_encoder;
#[cfg(feature = "local")]
mod files;
#[cfg(feature = "hf-hub")]
mod hub;
#[cfg(feature = "local")]
mod model2vec;
#[cfg(feature = "local")]
mod mpnet;
#[cfg(feature = "local")]
mod pooling;
#[cfg(feature = "local")]
mod provider;
#[cfg(feature = "local")]
mod reranker;
#[cfg(feature = "local")]
mod tokenize;

pub(crate) use settings::expand_home;
pub use settings::{
    DEFAULT_LOCAL_BATCH_SIZE, DEFAULT_LOCAL_MODEL_REPO, LocalModelKind, LocalSettings,
};

#[cfg(feature = "local")]
pub use provider::{LocalOptions, LocalProvider};
#[cfg(feature = "local")]
pub use reranker::LocalReranker;

use cortex_core::error::ProviderError;

/// Whether this build contains the local embedder.
pub const AVAILABLE: bool = cfg!(feature = "local");

/// The signature (model name, dimension) the configured local model will have, read
/// from its small files without loading weights. Fails when there is no model and no
/// way to download one, or when `requested_dim` differs from the model's dimension.
#[cfg(feature = "local")]
pub(crate) fn resolve_signature(
    settings: &LocalSettings,
    model_override: Option<String>,
    requested_dim: Option<usize>,
) -> Result<(String, usize), ProviderError> {
    match settings.model_dir() {
        Some(dir) => {
            let info = files::inspect(dir, settings.kind)?;
            provider::check_dimension(dir, info.dimension, requested_dim)?;
            Ok((model_override.unwrap_or(info.name), info.dimension))
        }
        None => pending_download_signature(settings, model_override, requested_dim),
    }
}

/// Without the feature the name is refused while parsing, so this never runs.
#[cfg(not(feature = "local"))]
pub(crate) fn resolve_signature(
    _settings: &LocalSettings,
    _model_override: Option<String>,
    _requested_dim: Option<usize>,
) -> Result<(String, usize), ProviderError> {
    Err(not_compiled())
}

/// Loads the configured model, downloading it first when that is enabled and needed.
#[cfg(feature = "local")]
pub(crate) fn build(
    settings: &LocalSettings,
    model: &str,
    dimension: usize,
) -> Result<LocalProvider, ProviderError> {
    let options = LocalOptions {
        kind: settings.kind,
        batch_size: settings.batch_size,
        model_name: Some(model.to_owned()),
        dimension: Some(dimension),
    };
    match settings.model_dir() {
        Some(dir) => LocalProvider::load(dir, &options),
        None => {
            let dir = download_default(settings)?;
            LocalProvider::load(&dir, &options)
        }
    }
}

#[cfg(feature = "hf-hub")]
fn download_default(settings: &LocalSettings) -> Result<std::path::PathBuf, ProviderError> {
    let dir = settings.default_dir.clone().ok_or_else(|| {
        ProviderError::Config(
            "cannot download the local model: neither HOME nor USERPROFILE is set; \
             set CORTEX_EMBED_MODEL_PATH instead"
                .into(),
        )
    })?;
    tracing::info!(repo = %settings.repo, dir = %dir.display(), "downloading the local embedding model");
    hub::download(&settings.repo, &dir)?;
    Ok(dir)
}

#[cfg(all(feature = "local", not(feature = "hf-hub")))]
fn download_default(settings: &LocalSettings) -> Result<std::path::PathBuf, ProviderError> {
    Err(no_model(settings))
}

/// Before a download the files cannot be read, so the dimension comes from
/// `CORTEX_EMBED_DIM` or the few models whose size is known; the loaded model is
/// checked against it.
#[cfg(feature = "hf-hub")]
fn pending_download_signature(
    settings: &LocalSettings,
    model_override: Option<String>,
    requested_dim: Option<usize>,
) -> Result<(String, usize), ProviderError> {
    let name = settings::repo_name(&settings.repo);
    let dimension = requested_dim
        .or_else(|| known_dimension(name))
        .ok_or_else(|| {
            ProviderError::Config(format!(
                "the dimension of {} is not known before it is downloaded; set CORTEX_EMBED_DIM",
                settings.repo
            ))
        })?;
    Ok((model_override.unwrap_or_else(|| name.to_owned()), dimension))
}

#[cfg(all(feature = "local", not(feature = "hf-hub")))]
fn pending_download_signature(
    settings: &LocalSettings,
    _model_override: Option<String>,
    _requested_dim: Option<usize>,
) -> Result<(String, usize), ProviderError> {
    Err(no_model(settings))
}

#[cfg(feature = "hf-hub")]
fn known_dimension(name: &str) -> Option<usize> {
    match name {
        "all-MiniLM-L6-v2" | "all-MiniLM-L12-v2" | "bge-small-en-v1.5" => Some(384),
        "all-mpnet-base-v2" | "bge-base-en-v1.5" => Some(768),
        "potion-base-8M" => Some(256),
        _ => None,
    }
}

#[cfg(all(feature = "local", not(feature = "hf-hub")))]
fn no_model(settings: &LocalSettings) -> ProviderError {
    let default = settings
        .default_dir
        .as_ref()
        .map_or_else(String::new, |dir| {
            format!(", or put the model's files in {}", dir.display())
        });
    ProviderError::Config(format!(
        "CORTEX_EMBED_PROVIDER=local needs a model: set CORTEX_EMBED_MODEL_PATH to a directory \
         with {}'s config.json, tokenizer.json and model.safetensors{default} (see \
         docs/PROVIDERS.md; `cortex model fetch` puts the default, all-mpnet-base-v2, there; \
         a build with the `hf-hub` feature downloads it by itself)",
        settings.repo
    ))
}

#[cfg(not(feature = "local"))]
pub(crate) fn not_compiled() -> ProviderError {
    ProviderError::Config(
        "CORTEX_EMBED_PROVIDER=local: this build has no local embedder (cargo feature \
         `local` of cortex-providers is off); rebuild with default features"
            .into(),
    )
}

#[cfg(all(test, not(feature = "local")))]
mod tests {
    use crate::EmbedProviderKind;

    #[test]
    fn a_slim_build_names_the_missing_feature() {
        let err = "local".parse::<EmbedProviderKind>().unwrap_err();
        assert!(err.to_string().contains("cargo feature `local`"), "{err}");
    }
}
