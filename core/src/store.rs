//! The memory seam between the engine and storage: [`MemoryStore`], everything memorize and
//! recall need. It is one of three store traits: the layers' records live behind
//! [`EnrichmentStore`](crate::enrichment_store::EnrichmentStore) and export, import and re-embedding behind
//! [`TransferStore`](crate::transfer::TransferStore), so a backend can ship this one first.

use crate::error::StoreResult;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::StoreError;
use crate::filter::MemoryFilter;
use crate::hybrid::ScoredMemory;
use crate::index::MemoryIndex;
use crate::memory::Supersession;
use crate::memory::{Memory, MemoryId};
use crate::new_memory::NewMemory;
use crate::signature::EmbeddingSignature;

/// What a backend does natively (the OpenDAL way: flat flags, all off by default). The
/// engine reads `search`; the conformance suite reads every flag and holds the backend to
/// each one it claims.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// [`MemoryStore::search`] runs the whole hybrid query in the backend. The engine then
    /// calls it instead of building an index, and the suite checks it returns exactly what
    /// the in-process path returns.
    pub search: bool,
    /// Data outlives the process: the suite closes every handle, reopens and compares.
    pub persistent: bool,
    /// Other processes may write the same store concurrently: the suite runs its two-engine
    /// scenarios over two separate handles, so each engine must see the other's writes
    /// through the change counter.
    pub shared: bool,
    /// [`MemoryStore::add`] writes a memory's [`NewMemory::records`] (the caller's
    /// entities, relations and event) in its transaction, as
    /// [`EnrichmentStore::record_extraction`](crate::enrichment_store::EnrichmentStore::record_extraction)
    /// would. A store without it refuses such a memory and the engine refuses the caller's
    /// structure before any embed.
    pub records: bool,
}

/// A per-user change counter. Every write that changes a user's live set (add, delete,
/// supersede) bumps it by one in the same transaction, so a cached index knows whether
/// it is current and whether one write of its own is the only change since.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Generation(pub u64);

/// A stored memory and the user's generation right after the write.
#[derive(Debug, Clone, PartialEq)]
pub struct Added {
    pub memory: Memory,
    pub generation: Generation,
}

/// What a delete removed: the generation after it, and the memories it had superseded,
/// which are live again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    pub generation: Generation,
    pub restored: Vec<MemoryId>,
}

/// A user's live memories as an index, and the generation it reflects.
#[derive(Debug, Clone)]
pub struct BuiltIndex {
    pub index: MemoryIndex,
    pub generation: Generation,
}

/// One hybrid query for the [`MemoryStore::search`] pushdown.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchRequest {
    pub query: String,
    /// The distinct query terms in byte order, from the core tokenizer.
    pub terms: Vec<String>,
    pub embedding: Vec<f32>,
    pub top_k: usize,
    /// Only memories that pass are candidates of either list; BM25's statistics, the
    /// lexical bound and the neighbours stay those of every live memory (validated,
    /// normal form).
    pub filter: MemoryFilter,
}

/// A memory's place in a list: newest `created_at` first (the date a memory shows), and
/// of two with the same date the later stored first. A larger key is listed earlier.
/// Every store orders by it, so a cursor means the same on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ListKey {
    pub created_at: DateTime<Utc>,
    pub seq: i64,
}

impl ListKey {
    pub fn of(memory: &Memory) -> Self {
        Self {
            created_at: memory.created_at,
            seq: memory.seq,
        }
    }
}

/// One page of [`MemoryStore::list`]: live memories that pass `filter`, in [`ListKey`]
/// order (newest first), only those after `before`, at most `limit`. Keyed by position,
/// so every memory there when a walk began is on exactly one of its pages, whatever is
/// written meanwhile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    pub filter: MemoryFilter,
    pub limit: usize,
    /// Only memories listed after this one (the last of the previous page): a smaller key.
    pub before: Option<ListKey>,
}

impl ListQuery {
    /// The newest `limit` live memories, unfiltered.
    pub fn newest(limit: usize) -> Self {
        Self {
            limit,
            ..Self::default()
        }
    }

    /// Whether `memory` belongs on this page's side of the cursor and passes the filter.
    pub fn admits(&self, memory: &Memory) -> bool {
        self.before.is_none_or(|k| ListKey::of(memory) < k) && self.filter.matches(memory)
    }
}

/// Storage for memories, their vectors, the embedding signature and the supersessions that
/// decide the live set: everything memorize and recall need, and nothing more. Every method
/// is scoped to one user; nothing is read or written across users. The layers' records
/// live behind [`EnrichmentStore`](crate::enrichment_store::EnrichmentStore).
#[async_trait]
pub trait MemoryStore: Send + Sync + fmt::Debug {
    /// What this backend does natively.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// The signature recorded by the first write, if any.
    async fn signature(&self) -> StoreResult<Option<EmbeddingSignature>>;

    /// Stores a memory and its vector in one transaction. The first write records
    /// `signature`; a later write with another one fails with
    /// [`StoreError::SignatureMismatch`] and writes nothing.
    async fn add(
        &self,
        memory: &NewMemory,
        embedding: &[f32],
        signature: &EmbeddingSignature,
    ) -> StoreResult<Added>;

    async fn get(&self, user: &str, id: &MemoryId) -> StoreResult<Option<Memory>>;

    /// Ids whose hyphenated lowercase form starts with `prefix` (already lowercased).
    async fn find_by_prefix(&self, user: &str, prefix: &str) -> StoreResult<Vec<MemoryId>>;

    /// Deletes a memory with its events, entity links, the edges read from it and its
    /// supersessions (memories it superseded become live again). `None` when it did not
    /// exist.
    async fn delete(&self, user: &str, id: &MemoryId) -> StoreResult<Option<Deleted>>;

    /// One page of live memories, newest first (see [`ListQuery`] and [`ListKey`]).
    async fn list(&self, user: &str, query: &ListQuery) -> StoreResult<Vec<Memory>>;

    /// Number of memories no correction superseded, expired ones included: they stay
    /// stored until pruned. (A user's summary splits them by
    /// [`MemoryState`](crate::memory::MemoryState).)
    async fn count(&self, user: &str) -> StoreResult<u64>;

    /// The user's current change counter (cheap: read on every recall).
    async fn generation(&self, user: &str) -> StoreResult<Generation>;

    /// The user's live memories materialised into an index of `dimension`.
    async fn build_index(&self, user: &str, dimension: usize) -> StoreResult<BuiltIndex>;

    /// The whole hybrid query run natively, for backends with
    /// [`Capabilities::search`]; it must return what `hybrid_retrieve` returns over
    /// [`build_index`](Self::build_index).
    async fn search(&self, user: &str, request: &SearchRequest) -> StoreResult<Vec<ScoredMemory>> {
        let _ = (user, request);
        Err(StoreError::Unsupported("search"))
    }

    /// The stored embeddings of `ids`, in order, exactly as written (`None` for a memory
    /// that is not the user's or no longer stored). A store that can
    /// [`search`](Self::search) provides it: recall compares its first candidates' own
    /// vectors (`crate::current`), which an in-process index already holds.
    async fn embeddings(&self, user: &str, ids: &[MemoryId]) -> StoreResult<Vec<Option<Vec<f32>>>> {
        let _ = (user, ids);
        Err(StoreError::Unsupported("embeddings"))
    }

    /// Keeps `built`, an index of `user`'s memories that the caller kept up to date with
    /// its own writes, where the next [`build_index`](Self::build_index) (in this process
    /// or the next) can read it back, when it still describes the user's memories as they
    /// are: for an engine letting go of its indexes (at shutdown). A store that keeps
    /// nothing between builds (the default) does nothing.
    async fn keep_index(&self, user: &str, built: &BuiltIndex) -> StoreResult<()> {
        let _ = (user, built);
        Ok(())
    }

    /// Marks `old_id` superseded by `new_id` (both must exist for the user).
    async fn supersede(&self, user: &str, supersession: &Supersession) -> StoreResult<Generation>;

    /// Every supersession that names `memory_id` as old or new, oldest first.
    async fn supersessions(
        &self,
        user: &str,
        memory_id: &MemoryId,
    ) -> StoreResult<Vec<Supersession>>;
}

// Forward every method, including the defaulted ones, so a wrapped store keeps its
// capabilities and its pushdown.
macro_rules! forward_store {
    ($($ptr:ident),*) => {$(
        #[async_trait]
        impl<S: MemoryStore + ?Sized> MemoryStore for $ptr<S> {
            fn capabilities(&self) -> Capabilities {
                (**self).capabilities()
            }
            async fn signature(&self) -> StoreResult<Option<EmbeddingSignature>> {
                (**self).signature().await
            }
            async fn add(
                &self,
                memory: &NewMemory,
                embedding: &[f32],
                signature: &EmbeddingSignature,
            ) -> StoreResult<Added> {
                (**self).add(memory, embedding, signature).await
            }
            async fn get(&self, user: &str, id: &MemoryId) -> StoreResult<Option<Memory>> {
                (**self).get(user, id).await
            }
            async fn find_by_prefix(&self, user: &str, prefix: &str) -> StoreResult<Vec<MemoryId>> {
                (**self).find_by_prefix(user, prefix).await
            }
            async fn delete(&self, user: &str, id: &MemoryId) -> StoreResult<Option<Deleted>> {
                (**self).delete(user, id).await
            }
            async fn list(&self, user: &str, query: &ListQuery) -> StoreResult<Vec<Memory>> {
                (**self).list(user, query).await
            }
            async fn count(&self, user: &str) -> StoreResult<u64> {
                (**self).count(user).await
            }
            async fn generation(&self, user: &str) -> StoreResult<Generation> {
                (**self).generation(user).await
            }
            async fn build_index(&self, user: &str, dimension: usize) -> StoreResult<BuiltIndex> {
                (**self).build_index(user, dimension).await
            }
            async fn search(
                &self,
                user: &str,
                request: &SearchRequest,
            ) -> StoreResult<Vec<ScoredMemory>> {
                (**self).search(user, request).await
            }
            async fn embeddings(
                &self,
                user: &str,
                ids: &[MemoryId],
            ) -> StoreResult<Vec<Option<Vec<f32>>>> {
                (**self).embeddings(user, ids).await
            }
            async fn keep_index(&self, user: &str, built: &BuiltIndex) -> StoreResult<()> {
                (**self).keep_index(user, built).await
            }
            async fn supersede(
                &self,
                user: &str,
                supersession: &Supersession,
            ) -> StoreResult<Generation> {
                (**self).supersede(user, supersession).await
            }
            async fn supersessions(
                &self,
                user: &str,
                memory_id: &MemoryId,
            ) -> StoreResult<Vec<Supersession>> {
                (**self).supersessions(user, memory_id).await
            }
        }
    )*};
}

forward_store!(Arc, Box);
