//! How a search runs on this store: the approximate index built once, the dense plan
//! per user (exact, or the index, from the user's live count and the filter), and the
//! pushdown's statements for one search.

use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use cortex_core::embedding::{normalized, validate_embedding};
use cortex_core::hybrid::{ScoredMemory, candidate_pool};
use cortex_core::{
    error::StoreError, error::StoreResult, filter::MemoryFilter, store::SearchRequest,
};
use sea_query::{Expr, ExprTrait, Query};

use crate::config::DenseMode;
use crate::filter::any_expired;
use crate::pool::Connections;
use crate::search::ann_index::ensure_ann_index;
use crate::search::dense_plan::{
    DensePlan, FILTERED_EXACT_BELOW, check_hnsw_dimension, passing_count,
};
use crate::search::lexical_path::PathCounters;
use crate::sql::{build, get, row_opt};
use crate::tables::Users;
use crate::{pg_err, search};

use super::{MAX_CACHED_COUNTS, PostgresStore, limit_of};

impl PostgresStore {
    /// Builds the HNSW index on a task of its own: a call past its deadline stops waiting
    /// for a long build without cutting it off midway (an interrupted concurrent build
    /// leaves an invalid index that searches ignore until it is rebuilt by hand).
    pub(super) async fn ensure_index(&self, dimension: usize) -> Result<(), StoreError> {
        if self.inner.index_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move {
            ensure_ann_index(
                &inner.pool,
                &inner.names,
                dimension,
                &inner.config,
                &inner.index_ready,
                &inner.ivf_lists,
            )
            .await
        })
        .await
        .map_err(|e| StoreError::backend("postgres", e))?
    }

    /// Exact or HNSW for this user's next search with `filter`: a filtered search that
    /// HNSW would serve is exact when fewer than `hnsw_threshold` of the user's live
    /// memories pass (or always, without pgvector's iterative scan); see
    /// `search::dense_plan`.
    pub(crate) async fn plan(
        &self,
        on: &Connections,
        user: &str,
        dimension: usize,
        filter: &MemoryFilter,
    ) -> Result<DensePlan, StoreError> {
        let plan = self.unfiltered_plan(on, user, dimension).await?;
        if !plan.is_index() || filter.is_empty() || !self.few_pass(on, user, filter).await? {
            return Ok(plan);
        }
        self.inner.filtered_exact.fetch_add(1, Ordering::Relaxed);
        Ok(DensePlan::Exact)
    }

    /// `request` as the search runs it. Every recall asks only for memories not expired at
    /// its `alive_at`; when none of the user's live memories has expired by then (one
    /// probe, which the partial index `memories_user_expiry` answers), that condition
    /// holds for every row and is left out, so the results are the same and a search with
    /// no other condition takes the unfiltered paths (pruned BM25, generic plans, HNSW
    /// without a count). Otherwise it stays, a filter like any other.
    ///
    /// The probe is its own statement, just before the search's snapshot (whose first
    /// statement depends on its answer), not in it: a memory already expired at `alive_at`
    /// that becomes live in between (an import of one, a write committed from a clock
    /// behind this one's, or one revived by forgetting its successor) can be returned by
    /// that one search.
    pub(crate) async fn search_request<'r>(
        &self,
        on: &Connections,
        user: &str,
        request: &'r SearchRequest,
    ) -> Result<Cow<'r, SearchRequest>, StoreError> {
        let Some(at) = request.filter.alive_at else {
            return Ok(Cow::Borrowed(request));
        };
        let probe = any_expired(self.names(), user, at);
        let client = on.get().await?;
        let expired: bool = match row_opt(&client, &probe).await? {
            Some(row) => get(&row, 0)?,
            None => return Err(StoreError::Corrupt("EXISTS returned no row".into())),
        };
        drop(client);
        if expired {
            return Ok(Cow::Borrowed(request));
        }
        let mut request = request.clone();
        request.filter.alive_at = None;
        Ok(Cow::Owned(request))
    }

    /// Whether too few of the user's live memories pass `filter` for an HNSW search (see
    /// `search::dense_plan`): counted up to `hnsw_threshold`.
    async fn few_pass(
        &self,
        on: &Connections,
        user: &str,
        filter: &MemoryFilter,
    ) -> Result<bool, StoreError> {
        if !self.inner.server.iterative_scan {
            return Ok(true);
        }
        let threshold = Ord::min(self.inner.config.hnsw_threshold, FILTERED_EXACT_BELOW);
        if threshold == 0 {
            return Ok(false);
        }
        let built = passing_count(self.names(), user, filter, limit_of(threshold));
        let client = on.get().await?;
        let passing: i64 = match row_opt(&client, &built).await? {
            Some(row) => get(&row, 0)?,
            None => 0,
        };
        Ok(u64::try_from(passing).unwrap_or(0) < threshold)
    }

    /// Exact or HNSW for this user's next search, by the mode and the user's live count.
    async fn unfiltered_plan(
        &self,
        on: &Connections,
        user: &str,
        dimension: usize,
    ) -> Result<DensePlan, StoreError> {
        match self.inner.config.dense_mode {
            DenseMode::Exact => Ok(DensePlan::Exact),
            DenseMode::Hnsw => {
                self.ensure_index(dimension).await?;
                Ok(DensePlan::Index { dimension })
            }
            DenseMode::Auto => {
                if check_hnsw_dimension(dimension).is_err() {
                    return Ok(DensePlan::Exact);
                }
                let cached = self
                    .inner
                    .live_counts
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(user)
                    .copied();
                let live = match cached {
                    Some(n) => n,
                    None => self.live_count(on, user).await?,
                };
                if live < self.inner.config.hnsw_threshold {
                    return Ok(DensePlan::Exact);
                }
                if self.inner.index_ready.load(Ordering::Acquire) {
                    return Ok(DensePlan::Index { dimension });
                }
                // Build the index in the background; search exactly until it is there.
                if !self.inner.index_building.swap(true, Ordering::AcqRel) {
                    let inner = Arc::clone(&self.inner);
                    tokio::spawn(async move {
                        let built = ensure_ann_index(
                            &inner.pool,
                            &inner.names,
                            dimension,
                            &inner.config,
                            &inner.index_ready,
                            &inner.ivf_lists,
                        )
                        .await;
                        if let Err(e) = built {
                            tracing::warn!(
                                error = %e,
                                index = inner.config.ann_index.as_str(),
                                "building the approximate index failed"
                            );
                            inner.index_building.store(false, Ordering::Release);
                        }
                    });
                }
                Ok(DensePlan::Exact)
            }
        }
    }

    /// `user`'s live memories, read on `on` (the statistics row counts exactly the live
    /// memories, see `postings`), and remembered (see `remember_live_count`).
    pub(super) async fn live_count(&self, on: &Connections, user: &str) -> StoreResult<u64> {
        let built = build(
            Query::select()
                .column(Users::DocCount)
                .from(self.names().table(Users::Table))
                .and_where(Expr::col(Users::UserId).eq(user)),
        );
        let client = on.get().await?;
        let live = match row_opt(&client, &built).await? {
            Some(row) => u64::try_from(get::<i64>(&row, 0)?).unwrap_or(0),
            None => 0,
        };
        self.remember_live_count(user, live);
        Ok(live)
    }

    /// Remembers `user`'s live count as a search saw it: it chooses exact or HNSW in
    /// `auto` mode, and whether an HNSW walk may skip the iterative scan (`walks_plain`).
    pub(super) fn remember_live_count(&self, user: &str, live: u64) {
        if self.inner.config.dense_mode == DenseMode::Exact {
            return;
        }
        let mut counts = self
            .inner
            .live_counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if counts.len() >= MAX_CACHED_COUNTS && !counts.contains_key(user) {
            counts.clear();
        }
        counts.insert(user.to_owned(), live);
    }

    /// This handle's BM25 path counters (read through [`PostgresStore::diagnostics`]).
    pub(crate) fn path_counters(&self) -> &PathCounters {
        &self.inner.lexical_paths
    }

    /// How many of this handle's searches ran their two sides on two connections.
    pub(crate) fn parallel_search_count(&self) -> u64 {
        self.inner.parallel_searches.load(Ordering::Relaxed)
    }

    /// How many of this handle's filtered searches were exact because few memories passed.
    pub(crate) fn filtered_exact_count(&self) -> u64 {
        self.inner.filtered_exact.load(Ordering::Relaxed)
    }

    /// One search as the pushdown runs it (see [`search::Search`]).
    pub(crate) fn search_of<'a>(
        &'a self,
        on: &'a Connections,
        plan: DensePlan,
        user: &'a str,
        unit: &'a [f32],
        request: &'a SearchRequest,
    ) -> search::Search<'a> {
        search::Search {
            store: search::Store {
                names: &self.inner.names,
                config: &self.inner.config,
                pool: on,
                iterative_scan: self.inner.server.iterative_scan,
                ivf_lists: self.inner.ivf_lists.load(Ordering::Acquire),
            },
            plan,
            user,
            unit,
            request,
            plain_first: plan.is_index()
                && self.inner.config.plain_walk
                && request.filter.is_empty()
                && self.walks_plain(user, request),
        }
    }

    /// Whether an HNSW search of `user` may walk the graph without the iterative scan
    /// first: when the user's live count, as last seen, reaches the candidates the walk
    /// asks for (a smaller user's walk always comes back short), and no walk of theirs has
    /// come back short on this handle. A filtered search always scans iteratively: the
    /// filter drops candidates the walk cannot know of.
    fn walks_plain(&self, user: &str, request: &SearchRequest) -> bool {
        let wanted = search::dense_plan::hnsw_candidates(candidate_pool(request.top_k));
        let live = self
            .inner
            .live_counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(user)
            .copied();
        let short = || {
            self.inner
                .short_walks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(user)
        };
        live.is_some_and(|n| n >= u64::try_from(wanted).unwrap_or(u64::MAX)) && !short()
    }

    /// How many of this handle's searches walked the HNSW graph twice: once without the
    /// iterative scan, short, then with it.
    pub(crate) fn rewalk_count(&self) -> u64 {
        self.inner.rewalks.load(Ordering::Relaxed)
    }

    /// `MemoryStore::search` on `on` (the primary's or a replica's connections): the
    /// pushdown, its counters and the live count it saw. Only the signature (cached) and
    /// a missing approximate index (built) are the primary's.
    pub(super) async fn pushdown(
        &self,
        on: &Connections,
        user: &str,
        request: &SearchRequest,
    ) -> StoreResult<Vec<ScoredMemory>> {
        if request.top_k == 0 {
            return Ok(Vec::new());
        }
        let Some(signature) = self.known_signature().await? else {
            return Ok(Vec::new());
        };
        validate_embedding(&request.embedding, signature.dimension).map_err(pg_err)?;
        let unit = normalized(&request.embedding);
        let request = self.search_request(on, user, request).await?;
        let plan = self
            .plan(on, user, signature.dimension, &request.filter)
            .await?;
        let found = self
            .search_of(on, plan, user, &unit, &request)
            .run()
            .await?;
        let mut out = Vec::with_capacity(found.rows.len());
        let mut live = None;
        for row in &found.rows {
            let (hit, count) = search::decode(row)?;
            live = count.or(live);
            out.push(hit);
        }
        if found.parallel {
            self.inner.parallel_searches.fetch_add(1, Ordering::Relaxed);
        }
        if found.rewalked {
            self.inner.rewalks.fetch_add(1, Ordering::Relaxed);
            let mut short = self
                .inner
                .short_walks
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if short.len() >= MAX_CACHED_COUNTS {
                short.clear();
            }
            short.insert(user.to_owned());
        }
        self.inner.lexical_paths.record(found.path, found.lookups);
        if let Some(n) = live {
            self.remember_live_count(user, u64::try_from(n).unwrap_or(0));
        }
        Ok(out)
    }
}
