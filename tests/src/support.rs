//! Shared pieces of the scenarios: an engine over a store, and providers that misbehave.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use cortex_core::{
    engine::CortexMemory, enrichment_store::EnrichmentStore, error::ProviderError,
    memory::MemoryKind, provider::EmbedResult, provider::EmbedTask, provider::GenResult,
    provider::LLMProvider, provider::TokenUsage, signature::EmbeddingSignature, store::MemoryStore,
};
use cortex_providers::FakeProvider;

use crate::TestStorage;

/// The Fake dimension the scenarios use.
pub const DIM: usize = 256;

/// An engine over `store` with a counting Fake embedder.
pub fn engine(store: Arc<dyn MemoryStore>) -> (CortexMemory, Arc<FakeProvider>) {
    let fake = Arc::new(FakeProvider::new(DIM));
    (CortexMemory::new(store, fake.clone()), fake)
}

/// The storage's enrichment handle; a backend that runs the enrichment suite must give one.
pub async fn records(storage: &dyn TestStorage) -> Arc<dyn EnrichmentStore> {
    storage.connect_enrichment().await.expect(
        "this backend runs enrichment_suite! but its TestStorage::connect_enrichment returns None",
    )
}

/// Whether a scenario that needs `capability` applies. When it does not, says so on the
/// process's stderr (which a passing test does not swallow) and the scenario checks
/// nothing more: the capability is the backend's own claim, as in OpenDAL's suites.
pub fn applies(scenario: &str, capability: &str, present: bool) -> bool {
    if !present {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "NOT APPLICABLE {scenario}: the store does not report `{capability}`"
        );
    }
    present
}

/// A user id no other test uses, so scenarios could share storage and still not meet.
pub fn user(tag: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{tag}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

/// Memorizes each text as a note and returns the stored memories in order.
pub async fn remember_all(
    engine: &CortexMemory,
    user: &str,
    texts: &[&str],
) -> Vec<cortex_core::memory::Memory> {
    let mut out = Vec::new();
    for text in texts {
        out.push(
            engine
                .memorize(user, text, MemoryKind::Note, &[], &Default::default())
                .await
                .unwrap_or_else(|e| panic!("memorize {text:?}: {e}"))
                .memory,
        );
    }
    out
}

/// A provider that answers every embed with one fixed vector (valid or not).
#[derive(Debug)]
pub struct FixedVectorProvider {
    pub signature: EmbeddingSignature,
    pub vector: Vec<f32>,
    pub calls: AtomicU64,
}

impl FixedVectorProvider {
    pub fn new(dimension: usize, vector: Vec<f32>) -> Self {
        Self {
            signature: EmbeddingSignature::new(cortex_providers::fake::FAKE_MODEL, dimension),
            vector,
            calls: AtomicU64::new(0),
        }
    }
}

#[async_trait]
impl LLMProvider for FixedVectorProvider {
    fn name(&self) -> &str {
        "fixed"
    }

    fn embedding_signature(&self) -> EmbeddingSignature {
        self.signature.clone()
    }

    async fn embed(
        &self,
        texts: &[String],
        _task: EmbedTask,
    ) -> Result<EmbedResult, ProviderError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(EmbedResult {
            vectors: texts.iter().map(|_| self.vector.clone()).collect(),
            usage: TokenUsage::default(),
        })
    }

    async fn generate(&self, _: &str, _: f32, _: u32) -> Result<GenResult, ProviderError> {
        Err(ProviderError::Unsupported {
            provider: "fixed",
            operation: "generate",
        })
    }
}

/// An embedder with hand-placed vectors: each text listed gets its vector, anything else
/// falls back to the Fake. It models what a semantic model does and the Fake cannot:
/// texts that share no words yet sit close together.
#[derive(Debug)]
pub struct TableProvider {
    pub table: std::collections::HashMap<String, Vec<f32>>,
    pub fallback: FakeProvider,
}

#[async_trait]
impl LLMProvider for TableProvider {
    fn name(&self) -> &str {
        "table"
    }

    fn embedding_signature(&self) -> EmbeddingSignature {
        self.fallback.embedding_signature()
    }

    async fn embed(
        &self,
        texts: &[String],
        _task: EmbedTask,
    ) -> Result<EmbedResult, ProviderError> {
        Ok(EmbedResult {
            vectors: texts
                .iter()
                .map(|t| {
                    self.table
                        .get(t)
                        .cloned()
                        .unwrap_or_else(|| self.fallback.vector(t))
                })
                .collect(),
            usage: TokenUsage::default(),
        })
    }

    async fn generate(&self, _: &str, _: f32, _: u32) -> Result<GenResult, ProviderError> {
        Err(ProviderError::Unsupported {
            provider: "table",
            operation: "generate",
        })
    }
}

/// How a [`ScriptedReranker`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerankBehaviour {
    /// Ranks the candidates in reverse, scores descending.
    Reverse,
    /// Returns only the last candidate.
    OnlyLast,
    Fail,
    /// Never answers within any sane timeout.
    Hang,
    /// Names a candidate that does not exist.
    OutOfRange,
}

/// A reranker whose behaviour the test picks, counting calls and the documents it saw.
#[derive(Debug)]
pub struct ScriptedReranker {
    pub behaviour: RerankBehaviour,
    pub calls: AtomicU64,
    pub seen: std::sync::Mutex<usize>,
}

impl ScriptedReranker {
    pub fn new(behaviour: RerankBehaviour) -> Self {
        Self {
            behaviour,
            calls: AtomicU64::new(0),
            seen: std::sync::Mutex::new(0),
        }
    }
}

#[async_trait]
impl cortex_core::reranker::Reranker for ScriptedReranker {
    fn name(&self) -> &str {
        "scripted-reranker"
    }

    async fn rerank(
        &self,
        _query: &str,
        documents: &[String],
        top_n: usize,
    ) -> Result<Vec<cortex_core::reranker::RerankHit>, ProviderError> {
        use cortex_core::reranker::RerankHit;
        self.calls.fetch_add(1, Ordering::SeqCst);
        *self.seen.lock().unwrap() = documents.len();
        let n = documents.len();
        match self.behaviour {
            RerankBehaviour::Reverse => Ok((0..n)
                .rev()
                .take(top_n)
                .enumerate()
                .map(|(i, index)| RerankHit {
                    index,
                    score: 1.0 - i as f64 * 0.01,
                })
                .collect()),
            RerankBehaviour::OnlyLast => Ok(vec![RerankHit {
                index: n - 1,
                score: 0.9,
            }]),
            RerankBehaviour::Fail => Err(ProviderError::Http {
                provider: "scripted-reranker",
                status: 503,
                message: "overloaded".into(),
            }),
            RerankBehaviour::Hang => {
                tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                Ok(Vec::new())
            }
            RerankBehaviour::OutOfRange => Ok(vec![RerankHit {
                index: n + 5,
                score: 1.0,
            }]),
        }
    }
}
