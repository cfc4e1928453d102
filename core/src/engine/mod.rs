//! CortexMemory: the engine that composes a provider, a store and hybrid retrieval.

mod corrections;
mod enrichment;
mod history;
mod index_cache;
mod layer_reads;
mod memorize;
mod paging;
mod recall;
mod retag;

pub use index_cache::CacheStats;

pub use enrichment::EnrichmentError;
pub use history::HistoryEntry;
pub use memorize::{MemorizeOptions, MemorizeStatus, Memorized, REPLACED_BY_CALLER};
pub use retag::Retag;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::current;
use crate::enrichment_store::EnrichmentStore;
use crate::listing::check_limit;
use crate::memory::DEFAULT_MAX_CONTENT_BYTES;
use crate::profile::Tier;
use crate::provider::LLMProvider;
use crate::reranker::Reranker;
use crate::signature::EmbeddingSignature;
use crate::store::MemoryStore;
use crate::usage::{ProviderUsage, UsageMeter};
use index_cache::IndexCache;

/// Fewest hex characters a forget prefix must have.
pub const MIN_PREFIX_HEX: usize = 4;

/// The opt-in write-time layers; all off by default. None of them changes recall.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layers {
    /// Dated events per memory (`CORTEX_EPISODIC`), read by [`CortexMemory::timeline`].
    /// One extraction call per memorize, shared with the graph layer.
    pub episodic: bool,
    /// The entity graph (`CORTEX_GRAPH`), read by [`CortexMemory::recall_about`].
    pub graph: bool,
    /// Near-identical memories are not written again (`CORTEX_DEDUP`; embedding only).
    pub dedup: bool,
    /// One arbiter call decides which related memories a new one makes stale
    /// (`CORTEX_SOFT_UPDATE`).
    pub soft_update: bool,
}

/// Engine limits, layers and their knobs.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Largest memory content, in bytes of UTF-8.
    pub max_content_bytes: usize,
    /// Largest recall query, in bytes of UTF-8.
    pub max_query_bytes: usize,
    pub layers: Layers,
    /// Cosine at or above which a new memory is a duplicate of a live one.
    pub dedup_threshold: f64,
    /// Lowest cosine of the soft-update band `[floor, dedup_threshold)`.
    pub soft_update_floor: f64,
    /// Most candidates one arbiter prompt carries.
    pub max_arbiter_candidates: usize,
    /// Time allowed for one extraction or arbiter call.
    pub enrichment_timeout: Duration,
    /// Output budget of one extraction or arbiter call.
    pub enrichment_max_tokens: u32,
    /// How many fused candidates recall hands a reranker (at least `top_k`).
    pub rerank_depth: usize,
    /// Time allowed for one rerank call before recall falls back to the fused order.
    pub rerank_timeout: Duration,
    /// Most approximate heap bytes the per-user index cache holds before it drops the
    /// least recently used users' indexes (`None`: no bound).
    pub cache_max_bytes: Option<usize>,
    /// The cosine at which two recalled memories count as one topic, so the later-written
    /// goes first ([`current`]); `None` turns that stage off (fusion's order).
    pub same_topic: Option<f32>,
}

impl EngineConfig {
    /// This configuration with a tier's knobs (the profile is their one source).
    pub fn with_tier(mut self, tier: Tier) -> Self {
        self.rerank_depth = tier.profile().rerank_depth;
        self
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            max_content_bytes: DEFAULT_MAX_CONTENT_BYTES,
            max_query_bytes: DEFAULT_MAX_CONTENT_BYTES,
            layers: Layers::default(),
            dedup_threshold: 0.95,
            soft_update_floor: 0.83,
            max_arbiter_candidates: 8,
            enrichment_timeout: Duration::from_secs(30),
            enrichment_max_tokens: 1024,
            rerank_depth: Tier::default().profile().rerank_depth,
            rerank_timeout: Duration::from_secs(10),
            cache_max_bytes: None,
            same_topic: Some(current::SAME_TOPIC),
        }
    }
}

/// The memory engine. memorize is one embed plus one store transaction; recall is one
/// embed plus retrieval, pushed down to the store when it can, else over a per-user index
/// cached in this process and kept current by a change counter.
#[derive(Debug)]
pub struct CortexMemory {
    store: Arc<dyn MemoryStore>,
    /// The layers' records, given only when a layer needs them: recall has no way to
    /// read them.
    enrichment: Option<Arc<dyn EnrichmentStore>>,
    embedder: Arc<dyn LLMProvider>,
    config: EngineConfig,
    /// The store's signature once known; it never changes after the first write.
    stored_signature: OnceLock<EmbeddingSignature>,
    indexes: IndexCache,
    usage: UsageMeter,
    /// The model for extraction and arbitration; the layers that need it are skipped
    /// (and counted as failures) without it.
    llm: Option<Arc<dyn LLMProvider>>,
    enrichment_failures: AtomicU64,
    reranker: Option<Arc<dyn Reranker>>,
    rerank_failures: AtomicU64,
    /// What "now" is for expiry.
    clock: Arc<dyn Clock>,
}

impl CortexMemory {
    pub fn new(store: Arc<dyn MemoryStore>, embedder: Arc<dyn LLMProvider>) -> Self {
        Self::with_config(store, embedder, EngineConfig::default())
    }

    pub fn with_config(
        store: Arc<dyn MemoryStore>,
        embedder: Arc<dyn LLMProvider>,
        config: EngineConfig,
    ) -> Self {
        Self {
            indexes: IndexCache::new(config.cache_max_bytes),
            store,
            enrichment: None,
            embedder,
            config,
            stored_signature: OnceLock::new(),
            usage: UsageMeter::default(),
            llm: None,
            enrichment_failures: AtomicU64::new(0),
            reranker: None,
            rerank_failures: AtomicU64::new(0),
            clock: Arc::new(SystemClock),
        }
    }

    /// Sets the clock expiry is judged by (the system's by default).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets a reranker: recall then fuses a deeper pool and lets it choose the top k,
    /// falling back to the fused order on any failure.
    pub fn with_reranker(mut self, reranker: Arc<dyn Reranker>) -> Self {
        self.reranker = Some(reranker);
        self
    }

    /// Rerank calls that failed, timed out or answered nonsense (each time, recall
    /// returned the fused order instead).
    pub fn rerank_failures(&self) -> u64 {
        self.rerank_failures.load(Ordering::Relaxed)
    }

    /// Sets where the episodic and graph layers keep their records (usually the same
    /// backend as the memories); without it those layers count a failure per memory and
    /// their reads answer that the store keeps no such records.
    pub fn with_enrichment(mut self, store: Arc<dyn EnrichmentStore>) -> Self {
        self.enrichment = Some(store);
        self
    }

    /// Sets the model the extraction and arbiter calls use.
    pub fn with_llm(mut self, llm: Arc<dyn LLMProvider>) -> Self {
        self.llm = Some(llm);
        self
    }

    /// Extraction or arbiter calls that failed, timed out or returned garbage (each time,
    /// the memory was stored anyway).
    pub fn enrichment_failures(&self) -> u64 {
        self.enrichment_failures.load(Ordering::Relaxed)
    }

    pub fn store(&self) -> &Arc<dyn MemoryStore> {
        &self.store
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The model and dimension every memorize and recall embeds with.
    pub fn embedder_signature(&self) -> EmbeddingSignature {
        self.embedder.embedding_signature()
    }

    /// Calls and tokens spent per provider since this engine started.
    pub fn usage(&self) -> BTreeMap<String, ProviderUsage> {
        self.usage.snapshot()
    }

    /// The name of every provider this engine may call, as [`usage`](Self::usage) keys
    /// them: the embedder, and the LLM and the reranker when it has them.
    pub fn providers(&self) -> Vec<String> {
        let mut names = vec![self.embedder.name().to_owned()];
        names.extend(self.llm.as_ref().map(|l| l.name().to_owned()));
        names.extend(self.reranker.as_ref().map(|r| r.name().to_owned()));
        names.sort();
        names.dedup();
        names
    }
}
