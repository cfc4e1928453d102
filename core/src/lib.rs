//! Cortex core: long-term memory for AI agents.
//!
//! This crate holds the types, the storage seams ([`MemoryStore`] for memories and
//! recall, [`EnrichmentStore`] for the layers' records, [`TransferStore`] for export and
//! import), the [`LLMProvider`] seam, the in-memory index with exact dense search and
//! BM25, hybrid retrieval fused by Reciprocal Rank Fusion, and the [`CortexMemory`]
//! engine. It performs no I/O of its own: storage
//! backends and model providers live in other crates.

pub mod clock;
pub mod current;
pub mod dossier;
pub mod embedding;
pub mod engine;
pub mod enrichment_store;
pub mod error;
pub mod filter;
pub mod fusion;
pub mod hybrid;
pub mod in_memory;
pub mod index;
pub mod keys;
pub mod listing;
pub mod memory;
pub mod new_memory;
pub mod profile;
pub mod provider;
pub mod reader;
pub mod record_tx;
pub mod records;
pub mod reranker;
pub mod setting;
pub mod signature;
pub mod store;
pub mod structure;
pub mod tokenizer;
pub mod transfer;
pub mod usage;

pub use clock::{Clock, ManualClock, SystemClock};
pub use dossier::{Direction, Dossier, Relationship};
pub use engine::{
    CacheStats, CortexMemory, EngineConfig, EnrichmentError, HistoryEntry, Layers, MAX_LIMIT,
    MemorizeOptions, MemorizeStatus, Memorized, REPLACED_BY_CALLER, Retag,
};
pub use enrichment_store::{
    EnrichmentStore, ExtractedEdge, ExtractedLink, ExtractionRecords, MemoryRecords, Resolved,
};
pub use error::{
    BackendFault, CortexError, EmbeddingProblem, ProviderError, StoreError, StoreResult,
};
pub use filter::MemoryFilter;
pub use hybrid::{
    PARALLEL_LISTS_FROM, ScoredMemory, candidate_pool, hybrid_retrieve, hybrid_retrieve_filtered,
};
pub use in_memory::InMemoryStore;
pub use index::{MemoryIndex, Snapshot, SnapshotError, VectorSource};
pub use keys::{Caller, KeyError, KeyStore, Scope, StoredKey};
pub use listing::Page;
pub use memory::{Memory, MemoryId, MemoryKind, MemoryState};
pub use new_memory::NewMemory;
pub use profile::{Profile, Tier};
pub use provider::{EmbedResult, EmbedTask, GenResult, LLMProvider, TokenUsage};
pub use record_tx::RecordTx;
pub use reranker::{RerankHit, Reranker};
pub use signature::EmbeddingSignature;
pub use store::{
    Added, BuiltIndex, Capabilities, Deleted, Generation, ListKey, ListQuery, MemoryStore,
    SearchRequest,
};
pub use structure::{MemoryStructure, StructureEntity, StructureEvent, StructureRelation};
pub use transfer::{
    EntityLink, ImportItem, Imported, ImportedEntity, ItemImported, Record, RecordKind,
    StoredMemory, Switch, TransferStore,
};
pub use usage::ProviderUsage;
