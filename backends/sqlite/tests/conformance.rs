//! The conformance suite against SQLite files in temporary directories.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use cortex_conformance::{
    StoreFactory, TestStorage, conformance_suite, enrichment_suite, key_suite, transfer_suite,
};
use cortex_core::{
    enrichment_store::EnrichmentStore, keys::KeyStore, store::MemoryStore, transfer::TransferStore,
};
use cortex_sqlite::SqliteStore;

struct Sqlite;

/// A database file in its own temporary directory, removed with it.
struct SqliteFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

#[async_trait]
impl StoreFactory for Sqlite {
    async fn create(&self) -> Box<dyn TestStorage> {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("nested").join("memory.db");
        Box::new(SqliteFile { _dir: dir, path })
    }
}

#[async_trait]
impl TestStorage for SqliteFile {
    async fn connect(&self) -> Arc<dyn MemoryStore> {
        Arc::new(SqliteStore::open(&self.path).expect("open sqlite"))
    }

    async fn connect_enrichment(&self) -> Option<Arc<dyn EnrichmentStore>> {
        Some(Arc::new(
            SqliteStore::open(&self.path).expect("open sqlite"),
        ))
    }

    async fn connect_transfer(&self) -> Option<Arc<dyn TransferStore>> {
        Some(Arc::new(
            SqliteStore::open(&self.path).expect("open sqlite"),
        ))
    }

    async fn connect_keys(&self) -> Option<Arc<dyn KeyStore>> {
        Some(Arc::new(
            SqliteStore::open(&self.path).expect("open sqlite"),
        ))
    }
}

conformance_suite!(Sqlite);
enrichment_suite!(Sqlite);
transfer_suite!(Sqlite);
key_suite!(Sqlite);
