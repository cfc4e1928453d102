//! The Postgres pushdown: memorize throughput through the store's `add`, and one `search`
//! call's latency, exact vs HNSW dense candidates, with HNSW's overlap@10 with exact.
//!
//! Vectors: 384 dimensions, unit length, 64 Gaussian clusters of varying spread. Texts:
//! 4-24 words drawn Zipf-like from a 400-word vocabulary (the commonest words are in half
//! the memories). One user holds every memory (the per-user filter keeps everything, the
//! HNSW best case). Queries: a stored vector plus noise with 1-3 words ("hybrid"), or the
//! same vector with no words ("dense-only", which isolates the vector side).

pub(crate) mod corpus;
mod diagnose;
pub(crate) mod runs;
pub(crate) mod schema;
mod size;
mod sweeps;
pub(crate) mod table;

use std::time::Duration;

use cortex_postgres::{AnnIndex, DenseMode, HnswBuild, IvfFlat, PostgresConfig};
use serde_json::Value;

use crate::BoxError;

pub(crate) const DIM: usize = 384;
pub(crate) const WRITERS: usize = 8;
pub(crate) const USER: &str = "bench";
pub(crate) const TOP_K: usize = 10;

/// What to run against which server.
#[derive(Debug, Clone)]
pub struct PgOptions {
    pub url: String,
    pub sizes: Vec<usize>,
    pub queries: usize,
    /// Keep each size's schema afterwards, and reuse one already holding that many
    /// memories instead of loading it again (memorize is then not measured).
    pub keep: bool,
    /// Print each search plan (EXPLAIN ANALYZE) for the first few queries.
    pub explain: bool,
    /// How the HNSW index is built; a kept schema's index built otherwise is dropped and
    /// built again with these.
    pub hnsw_build: HnswBuild,
    /// Which approximate index the "hnsw" rows build and search (HNSW or IVFFlat).
    pub ann_index: AnnIndex,
    /// The IVFFlat index's lists (`None`: from the rows, as the store picks them).
    pub ivf_lists: Option<u32>,
    /// Also search the index at these fixed widths: `hnsw.ef_search` values for HNSW,
    /// `ivfflat.probes` for IVFFlat.
    pub ef_sweep: Vec<usize>,
    /// Also run HNSW hybrid searches at these BM25 prune budgets.
    pub budget_sweep: Vec<u64>,
    /// Also run HNSW hybrid searches at these lookup costs.
    pub lookup_sweep: Vec<u64>,
    /// Instead of measuring, repeat the HNSW hybrid searches for this long (for a
    /// profiler attached to the server); the schemas must already be loaded.
    pub profile: Option<Duration>,
    /// Instead of measuring, print each HNSW hybrid search on the kept schemas: its terms,
    /// BM25 path, median latency of this many runs and its plan's planning and execution
    /// times.
    pub trace: Option<usize>,
}

impl PgOptions {
    /// A handle on `schema` in `mode`: every handle builds the approximate index, if it is
    /// the one to, with the settings asked for.
    fn store_config(&self, schema: &str, mode: DenseMode) -> PostgresConfig {
        PostgresConfig {
            hnsw_build: self.hnsw_build,
            ann_index: self.ann_index,
            ivfflat: IvfFlat {
                lists: self.ivf_lists,
                probes: None,
            },
            ..schema::config(&self.url, schema, mode)
        }
    }

    /// The name of the sweep's search width: `hnsw.ef_search`, or `ivfflat.probes`.
    fn width_name(&self) -> &'static str {
        match self.ann_index {
            AnnIndex::Hnsw => "ef_search",
            AnnIndex::IvfFlat => "probes",
        }
    }

    /// `config` searching the index at width `w` (see [`PgOptions::width_name`]).
    fn with_width(&self, config: PostgresConfig, w: usize) -> PostgresConfig {
        match self.ann_index {
            AnnIndex::Hnsw => PostgresConfig {
                ef_search: Some(w),
                ..config
            },
            AnnIndex::IvfFlat => PostgresConfig {
                ivfflat: IvfFlat {
                    probes: Some(u32::try_from(w).unwrap_or(u32::MAX)),
                    ..config.ivfflat
                },
                ..config
            },
        }
    }
}

/// Runs every size, prints the table's rows and returns them.
pub async fn measure(opts: &PgOptions) -> Result<Value, BoxError> {
    table::header();
    let mut rows = Vec::new();
    for &n in &opts.sizes {
        // `None`: the size was profiled or traced instead of measured.
        if let Some(row) = size::measure(opts, n).await? {
            rows.push(row);
        }
    }
    Ok(Value::Array(rows))
}

pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}
