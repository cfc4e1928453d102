//! The PostgreSQL + pgvector backend.
//!
//! [`PostgresStore`] implements [`MemoryStore`](cortex_core::store::MemoryStore) over a
//! deadpool-postgres pool, with SQL built by sea-query and every value bound as a parameter.
//! Besides the `build_index` path it runs the whole hybrid query in SQL, two statements in
//! one snapshot (the `search` pushdown): exact dense candidates re-scored with the core's own cosine
//! arithmetic (or HNSW candidates, approximate by configuration), BM25 over a postings
//! table written with the core tokenizer, and the core's fusion, returning what `hybrid_retrieve`
//! returns over `build_index` on the same data when the dense side is exact.
//!
//! Every module, one line each: docs/ARCHITECTURE.md, "Module map" (checked against the
//! tree by scripts/check-structure.py).

mod codec;
pub mod config;
mod deadline;
mod diagnostics;
mod enrichment;
pub mod error;
mod filter;
mod hnsw_memory;
mod inspect;
mod keys;
mod meta;
mod names;
mod pool;
mod postings;
mod prefix;
mod reanalyze;
mod records;
mod redact;
mod reembed;
mod replicas;
mod schema;
mod search;
mod sql;
mod store;
mod tables;
mod tls;
mod transfer;

pub use config::{
    AnnIndex, DEFAULT_HNSW_THRESHOLD, DEFAULT_LOOKUP_COST, DEFAULT_POOL_SIZE, DEFAULT_PRUNE_BUDGET,
    DenseMode, HnswBuild, IvfFlat, MAX_IVF_LISTS, PostgresConfig, Timeouts,
};
pub use diagnostics::Diagnostics;
pub use error::PostgresError;
pub use hnsw_memory::HnswMemory;
pub use inspect::{Inspection, inspect};
pub use names::validate_schema_name;
pub use replicas::{
    DEFAULT_MAX_LAG, DEFAULT_PROBE_INTERVAL, DEFAULT_PROBE_TIMEOUT, DEFAULT_READ_WAIT,
    READS_SERIES, ROUTES, ReadReplicas, ReplicaReads, ReplicaState, ReplicaStatus,
    SERIES as REPLICA_SERIES, SKIP_REASONS, SKIPS_SERIES, USABLE_SERIES, split_urls,
};
pub use schema::SCHEMA_VERSION;
pub use search::lexical_path::{LexicalPath, LexicalPaths, RarestFirstLookups};
pub use store::PostgresStore;

use cortex_core::error::StoreError;

/// Wraps a driver or pool error, classified (see [`error`]); anything else as it is.
pub(crate) fn pg_err(e: impl Into<cortex_core::error::BoxError>) -> StoreError {
    StoreError::backend("postgres", PostgresError::call(e.into()))
}
