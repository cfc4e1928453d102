//! The optional reranker seam: a cross-encoder (hosted or local) that reorders recall's
//! candidates. The engine never depends on it succeeding.

use std::fmt::Debug;

use async_trait::async_trait;

use crate::error::ProviderError;

/// One reranked document: its index in the request and its relevance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RerankHit {
    pub index: usize,
    pub score: f64,
}

/// Scores documents against a query.
#[async_trait]
pub trait Reranker: Send + Sync + Debug {
    /// A short stable name, used in accounting and logs.
    fn name(&self) -> &str;

    /// The `top_n` most relevant of `documents`, most relevant first.
    async fn rerank(
        &self,
        query: &str,
        documents: &[String],
        top_n: usize,
    ) -> Result<Vec<RerankHit>, ProviderError>;
}
