//! Cortex core: long-term memory for AI agents.
//!
//! This crate holds the types, the storage seams ([`store::MemoryStore`] for memories
//! and recall, [`enrichment_store::EnrichmentStore`] for the layers' records,
//! [`transfer::TransferStore`] for export and import), the [`provider::LLMProvider`]
//! seam, the in-memory index with exact dense search and BM25, hybrid retrieval fused by
//! Reciprocal Rank Fusion, and the [`engine::CortexMemory`] engine. It performs no I/O of
//! its own: storage backends and model providers live in other crates.
//!
//! Every type has one path, through the module named after its concept
//! (`cortex_core::memory::Memory`, `cortex_core::engine::CortexMemory`): the crate root
//! re-exports nothing.

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
