//! The local embedder: the real all-MiniLM-L6-v2 (fetched by scripts/fetch-test-model.sh,
//! found through CORTEX_TEST_MODEL_DIR), a synthetic model2vec model written by the
//! tests, and the configuration rules that choose between embedders.

#![cfg(feature = "local")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

mod bert;
mod common;
mod config;
mod model2vec;
mod mpnet;
mod reranker;
