//! The embedded SQLite backend: one file, no server, WAL mode.
//!
//! It implements [`MemoryStore`](cortex_core::store::MemoryStore) through the `build_index` path
//! (no `search` pushdown): the engine materialises a user's live memories into the core
//! index once and keeps it current through the per-user change counter.

mod codec;
mod enrichment;
mod index_build;
mod keys;
mod listing;
mod meta;
mod records;
mod reembed;
mod schema;
mod snapshot;
mod store;
mod transfer;
mod vectors;
mod writes;

pub use schema::SCHEMA_VERSION;
pub use store::{SqliteConfig, SqliteStore, Synchronous, default_path};

use cortex_core::error::StoreError;

pub(crate) fn db_err(e: rusqlite::Error) -> StoreError {
    StoreError::backend("sqlite", e)
}
