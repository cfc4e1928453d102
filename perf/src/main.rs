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
mod corpus;
mod embedder;
mod filtered;
mod load;
mod local;
mod mcp_client;
mod peer;
mod postgres;
mod served;
mod stats;
mod ties;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cortex_core::tokenizer::query_terms;
use cortex_core::{
    CortexMemory, EmbeddingSignature, MemoryIndex, MemoryKind, MemoryStore, NewMemory,
    PARALLEL_LISTS_FROM, hybrid_retrieve,
};
use cortex_postgres::{AnnIndex, HnswBuild};
use cortex_providers::FakeProvider;
use cortex_providers::fake::FAKE_MODEL;
use cortex_sqlite::{SqliteConfig, SqliteStore, Synchronous};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde_json::{Value, json};

use stats::{Samples, rss_bytes};

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
        return Ok(());
    }
    if opts.filters {
        return filters_mode(&opts).await;
    }
    if opts.embed_sweep {
        let model = opts
            .local_model
            .as_deref()
            .ok_or("--embed-sweep needs --local-model DIR")?;
        let report = embedder::measure(model, opts.quick)?;
        if let Some(path) = &opts.json {
            std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
            eprintln!("wrote {path}");
        }
        return Ok(());
    }
    let (mut sizes, mut dims, queries) = if opts.quick {
        (vec![1_000, 5_000], vec![384], 20)
    } else {
        (vec![1_000, 10_000, 100_000], vec![384, 768], 200)
    };
    if let Some(s) = opts.sizes.clone() {
        sizes = s;
    }
    if let Some(d) = opts.dims.clone() {
        dims = d;
    }
    let mut report = Vec::new();
    println!(
        "| N | d | floor ms | recall p50 | p95 | ratio to floor | embed | dense | dense / floor | bm25 | fusion | rebuild/recall p50 | speedup | dense-only p50 | sqlite-vec p50 | vs sqlite-vec | bytes/memory | index bytes/memory | resident index bytes/memory | dense / resident dense |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &d in &dims {
        for &n in &sizes {
            let row = measure(n, d, queries).await?;
            print_row(&row);
            report.push(row);
        }
    }
    println!(
        "\n| N | d | cold from rows (no snapshot) | cold, writing the snapshot | cold from the snapshot | rows / snapshot | cold, snapshot 1% behind | stop keeping 1% own writes | cold after that stop | snapshot bytes/memory |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in &report {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "| {} | {} | {:.0} ms | {:.0} ms | {:.1} ms | {:.1}x | {:.0} ms | {:.0} ms | {:.1} ms | {:.0} |",
            r["n"],
            r["d"],
            f("cold_from_rows_ms"),
            f("cold_writing_snapshot_ms"),
            f("cold_open_and_first_recall_ms"),
            f("cold_from_rows_ms") / f("cold_open_and_first_recall_ms"),
            f("cold_snapshot_behind_1pct_ms"),
            f("keep_at_stop_ms"),
            f("cold_after_kept_stop_ms"),
            f("snapshot_bytes_per_memory"),
        );
    }
    let write = measure_memorize(if opts.quick { 300 } else { 5_000 }).await?;
    println!(
        "\nmemorize, WAL + synchronous=FULL (the default), Fake embedder, d=384: {:.0} memories/s ({} in {:.2} s)",
        write["per_second"].as_f64().unwrap_or(0.0),
        write["count"],
        write["seconds"].as_f64().unwrap_or(0.0)
    );
    println!(
        "memorize p50 / p95: FULL {:.2} / {:.2} ms, NORMAL {:.2} / {:.2} ms; NORMAL is {:.2}x as fast",
        write["full"]["p50_ms"].as_f64().unwrap_or(0.0),
        write["full"]["p95_ms"].as_f64().unwrap_or(0.0),
        write["normal"]["p50_ms"].as_f64().unwrap_or(0.0),
        write["normal"]["p95_ms"].as_f64().unwrap_or(0.0),
        write["normal_speedup"].as_f64().unwrap_or(0.0)
    );
    let local = match &opts.local_model {
        Some(dir) => {
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
            r
        }
        None => Value::Null,
    };
    let pg = match &opts.postgres {
        Some(url) => {
            let pg = postgres::PgOptions {
                url: url.clone(),
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
            };
            postgres::measure(&pg).await?
        }
        None => Value::Null,
    };
    let out = json!({ "sqlite_path": report, "memorize": write, "local": local, "postgres": pg, "quick": opts.quick });
    if let Some(path) = opts.json {
        std::fs::write(&path, serde_json::to_string_pretty(&out)?)?;
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

fn print_row(r: &Value) {
    let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2}x | {:.3} | {:.2} | {:.2}x | {:.2} | {:.3} | {:.1} | {:.0}x | {:.2} | {:.2} | {:.1}x | {:.0} | {:.0} | {:.0} | {:.2}x |",
        r["n"],
        r["d"],
        f("floor_ms"),
        f("recall_p50_ms"),
        f("recall_p95_ms"),
        f("recall_p50_ms") / f("floor_ms"),
        f("embed_p50_ms"),
        f("dense_p50_ms"),
        f("dense_p50_ms") / f("floor_ms"),
        f("bm25_p50_ms"),
        f("fusion_p50_ms"),
        f("rebuild_p50_ms"),
        f("rebuild_p50_ms") / f("recall_p50_ms"),
        f("dense_only_p50_ms"),
        f("sqlite_vec_p50_ms"),
        f("sqlite_vec_p50_ms") / f("dense_only_p50_ms"),
        f("bytes_per_memory"),
        f("index_bytes_per_memory"),
        f("resident_index_bytes_per_memory"),
        f("dense_p50_ms") / f("resident_dense_p50_ms"),
    );
}

/// Opens the file (with or without index snapshots) and answers one recall: the time
/// taken, and the engine holding the index with its store.
async fn open_and_recall(
    path: &std::path::Path,
    snapshots: bool,
    fake: &Arc<FakeProvider>,
    query: &str,
) -> Result<(f64, (CortexMemory, Arc<dyn MemoryStore>)), BoxError> {
    let started = Instant::now();
    let config = SqliteConfig {
        index_snapshots: snapshots,
        ..SqliteConfig::new(path)
    };
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open_with(&config)?);
    let engine = CortexMemory::new(store.clone(), fake.clone());
    engine.recall(USER, query, 10).await?;
    Ok((started.elapsed().as_secs_f64() * 1e3, (engine, store)))
}

/// The bytes of the snapshots beside the file.
fn snapshot_bytes(path: &std::path::Path) -> Result<u64, BoxError> {
    let mut dir = path.as_os_str().to_owned();
    dir.push(".index");
    let mut total = 0;
    for entry in std::fs::read_dir(std::path::PathBuf::from(dir))? {
        total += entry?.metadata()?.len();
    }
    Ok(total)
}

/// The floor: one streaming pass summing `n * d` f32 values (best of several passes).
fn floor_ms(n: usize, d: usize) -> f64 {
    let data = vec![1.0f32; n * d];
    let mut samples = Samples::default();
    let mut sink = 0.0f32;
    for _ in 0..7 {
        sink += samples.time(|| {
            let mut acc = [0.0f32; 16];
            for chunk in data.chunks_exact(16) {
                for i in 0..16 {
                    acc[i] += chunk[i];
                }
            }
            acc.iter().sum::<f32>()
        });
    }
    std::hint::black_box(sink);
    samples.min_ms()
}

async fn measure(n: usize, d: usize, queries: usize) -> Result<Value, BoxError> {
    eprintln!("N = {n}, d = {d}: generating and loading");
    let corpus = corpus::generate(n, d, 42);
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("bench.db");
    let signature = EmbeddingSignature::new(FAKE_MODEL, d);
    {
        let store = SqliteStore::open(&path)?;
        for (i, text) in corpus.texts.iter().enumerate() {
            let m = NewMemory::new(USER, text, MemoryKind::Note, &[], 1 << 20)?;
            store.add(&m, corpus.vector(i), &signature).await?;
        }
    }
    let mut rng = SmallRng::seed_from_u64(7);
    let query_texts: Vec<String> = (0..queries).map(|_| corpus::text(&mut rng)).collect();
    let fake = Arc::new(FakeProvider::new(d));

    // Cold: open the file and answer the first recall. Without snapshots the index is
    // built from every row (what every opening cost before them; the RSS growth is
    // measured here, the process's first index); with them, the first opening builds
    // it so and writes the snapshot, every later one reads the snapshot.
    let rss_before = rss_bytes();
    let (cold_rows_ms, first) = open_and_recall(&path, false, &fake, &query_texts[0]).await?;
    let rss_after = rss_bytes();
    drop(first);
    let (cold_write_ms, first) = open_and_recall(&path, true, &fake, &query_texts[0]).await?;
    drop(first);
    let snapshot_bytes = snapshot_bytes(&path)?;
    // One opening is noisy at this scale (tens of ms): the median of three.
    let mut opens = Samples::default();
    for _ in 0..2 {
        let (ms, _) = open_and_recall(&path, true, &fake, &query_texts[0]).await?;
        opens.push(Duration::from_secs_f64(ms / 1e3));
    }
    let (ms, (engine, store)) = open_and_recall(&path, true, &fake, &query_texts[0]).await?;
    opens.push(Duration::from_secs_f64(ms / 1e3));
    let cold_ms = opens.p50();

    // Warm recall through the engine (index cached).
    let mut recall = Samples::default();
    for q in &query_texts {
        let started = Instant::now();
        let hits = engine.recall(USER, q, 10).await?;
        recall.push(started.elapsed());
        std::hint::black_box(hits);
    }

    // The same work split into its parts, on an index built the same way.
    let built = store.build_index(USER, d).await?;
    let index = &built.index;
    // The same memories with every f32 row in memory, as an index without a vector
    // source keeps them: what reading the candidates' vectors from the file costs.
    let mut resident = MemoryIndex::new(d);
    for row in 0..index.len() {
        let memory = index.memory(row).clone();
        let at = usize::try_from(memory.seq - 1)?;
        resident.insert(memory, corpus.vector(at))?;
    }
    let (mut embed, mut dense, mut bm25, mut hybrid) = (
        Samples::default(),
        Samples::default(),
        Samples::default(),
        Samples::default(),
    );
    let mut resident_dense = Samples::default();
    let mut scored = Vec::with_capacity(query_texts.len());
    for q in &query_texts {
        let v = embed.time(|| fake.vector(q));
        let terms = query_terms(q);
        scored.push(index.dense_rows_scored(&v, 40));
        let from_file = dense.time(|| index.dense_search(&v, 40))?;
        let in_memory = resident_dense.time(|| resident.dense_search(&v, 40))?;
        if from_file != in_memory {
            return Err(format!(
                "{n} x {d}: the index over the file differs from the resident one"
            )
            .into());
        }
        std::hint::black_box(bm25.time(|| index.lexical_search(&terms, 40)));
        std::hint::black_box(hybrid.time(|| hybrid_retrieve(index, &v, &terms, 10))?);
    }
    // From PARALLEL_LISTS_FROM memories the two lists are ranked side by side.
    let lists_p50 = if n >= PARALLEL_LISTS_FROM {
        dense.p50().max(bm25.p50())
    } else {
        dense.p50() + bm25.p50()
    };
    let fusion_p50 = (hybrid.p50() - lists_p50).max(0.0);

    // The seed's way: rebuild the user's index from the rows on every recall.
    let rows_store = SqliteStore::open_with(&SqliteConfig {
        index_snapshots: false,
        ..SqliteConfig::new(&path)
    })?;
    let mut rebuild = Samples::default();
    for q in query_texts.iter().take(if n >= 100_000 { 5 } else { 20 }) {
        let v = fake.vector(q);
        let terms = query_terms(q);
        let started = Instant::now();
        let fresh = rows_store.build_index(USER, d).await?;
        std::hint::black_box(hybrid_retrieve(&fresh.index, &v, &terms, 10)?);
        rebuild.push(started.elapsed());
    }
    drop(rows_store);

    // Dense-only against sqlite-vec, same vectors, same queries, k = 10.
    let qvecs: Vec<Vec<f32>> = (0..queries.min(50))
        .map(|i| corpus.vector((i * 7919) % n).to_vec())
        .collect();
    let mut dense_only = Samples::default();
    let mut ours = Vec::new();
    for q in &qvecs {
        let hits = dense_only.time(|| index.dense_search(q, 10))?;
        ours.push(
            hits.iter()
                .map(|h| index.memory(h.row).seq - 1)
                .collect::<Vec<i64>>(),
        );
    }
    let (peer, theirs) = peer::knn_latency(&corpus, &qvecs, 10)?;
    let agree = ours
        .iter()
        .zip(&theirs)
        .map(|(a, b)| a.iter().filter(|x| b.contains(x)).count())
        .sum::<usize>() as f64
        / (10 * qvecs.len()) as f64;

    // A snapshot behind the file by 1% of its memories, written by a process that keeps
    // none: the opening reads it, applies the rows written since, and writes it again.
    drop((engine, store));
    {
        let writer = SqliteStore::open_with(&SqliteConfig {
            index_snapshots: false,
            ..SqliteConfig::new(&path)
        })?;
        let mut rng = SmallRng::seed_from_u64(11);
        for _ in 0..(n / 100).max(1) {
            let text = corpus::text(&mut rng);
            let m = NewMemory::new(USER, &text, MemoryKind::Note, &[], 1 << 20)?;
            writer.add(&m, &fake.vector(&text), &signature).await?;
        }
    }
    let (cold_behind_ms, (engine, _store)) =
        open_and_recall(&path, true, &fake, &query_texts[0]).await?;

    // A server's own writes, 1% of its memories, kept at its stop (`keep_indexes`, as
    // cortex-mcp does on its way out): what the stop costs, and the next opening.
    let mut rng = SmallRng::seed_from_u64(13);
    for _ in 0..(n / 100).max(1) {
        let text = corpus::text(&mut rng);
        engine.memorize(USER, &text, MemoryKind::Note, &[]).await?;
    }
    let started = Instant::now();
    engine.keep_indexes().await;
    let keep_ms = started.elapsed().as_secs_f64() * 1e3;
    drop(engine);
    let (cold_kept_ms, _) = open_and_recall(&path, true, &fake, &query_texts[0]).await?;

    let floor = floor_ms(n, d);
    Ok(json!({
        "n": n, "d": d,
        "floor_ms": floor,
        "cold_open_and_first_recall_ms": cold_ms,
        "cold_from_rows_ms": cold_rows_ms,
        "cold_writing_snapshot_ms": cold_write_ms,
        "cold_snapshot_behind_1pct_ms": cold_behind_ms,
        "keep_at_stop_ms": keep_ms,
        "cold_after_kept_stop_ms": cold_kept_ms,
        "snapshot_bytes_per_memory": snapshot_bytes as f64 / n as f64,
        "recall_p50_ms": recall.p50(), "recall_p95_ms": recall.p95(),
        "embed_p50_ms": embed.p50(), "dense_p50_ms": dense.p50(), "bm25_p50_ms": bm25.p50(),
        "fusion_p50_ms": fusion_p50, "hybrid_p50_ms": hybrid.p50(),
        "rebuild_p50_ms": rebuild.p50(), "rebuild_p95_ms": rebuild.p95(),
        "dense_only_p50_ms": dense_only.p50(), "sqlite_vec_p50_ms": peer.p50(),
        "top10_agreement_with_sqlite_vec": agree,
        "index_bytes_per_memory": index.approx_bytes() as f64 / n as f64,
        "resident_index_bytes_per_memory": resident.approx_bytes() as f64 / n as f64,
        "resident_dense_p50_ms": resident_dense.p50(),
        "dense_rows_scored_median": median(&mut scored),
        "bytes_per_memory": rss_after.saturating_sub(rss_before) as f64 / n as f64,
    }))
}

/// Memorize through the engine on SQLite at both commit durabilities, in alternating
/// rounds so that both see the same machine: FULL (the default, an fsync per commit) and
/// NORMAL (fsync at checkpoints).
async fn measure_memorize(count: usize) -> Result<Value, BoxError> {
    const ROUNDS: usize = 3;
    let mut rng = SmallRng::seed_from_u64(11);
    let texts: Vec<String> = (0..count).map(|_| corpus::text(&mut rng)).collect();
    let per_round = count.div_ceil(ROUNDS);
    let mut seconds = [0.0f64; 2];
    let mut latencies = [Samples::default(), Samples::default()];
    let modes = [Synchronous::Full, Synchronous::Normal];
    let dir = tempfile::tempdir()?;
    let engines = modes
        .iter()
        .enumerate()
        .map(|(i, mode)| {
            let config = SqliteConfig {
                synchronous: *mode,
                ..SqliteConfig::new(dir.path().join(format!("w{i}.db")))
            };
            let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open_with(&config)?);
            Ok(CortexMemory::new(store, Arc::new(FakeProvider::new(384))))
        })
        .collect::<Result<Vec<_>, BoxError>>()?;
    for chunk in texts.chunks(per_round) {
        for (i, engine) in engines.iter().enumerate() {
            let started = Instant::now();
            for t in chunk {
                let one = Instant::now();
                engine.memorize(USER, t, MemoryKind::Note, &[]).await?;
                latencies[i].push(one.elapsed());
            }
            seconds[i] += started.elapsed().as_secs_f64();
        }
    }
    let report = |i: usize| {
        json!({
            "count": count, "seconds": seconds[i], "per_second": count as f64 / seconds[i],
            "p50_ms": latencies[i].p50(), "p95_ms": latencies[i].p95(),
        })
    };
    Ok(json!({
        "count": count, "seconds": seconds[0], "per_second": count as f64 / seconds[0],
        "full": report(0), "normal": report(1),
        "normal_speedup": seconds[0] / seconds[1],
    }))
}

fn median(values: &mut [usize]) -> usize {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}
