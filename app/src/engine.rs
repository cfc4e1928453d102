//! Wiring the engine from configuration: the store the settings name (opened and
//! migrated), the providers (honouring the store's own embedder), the layers, the engine.
//! Both applications build through here: the MCP server (lazily, on its first tool call)
//! and the `cortex` command.

use std::sync::Arc;

use cortex_core::{
    engine::CortexMemory, engine::EngineConfig, error::ProviderError, error::StoreError,
    keys::KeyStore, store::MemoryStore, transfer::TransferStore,
};
use cortex_providers::{ProviderConfig, RerankerConfig};

use crate::config::{ConfigError, ServerConfig, Storage};

/// A built engine plus the per-server settings every tool call needs.
#[derive(Debug)]
pub struct Engine {
    pub memory: Arc<CortexMemory>,
    /// The same store, for reading out whole (export, the web page's graph and stats).
    pub store: Arc<dyn TransferStore>,
    /// The user every call reads and writes as (`CORTEX_USER_ID`).
    pub user_id: String,
    /// Default limit for recall, list and the keyed reads (`CORTEX_TOP_K`).
    pub top_k: usize,
}

/// Why the engine could not be built; the message says which setting to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("cannot open the memory store: {0}")]
    Store(#[from] StoreError),
    #[error("cannot set up the model provider: {0}")]
    Provider(#[from] ProviderError),
    #[error("{0}")]
    Unsupported(String),
}

/// Reads the environment and builds the engine it describes.
pub async fn build_engine_from_env() -> Result<Engine, EngineError> {
    let config = ServerConfig::from_env()?;
    build_engine(&config).await
}

/// The provider settings to use with `store`: the configured ones, except that with no
/// `CORTEX_EMBED_PROVIDER` a store whose vectors come from the local model keeps the local
/// model even when a key would make another provider the default.
pub async fn honour_store(
    providers: &ProviderConfig,
    store: &dyn MemoryStore,
) -> Result<ProviderConfig, EngineError> {
    if let Some(local) = providers.local_alternative()
        && store.signature().await? == Some(local.embedding_signature())
    {
        tracing::info!(
            embedder = %local.embedding_signature(),
            "the store was written by the local model: keeping it (set CORTEX_EMBED_PROVIDER \
             to choose another and run `cortex reembed`)"
        );
        return Ok(local);
    }
    Ok(providers.clone())
}

/// Builds the store, the embedder and the engine `config` describes.
pub async fn build_engine(config: &ServerConfig) -> Result<Engine, EngineError> {
    // The embedder first: it is the step most likely to fail (a missing key), and it
    // must not leave a database file behind when it does. Only when a local model could
    // be the store's own embedder is the store read first.
    let (store, providers) = match config.providers.local_alternative() {
        Some(_) => {
            let store = open_store(&config.storage).await?;
            let providers = honour_store(&config.providers, &*store).await?;
            (Some(store), providers)
        }
        None => (None, config.providers.clone()),
    };
    let embedder = providers.build_embedder_async().await?;
    let generator = providers.build_llm_async().await?;
    let reranker = match &config.reranker {
        Some(reranker) => Some(reranker.build().await?),
        None => None,
    };
    let store = match store {
        Some(store) => store,
        None => open_store(&config.storage).await?,
    };
    let engine_config = EngineConfig {
        layers: config.layers,
        cache_max_bytes: config.cache_max_bytes,
        ..EngineConfig::default()
    }
    .with_tier(config.tier);
    let engine_config = EngineConfig {
        rerank_depth: config.rerank_depth,
        ..engine_config
    };
    let mut memory = CortexMemory::with_config(store.clone(), embedder, engine_config);
    // The entity graph and the timeline are always reachable: callers write them with
    // memorize's structure whatever the layer flags, which only add the model's extraction.
    memory = memory.with_enrichment(store.clone());
    if let Some(generator) = generator {
        memory = memory.with_llm(generator);
    }
    if let Some(reranker) = reranker {
        memory = memory.with_reranker(reranker);
    }
    tracing::info!(
        user = %config.user_id,
        tier = config.tier.as_str(),
        episodic = config.layers.episodic,
        graph = config.layers.graph,
        dedup = config.layers.dedup,
        soft_update = config.layers.soft_update,
        embedder = %providers.embedding_signature(),
        reranker = config.reranker.as_ref().map(RerankerConfig::model),
        "engine ready"
    );
    Ok(Engine {
        memory: Arc::new(memory),
        store,
        user_id: config.user_id.clone(),
        top_k: config.top_k,
    })
}

/// Opens (creating or migrating) the store `storage` names. The administration commands
/// use it too, so they read and write exactly where the server does.
pub async fn open_store(storage: &Storage) -> Result<Arc<dyn TransferStore>, EngineError> {
    Ok(storage.open().await?)
}

/// The API keys of the store `storage` names (`cortex token`, the server in key mode): a
/// handle of its own on the same store.
pub async fn open_key_store(storage: &Storage) -> Result<Arc<dyn KeyStore>, EngineError> {
    Ok(storage.open_keys().await?)
}
