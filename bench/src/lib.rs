//! The retrieval benchmarks, outside the product: `cortex-bench` runs LongMemEval
//! ([`longmemeval`]), LoCoMo and the committed memory sets ([`locomo`]), or every dev set
//! at once ([`run::bench_dev`]), each through the engine on a fresh store, and scores the
//! rankings. The Chain-of-Note reader ([`chain_of_note`]) and the LLM judge answer
//! LongMemEval's questions when `--qa` asks; [`caching_provider`] over
//! [`response_cache`] makes repeated runs cost no model calls. How to reproduce every
//! table: docs/BENCHMARKS.md.

pub mod args;
pub mod backend;
pub mod caching_provider;
pub mod chain_of_note;
pub mod dataset;
pub mod error;
pub mod half;
pub mod ingest;
pub mod locomo;
pub mod longmemeval;
pub mod metrics;
pub mod providers;
pub mod qa;
pub mod report;
pub mod response_cache;
pub mod retrieve;
pub mod run;
