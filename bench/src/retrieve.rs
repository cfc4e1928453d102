//! The retrievers a run compares.
//!
//! `hybrid` is the product path: `CortexMemory::recall` (dense + BM25 fused, pushed
//! down to the store when it can). The `dense` and `bm25` ablations read the same stored
//! memories back through `MemoryStore::build_index` and call the index's `dense_search`
//! or `lexical_search` directly — each of the two lists the fusion reads, at the full depth —
//! so all three rank exactly the same memories with the same vectors on any backend.

use std::collections::HashMap;
use std::fmt;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use clap::ValueEnum;
use cortex_core::embedding::validate_embedding;
use cortex_core::tokenizer::query_terms;
use cortex_core::{
    engine::CortexMemory, index::MemoryIndex, memory::MemoryId, provider::EmbedTask,
    provider::LLMProvider, provider::TokenUsage, store::MemoryStore,
};
use serde::Serialize;

use crate::error::BenchError;

/// The depth of the lists `--lists` writes.
pub const LISTS_DEPTH: usize = 200;

/// A way to rank memories for a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Retriever {
    /// Dense and BM25 fused (`cortex_core::fusion`), then the current over the stale
    /// (`cortex_core::current`): what `recall` returns.
    Hybrid,
    /// Dense and BM25 fused only, without the current-over-stale stage: the ablation that
    /// says what that stage changes.
    Fused,
    /// Cosine similarity only.
    Dense,
    /// Okapi BM25 only.
    Bm25,
    /// `hybrid`, then the reranker of `CORTEX_RERANK_PROVIDER` orders its fused pool
    /// (`--rerank-depth` candidates): what `recall` returns with a reranker configured.
    Reranked,
}

impl Retriever {
    pub fn as_str(self) -> &'static str {
        match self {
            Retriever::Hybrid => "hybrid",
            Retriever::Fused => "fused",
            Retriever::Dense => "dense",
            Retriever::Bm25 => "bm25",
            Retriever::Reranked => "reranked",
        }
    }
}

impl fmt::Display for Retriever {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Ranks one question's memories with each retriever asked for.
#[derive(Debug)]
pub struct Ranker<'a> {
    pub engine: &'a CortexMemory,
    /// The same engine with a reranker, for [`Retriever::Reranked`].
    pub reranked: Option<&'a CortexMemory>,
    pub store: &'a Arc<dyn MemoryStore>,
    pub embedder: &'a Arc<dyn LLMProvider>,
    pub user: &'a str,
    pub question_id: &'a str,
    /// Built on first use by an ablation, then shared by the others.
    index: Option<MemoryIndex>,
    /// Query embeddings the ablations made outside the engine.
    pub query_embeds: u64,
    pub query_tokens: TokenUsage,
}

impl<'a> Ranker<'a> {
    pub fn new(
        engine: &'a CortexMemory,
        reranked: Option<&'a CortexMemory>,
        store: &'a Arc<dyn MemoryStore>,
        embedder: &'a Arc<dyn LLMProvider>,
        user: &'a str,
        question_id: &'a str,
    ) -> Self {
        Self {
            engine,
            reranked,
            store,
            embedder,
            user,
            question_id,
            index: None,
            query_embeds: 0,
            query_tokens: TokenUsage::default(),
        }
    }

    /// The ids of the best `depth` memories for `query`, best first.
    pub async fn rank(
        &mut self,
        retriever: Retriever,
        query: &str,
        depth: usize,
    ) -> Result<Vec<MemoryId>, BenchError> {
        match retriever {
            Retriever::Hybrid => {
                let found = self
                    .engine
                    .recall(self.user, query, depth)
                    .await
                    .map_err(|e| BenchError::engine(self.question_id, e))?;
                Ok(found.into_iter().map(|s| s.memory.id).collect())
            }
            Retriever::Reranked => {
                let engine = self.reranked.ok_or(BenchError::NoReranker)?;
                let failures = engine.rerank_failures();
                let found = engine
                    .recall(self.user, query, depth)
                    .await
                    .map_err(|e| BenchError::engine(self.question_id, e))?;
                if engine.rerank_failures() != failures {
                    return Err(BenchError::RerankFailed(self.question_id.to_owned()));
                }
                Ok(found.into_iter().map(|s| s.memory.id).collect())
            }
            Retriever::Fused => {
                let vector = self.embed_query(query).await?;
                let terms = query_terms(query);
                let index = self.index().await?;
                let found = cortex_core::hybrid::hybrid_retrieve(index, &vector, &terms, depth)?;
                Ok(found.into_iter().map(|s| s.memory.id).collect())
            }
            Retriever::Dense => {
                let vector = self.embed_query(query).await?;
                let index = self.index().await?;
                Ok(ids(index, index.dense_search(&vector, depth)?))
            }
            Retriever::Bm25 => {
                let terms = query_terms(query);
                let index = self.index().await?;
                Ok(ids(index, index.lexical_search(&terms, depth)))
            }
        }
    }

    /// Appends one JSON line to `path` with both lists at depth [`LISTS_DEPTH`], scored
    /// (memories as positions in the corpus, in insertion order), each query term's idf,
    /// the gold positions and each memory's session: what an offline fusion study needs.
    pub async fn write_lists(
        &mut self,
        path: &Path,
        query: &str,
        by_id: &HashMap<MemoryId, usize>,
        gold: &[usize],
        session_of: &[usize],
        group: &str,
    ) -> Result<(), BenchError> {
        let depth = LISTS_DEPTH;
        let vector = self.embed_query(query).await?;
        let terms = query_terms(query);
        let index = self.index().await?;
        let list = |hits: Vec<cortex_core::index::Hit>| -> Vec<(usize, f64)> {
            hits.into_iter()
                .filter_map(|h| by_id.get(&index.memory(h.row).id).map(|&p| (p, h.score)))
                .collect()
        };
        let line = serde_json::json!({
            "group": group,
            "question": query,
            "terms": terms,
            "idfs": index.term_idfs(&terms),
            "gold": gold,
            "session_of": session_of,
            "dense": list(index.dense_search(&vector, depth)?),
            "bm25": list(index.lexical_search(&terms, depth)),
        });
        let io = |source| BenchError::Io {
            path: path.to_owned(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        writeln!(file, "{line}").map_err(io)
    }

    async fn embed_query(&mut self, query: &str) -> Result<Vec<f32>, BenchError> {
        let dimension = self.embedder.embedding_signature().dimension;
        let result = self
            .embedder
            .embed(&[query.to_owned()], EmbedTask::Query)
            .await?;
        self.query_embeds += 1;
        self.query_tokens.add(result.usage);
        let vector = result.vectors.into_iter().next().unwrap_or_default();
        validate_embedding(&vector, dimension)
            .map_err(|e| BenchError::engine(self.question_id, e))?;
        Ok(vector)
    }

    async fn index(&mut self) -> Result<&MemoryIndex, BenchError> {
        if self.index.is_none() {
            let dimension = self.embedder.embedding_signature().dimension;
            let built = self.store.build_index(self.user, dimension).await?;
            self.index = Some(built.index);
        }
        self.index
            .as_ref()
            .ok_or_else(|| BenchError::Unavailable("the memory index could not be built".into()))
    }
}

fn ids(index: &MemoryIndex, hits: Vec<cortex_core::index::Hit>) -> Vec<MemoryId> {
    hits.into_iter().map(|h| index.memory(h.row).id).collect()
}

/// Ranked memory ids as positions in the question's corpus (ids it did not write, which
/// a fresh store never returns, are dropped).
pub fn positions(ranked: &[MemoryId], by_id: &HashMap<MemoryId, usize>) -> Vec<usize> {
    ranked
        .iter()
        .filter_map(|id| by_id.get(id).copied())
        .collect()
}
