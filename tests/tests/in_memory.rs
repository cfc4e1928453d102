//! The conformance suite against the in-memory reference store.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

use std::sync::Arc;

use async_trait::async_trait;
use cortex_conformance::{
    StoreFactory, TestStorage, conformance_suite, enrichment_suite, key_suite, transfer_suite,
};
use cortex_core::{
    enrichment_store::EnrichmentStore, in_memory::InMemoryStore, keys::KeyStore,
    store::MemoryStore, transfer::TransferStore,
};

struct InMemory;

struct Shared(Arc<InMemoryStore>);

#[async_trait]
impl StoreFactory for InMemory {
    async fn create(&self) -> Box<dyn TestStorage> {
        Box::new(Shared(Arc::new(InMemoryStore::new())))
    }
}

#[async_trait]
impl TestStorage for Shared {
    async fn connect(&self) -> Arc<dyn MemoryStore> {
        self.0.clone()
    }

    async fn connect_enrichment(&self) -> Option<Arc<dyn EnrichmentStore>> {
        Some(self.0.clone())
    }

    async fn connect_transfer(&self) -> Option<Arc<dyn TransferStore>> {
        Some(self.0.clone())
    }

    async fn connect_keys(&self) -> Option<Arc<dyn KeyStore>> {
        Some(self.0.clone())
    }
}

conformance_suite!(InMemory);
enrichment_suite!(InMemory);
transfer_suite!(InMemory);
key_suite!(InMemory);
