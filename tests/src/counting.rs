//! A store wrapper that counts calls per method, for tests that prove what a path touches.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cortex_core::records::{
    Entity, EntityEdge, EntityId, EntityRole, EntityUpsert, Event, Supersession, TimeRange,
    TimelineEntry,
};
use cortex_core::{
    Added, BuiltIndex, Capabilities, Deleted, EmbeddingSignature, Generation, Memory, MemoryId,
    MemoryStore, NewMemory, ScoredMemory, SearchRequest, StoreResult,
};

/// The store methods that read or write enrichment records.
pub const ENRICHMENT_METHODS: &[&str] = &[
    "add_event",
    "timeline",
    "supersede",
    "supersessions",
    "upsert_entity",
    "find_entity",
    "entity",
    "add_edge",
    "edges",
    "link_entity",
    "entity_memories",
];

/// Forwards every call to `inner` and counts it by method name.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn MemoryStore>,
    calls: Mutex<BTreeMap<&'static str, u64>>,
}

impl CountingStore {
    pub fn new(inner: Arc<dyn MemoryStore>) -> Self {
        Self {
            inner,
            calls: Mutex::new(BTreeMap::new()),
        }
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
        self.inner.capabilities()
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
    async fn list(&self, user: &str, limit: usize) -> StoreResult<Vec<Memory>> {
        self.hit("list").list(user, limit).await
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
    async fn add_event(&self, user: &str, event: &Event) -> StoreResult<()> {
        self.hit("add_event").add_event(user, event).await
    }
    async fn timeline(
        &self,
        user: &str,
        range: &TimeRange,
        limit: usize,
    ) -> StoreResult<Vec<TimelineEntry>> {
        self.hit("timeline").timeline(user, range, limit).await
    }
    async fn supersede(&self, user: &str, s: &Supersession) -> StoreResult<Generation> {
        self.hit("supersede").supersede(user, s).await
    }
    async fn supersessions(&self, user: &str, id: &MemoryId) -> StoreResult<Vec<Supersession>> {
        self.hit("supersessions").supersessions(user, id).await
    }
    async fn upsert_entity(&self, user: &str, e: &EntityUpsert) -> StoreResult<Entity> {
        self.hit("upsert_entity").upsert_entity(user, e).await
    }
    async fn find_entity(&self, user: &str, name: &str) -> StoreResult<Option<Entity>> {
        self.hit("find_entity").find_entity(user, name).await
    }
    async fn entity(&self, user: &str, id: &EntityId) -> StoreResult<Option<Entity>> {
        self.hit("entity").entity(user, id).await
    }
    async fn add_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<()> {
        self.hit("add_edge").add_edge(user, edge).await
    }
    async fn edges(&self, user: &str, entity: &EntityId) -> StoreResult<Vec<EntityEdge>> {
        self.hit("edges").edges(user, entity).await
    }
    async fn link_entity(
        &self,
        user: &str,
        memory: &MemoryId,
        entity: &EntityId,
        role: EntityRole,
    ) -> StoreResult<()> {
        self.hit("link_entity")
            .link_entity(user, memory, entity, role)
            .await
    }
    async fn entity_memories(
        &self,
        user: &str,
        entity: &EntityId,
        limit: usize,
    ) -> StoreResult<Vec<Memory>> {
        self.hit("entity_memories")
            .entity_memories(user, entity, limit)
            .await
    }
}
