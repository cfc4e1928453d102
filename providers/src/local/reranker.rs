//! The in-process reranker (`CORTEX_RERANK_PROVIDER=local`): a cross-encoder on the CPU,
//! no key, no network. It reads each of recall's fused candidates together with the
//! query, which neither the embedding nor BERT's word counts can, and orders them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use cortex_core::{error::ProviderError, reranker::RerankHit, reranker::Reranker};

use super::cross_encoder::CrossEncoder;
use crate::blocking::off_runtime;

/// Pairs scored in one forward pass: recall's candidates are short, so one pass of 16
/// pads little and keeps both cores busy.
const BATCH: usize = 16;

/// A cross-encoder loaded from a directory, behind core's [`Reranker`].
#[derive(Debug, Clone)]
pub struct LocalReranker {
    encoder: Arc<CrossEncoder>,
    name: String,
}

impl LocalReranker {
    /// Loads the model in `dir` (blocking: reads about 130 MB).
    pub fn load(dir: &Path) -> Result<Self, ProviderError> {
        let encoder = CrossEncoder::load(dir)?;
        let name = dir
            .file_name()
            .map_or_else(|| "local".to_owned(), |n| n.to_string_lossy().into_owned());
        Ok(Self {
            encoder: Arc::new(encoder),
            name,
        })
    }

    /// [`LocalReranker::load`] off the async runtime's worker threads.
    pub async fn load_async(dir: PathBuf) -> Result<Self, ProviderError> {
        off_runtime("loading the reranker", move || Self::load(&dir)).await?
    }

    /// Every document's relevance logit, in the documents' order.
    pub fn scores(&self, query: &str, documents: &[&str]) -> Result<Vec<f32>, ProviderError> {
        Ok(self.encoder.scores(query, documents, BATCH)?.0)
    }
}

#[async_trait]
impl Reranker for LocalReranker {
    fn name(&self) -> &str {
        &self.name
    }

    async fn rerank(
        &self,
        query: &str,
        documents: &[String],
        top_n: usize,
    ) -> Result<Vec<RerankHit>, ProviderError> {
        let (encoder, query, documents) =
            (self.encoder.clone(), query.to_owned(), documents.to_vec());
        let scores = off_runtime("reranking", move || {
            let documents: Vec<&str> = documents.iter().map(String::as_str).collect();
            encoder.scores(&query, &documents, BATCH)
        })
        .await??
        .0;
        Ok(ranked(&scores, top_n))
    }
}

/// The `top_n` best of `scores`, best first; equal scores keep the candidates' order
/// (recall's fused order), so a tie never reorders what fusion decided.
fn ranked(scores: &[f32], top_n: usize) -> Vec<RerankHit> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    order
        .into_iter()
        .take(top_n)
        .map(|index| RerankHit {
            index,
            score: f64::from(scores[index]),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_first_and_ties_keep_the_fused_order() {
        let hits = ranked(&[0.5, 2.0, 0.5, -1.0, 2.0], 4);
        let order: Vec<usize> = hits.iter().map(|h| h.index).collect();
        assert_eq!(order, [1, 4, 0, 2]);
        assert_eq!(hits[0].score, 2.0);
        assert!(ranked(&[1.0], 0).is_empty());
    }
}
