//! `--filters`: filtered recall beside unfiltered recall, on the in-process path (the
//! cached `MemoryIndex` SQLite recall searches) and, with `--postgres`, on the Postgres
//! pushdown (exact, HNSW, and HNSW without its exact fallback for selective filters).
//!
//! The corpus is the Postgres bench's (`postgres::corpus`: 384 dimensions, 64 clusters,
//! a 400-word Zipf vocabulary) with labels drawn independently of it, per memory from its
//! own random stream, so no label is correlated with a vector cluster or a word:
//!
//! - a topic tag `topic0`..`topic19`, always;
//! - tag `p1` with probability 1%, `p10` with 10%, `p50` with 50% (independently);
//! - a kind, uniform over the six;
//! - `created_at` spread evenly over 2025 in insertion order (as memories written over a
//!   year would be).
//!
//! The filters: each tag alone (1%, 10%, 50%), a 10% window of `created_at`, and one
//! combining kinds, `tags_all` and an open-ended `since` (under 1%). For each query the
//! unfiltered search and every filtered one run one after another, in an order rotated
//! per query, so that all of them see the same machine. Every returned memory is checked
//! against its filter (`MemoryFilter::matches`); one that fails, an exact result shorter
//! than the memories that pass allow, or a search that errs makes the run fail.

use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use cortex_core::{
    filter::MemoryFilter, hybrid::ScoredMemory, hybrid::hybrid_retrieve,
    hybrid::hybrid_retrieve_filtered, index::MemoryIndex, memory::Memory, memory::MemoryKind,
    new_memory::NewMemory, store::MemoryStore, store::SearchRequest,
};
use cortex_postgres::{AnnIndex, DenseMode, PostgresConfig, PostgresStore};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::BoxError;
use crate::postgres::corpus::{self, Corpus, Rng, requests};
use crate::postgres::runs::overlap;
use crate::postgres::schema::{config, drop_schema, filled};
use crate::postgres::table::rate;
use crate::postgres::{DIM, TOP_K, USER, WRITERS, secs};
use crate::stats::Samples;

/// 2025-01-01T00:00:00Z: the year the memories' `created_at` spread over.
const YEAR_START: i64 = 1_735_689_600;
const YEAR_SECS: i64 = 365 * 86_400;

/// What `--filters` runs.
#[derive(Debug, Clone)]
pub(crate) struct FilterOptions {
    /// Memories in the in-process index.
    pub memories: usize,
    /// Hybrid queries on the in-process path.
    pub queries: usize,
    /// The Postgres server, when the pushdown is measured too.
    pub postgres: Option<String>,
    /// Memory counts for Postgres, one schema `cortex_bench_filters_<N>` each.
    pub pg_sizes: Vec<usize>,
    /// Hybrid queries per Postgres size.
    pub pg_queries: usize,
    /// Keep the schemas, and reuse one already holding that many memories.
    pub keep: bool,
    /// The approximate index of the pushdown's index modes.
    pub ann_index: AnnIndex,
}

/// One memory's labels.
struct Label {
    kind: MemoryKind,
    tags: Vec<String>,
    created_at: DateTime<Utc>,
}

/// The labels of the `i`-th of `n` memories, from a random stream of its own (seeded by a
/// hash of `i`, so neighbouring memories' streams do not overlap).
fn label(i: usize, n: usize) -> Label {
    let mut rng = Rng(Rng(i as u64 ^ 0x0f11_7e25_5eed_0001).next());
    let mut tags = vec![format!("topic{}", rng.below(20))];
    for (tag, p) in [("p1", 0.01), ("p10", 0.10), ("p50", 0.50)] {
        if rng.unit() < p {
            tags.push(tag.to_owned());
        }
    }
    let kind = MemoryKind::ALL[rng.below(MemoryKind::ALL.len())];
    let offset = (i as i128 * i128::from(YEAR_SECS) / n.max(1) as i128) as i64;
    Label {
        kind,
        tags,
        created_at: at(YEAR_START + offset),
    }
}

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0).single().unwrap_or_default()
}

/// A point `fraction` of the way through the year.
fn in_year(fraction: f64) -> DateTime<Utc> {
    at(YEAR_START + (fraction * YEAR_SECS as f64) as i64)
}

/// A named filter; the first case is no filter at all.
struct Case {
    name: &'static str,
    filter: MemoryFilter,
}

fn cases() -> Result<Vec<Case>, BoxError> {
    let tags = |t: &[&str]| t.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let case = |name, filter| Case { name, filter };
    Ok(vec![
        case("none", MemoryFilter::default()),
        case(
            "tag p1",
            MemoryFilter::new(&[], &tags(&["p1"]), &[], None, None)?,
        ),
        case(
            "tag p10",
            MemoryFilter::new(&[], &tags(&["p10"]), &[], None, None)?,
        ),
        case(
            "tag p50",
            MemoryFilter::new(&[], &tags(&["p50"]), &[], None, None)?,
        ),
        case(
            "created in a 10% window",
            MemoryFilter::new(&[], &[], &[], Some(in_year(0.45)), Some(in_year(0.55)))?,
        ),
        case(
            "fact or decision, all of p10 and p50, since mid-year",
            MemoryFilter::new(
                &[MemoryKind::Fact, MemoryKind::Decision],
                &[],
                &tags(&["p10", "p50"]),
                Some(in_year(0.5)),
                None,
            )?,
        ),
    ])
}

/// The labelled corpus of `n` memories and its labels: the same for a given `n` on every
/// run and machine, so a kept schema matches what a later run generates.
fn labelled(n: usize, rng: &mut Rng) -> (Corpus, Vec<Label>) {
    let corpus = corpus::generate(n, rng);
    let labels = (0..n).map(|i| label(i, n)).collect();
    (corpus, labels)
}

/// How many of the labelled memories pass each case's filter.
fn passing(cases: &[Case], labels: &[Label]) -> Vec<usize> {
    let probe = |l: &Label| Memory {
        id: Uuid::nil(),
        user_id: USER.into(),
        content: String::new(),
        kind: l.kind,
        tags: l.tags.clone(),
        created_at: l.created_at,
        seq: 0,
        expires_at: None,
    };
    let probes: Vec<Memory> = labels.iter().map(probe).collect();
    cases
        .iter()
        .map(|c| probes.iter().filter(|m| c.filter.matches(m)).count())
        .collect()
}

/// Runs `--filters`: prints the tables, returns the report and how many checks failed.
pub(crate) async fn run(opts: &FilterOptions) -> Result<(Value, u64), BoxError> {
    let cases = cases()?;
    let (local, mut failures) = in_process(opts.memories, opts.queries, &cases)?;
    let mut pg = Vec::new();
    if let Some(url) = &opts.postgres {
        for &n in &opts.pg_sizes {
            let (row, failed) = pushdown(url, n, opts, &cases).await?;
            failures += failed;
            pg.push(row);
        }
    }
    Ok((json!({ "in_process": local, "postgres": pg }), failures))
}

/// Checks of one search's answer.
#[derive(Debug, Default, Clone)]
struct Checked {
    latencies: Samples,
    /// Per query, in milliseconds (for the paired ratio with the unfiltered search).
    millis: Vec<f64>,
    /// Each search's result ids, in order (empty for a search that erred).
    results: Vec<Vec<Uuid>>,
    returned: usize,
    /// Returned memories that fail the filter.
    failing: usize,
    /// Searches that returned fewer than `min(TOP_K, passing)` memories.
    short: usize,
    errors: usize,
    first_error: Option<String>,
    /// Searches the store planned exactly though its mode is HNSW.
    planned_exact: u64,
}

impl Checked {
    fn record(
        &mut self,
        took: std::time::Duration,
        hits: &[ScoredMemory],
        filter: &MemoryFilter,
        pass: usize,
    ) {
        self.latencies.push(took);
        self.millis.push(took.as_secs_f64() * 1e3);
        self.returned += hits.len();
        self.failing += hits.iter().filter(|h| !filter.matches(&h.memory)).count();
        if hits.len() < TOP_K.min(pass) {
            self.short += 1;
        }
        self.results
            .push(hits.iter().map(|h| h.memory.id).collect());
    }

    fn error(&mut self, e: impl std::fmt::Display) {
        self.errors += 1;
        self.results.push(Vec::new());
        self.first_error.get_or_insert_with(|| e.to_string());
    }

    fn per_search(&self) -> f64 {
        self.returned as f64 / self.results.len().max(1) as f64
    }

    /// The median over queries of this search's time over the unfiltered one's.
    fn paired_ratio(&self, unfiltered: &Checked) -> f64 {
        let mut ratios: Vec<f64> = self
            .millis
            .iter()
            .zip(&unfiltered.millis)
            .map(|(a, b)| a / b)
            .collect();
        if ratios.is_empty() {
            return f64::NAN;
        }
        ratios.sort_unstable_by(f64::total_cmp);
        ratios[ratios.len() / 2]
    }

    fn json(&self, case: &Case, pass: usize, n: usize, unfiltered: &Checked) -> Value {
        json!({
            "filter": case.name,
            "passing": pass,
            "selectivity": pass as f64 / n.max(1) as f64,
            "searches": self.results.len(),
            "p50_ms": self.latencies.p50(),
            "p95_ms": self.latencies.p95(),
            "p50_over_unfiltered_p50": self.latencies.p50() / unfiltered.latencies.p50(),
            "median_paired_ratio": self.paired_ratio(unfiltered),
            "results_per_search": self.per_search(),
            "failing_filter": self.failing,
            "short_results": self.short,
            "errors": self.errors,
            "first_error": self.first_error,
            "planned_exact": self.planned_exact,
        })
    }
}

fn percent(pass: usize, n: usize) -> String {
    format!("{:.1}%", pass as f64 * 100.0 / n.max(1) as f64)
}

/// The in-process path: `hybrid_retrieve` and `hybrid_retrieve_filtered` over one index.
fn in_process(n: usize, queries: usize, cases: &[Case]) -> Result<(Value, u64), BoxError> {
    eprintln!("filters, in-process: generating and indexing {n} memories");
    let mut rng = Rng(n as u64);
    let (corpus, labels) = labelled(n, &mut rng);
    let mut index = MemoryIndex::new(DIM);
    for (i, l) in labels.iter().enumerate() {
        let memory = Memory {
            id: Uuid::from_u128(i as u128 + 1),
            user_id: USER.into(),
            content: corpus.texts[i].clone(),
            kind: l.kind,
            tags: l.tags.clone(),
            created_at: l.created_at,
            seq: i as i64 + 1,
            expires_at: None,
        };
        index.insert(memory, &corpus.vectors[i])?;
    }
    let requests = requests(&corpus, &mut rng, queries).0;
    let pass = passing(cases, &labels);
    let search = |r: &SearchRequest, c: &Case| match c.filter.is_empty() {
        true => hybrid_retrieve(&index, &r.embedding, &r.terms, TOP_K),
        false => hybrid_retrieve_filtered(&index, &r.embedding, &r.terms, TOP_K, &c.filter),
    };
    for r in requests.iter().take(5) {
        for c in cases {
            std::hint::black_box(search(r, c)?);
        }
    }
    let mut cells = vec![Checked::default(); cases.len()];
    for (q, r) in requests.iter().enumerate() {
        for k in 0..cases.len() {
            let c = (q + k) % cases.len();
            let start = Instant::now();
            let hits = search(r, &cases[c])?;
            let took = start.elapsed();
            cells[c].record(took, &hits, &cases[c].filter, pass[c]);
        }
    }

    println!(
        "\nfiltered recall, in-process (the cached index SQLite recall searches): {n} memories, \
         d={DIM}, {} hybrid queries of top {TOP_K}; per query the unfiltered recall and each \
         filtered one, in an order rotated per query",
        requests.len()
    );
    println!(
        "\n| filter | selects | p50 (ms) | p95 (ms) | p50 / unfiltered p50 | median per-query ratio | results/search | failing the filter | short |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut rows = Vec::new();
    let mut failures = 0;
    for ((c, cell), &p) in cases.iter().zip(&cells).zip(&pass) {
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2}x | {:.2}x | {:.1} | {} | {} |",
            c.name,
            percent(p, n),
            cell.latencies.p50(),
            cell.latencies.p95(),
            cell.latencies.p50() / cells[0].latencies.p50(),
            cell.paired_ratio(&cells[0]),
            cell.per_search(),
            cell.failing,
            cell.short,
        );
        failures += (cell.failing + cell.short) as u64;
        rows.push(cell.json(c, p, n, &cells[0]));
    }
    let worst = cells[1..]
        .iter()
        .map(|c| c.latencies.p50() / cells[0].latencies.p50())
        .fold(0.0f64, f64::max);
    println!(
        "\nslowest filtered p50: {worst:.2}x the unfiltered p50 (the goal: within 1.5x at 100k)"
    );
    Ok((
        json!({ "n": n, "d": DIM, "queries": requests.len(), "top_k": TOP_K,
                "worst_p50_ratio": worst, "filters": rows }),
        failures,
    ))
}

/// The stores searched, in the table's order: exact, the approximate index (HNSW or
/// IVFFlat), and the index with the exact fallback for selective filters turned off (the
/// iterative scan alone).
fn mode_names(index: AnnIndex) -> [String; 3] {
    let kind = index.as_str();
    [
        "exact".into(),
        kind.into(),
        format!("{kind}, no exact fallback"),
    ]
}

/// The Postgres pushdown over `n` labelled memories in schema `cortex_bench_filters_<n>`
/// (`cortex_bench_filters_ivfflat_<n>` for IVFFlat: one approximate index a schema).
async fn pushdown(
    url: &str,
    n: usize,
    opts: &FilterOptions,
    cases: &[Case],
) -> Result<(Value, u64), BoxError> {
    let schema = match opts.ann_index {
        AnnIndex::Hnsw => format!("cortex_bench_filters_{n}"),
        AnnIndex::IvfFlat => format!("cortex_bench_filters_ivfflat_{n}"),
    };
    let indexed = |mode| PostgresConfig {
        ann_index: opts.ann_index,
        ..config(url, &schema, mode)
    };
    let mut rng = Rng(n as u64);
    let (corpus, labels) = labelled(n, &mut rng);
    let requests = requests(&corpus, &mut rng, opts.pg_queries).0;
    let pass = passing(cases, &labels);

    let (exact, rates) = filled(
        || config(url, &schema, DenseMode::Exact),
        &schema,
        n,
        opts.keep,
        &corpus,
        &format!("loading {n} labelled memories into Postgres ({WRITERS} writers)..."),
        |i: usize| {
            let l = &labels[i];
            NewMemory::new(USER, &corpus.texts[i], l.kind, &l.tags, 1 << 16)?.dated(l.created_at)
        },
    )
    .await?;
    // Only a schema reused as it was has no memorize rates.
    let reuse = rates.is_none();
    eprintln!("building the {} index...", opts.ann_index.as_str());
    let start = Instant::now();
    let hnsw = PostgresStore::connect(indexed(DenseMode::Hnsw)).await?;
    let build = start.elapsed();
    let no_fallback = PostgresStore::connect(PostgresConfig {
        hnsw_threshold: 0,
        ..indexed(DenseMode::Hnsw)
    })
    .await?;
    // The in-process path over the store's own rows: what exact search must equal.
    let built = exact.build_index(USER, DIM).await?.index;
    let stores = [&exact, &hnsw, &no_fallback];
    let searched = Searched::run(stores, &built, &requests, cases, &pass).await?;

    let loaded = Loaded {
        schema: &schema,
        reuse,
        rates,
        build,
    };
    loaded.print(n, opts.ann_index, requests.len());
    let (modes, failures) = searched.rows(n, opts.ann_index, cases, &pass, requests.len());
    if !opts.keep {
        drop_schema(&hnsw, &schema).await?;
    }
    Ok((
        json!({
            "n": n, "schema": schema, "reused": reuse, "queries": requests.len(),
            "memorize_one_client_per_s": rates.map(|r| r.0),
            "memorize_concurrent_per_s": rates.map(|r| r.1).filter(|r| r.is_finite()),
            "ann_index": opts.ann_index.as_str(),
            "index_build_s": secs(build),
            "modes": modes,
        }),
        failures,
    ))
}

/// How the pushdown's schema came to hold its memories, and its index's build.
struct Loaded<'a> {
    schema: &'a str,
    reuse: bool,
    /// Memorize rates, one client then many (`None`: reused).
    rates: Option<(f64, f64)>,
    build: Duration,
}

impl Loaded<'_> {
    /// The pushdown table's heading: the schema, its load and build, `queries` queries.
    fn print(&self, n: usize, ann_index: AnnIndex, queries: usize) {
        let schema = self.schema;
        println!(
            "\nfiltered search, Postgres pushdown: {n} memories in {schema} ({}; memorize {} /s one \
             client, {} /s {WRITERS} clients), {} build {:.1} s, {} hybrid queries of top \
             {TOP_K}; per query every filter on every store, in orders rotated per query",
            if self.reuse { "reused" } else { "loaded" },
            rate(self.rates, |r| r.0),
            rate(self.rates, |r| r.1),
            ann_index.as_str(),
            secs(self.build),
            queries
        );
        println!(
            "\n| memories | mode | filter | selects | p50 (ms) | p95 (ms) | p50 / unfiltered p50 | results/search | planned exact | overlap@10 with exact | failing the filter |"
        );
        println!("|---:|---|---|---:|---:|---:|---:|---:|---:|---|---:|");
    }
}

/// The pushdown's searches: every filter on every store, per query.
struct Searched {
    /// By store (exact, the index, the index without its fallback), then by case.
    cells: Vec<Vec<Checked>>,
    /// Per case, the exact searches equal to the in-process path on the same rows.
    parity: Vec<usize>,
}

impl Searched {
    /// Runs every request under every case on every store (in orders rotated per query,
    /// so that all see the same machine), checking each answer, and the in-process path
    /// over `built` beside the exact store.
    async fn run(
        stores: [&PostgresStore; 3],
        built: &MemoryIndex,
        requests: &[SearchRequest],
        cases: &[Case],
        pass: &[usize],
    ) -> Result<Searched, BoxError> {
        let request = |r: &SearchRequest, c: &Case| SearchRequest {
            filter: c.filter.clone(),
            ..r.clone()
        };
        for r in requests.iter().take(3) {
            for c in cases {
                for store in stores {
                    // Errors show in the measured searches below.
                    let _ = store.search(USER, &request(r, c)).await;
                }
            }
        }
        eprintln!("filtered searches...");
        let mut cells = vec![vec![Checked::default(); cases.len()]; stores.len()];
        let mut parity = vec![0usize; cases.len()];
        for (q, r) in requests.iter().enumerate() {
            for k in 0..cases.len() {
                let c = (q + k) % cases.len();
                let req = request(r, &cases[c]);
                for j in 0..stores.len() {
                    let s = (q + j) % stores.len();
                    let store = stores[s];
                    let before = store.diagnostics().filtered_exact_searches();
                    let start = Instant::now();
                    let answer = store.search(USER, &req).await;
                    let took = start.elapsed();
                    let cell = &mut cells[s][c];
                    cell.planned_exact += store.diagnostics().filtered_exact_searches() - before;
                    match answer {
                        Ok(hits) => cell.record(took, &hits, &req.filter, pass[c]),
                        Err(e) => cell.error(e),
                    }
                }
                let local: Vec<Uuid> =
                    hybrid_retrieve_filtered(built, &r.embedding, &r.terms, TOP_K, &req.filter)?
                        .iter()
                        .map(|h| h.memory.id)
                        .collect();
                if cells[0][c].results.last() == Some(&local) {
                    parity[c] += 1;
                }
            }
        }
        Ok(Searched { cells, parity })
    }

    /// Prints the table's rows, mode by mode, for `queries` queries; returns them by mode,
    /// and how many checks failed.
    fn rows(
        &self,
        n: usize,
        ann_index: AnnIndex,
        cases: &[Case],
        pass: &[usize],
        queries: usize,
    ) -> (serde_json::Map<String, Value>, u64) {
        let (cells, parity) = (&self.cells, &self.parity);
        let mut failures = 0u64;
        let mut modes = serde_json::Map::new();
        for (s, mode) in mode_names(ann_index).iter().enumerate() {
            let unfiltered = &cells[s][0];
            let mut rows = Vec::new();
            for (c, case) in cases.iter().enumerate() {
                let cell = &cells[s][c];
                let agreement = match s {
                    0 => format!(
                        "{:.3} (= in-process on its rows: {}/{})",
                        overlap(&cells[0][c].results, &cell.results),
                        parity[c],
                        queries
                    ),
                    _ => format!("{:.3}", overlap(&cells[0][c].results, &cell.results)),
                };
                let errors = match &cell.first_error {
                    Some(e) => format!(" ({} errors: {e})", cell.errors),
                    None => String::new(),
                };
                let exact_count = match s {
                    0 => String::new(),
                    _ => format!(" (exact {:.1})", cells[0][c].per_search()),
                };
                println!(
                    "| {n} | {mode} | {} | {} | {:.1} | {:.1} | {:.2}x | {:.1}{exact_count} | {} | {agreement} | {}{errors} |",
                    case.name,
                    percent(pass[c], n),
                    cell.latencies.p50(),
                    cell.latencies.p95(),
                    cell.latencies.p50() / unfiltered.latencies.p50(),
                    cell.per_search(),
                    cell.planned_exact,
                    cell.failing,
                );
                // Short results fail exact search only: HNSW's losses are measured, not failed.
                failures += (cell.failing + cell.errors) as u64;
                if s == 0 {
                    // The exact pushdown must equal the in-process path on every search.
                    failures += cell.short as u64 + (queries - parity[c]) as u64;
                }
                let mut row = cell.json(case, pass[c], n, unfiltered);
                row["overlap_with_exact"] = json!(overlap(&cells[0][c].results, &cell.results));
                if s == 0 {
                    row["equal_to_in_process"] = json!(parity[c]);
                }
                rows.push(row);
            }
            modes.insert(mode.clone(), Value::Array(rows));
        }
        (modes, failures)
    }
}
