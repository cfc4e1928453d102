//! CortexMemory: the engine that composes a provider, a store and hybrid retrieval.

mod enrichment;
mod history;
mod index_cache;
mod layer_reads;
mod retag;

pub use index_cache::CacheStats;

pub use enrichment::EnrichmentError;
pub use history::HistoryEntry;
pub use retag::Retag;

use enrichment::extraction_records;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use chrono::{DateTime, Utc};

use tokio::sync::OwnedRwLockReadGuard;
use uuid::Uuid;

use crate::clock::{Clock, SystemClock};
use crate::current;
use crate::embedding::validate_embedding;
use crate::enrichment_store::{EnrichmentStore, MemoryRecords};
use crate::error::StoreError;
use crate::error::{CortexError, EmbeddingProblem, Result};
use crate::filter::MemoryFilter;
use crate::hybrid::{ScoredMemory, hybrid_retrieve_filtered};
use crate::index::MemoryIndex;
use crate::listing::{self, Page, check_limit};
use crate::memory::{
    DEFAULT_MAX_CONTENT_BYTES, Memory, MemoryId, MemoryKind, validate_content, validate_user,
};
use crate::new_memory::NewMemory;
use crate::profile::Tier;
use crate::provider::{EmbedTask, LLMProvider, TokenUsage};
use crate::reader::extraction::Extraction;
use crate::reranker::{RerankHit, Reranker};
use crate::signature::EmbeddingSignature;
use crate::store::{BuiltIndex, Generation, MemoryStore, SearchRequest};
use crate::structure::MemoryStructure;
use crate::tokenizer::query_terms;
use crate::usage::{CallKind, ProviderUsage, UsageMeter};
use index_cache::IndexCache;

pub use crate::listing::MAX_LIMIT;
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

/// What memorize did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemorizeStatus {
    /// A new memory was written.
    Stored,
    /// A live memory was near-identical; nothing was written and `memory` is that one.
    Duplicate,
    /// A new memory was written and made the memories in `superseded` stale.
    Superseded,
}

impl MemorizeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MemorizeStatus::Stored => "stored",
            MemorizeStatus::Duplicate => "duplicate",
            MemorizeStatus::Superseded => "superseded",
        }
    }
}

/// The outcome of [`CortexMemory::memorize`].
#[derive(Debug, Clone, PartialEq)]
pub struct Memorized {
    pub memory: Memory,
    pub status: MemorizeStatus,
    /// Memories this one made stale (soft update).
    pub superseded: Vec<MemoryId>,
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

    /// Validates, embeds once and stores one memory in one transaction. With layers on:
    /// a near-duplicate is not written (dedup), related memories the new one makes stale
    /// are superseded (soft update), and one extraction call records its event and graph
    /// facts. A layer that fails never loses the memory.
    pub async fn memorize(
        &self,
        user: &str,
        content: &str,
        kind: MemoryKind,
        tags: &[String],
    ) -> Result<Memorized> {
        self.memorize_at(user, content, kind, tags, None).await
    }

    /// [`memorize`](Self::memorize) with the memory dated `created_at` (in the past) instead
    /// of now: a fact learned earlier, or a record brought over from elsewhere. The date is
    /// what the memory shows and what `since`/`until` filters see; ranking is unchanged.
    pub async fn memorize_at(
        &self,
        user: &str,
        content: &str,
        kind: MemoryKind,
        tags: &[String],
        created_at: Option<DateTime<Utc>>,
    ) -> Result<Memorized> {
        let options = MemorizeOptions {
            created_at,
            ..MemorizeOptions::default()
        };
        self.memorize_with(user, content, kind, tags, &options)
            .await
    }

    /// [`memorize`](Self::memorize) with everything a caller may add: a past date, and a
    /// memory this one corrects (`replaces`, an id or unique prefix). A correction is
    /// written with its supersession in one transaction, so recall returns the new memory
    /// and never the old one, and `history` shows the chain; the dedup and soft-update
    /// layers stand aside for it, since the caller has said what the new memory replaces.
    /// A correction that gives no tags keeps the old memory's; one that gives tags has
    /// exactly those (docs/FORMAT.md, "Corrections").
    pub async fn memorize_with(
        &self,
        user: &str,
        content: &str,
        kind: MemoryKind,
        tags: &[String],
        options: &MemorizeOptions,
    ) -> Result<Memorized> {
        self.memorize_carrying(user, content, kind, Tags::OrReplaced(tags), options, None)
            .await
    }

    /// [`memorize_with`](Self::memorize_with), writing `carried` (another version's
    /// records) with the memory.
    async fn memorize_carrying(
        &self,
        user: &str,
        content: &str,
        kind: MemoryKind,
        tags: Tags<'_>,
        options: &MemorizeOptions,
        carried: Option<MemoryRecords>,
    ) -> Result<Memorized> {
        // Every argument is checked before the embed call.
        let (new, replaced, structure) = self
            .prepare(user, content, kind, tags, options, carried)
            .await?;
        let signature = self.guard_signature().await?.1;
        let vector = self
            .embed_one(content, EmbedTask::Document, &signature)
            .await?;
        // A correction is the caller's decision: no layer second-guesses it.
        let layers = match replaced {
            Some(_) => Layers {
                dedup: false,
                soft_update: false,
                ..self.config.layers
            },
            None => self.config.layers,
        };
        let neighbours = if layers.dedup || layers.soft_update {
            self.neighbours(user, &vector, signature.dimension).await?
        } else {
            Vec::new()
        };
        if layers.dedup
            && let Some((existing, _)) = neighbours
                .iter()
                .find(|(_, cos)| *cos >= self.config.dedup_threshold)
        {
            // The memory is known already; what the caller says about it is still kept.
            if let Some(x) = &structure {
                let records = extraction_records(existing.id, x, true, true);
                self.records()?.record_extraction(user, &records).await?;
            }
            return Ok(Memorized {
                memory: existing.clone(),
                status: MemorizeStatus::Duplicate,
                superseded: Vec::new(),
            });
        }
        let added = match self.store.add(&new, &vector, &signature).await {
            Ok(added) => added,
            // Another correction of the same memory committed first.
            Err(StoreError::AlreadySuperseded(old)) => {
                return Err(CortexError::invalid(
                    "replaces",
                    format!("memory {old} was already replaced; replace its successor instead"),
                ));
            }
            Err(e) => return Err(e.into()),
        };
        let _ = self.stored_signature.set(signature);
        let memory = added.memory.clone();
        self.update_cached(user, added.generation, move |index| {
            if let Some(old) = replaced {
                index.remove(&old);
            }
            index.insert(added.memory, &vector).is_ok()
        })
        .await;

        let mut superseded: Vec<MemoryId> = replaced.into_iter().collect();
        if layers.soft_update {
            superseded.extend(self.made_stale(&memory, neighbours).await);
        }
        // The caller's own structure stands in for the model's reading of the memory.
        if (layers.episodic || layers.graph)
            && !options.skip_extraction
            && structure.is_none()
            && let Err(e) = self.extract(&memory).await
        {
            self.enrichment_failed("extraction", &memory, &e);
        }
        let status = if superseded.is_empty() {
            MemorizeStatus::Stored
        } else {
            MemorizeStatus::Superseded
        };
        Ok(Memorized {
            memory,
            status,
            superseded,
        })
    }

    /// The memory a memorize writes, checked: its date, expiry, the memory it corrects
    /// (whose tags it keeps when `tags` allows and gives none), and the records written
    /// with it (the caller's structure, validated, or else `carried`).
    async fn prepare(
        &self,
        user: &str,
        content: &str,
        kind: MemoryKind,
        tags: Tags<'_>,
        options: &MemorizeOptions,
        carried: Option<MemoryRecords>,
    ) -> Result<(NewMemory, Option<MemoryId>, Option<Extraction>)> {
        let given = match tags {
            Tags::OrReplaced(given) | Tags::Exactly(given) => given,
        };
        let mut new = NewMemory::new(user, content, kind, given, self.config.max_content_bytes)?;
        if let Some(at) = options.created_at {
            new = new.dated(at)?;
        }
        if let Some(at) = options.expires_at {
            new = new.expiring(at, self.clock.now())?;
        }
        let replaced = match options.replaces.as_deref() {
            Some(id) => Some(self.replaceable(user, id).await?),
            None => None,
        };
        if let Some(old) = &replaced {
            let reason = options.reason.as_deref().unwrap_or(REPLACED_BY_CALLER);
            new = new.replacing(old.id, reason);
            if matches!(tags, Tags::OrReplaced(_)) && new.tags.is_empty() {
                new.tags = old.tags.clone();
            }
        }
        let replaced = replaced.map(|old| old.id);
        let structure = match &options.structure {
            Some(s) if !s.is_empty() => {
                if !self.store.capabilities().records {
                    return Err(StoreError::Unsupported(
                        "entities and events written with a memory",
                    )
                    .into());
                }
                Some(s.validated()?)
            }
            _ => None,
        };
        if let Some(x) = &structure {
            let records = extraction_records(new.id, x, true, true);
            new = new.with_records(records);
        } else if let Some(carried) = carried.filter(|c| !c.is_empty()) {
            let records = carried.for_memory(new.id);
            new = new.with_records(records);
        }
        Ok((new, replaced, structure))
    }

    /// Live memories most similar to `vector`, with their cosine, best first.
    async fn neighbours(
        &self,
        user: &str,
        vector: &[f32],
        dimension: usize,
    ) -> Result<Vec<(Memory, f64)>> {
        let built = self.current_index(user, dimension).await?;
        let Some(built) = built.as_ref() else {
            return Ok(Vec::new());
        };
        let depth = self.config.max_arbiter_candidates.max(1) * 2;
        let now = self.clock.now();
        Ok(built
            .index
            .dense_search(vector, depth)?
            .into_iter()
            .map(|hit| (built.index.memory(hit.row).clone(), hit.score))
            .filter(|(m, _)| !m.expired_at(now))
            .collect())
    }

    /// The `top_k` live memories most relevant to `query`, best first.
    pub async fn recall(&self, user: &str, query: &str, top_k: usize) -> Result<Vec<ScoredMemory>> {
        self.recall_filtered(user, query, top_k, &MemoryFilter::default())
            .await
    }

    /// [`recall`](Self::recall) among only the live memories that pass `filter`: fewer
    /// than `top_k` when fewer pass. A memory that passes ranks among the others that pass
    /// with the score it would have unfiltered before its neighbours' share
    /// (docs/RETRIEVAL.md).
    pub async fn recall_filtered(
        &self,
        user: &str,
        query: &str,
        top_k: usize,
        filter: &MemoryFilter,
    ) -> Result<Vec<ScoredMemory>> {
        validate_user(user)?;
        validate_content("query", query, self.config.max_query_bytes)?;
        check_limit("top_k", top_k)?;
        let mut filter = filter.clone().validated()?;
        // An expired memory is never a candidate, whatever the caller asked.
        filter.include_expired = false;
        let now = self.clock.now();
        filter.alive_at = Some(now);
        let (stored, signature) = self.guard_signature().await?;
        let embedding = self.embed_one(query, EmbedTask::Query, &signature).await?;
        if stored.is_none() {
            // Nothing was ever written to this store.
            return Ok(Vec::new());
        }
        let terms = query_terms(query);
        // A reranker chooses from a deeper fused pool.
        let depth = match &self.reranker {
            Some(_) => self.config.rerank_depth.clamp(top_k, MAX_LIMIT),
            None => top_k,
        };
        // The current-over-stale stage compares the fused head whatever the limit, so a
        // smaller recall stays a prefix of a larger one.
        let past = self.config.same_topic.is_none() || current::asks_for_the_past(query);
        let same_topic = self.config.same_topic.unwrap_or(current::SAME_TOPIC);
        let fetch = if past {
            depth
        } else {
            depth.max(current::HEAD)
        };
        let mut candidates = if self.store.capabilities().search {
            let request = SearchRequest {
                query: query.to_owned(),
                terms,
                embedding,
                top_k: fetch,
                filter,
            };
            let mut found = self.store.search(user, &request).await?;
            if !past {
                let head: Vec<MemoryId> = found
                    .iter()
                    .take(current::HEAD)
                    .map(|c| c.memory.id)
                    .collect();
                let stored = self.store.embeddings(user, &head).await?;
                let units = stored
                    .into_iter()
                    .map(|v| v.map(|v| crate::embedding::normalized(&v)))
                    .collect();
                current::prefer_current(&mut found, &units_or_empty(units), same_topic);
            }
            found
        } else {
            let built = self.current_index(user, signature.dimension).await?;
            match built.as_ref() {
                None => Vec::new(),
                Some(b) => {
                    // Nothing expired yet: the condition holds for every row, and the empty
                    // filter keeps the unfiltered path.
                    if !b.index.any_expired(now) {
                        filter.alive_at = None;
                    }
                    let mut found =
                        hybrid_retrieve_filtered(&b.index, &embedding, &terms, fetch, &filter)?;
                    if !past {
                        let head: Vec<&Memory> = found
                            .iter()
                            .take(current::HEAD)
                            .map(|c| &c.memory)
                            .collect();
                        let units = b.index.unit_vectors(&head)?;
                        current::prefer_current(&mut found, &units_or_empty(units), same_topic);
                    }
                    found
                }
            }
        };
        candidates.truncate(depth);
        Ok(match &self.reranker {
            Some(reranker) => {
                // The reranker reads at most its depth, whatever the limit: a limit past
                // it gets the rest in fused order (one pass of a cross-encoder per
                // candidate is what a recall pays).
                let read = self.config.rerank_depth.clamp(1, MAX_LIMIT);
                let rest = candidates.split_off(read.min(candidates.len()));
                let mut chosen = self
                    .rerank(reranker.as_ref(), query, candidates, top_k.min(read))
                    .await;
                let room = top_k.saturating_sub(chosen.len());
                chosen.extend(rest.into_iter().take(room));
                chosen
            }
            None => candidates,
        })
    }

    /// The reranker's top `top_k` of `candidates`; on any failure, the fused top `top_k`.
    async fn rerank(
        &self,
        reranker: &dyn Reranker,
        query: &str,
        mut candidates: Vec<ScoredMemory>,
        top_k: usize,
    ) -> Vec<ScoredMemory> {
        if candidates.is_empty() {
            return candidates;
        }
        let documents: Vec<String> = candidates
            .iter()
            .map(|c| c.memory.content.clone())
            .collect();
        let call = reranker.rerank(query, &documents, top_k);
        let outcome = match tokio::time::timeout(self.config.rerank_timeout, call).await {
            Ok(Ok(hits)) => check_rerank(hits, candidates.len()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("timed out".to_owned()),
        };
        self.usage.record(
            reranker.name(),
            CallKind::Rerank,
            outcome.is_ok().then(TokenUsage::default),
        );
        match outcome {
            Ok(hits) => {
                let mut slots: Vec<Option<ScoredMemory>> =
                    candidates.into_iter().map(Some).collect();
                let mut chosen: Vec<ScoredMemory> = Vec::with_capacity(top_k);
                for hit in hits.iter().take(top_k) {
                    if let Some(mut c) = slots[hit.index].take() {
                        c.rerank_score = Some(hit.score);
                        chosen.push(c);
                    }
                }
                // A reranker that returned fewer than asked: the rest in fused order.
                chosen.extend(
                    slots
                        .into_iter()
                        .flatten()
                        .take(top_k.saturating_sub(chosen.len())),
                );
                chosen
            }
            Err(reason) => {
                self.rerank_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(reranker = reranker.name(), %reason, "rerank failed; returning the fused order");
                candidates.truncate(top_k);
                candidates
            }
        }
    }

    /// Live memories, newest first.
    pub async fn list_memories(&self, user: &str, limit: usize) -> Result<Vec<Memory>> {
        Ok(self
            .list_page(user, &MemoryFilter::default(), limit, None)
            .await?
            .memories)
    }

    /// One page of the live memories that pass `filter`, newest first by
    /// [`ListKey`](crate::ListKey), starting after `cursor` (a previous page's
    /// [`Page::next_cursor`]); expired ones are left out unless the filter includes them,
    /// as they stand on this engine's clock.
    pub async fn list_page(
        &self,
        user: &str,
        filter: &MemoryFilter,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page> {
        listing::list_page(
            self.store.as_ref(),
            user,
            filter,
            limit,
            cursor,
            self.clock.now(),
        )
        .await
    }

    /// Now, on the clock that decides what has expired.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Number of memories no correction superseded, expired ones included
    /// ([`MemoryStore::count`]).
    pub async fn count(&self, user: &str) -> Result<u64> {
        validate_user(user)?;
        Ok(self.store.count(user).await?)
    }

    /// Deletes one memory by full id or by a prefix of at least four hex characters that
    /// matches exactly one memory; returns its full id.
    pub async fn forget(&self, user: &str, id_or_prefix: &str) -> Result<MemoryId> {
        validate_user(user)?;
        let id = self.resolve(user, id_or_prefix).await?;
        let deleted = self
            .store
            .delete(user, &id)
            .await?
            .ok_or_else(|| CortexError::NotFound {
                id: id_or_prefix.trim().to_owned(),
            })?;
        // Memories the deleted one had superseded are live again; the cache cannot add
        // them without their vectors, so it rebuilds on the next recall instead.
        let in_place = deleted.restored.is_empty();
        self.update_cached(user, deleted.generation, move |index| {
            // A forgotten memory the index lacks was superseded, not live: still in place.
            index.remove(&id);
            in_place
        })
        .await;
        Ok(id)
    }

    /// The full id a caller's id or prefix names.
    pub async fn resolve(&self, user: &str, id_or_prefix: &str) -> Result<MemoryId> {
        let wanted = id_or_prefix.trim().to_lowercase();
        if let Ok(id) = Uuid::parse_str(&wanted) {
            return Ok(id);
        }
        let hex = wanted.chars().filter(char::is_ascii_hexdigit).count();
        let well_formed =
            wanted.len() <= 36 && wanted.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
        if !well_formed || hex < MIN_PREFIX_HEX {
            return Err(CortexError::invalid(
                "memory_id",
                format!(
                    "{id_or_prefix:?} is neither a memory id nor a prefix of at least \
                     {MIN_PREFIX_HEX} hex characters"
                ),
            ));
        }
        let matches = self.store.find_by_prefix(user, &wanted).await?;
        match matches.as_slice() {
            [] => Err(CortexError::NotFound { id: wanted }),
            [id] => Ok(*id),
            many => Err(CortexError::AmbiguousPrefix {
                prefix: wanted,
                count: many.len(),
            }),
        }
    }

    /// The user's live memories that have expired by now, each deleted for good unless
    /// `dry_run` (as `forget` deletes: a memory it had superseded is live again).
    pub async fn prune_expired(&self, user: &str, dry_run: bool) -> Result<Vec<Memory>> {
        validate_user(user)?;
        let now = self.clock.now();
        let every = MemoryFilter {
            include_expired: true,
            ..MemoryFilter::default()
        };
        let mut expired = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .list_page(user, &every, MAX_LIMIT, cursor.as_deref())
                .await?;
            expired.extend(page.memories.into_iter().filter(|m| m.expired_at(now)));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        if !dry_run {
            for m in &expired {
                self.forget(user, &m.id.to_string()).await?;
            }
        }
        Ok(expired)
    }

    /// The live memory a correction names: it must exist and not be superseded already
    /// (correct the memory that replaced it instead).
    async fn replaceable(&self, user: &str, id_or_prefix: &str) -> Result<Memory> {
        let id = self
            .resolve(user, id_or_prefix)
            .await
            .map_err(|e| match e {
                CortexError::InvalidInput { reason, .. } => {
                    CortexError::invalid("replaces", reason)
                }
                other => other,
            })?;
        let Some(old) = self.store.get(user, &id).await? else {
            return Err(CortexError::NotFound {
                id: id_or_prefix.trim().to_owned(),
            });
        };
        let newer: Vec<MemoryId> = self
            .store
            .supersessions(user, &id)
            .await?
            .into_iter()
            .filter(|s| s.old_id == id)
            .map(|s| s.new_id)
            .collect();
        if let Some(newer) = newer.first() {
            return Err(CortexError::invalid(
                "replaces",
                format!("memory {id} was already replaced by {newer}; replace that one instead"),
            ));
        }
        Ok(old)
    }

    /// The store's signature (if any) and the provider's, refusing a mismatch. Runs before
    /// the embed call so a mismatched store costs no provider call.
    async fn guard_signature(&self) -> Result<(Option<EmbeddingSignature>, EmbeddingSignature)> {
        let got = self.embedder.embedding_signature();
        let stored = match self.stored_signature.get() {
            Some(known) => Some(known.clone()),
            None => {
                let read = self.store.signature().await?;
                if let Some(sig) = &read {
                    let _ = self.stored_signature.set(sig.clone());
                }
                read
            }
        };
        match stored {
            Some(stored) if stored != got => Err(CortexError::EmbeddingMismatch { stored, got }),
            stored => Ok((stored, got)),
        }
    }

    /// One embed call for one text, with the vector checked before anything uses it.
    async fn embed_one(
        &self,
        text: &str,
        task: EmbedTask,
        signature: &EmbeddingSignature,
    ) -> Result<Vec<f32>> {
        let result = self.embedder.embed(&[text.to_owned()], task).await;
        let usage = result.as_ref().ok().map(|r| r.usage);
        self.usage
            .record(self.embedder.name(), CallKind::Embed, usage);
        let result = result?;
        let got = result.vectors.len();
        let Ok([vector]) = <[Vec<f32>; 1]>::try_from(result.vectors) else {
            return Err(EmbeddingProblem::WrongCount { expected: 1, got }.into());
        };
        validate_embedding(&vector, signature.dimension)?;
        Ok(vector)
    }

    /// What the per-user index cache did and holds (for metrics).
    pub fn cache_stats(&self) -> CacheStats {
        self.indexes.stats()
    }

    /// Hands each cached index to the store to keep for the next opening
    /// ([`MemoryStore::keep_index`]): for a server stopping. The indexes stay cached. A
    /// store that cannot keep one logs why and the rest are still offered: the only cost
    /// of a lost one is a slower first recall next time. How many indexes were offered.
    pub async fn keep_indexes(&self) -> usize {
        let mut offered = 0;
        for (user, slot) in self.indexes.slots() {
            let held = slot.read().await;
            let Some(built) = held.as_ref() else {
                continue;
            };
            offered += 1;
            if let Err(e) = self.store.keep_index(&user, built).await {
                tracing::warn!(error = %e, "an index was not kept for the next opening");
            }
        }
        offered
    }

    /// The user's cached index, rebuilt from the store only when its generation moved.
    async fn current_index(
        &self,
        user: &str,
        dimension: usize,
    ) -> Result<OwnedRwLockReadGuard<Option<BuiltIndex>>> {
        let slot = self.indexes.slot(user);
        let current = self.store.generation(user).await?;
        let fresh = |b: &Option<BuiltIndex>| {
            b.as_ref()
                .is_some_and(|b| b.generation == current && b.index.dimension() == dimension)
        };
        let read = slot.clone().read_owned().await;
        if fresh(&read) {
            self.indexes.hit();
            return Ok(read);
        }
        drop(read);
        let mut write = slot.write_owned().await;
        if !fresh(&write) {
            self.indexes.miss();
            let built = self.store.build_index(user, dimension).await?;
            self.indexes.resized(user, built.index.approx_bytes());
            *write = Some(built);
        } else {
            self.indexes.hit();
        }
        Ok(write.downgrade())
    }

    /// Applies this process's own write to the cached index when it is the only change
    /// since the cache was built; otherwise drops the cache so the next recall rebuilds.
    async fn update_cached(
        &self,
        user: &str,
        generation: Generation,
        apply: impl FnOnce(&mut MemoryIndex) -> bool,
    ) {
        // Only a cache that exists is updated; a write must not create one.
        let Some(slot) = self.indexes.existing(user) else {
            return;
        };
        let mut cached = slot.write().await;
        let Some(built) = cached.as_mut() else {
            return;
        };
        if built.generation >= generation {
            return; // a rebuild already saw this write
        }
        let before = built.index.len();
        if built.generation.0 + 1 == generation.0 && apply(&mut built.index) {
            built.generation = generation;
            // Proportional to the memories held: exact enough for a bound, and O(1) where
            // measuring again would walk every memory on every write.
            let after = built.index.len();
            let fresh = (before == 0).then(|| built.index.approx_bytes());
            self.indexes.resized_from(user, |held| match fresh {
                Some(bytes) => bytes,
                None => held.saturating_mul(after) / before,
            });
        } else {
            *cached = None;
            self.indexes.resized(user, 0);
        }
    }
}

/// The supersession reason a caller's correction records (`history` shows it).
pub const REPLACED_BY_CALLER: &str = "replaced by the caller";

/// What [`CortexMemory::memorize_with`] may add to a memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemorizeOptions {
    /// When it became true, if not now (not in the future).
    pub created_at: Option<DateTime<Utc>>,
    /// The memory this one corrects: a full id or a unique prefix of a live memory.
    pub replaces: Option<String>,
    /// The supersession's reason for `history` (default [`REPLACED_BY_CALLER`]).
    pub reason: Option<String>,
    /// Leaves out the extraction layers' call: a retag's content is the old memory's, whose
    /// events and entity links are already recorded.
    pub skip_extraction: bool,
    /// When the memory expires (after now): from then on it is never recalled.
    pub expires_at: Option<DateTime<Utc>>,
    /// What the caller knows about the memory (its entities, their relations, its event):
    /// written with it in its transaction, as the extraction layer's records, whatever the
    /// layer flags; the extraction call is then not made.
    pub structure: Option<MemoryStructure>,
}

/// Which tags a new version of a memory gets.
#[derive(Debug, Clone, Copy)]
enum Tags<'a> {
    /// These; when none are given and the memory corrects another, the corrected one's:
    /// a caller who corrects the text has not asked to drop the labels.
    OrReplaced(&'a [String]),
    /// Exactly these, even none: a retag has decided the whole set.
    Exactly(&'a [String]),
}

/// Unit vectors for [`current::prefer_current`]; a memory without one (left the store
/// since its candidate list was read) gets an empty vector, which is close to nothing.
fn units_or_empty(units: Vec<Option<Vec<f32>>>) -> Vec<Vec<f32>> {
    units.into_iter().map(Option::unwrap_or_default).collect()
}

/// A reranker answer is usable when every index is in range and none repeats.
fn check_rerank(
    hits: Vec<RerankHit>,
    candidates: usize,
) -> std::result::Result<Vec<RerankHit>, String> {
    let mut seen = vec![false; candidates];
    for hit in &hits {
        if hit.index >= candidates || std::mem::replace(&mut seen[hit.index], true) {
            return Err(format!("index {} is out of range or repeated", hit.index));
        }
        if !hit.score.is_finite() {
            return Err(format!("score {} is not finite", hit.score));
        }
    }
    if hits.is_empty() {
        return Err("no results".to_owned());
    }
    Ok(hits)
}
