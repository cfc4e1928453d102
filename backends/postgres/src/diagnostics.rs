//! What a store handle can tell about its own searches: which BM25 path each took, the
//! rarest-first lookups, the parallel searches, and the plans of a search's statements.
//! Tests, the bench and someone diagnosing a slow recall read these; an application does
//! not, so they sit behind one handle instead of beside `MemoryStore` on the store.

use cortex_core::embedding::normalized;
use cortex_core::{error::StoreError, store::SearchRequest};

use crate::config::{AnnIndex, HnswBuild};
use crate::hnsw_memory::{HnswMemory, hnsw_memory};
use crate::replicas::{ReplicaReads, ReplicaStatus, Replicas};
use crate::search::dense_plan::{HNSW_INDEX, hnsw_built_with};
use crate::search::ivfflat::{IVFFLAT_INDEX, built_lists};
use crate::search::lexical_path::{LexicalPaths, RarestFirstLookups};
use crate::store::PostgresStore;

/// A store handle's diagnostics (see [`PostgresStore::diagnostics`]).
#[derive(Debug, Clone, Copy)]
pub struct Diagnostics<'a> {
    store: &'a PostgresStore,
}

impl PostgresStore {
    /// The diagnostics of this handle's searches.
    pub fn diagnostics(&self) -> Diagnostics<'_> {
        Diagnostics { store: self }
    }
}

impl Diagnostics<'_> {
    /// How many searches of this handle took each BM25 path (pruning, see
    /// `CORTEX_PG_PRUNE_BUDGET`).
    pub fn lexical_paths(&self) -> LexicalPaths {
        self.store.path_counters().snapshot()
    }

    /// How many candidates this handle's rarest-first searches had and how many of them
    /// they looked up.
    pub fn rarest_first_lookups(&self) -> RarestFirstLookups {
        self.store.path_counters().lookups()
    }

    /// How many of this handle's searches ran their dense side on a second connection,
    /// beside the BM25 side (see [`crate::PostgresConfig::parallel_search`]).
    pub fn parallel_searches(&self) -> u64 {
        self.store.parallel_search_count()
    }

    /// How many of this handle's HNSW searches walked the graph twice: an unfiltered
    /// search of a user whose live count reaches the candidates it asks for walks it
    /// first without pgvector's iterative scan (5-7% off the median at a million memories,
    /// [`PostgresConfig::plain_walk`](crate::PostgresConfig::plain_walk)); when that walk
    /// returns fewer candidates than asked (the user's memories are too few among the
    /// nearest `ef_search` of every user's), it runs again with the scan, and that user's
    /// later searches on this handle scan iteratively from the start.
    pub fn hnsw_rewalks(&self) -> u64 {
        self.store.rewalk_count()
    }

    /// How many of this handle's filtered searches were planned exactly though HNSW would
    /// have served them unfiltered, because fewer than
    /// [`hnsw_threshold`](crate::PostgresConfig::hnsw_threshold) of the user's live
    /// memories passed the filter (or pgvector has no iterative scan).
    pub fn filtered_exact_searches(&self) -> u64 {
        self.store.filtered_exact_count()
    }

    /// The plans of the search statements for `request` (EXPLAIN ANALYZE of the BM25
    /// statement with its generic plan (a filtered one's for its values), of the dense
    /// one for its values, then of the fused one, run with the same settings as the
    /// search; a filtered search in HNSW mode counts its passing memories first, and a
    /// recall's expiry condition is left out when nothing has expired, as the search
    /// does), for diagnosing a slow recall. Always on one connection, as when no second
    /// connection is free.
    pub async fn explain_search(
        &self,
        user: &str,
        request: &SearchRequest,
    ) -> Result<Vec<String>, StoreError> {
        self.store
            .bounded(async {
                let Some(signature) = self.store.known_signature().await? else {
                    return Ok(Vec::new());
                };
                // On the primary: the plans of the server that holds every write.
                let on = self.store.connections();
                let request = self.store.search_request(on, user, request).await?;
                let plan = self
                    .store
                    .plan(on, user, signature.dimension, &request.filter)
                    .await?;
                let unit = normalized(&request.embedding);
                self.store
                    .search_of(on, plan, user, &unit, &request)
                    .explain()
                    .await
            })
            .await
    }

    /// How this handle's reads went with read replicas (all zero without): served by a
    /// replica, at once or after waiting for it to replay the user's last write, or by the
    /// primary, and why; and the replicas passed over.
    pub fn replica_reads(&self) -> ReplicaReads {
        self.store
            .replicas()
            .map(Replicas::reads)
            .unwrap_or_default()
    }

    /// Each read replica as the prober last found it (empty without).
    pub fn replicas(&self) -> Vec<ReplicaStatus> {
        self.store
            .replicas()
            .map(Replicas::status)
            .unwrap_or_default()
    }

    /// Users whose last write through this handle some usable replica has not replayed
    /// yet: the prober forgets each once every usable replica has.
    pub fn pending_writes(&self) -> usize {
        self.store.replicas().map_or(0, Replicas::pending_writes)
    }

    /// The settings the HNSW index was built with (see [`HnswBuild`]), `None` while there
    /// is no index: they may differ from this handle's
    /// [`hnsw_build`](crate::PostgresConfig::hnsw_build), which applies to a new build.
    pub async fn hnsw_built_with(&self) -> Result<Option<HnswBuild>, StoreError> {
        self.store
            .bounded(async {
                let client = self.store.client().await?;
                hnsw_built_with(&client, self.store.names()).await
            })
            .await
    }

    /// The approximate index's size beside the server's `shared_buffers` (HNSW's, or
    /// IVFFlat's when [`ann_index`](crate::PostgresConfig::ann_index) names it): an HNSW
    /// index that does not fit makes every search several times slower (see
    /// [`HnswMemory`]).
    pub async fn hnsw_memory(&self) -> Result<HnswMemory, StoreError> {
        let index = match self.store.config().ann_index {
            AnnIndex::Hnsw => HNSW_INDEX,
            AnnIndex::IvfFlat => IVFFLAT_INDEX,
        };
        self.store
            .bounded(async {
                let client = self.store.client().await?;
                hnsw_memory(&client, self.store.names(), index).await
            })
            .await
    }

    /// The lists the IVFFlat index was built with, `None` while there is none.
    pub async fn ivfflat_lists(&self) -> Result<Option<u32>, StoreError> {
        self.store
            .bounded(async {
                let client = self.store.client().await?;
                built_lists(&client, self.store.names()).await
            })
            .await
    }
}
