//! A store wrapper that counts calls per method, for tests that prove what a path touches.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cortex_core::memory::Supersession;
use cortex_core::{
    error::StoreResult, hybrid::ScoredMemory, memory::Memory, memory::MemoryId,
    new_memory::NewMemory, signature::EmbeddingSignature, store::Added, store::BuiltIndex,
    store::Capabilities, store::Deleted, store::Generation, store::ListQuery, store::MemoryStore,
    store::SearchRequest,
};

/// The store methods recall may call: the signature, the change counter, the index or the
/// pushdown and its head's vectors.
pub const RECALL_METHODS: &[&str] = &[
    "signature",
    "generation",
    "build_index",
    "search",
    "embeddings",
];

/// Forwards every call to `inner` and counts it by method name.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn MemoryStore>,
    calls: Mutex<BTreeMap<&'static str, u64>>,
    /// Claimed instead of the inner store's, to play a backend with fewer capabilities.
    claims: Option<Capabilities>,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn MemoryStore>) -> Self {
        Self {
            inner,
            calls: Mutex::new(BTreeMap::new()),
            claims: None,
        }
    }

    /// The same wrapper claiming `capabilities` instead of the inner store's.
    pub fn claiming(mut self, capabilities: Capabilities) -> Self {
        self.claims = Some(capabilities);
        self
    }

    /// Calls of one method so far.
    pub fn calls(&self, method: &str) -> u64 {
        self.calls.lock().unwrap().get(method).copied().unwrap_or(0)
    }

    /// Every method called so far, with its count.
    pub fn snapshot(&self) -> BTreeMap<&'static str, u64> {
        self.calls.lock().unwrap().clone()
    }

    pub fn reset(&self) {
        self.calls.lock().unwrap().clear();
    }

    fn hit(&self, method: &'static str) -> &dyn MemoryStore {
        *self.calls.lock().unwrap().entry(method).or_default() += 1;
        self.inner.as_ref()
    }
}

#[async_trait]
impl MemoryStore for CountingStore {
    fn capabilities(&self) -> Capabilities {
        self.claims.unwrap_or_else(|| self.inner.capabilities())
    }
    async fn signature(&self) -> StoreResult<Option<EmbeddingSignature>> {
        self.hit("signature").signature().await
    }
    async fn add(&self, m: &NewMemory, v: &[f32], s: &EmbeddingSignature) -> StoreResult<Added> {
        self.hit("add").add(m, v, s).await
    }
    async fn get(&self, user: &str, id: &MemoryId) -> StoreResult<Option<Memory>> {
        self.hit("get").get(user, id).await
    }
    async fn find_by_prefix(&self, user: &str, prefix: &str) -> StoreResult<Vec<MemoryId>> {
        self.hit("find_by_prefix")
            .find_by_prefix(user, prefix)
            .await
    }
    async fn delete(&self, user: &str, id: &MemoryId) -> StoreResult<Option<Deleted>> {
        self.hit("delete").delete(user, id).await
    }
    async fn list(&self, user: &str, query: &ListQuery) -> StoreResult<Vec<Memory>> {
        self.hit("list").list(user, query).await
    }
    async fn count(&self, user: &str) -> StoreResult<u64> {
        self.hit("count").count(user).await
    }
    async fn generation(&self, user: &str) -> StoreResult<Generation> {
        self.hit("generation").generation(user).await
    }
    async fn build_index(&self, user: &str, dimension: usize) -> StoreResult<BuiltIndex> {
        self.hit("build_index").build_index(user, dimension).await
    }
    async fn search(&self, user: &str, request: &SearchRequest) -> StoreResult<Vec<ScoredMemory>> {
        self.hit("search").search(user, request).await
    }
    async fn embeddings(&self, user: &str, ids: &[MemoryId]) -> StoreResult<Vec<Option<Vec<f32>>>> {
        self.hit("embeddings").embeddings(user, ids).await
    }
    async fn supersede(&self, user: &str, s: &Supersession) -> StoreResult<Generation> {
        self.hit("supersede").supersede(user, s).await
    }
    async fn supersessions(&self, user: &str, id: &MemoryId) -> StoreResult<Vec<Supersession>> {
        self.hit("supersessions").supersessions(user, id).await
    }
}
