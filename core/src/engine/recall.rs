//! recall: hybrid retrieval over the user's index (or the store's pushdown), the
//! current over the stale, and the optional reranker.

use std::sync::atomic::Ordering;

use crate::current;
use crate::error::Result;
use crate::filter::MemoryFilter;
use crate::hybrid::{ScoredMemory, hybrid_retrieve_filtered};
use crate::listing::{MAX_LIMIT, check_limit};
use crate::memory::{Memory, MemoryId, validate_content, validate_user};
use crate::provider::{EmbedTask, TokenUsage};
use crate::reranker::{RerankHit, Reranker};
use crate::store::{MemoryStore, SearchRequest};
use crate::tokenizer::query_terms;
use crate::usage::CallKind;

use super::CortexMemory;

impl CortexMemory {
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
        let current = (!past).then_some(same_topic);
        let mut candidates = if self.store.capabilities().search {
            let request = SearchRequest {
                query: query.to_owned(),
                terms,
                embedding,
                top_k: fetch,
                filter,
            };
            self.pushed_down(user, &request, current).await?
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
                    if let Some(same_topic) = current {
                        let units = b.index.unit_vectors(&head(&found))?;
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

    /// The store's own hybrid search (the pushdown), then, with `current` (the same-topic
    /// cosine), the current-over-stale stage over the head's stored vectors.
    async fn pushed_down(
        &self,
        user: &str,
        request: &SearchRequest,
        current: Option<f32>,
    ) -> Result<Vec<ScoredMemory>> {
        let mut found = self.store.search(user, request).await?;
        if let Some(same_topic) = current {
            let ids: Vec<MemoryId> = head(&found).iter().map(|m| m.id).collect();
            let stored = self.store.embeddings(user, &ids).await?;
            let units = stored
                .into_iter()
                .map(|v| v.map(|v| crate::embedding::normalized(&v)))
                .collect();
            current::prefer_current(&mut found, &units_or_empty(units), same_topic);
        }
        Ok(found)
    }

    /// The reranker's top `top_k` of `candidates`; on any failure, the fused top `top_k`.
    pub(super) async fn rerank(
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
}

/// The memories the current-over-stale stage compares, whichever path found them.
fn head(found: &[ScoredMemory]) -> Vec<&Memory> {
    found
        .iter()
        .take(current::HEAD)
        .map(|c| &c.memory)
        .collect()
}

/// Unit vectors for [`current::prefer_current`]; a memory without one (left the store
/// since its candidate list was read) gets an empty vector, which is close to nothing.
pub(super) fn units_or_empty(units: Vec<Option<Vec<f32>>>) -> Vec<Vec<f32>> {
    units.into_iter().map(Option::unwrap_or_default).collect()
}

/// A reranker answer is usable when every index is in range and none repeats.
pub(super) fn check_rerank(
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
