//! `cortex-perf`: recall and memorize on the SQLite path, measured side by side with the
//! machine's memory-bandwidth floor, the seed's rebuild-per-recall, and sqlite-vec.
//!
//! ```text
//! cargo run --release -p cortex-perf -- [--quick] [--json FILE]
//!     [--sizes 1000,10000,100000] [--dims 384,768]
//!     [--postgres URL [--pg-sizes 10000,100000] [--pg-queries 100] [--pg-keep] [--pg-explain]
//!      [--pg-ef 100,200,400] [--pg-index hnsw|ivfflat] [--pg-ivf-lists N] [--pg-probes 10,20]
//!      [--pg-hnsw-m 16] [--pg-hnsw-ef-construction 64] [--pg-profile SECONDS] [--pg-trace RUNS] [--pg-ties 4600]]
//!     [--local-model DIR [--local-count 10000] [--local-queries 200] [--rerank-model DIR]]
//! cargo run --release -p cortex-perf -- [--quick] [--json FILE]
//!     [--load [--load-users 100] [--load-sessions 4] [--load-secs 60]]
//!     [--cache [--cache-users 10000] [--cache-memories 20] [--cache-tasks 16]
//!      [--cache-bound 64MiB] [--cache-no-compare]]
//!     [--load-backend sqlite|postgres [--postgres URL]] [--mcp-binary PATH]
//! cargo run --release -p cortex-perf -- --filters [--quick] [--json FILE]
//!     [--filters-memories 100000] [--filters-queries 200]
//!     [--postgres URL [--pg-sizes 100000] [--pg-queries 100] [--pg-keep]]
//! ```
//! Figures are ratios from one run on one machine; `--quick` runs the same pipeline on
//! small sizes (CI runs it to keep it working, and asserts nothing about time). With
//! `--postgres`, the Postgres pushdown is measured too, in schemas `cortex_bench_<N>`
//! of that database (dropped afterwards unless `--pg-keep`). With `--local-model`, the
//! default no-key configuration (SQLite and the in-process model) is timed per call.
//! `--load` and `--cache` instead drive the `cortex-mcp` binary over HTTP with many users
//! (see `load` and `cache`); they exit non-zero when any call failed or any answer held
//! another user's memory. `--filters` instead times filtered recall beside unfiltered
//! (see `filtered`), in-process and, with `--postgres`, on the pushdown in schemas
//! `cortex_bench_filters_<N>`; it exits non-zero when any result fails its filter.

mod cache;
mod cold_open;
mod corpus;
mod embedder;
mod filtered;
mod load;
mod local;
mod mcp_client;
mod memorize;
mod peer;
mod postgres;
mod served;
mod sqlite_path;
mod stats;
mod ties;

use std::time::Duration;

use cortex_postgres::{AnnIndex, HnswBuild};
use serde_json::{Value, json};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const USER: &str = "bench";

/// Recall and memorize measured side by side with the machine's floor and peers.
#[derive(clap::Parser)]
#[command(name = "cortex-perf")]
struct Options {
    /// Small sizes: keeps the pipeline working in CI (asserts nothing about time).
    #[arg(long)]
    quick: bool,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    json: Option<String>,
    /// Memory counts for the SQLite path.
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<usize>>,
    /// Embedding dimensions for the SQLite path.
    #[arg(long, value_delimiter = ',')]
    dims: Option<Vec<usize>>,
    /// Time memorize and recall through the engine on SQLite with the in-process model in
    /// this directory (all-MiniLM-L6-v2 from scripts/fetch-test-model.sh).
    #[arg(long)]
    local_model: Option<std::path::PathBuf>,
    /// Instead of everything else, with --local-model: the embedder's tokens a second at
    /// several batch sizes against the model's FLOPs and candle's matrix product on this
    /// CPU (run again with RAYON_NUM_THREADS=1 for one thread).
    #[arg(long)]
    embed_sweep: bool,
    /// Memories written before the recalls are timed (default 10,000; --quick 200).
    #[arg(long)]
    local_count: Option<usize>,
    /// Recalls timed (default 200; --quick 20).
    #[arg(long)]
    local_queries: Option<usize>,
    /// With --local-model: the same recalls again with the local reranker in this
    /// directory (scripts/fetch-reranker-model.sh) ordering 10, 20 and 30 fused candidates.
    #[arg(long)]
    rerank_model: Option<std::path::PathBuf>,
    /// Measure the Postgres pushdown too, in schemas `cortex_bench_<N>` of this database.
    #[arg(long)]
    postgres: Option<String>,
    /// Memory counts for Postgres.
    #[arg(long, value_delimiter = ',')]
    pg_sizes: Option<Vec<usize>>,
    /// Queries per Postgres measurement.
    #[arg(long)]
    pg_queries: Option<usize>,
    /// Keep the Postgres schemas, and reuse them when they hold the right count.
    #[arg(long)]
    pg_keep: bool,
    /// Print the search plans (EXPLAIN ANALYZE).
    #[arg(long)]
    pg_explain: bool,
    /// An hnsw.ef_search sweep (with `--pg-index hnsw`).
    #[arg(long, value_delimiter = ',')]
    pg_ef: Vec<usize>,
    /// Which approximate index the Postgres "hnsw" rows build and search: hnsw or ivfflat
    /// (a kept schema's index of the other kind is dropped).
    #[arg(long, default_value = "hnsw")]
    pg_index: AnnIndex,
    /// The IVFFlat index's lists (default: from the rows, as the store picks them).
    #[arg(long)]
    pg_ivf_lists: Option<u32>,
    /// An ivfflat.probes sweep (with `--pg-index ivfflat`).
    #[arg(long, value_delimiter = ',')]
    pg_probes: Vec<usize>,
    /// pgvector's `m` for the HNSW index (default 16; a kept schema's index built
    /// otherwise is built again).
    #[arg(long)]
    pg_hnsw_m: Option<u32>,
    /// pgvector's `ef_construction` for the HNSW index (default 64).
    #[arg(long)]
    pg_hnsw_ef_construction: Option<u32>,
    /// A BM25 prune budget sweep (hybrid searches over HNSW).
    #[arg(long, value_delimiter = ',')]
    pg_budgets: Vec<u64>,
    /// A sweep of the pruned path's lookup cost (hybrid searches over HNSW).
    #[arg(long, value_delimiter = ',')]
    pg_lookup_costs: Vec<u64>,
    /// Instead of measuring Postgres, repeat the HNSW hybrid searches on the kept schemas
    /// for this many seconds (to profile the server, e.g. with `perf record`), at the
    /// first `--pg-ef` when one is given.
    #[arg(long)]
    pg_profile: Option<u64>,
    /// Instead of measuring Postgres, print each HNSW hybrid search on the kept schemas
    /// (terms, BM25 path, median of this many runs, planning and execution time), at the
    /// first `--pg-ef` when one is given.
    #[arg(long)]
    pg_trace: Option<usize>,
    /// Instead of everything else, time exact Postgres searches over this many memories
    /// sharing one vector (every dense distance tied) against the in-process path.
    #[arg(long, value_delimiter = ',')]
    pg_ties: Option<Vec<usize>>,
    /// Instead of everything else, time filtered recall beside unfiltered at several
    /// selectivities: in-process, and on the Postgres pushdown with --postgres (exact and
    /// HNSW); fails when any result fails its filter.
    #[arg(long)]
    filters: bool,
    /// Memories of the in-process --filters index (default 100,000; --quick 5,000).
    #[arg(long)]
    filters_memories: Option<usize>,
    /// Hybrid queries of the in-process --filters run (default 200; --quick 50).
    #[arg(long)]
    filters_queries: Option<usize>,
    /// Instead of everything else, drive the HTTP server with many users x sessions of
    /// mixed memorize/recall/list/forget, checking every answer belongs to its caller.
    #[arg(long)]
    load: bool,
    /// Users of the load test (default 100; --quick 4).
    #[arg(long)]
    load_users: Option<usize>,
    /// Sessions per user, run at once (default 4; --quick 2).
    #[arg(long)]
    load_sessions: Option<usize>,
    /// Seconds the load lasts (default 60; --quick 3).
    #[arg(long)]
    load_secs: Option<u64>,
    /// The store the server of --load and --cache uses (postgres needs --postgres URL; a
    /// schema of its own is made and dropped).
    #[arg(long, value_enum, default_value = "sqlite")]
    load_backend: served::Backend,
    /// Hot standbys of --postgres for the load test's server to read from
    /// (CORTEX_DATABASE_READ_URL, comma-separated); the report says where reads were served.
    #[arg(long)]
    load_read_url: Option<String>,
    /// Instead of everything else, fill many users' index caches in one server under
    /// CORTEX_CACHE_MAX_BYTES, then once without a bound.
    #[arg(long)]
    cache: bool,
    /// Users of the cache test (default 10,000; --quick 200); implies --cache.
    #[arg(long)]
    cache_users: Option<usize>,
    /// Memories each user of the cache test writes before its recall (default 20; --quick 3).
    #[arg(long)]
    cache_memories: Option<usize>,
    /// Users of the cache test served at once (default 16; --quick 8).
    #[arg(long)]
    cache_tasks: Option<usize>,
    /// The bound, as CORTEX_CACHE_MAX_BYTES takes it (default 64MiB; --quick 256KiB).
    #[arg(long)]
    cache_bound: Option<String>,
    /// Skip the cache test's second pass, without a bound.
    #[arg(long)]
    cache_no_compare: bool,
    /// The server binary for --load and --cache (default: cortex-mcp beside this one).
    #[arg(long)]
    mcp_binary: Option<std::path::PathBuf>,
}

fn options() -> Options {
    <Options as clap::Parser>::parse()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), BoxError> {
    let opts = options();
    if cfg!(debug_assertions) {
        eprintln!("cortex-perf: this is a debug build; its timings mean nothing (use --release)");
    }
    if opts.load || opts.cache || opts.cache_users.is_some() {
        return http_modes(&opts).await;
    }
    if let Some(sizes) = &opts.pg_ties {
        return ties_mode(&opts, sizes).await;
    }
    if opts.filters {
        return filters_mode(&opts).await;
    }
    if opts.embed_sweep {
        return embed_sweep_mode(&opts);
    }
    default_mode(&opts).await
}

/// Without a mode flag: the SQLite path, memorize, and the local model and the Postgres
/// pushdown when asked for.
async fn default_mode(opts: &Options) -> Result<(), BoxError> {
    let report = sqlite_path::run(opts.quick, opts.sizes.clone(), opts.dims.clone()).await?;
    let write = memorize::run(if opts.quick { 300 } else { 5_000 }).await?;
    let local = match &opts.local_model {
        Some(dir) => local_model(opts, dir).await?,
        None => Value::Null,
    };
    let pg = match &opts.postgres {
        Some(url) => postgres::measure(&pg_options(opts, url)?).await?,
        None => Value::Null,
    };
    let out = json!({ "sqlite_path": report, "memorize": write, "local": local, "postgres": pg, "quick": opts.quick });
    if let Some(path) = &opts.json {
        std::fs::write(path, serde_json::to_string_pretty(&out)?)?;
        eprintln!("wrote {path}");
    }
    Ok(())
}

/// `--local-model`: memorize and recall with the model in `dir`, printed.
async fn local_model(opts: &Options, dir: &std::path::Path) -> Result<Value, BoxError> {
    let count = opts
        .local_count
        .unwrap_or(if opts.quick { 200 } else { 10_000 });
    let queries = opts
        .local_queries
        .unwrap_or(if opts.quick { 20 } else { 200 });
    let r = local::measure(dir, opts.rerank_model.as_deref(), count, queries).await?;
    println!(
        "\nlocal model {} on SQLite, {} memories: memorize p50 {:.1} ms (p95 {:.1}), \
         recall p50 {:.1} ms (p95 {:.1}) over {} recalls of limit 10, first recall \
         {:.0} ms",
        r["model"].as_str().unwrap_or("?"),
        r["memories"],
        r["memorize_p50_ms"].as_f64().unwrap_or(0.0),
        r["memorize_p95_ms"].as_f64().unwrap_or(0.0),
        r["recall_p50_ms"].as_f64().unwrap_or(0.0),
        r["recall_p95_ms"].as_f64().unwrap_or(0.0),
        r["queries"],
        r["first_recall_ms"].as_f64().unwrap_or(0.0),
    );
    for row in r["reranked"].as_array().into_iter().flatten() {
        println!(
            "  with the local reranker over {} fused candidates: recall p50 {:.1} ms \
             (p95 {:.1}), {:.1}x plain recall",
            row["depth"],
            row["recall_p50_ms"].as_f64().unwrap_or(0.0),
            row["recall_p95_ms"].as_f64().unwrap_or(0.0),
            row["p50_ratio_to_plain"].as_f64().unwrap_or(0.0),
        );
    }
    Ok(r)
}

/// What the Postgres measurement takes from the command line, for the server at `url`.
fn pg_options(opts: &Options, url: &str) -> Result<postgres::PgOptions, BoxError> {
    Ok(postgres::PgOptions {
        url: url.to_owned(),
        sizes: opts.pg_sizes.clone().unwrap_or(match opts.quick {
            true => vec![2_000],
            false => vec![10_000, 100_000],
        }),
        queries: opts.pg_queries.unwrap_or(if opts.quick { 20 } else { 100 }),
        keep: opts.pg_keep,
        explain: opts.pg_explain,
        hnsw_build: HnswBuild {
            m: opts.pg_hnsw_m.unwrap_or(HnswBuild::default().m),
            ef_construction: opts
                .pg_hnsw_ef_construction
                .unwrap_or(HnswBuild::default().ef_construction),
        }
        .check()?,
        ann_index: opts.pg_index,
        ivf_lists: opts.pg_ivf_lists,
        ef_sweep: match opts.pg_index {
            AnnIndex::Hnsw => opts.pg_ef.clone(),
            AnnIndex::IvfFlat => opts.pg_probes.clone(),
        },
        budget_sweep: opts.pg_budgets.clone(),
        lookup_sweep: opts.pg_lookup_costs.clone(),
        profile: opts.pg_profile.map(std::time::Duration::from_secs),
        trace: opts.pg_trace,
    })
}

/// `--pg-ties`: mass ties on the Postgres pushdown, at each of `sizes`.
async fn ties_mode(opts: &Options, sizes: &[usize]) -> Result<(), BoxError> {
    let url = opts
        .postgres
        .as_deref()
        .ok_or("--pg-ties needs --postgres URL")?;
    let rows = ties::measure(url, sizes, opts.pg_queries.unwrap_or(20)).await?;
    if let Some(path) = &opts.json {
        std::fs::write(
            path,
            serde_json::to_string_pretty(&json!({ "ties": rows }))?,
        )?;
        eprintln!("wrote {path}");
    }
    Ok(())
}

/// `--embed-sweep`: the local embedder's throughput against its FLOPs.
fn embed_sweep_mode(opts: &Options) -> Result<(), BoxError> {
    let model = opts
        .local_model
        .as_deref()
        .ok_or("--embed-sweep needs --local-model DIR")?;
    let report = embedder::measure(model, opts.quick)?;
    if let Some(path) = &opts.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        eprintln!("wrote {path}");
    }
    Ok(())
}

/// `--load` and `--cache`: the server over HTTP with many users. Fails when any call
/// failed, any answer held another user's memory, or an evicted user was answered wrong.
async fn http_modes(opts: &Options) -> Result<(), BoxError> {
    let binary = served::server_binary(opts.mcp_binary.as_deref())?;
    let mut out = serde_json::Map::new();
    let mut failures = 0;
    if opts.load {
        let report = load::run(&load_options(opts, &binary)).await?;
        failures += report["run"]["errors"].as_u64().unwrap_or(1)
            + report["run"]["cross_user"].as_u64().unwrap_or(1);
        out.insert("load".into(), report);
    }
    if opts.cache || opts.cache_users.is_some() {
        let report = cache::run(&cache_options(opts, &binary)?).await?;
        failures += cache::failures(&report);
        out.insert("cache".into(), report);
    }
    if let Some(path) = &opts.json {
        std::fs::write(path, serde_json::to_string_pretty(&Value::Object(out))?)?;
        eprintln!("wrote {path}");
    }
    match failures {
        0 => Ok(()),
        n => Err(format!("{n} failed calls, cross-user answers or wrong answers (above)").into()),
    }
}

/// `--filters`: filtered recall beside unfiltered. Fails when any result failed its
/// filter, an exact search returned fewer than it should, or a search erred.
async fn filters_mode(opts: &Options) -> Result<(), BoxError> {
    let q = opts.quick;
    let filter_opts = filtered::FilterOptions {
        memories: opts
            .filters_memories
            .unwrap_or(if q { 5_000 } else { 100_000 }),
        queries: opts.filters_queries.unwrap_or(if q { 50 } else { 200 }),
        postgres: opts.postgres.clone(),
        pg_sizes: opts
            .pg_sizes
            .clone()
            .unwrap_or(vec![if q { 2_000 } else { 100_000 }]),
        pg_queries: opts.pg_queries.unwrap_or(if q { 20 } else { 100 }),
        keep: opts.pg_keep,
        ann_index: opts.pg_index,
    };
    let (report, failures) = filtered::run(&filter_opts).await?;
    if let Some(path) = &opts.json {
        std::fs::write(
            path,
            serde_json::to_string_pretty(&json!({ "filters": report, "quick": q }))?,
        )?;
        eprintln!("wrote {path}");
    }
    match failures {
        0 => Ok(()),
        n => Err(format!(
            "{n} filtered results failing their filter, short exact results or failed searches (above)"
        )
        .into()),
    }
}

/// How long after the load the server's memory is read again: what the allocator gives
/// back once the sessions are gone.
fn settle(quick: bool) -> Duration {
    Duration::from_secs(if quick { 1 } else { 10 })
}

fn load_options(opts: &Options, binary: &std::path::Path) -> load::LoadOptions {
    let q = opts.quick;
    let secs = opts.load_secs.unwrap_or(if q { 3 } else { 60 });
    load::LoadOptions {
        users: opts.load_users.unwrap_or(if q { 4 } else { 100 }).max(1),
        sessions: opts.load_sessions.unwrap_or(if q { 2 } else { 4 }).max(1),
        window: Duration::from_secs(secs),
        settle: settle(q),
        backend: opts.load_backend,
        postgres: opts.postgres.clone(),
        read_url: opts.load_read_url.clone(),
        binary: binary.to_owned(),
    }
}

fn cache_options(
    opts: &Options,
    binary: &std::path::Path,
) -> Result<cache::CacheOptions, BoxError> {
    let q = opts.quick;
    let bound = opts
        .cache_bound
        .clone()
        .unwrap_or_else(|| if q { "256KiB" } else { "64MiB" }.to_owned());
    if cortex_app::config::parse_bytes(&bound).is_none() {
        return Err(format!("--cache-bound {bound:?}: use a size like 64MiB or 1048576").into());
    }
    Ok(cache::CacheOptions {
        users: opts
            .cache_users
            .unwrap_or(if q { 200 } else { 10_000 })
            .max(1),
        memories: opts.cache_memories.unwrap_or(if q { 3 } else { 20 }).max(1),
        tasks: opts.cache_tasks.unwrap_or(if q { 8 } else { 16 }).max(1),
        bound,
        compare: !opts.cache_no_compare,
        settle: settle(q),
        backend: opts.load_backend,
        postgres: opts.postgres.clone(),
        binary: binary.to_owned(),
    })
}
