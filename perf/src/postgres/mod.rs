//! The Postgres pushdown: memorize throughput through the store's `add`, and one `search`
//! call's latency, exact vs HNSW dense candidates, with HNSW's overlap@10 with exact.
//!
//! Vectors: 384 dimensions, unit length, 64 Gaussian clusters of varying spread. Texts:
//! 4-24 words drawn Zipf-like from a 400-word vocabulary (the commonest words are in half
//! the memories). One user holds every memory (the per-user filter keeps everything, the
//! HNSW best case). Queries: a stored vector plus noise with 1-3 words ("hybrid"), or the
//! same vector with no words ("dense-only", which isolates the vector side).

use std::sync::Arc;
use std::time::{Duration, Instant};

use cortex_core::tokenizer::query_terms;
use cortex_core::{
    CortexError, EmbeddingSignature, MemoryKind, MemoryStore, NewMemory, SearchRequest,
};
use cortex_postgres::{
    AnnIndex, DEFAULT_LOOKUP_COST, DEFAULT_PRUNE_BUDGET, DenseMode, HnswBuild, IvfFlat,
    PostgresConfig, PostgresStore, RarestFirstLookups,
};
use serde_json::{Value, json};

use crate::BoxError;
use crate::stats::Samples;

pub(crate) const DIM: usize = 384;
const CLUSTERS: usize = 64;
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

/// SplitMix64: the same corpus and queries on every run and machine.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn zipf(&mut self, n: usize) -> usize {
        ((n as f64).powf(self.unit()) - 1.0) as usize % n
    }
    fn normal(&mut self) -> f32 {
        ((0..6).map(|_| self.unit()).sum::<f64>() - 3.0) as f32 / 0.7
    }
}

fn unit(v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    v.into_iter().map(|x| (f64::from(x) / n) as f32).collect()
}

fn vocabulary() -> Vec<String> {
    let base = "the a to of and in is for on with at by from my our team project deploy \
        release build test server database api user customer meeting call email report budget \
        plan review design code bug fix issue ticket sprint week month year monday friday \
        morning evening night today tomorrow alice bob carol dana erik fatima berlin lisbon \
        tokyo paris office home remote coffee tea lunch dinner birthday holiday vacation flight \
        hotel train doctor dentist invoice payment refund contract vendor security key rotate \
        backup restore migrate postgres rust python kubernetes docker cluster latency error \
        timeout retry cache index search vector embedding model prompt token cost price";
    let mut words: Vec<String> = base.split_whitespace().map(str::to_owned).collect();
    let mut i = 0;
    while words.len() < 400 {
        words.push(format!("{}{}", words[i % 60], i / 60 + 2));
        i += 1;
    }
    words
}

pub(crate) struct Corpus {
    pub(crate) texts: Vec<String>,
    pub(crate) vectors: Vec<Vec<f32>>,
}

pub(crate) fn corpus(n: usize, rng: &mut Rng) -> Corpus {
    let words = vocabulary();
    let centers: Vec<Vec<f32>> = (0..CLUSTERS)
        .map(|_| unit((0..DIM).map(|_| rng.normal()).collect()))
        .collect();
    let spread: Vec<f32> = (0..CLUSTERS)
        .map(|_| 0.02 + 0.06 * rng.unit() as f32)
        .collect();
    let mut texts = Vec::with_capacity(n);
    let mut vectors = Vec::with_capacity(n);
    for _ in 0..n {
        let len = 4 + rng.below(21);
        texts.push(
            (0..len)
                .map(|_| words[rng.zipf(words.len())].as_str())
                .collect::<Vec<_>>()
                .join(" "),
        );
        let c = rng.below(CLUSTERS);
        vectors.push(unit(
            centers[c]
                .iter()
                .map(|x| x + spread[c] * rng.normal())
                .collect(),
        ));
    }
    Corpus { texts, vectors }
}

pub(crate) fn config(url: &str, schema: &str, mode: DenseMode) -> PostgresConfig {
    PostgresConfig {
        // Fixed, whatever CORTEX_PG_* says: the bench measures the defaults.
        schema: Some(schema.to_owned()),
        dense_mode: mode,
        pool_size: WRITERS,
        ..PostgresConfig::new(url)
    }
}

/// Memorize rates: one client one add at a time, then `WRITERS` concurrent clients (NaN,
/// printed "-", when the first 2,000 were all there was). `new` makes the `i`-th memory
/// (its text is `corpus.texts[i]`, its vector `corpus.vectors[i]`).
pub(crate) async fn load(
    store: Arc<PostgresStore>,
    corpus: &Corpus,
    new: impl Fn(usize) -> Result<NewMemory, CortexError>,
) -> Result<(f64, f64), BoxError> {
    let sig = EmbeddingSignature::new("bench", DIM);
    let sequential = 2000.min(corpus.texts.len());
    let start = Instant::now();
    for i in 0..sequential {
        store.add(&new(i)?, &corpus.vectors[i], &sig).await?;
    }
    let one = sequential as f64 / start.elapsed().as_secs_f64();
    let rest = corpus.texts.len() - sequential;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let chunk = (sequential..corpus.texts.len())
            .filter(|i| i % WRITERS == w)
            .map(|i| Ok((new(i)?, corpus.vectors[i].clone())))
            .collect::<Result<Vec<_>, BoxError>>()?;
        let store = store.clone();
        let sig = sig.clone();
        tasks.push(tokio::spawn(async move {
            for (m, v) in chunk {
                store.add(&m, &v, &sig).await?;
            }
            Ok::<_, cortex_core::StoreError>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let many = match rest {
        0 => f64::NAN,
        _ => rest as f64 / start.elapsed().as_secs_f64().max(1e-9),
    };
    Ok((one, many))
}

/// The BM25 paths, in [`Run::by_path`]'s order.
const PATHS: [&str; 6] = [
    "full scan",
    "within the budget",
    "pruned",
    "pruned past the budget",
    "one term in impact order",
    "rarest term first",
];

struct Run {
    latencies: Samples,
    results: Vec<Vec<uuid::Uuid>>,
    /// The same latencies by the BM25 path each search took: full scan, scored once,
    /// pruned, pruned past the budget.
    by_path: [Samples; 6],
    /// The rarest-first candidates and lookups of the measured searches (not the warm-up).
    lookups: RarestFirstLookups,
    /// How many of the measured searches ran their two sides on two connections.
    side_by_side: u64,
    /// How many walked the HNSW graph again with the iterative scan, the first walk short.
    rewalks: u64,
}

impl Run {
    /// The runs' searches as one run, in order.
    fn concat(runs: Vec<Run>) -> Run {
        let mut all = Run {
            latencies: Samples::default(),
            results: Vec::new(),
            by_path: Default::default(),
            lookups: RarestFirstLookups::default(),
            side_by_side: 0,
            rewalks: 0,
        };
        for run in runs {
            all.latencies.extend(&run.latencies);
            all.results.extend(run.results);
            for (into, from) in all.by_path.iter_mut().zip(&run.by_path) {
                into.extend(from);
            }
            all.lookups.candidates += run.lookups.candidates;
            all.lookups.looked_up += run.lookups.looked_up;
            all.side_by_side += run.side_by_side;
            all.rewalks += run.rewalks;
        }
        all
    }
}

/// Repeats the HNSW hybrid searches for `window`, one at a time, and says how many ran.
/// `hnsw` is the store's configuration in HNSW mode, with the index's build settings (a
/// kept index built otherwise is built again).
async fn profile(
    hnsw: PostgresConfig,
    schema: &str,
    requests: &[SearchRequest],
    window: Duration,
) -> Result<(), BoxError> {
    let hnsw = PostgresStore::connect(hnsw).await?;
    for r in requests.iter().take(5) {
        hnsw.search(USER, r).await?;
    }
    eprintln!("profiling window: {schema}, {:.0} s", window.as_secs_f64());
    let start = Instant::now();
    let mut searches = 0usize;
    while start.elapsed() < window {
        for r in requests {
            hnsw.search(USER, r).await?;
            searches += 1;
        }
    }
    let took = start.elapsed().as_secs_f64();
    println!(
        "{schema}: {searches} HNSW hybrid searches in {took:.1} s ({:.2} ms each)",
        took * 1e3 / searches.max(1) as f64
    );
    Ok(())
}

/// Prints each HNSW hybrid search: terms, path, median of `repeat` runs, and the times
/// EXPLAIN ANALYZE reports for it: the planning it pays per search (the dense
/// statement's; the BM25 and fused ones' generic plans are made once per connection) and
/// the execution of all three (and the plans themselves to stderr, with `print_plans`).
/// `hnsw` as for [`profile`].
async fn trace(
    hnsw: PostgresConfig,
    schema: &str,
    requests: &[SearchRequest],
    repeat: usize,
    print_plans: bool,
) -> Result<(), BoxError> {
    let serial = PostgresStore::connect(PostgresConfig {
        parallel_search: false,
        ..hnsw.clone()
    })
    .await?;
    let hnsw = PostgresStore::connect(hnsw).await?;
    for r in requests.iter().take(5) {
        hnsw.search(USER, r).await?;
        serial.search(USER, r).await?;
    }
    println!(
        "| {schema} query | BM25 path | median ms | one connection: median ms | planning ms (per search) | execution ms | rarest-first lookups / candidates |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for r in requests {
        let (runs, one) = paired(&hnsw, &serial, &vec![r.clone(); repeat.max(1)]).await?;
        let path = runs
            .by_path
            .iter()
            .position(|s| !s.is_empty())
            .map_or("none", |i| PATHS[i]);
        let latencies = runs.latencies;
        let before = hnsw.diagnostics().rarest_first_lookups();
        hnsw.search(USER, r).await?;
        let after = hnsw.diagnostics().rarest_first_lookups();
        let lookups = match after.candidates - before.candidates {
            0 => String::new(),
            candidates => format!("{} / {candidates}", after.looked_up - before.looked_up),
        };
        let plan = hnsw.diagnostics().explain_search(USER, r).await?;
        if print_plans {
            eprintln!("-- {:?}\n{}", r.terms, plan.join("\n"));
        }
        let times = |label: &str| {
            plan.iter()
                .filter_map(|l| l.strip_prefix(label))
                .filter_map(|t| t.trim().trim_end_matches(" ms").parse::<f64>().ok())
                .collect::<Vec<f64>>()
        };
        // The statements in the order the one-connection path runs them (EXPLAIN never runs
        // side by side): BM25, dense, fused. Only the dense one is planned per search; the
        // others' generic plans are made afresh for EXPLAIN, where a search reuses its
        // connection's, so they are left out.
        let planned = times("Planning Time:");
        let planning = planned.len().checked_sub(2).map_or(0.0, |i| planned[i]);
        let execution = times("Execution Time:").iter().sum::<f64>();
        println!(
            "| {} | {path} | {:.1} | {:.1} | {:.2} | {:.2} | {lookups} |",
            r.query,
            latencies.p50(),
            one.latencies.p50(),
            planning,
            execution
        );
    }
    Ok(())
}

/// Runs every request on both stores, alternating which goes first, so that the two are
/// measured under the same load and the same cache state.
async fn paired(
    a: &PostgresStore,
    b: &PostgresStore,
    requests: &[SearchRequest],
) -> Result<(Run, Run), BoxError> {
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for (i, r) in requests.iter().enumerate() {
        let one = std::slice::from_ref(r);
        if i % 2 == 0 {
            first.push(measured(a, one).await?);
            second.push(measured(b, one).await?);
        } else {
            second.push(measured(b, one).await?);
            first.push(measured(a, one).await?);
        }
    }
    Ok((Run::concat(first), Run::concat(second)))
}

async fn run(store: &PostgresStore, requests: &[SearchRequest]) -> Result<Run, BoxError> {
    // Warm the statement cache and the buffers.
    for r in requests.iter().take(5) {
        store.search(USER, r).await?;
    }
    measured(store, requests).await
}

/// Runs `requests` one at a time, each timed.
async fn measured(store: &PostgresStore, requests: &[SearchRequest]) -> Result<Run, BoxError> {
    let mut latencies = Samples::default();
    let mut results = Vec::new();
    let mut by_path: [Samples; 6] = Default::default();
    let lookups_before = store.diagnostics().rarest_first_lookups();
    let parallel_before = store.diagnostics().parallel_searches();
    let rewalks_before = store.diagnostics().hnsw_rewalks();
    for r in requests {
        let before = store.diagnostics().lexical_paths();
        let start = Instant::now();
        let hits = store.search(USER, r).await?;
        let took = start.elapsed();
        let after = store.diagnostics().lexical_paths();
        latencies.push(took);
        let path = [
            after.full - before.full,
            after.once - before.once,
            after.pruned - before.pruned,
            after.pruned_extended - before.pruned_extended,
            after.impact - before.impact,
            after.rarest_first - before.rarest_first,
        ]
        .iter()
        .position(|&n| n > 0);
        if let Some(i) = path {
            by_path[i].push(took);
        }
        results.push(hits.iter().map(|h| h.memory.id).collect());
    }
    let lookups_after = store.diagnostics().rarest_first_lookups();
    Ok(Run {
        latencies,
        results,
        by_path,
        lookups: RarestFirstLookups {
            candidates: lookups_after.candidates - lookups_before.candidates,
            looked_up: lookups_after.looked_up - lookups_before.looked_up,
        },
        side_by_side: store.diagnostics().parallel_searches() - parallel_before,
        rewalks: store.diagnostics().hnsw_rewalks() - rewalks_before,
    })
}

pub(crate) fn overlap(a: &[Vec<uuid::Uuid>], b: &[Vec<uuid::Uuid>]) -> f64 {
    let mut shared = 0usize;
    let mut total = 0usize;
    for (x, y) in a.iter().zip(b) {
        shared += x.iter().filter(|id| y.contains(id)).count();
        total += x.len().max(1);
    }
    shared as f64 / total.max(1) as f64
}

pub(crate) fn requests(
    corpus: &Corpus,
    rng: &mut Rng,
    count: usize,
) -> (Vec<SearchRequest>, Vec<SearchRequest>) {
    let words = vocabulary();
    let hybrid: Vec<SearchRequest> = (0..count)
        .map(|_| {
            let near = &corpus.vectors[rng.below(corpus.vectors.len())];
            let embedding = unit(near.iter().map(|x| x + 0.03 * rng.normal()).collect());
            let text = (0..1 + rng.below(3))
                .map(|_| words[rng.zipf(words.len())].as_str())
                .collect::<Vec<_>>()
                .join(" ");
            SearchRequest {
                terms: query_terms(&text),
                query: text,
                embedding,
                top_k: TOP_K,
                filter: Default::default(),
            }
        })
        .collect();
    let dense_only = hybrid
        .iter()
        .map(|r| SearchRequest {
            terms: Vec::new(),
            ..r.clone()
        })
        .collect();
    (hybrid, dense_only)
}

async fn explain(
    store: &PostgresStore,
    label: &str,
    requests: &[&SearchRequest],
) -> Result<(), BoxError> {
    for request in requests {
        eprintln!("-- {label} {:?}", request.terms);
        for line in store.diagnostics().explain_search(USER, request).await? {
            eprintln!("{line}");
        }
    }
    Ok(())
}

/// Runs every size, prints the table's rows and returns them.
pub async fn measure(opts: &PgOptions) -> Result<Value, BoxError> {
    println!(
        "\n| memories | memorize, 1 client (/s) | memorize, {WRITERS} clients (/s) | index build (s) | mode | hybrid p50 (ms) | hybrid p95 (ms) | dense-only p50 (ms) | dense-only p95 (ms) | overlap@10 with exact (hybrid / dense-only) |"
    );
    println!("|---:|---:|---:|---:|---|---:|---:|---:|---:|---|");
    let mut rows = Vec::new();
    // Every handle builds the approximate index, if it is the one to, with the settings
    // asked for.
    let pg_config = |schema: &str, mode: DenseMode| PostgresConfig {
        hnsw_build: opts.hnsw_build,
        ann_index: opts.ann_index,
        ivfflat: IvfFlat {
            lists: opts.ivf_lists,
            probes: None,
        },
        ..config(&opts.url, schema, mode)
    };
    // A search width of the sweep: `hnsw.ef_search`, or `ivfflat.probes`.
    let kind = opts.ann_index.as_str();
    let (width_name, with_width): (&str, fn(PostgresConfig, usize) -> PostgresConfig) =
        match opts.ann_index {
            AnnIndex::Hnsw => ("ef_search", |c: PostgresConfig, w: usize| PostgresConfig {
                ef_search: Some(w),
                ..c
            }),
            AnnIndex::IvfFlat => ("probes", |c: PostgresConfig, w: usize| PostgresConfig {
                ivfflat: IvfFlat {
                    probes: Some(u32::try_from(w).unwrap_or(u32::MAX)),
                    ..c.ivfflat
                },
                ..c
            }),
        };
    for &n in &opts.sizes {
        let schema = format!("cortex_bench_{n}");
        let mut rng = Rng(n as u64);
        let corpus = corpus(n, &mut rng);
        let exact = PostgresStore::connect(pg_config(&schema, DenseMode::Exact)).await?;
        let reuse = opts.keep && exact.count(USER).await? == n as u64;
        let mut load_rates = None;
        let exact = if reuse {
            eprintln!("reusing the {n} memories in schema {schema}");
            exact
        } else {
            exact
                .pool()
                .get()
                .await?
                .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .await?;
            let exact =
                Arc::new(PostgresStore::connect(pg_config(&schema, DenseMode::Exact)).await?);
            eprintln!("loading {n} memories into Postgres...");
            let new =
                |i: usize| NewMemory::new(USER, &corpus.texts[i], MemoryKind::Note, &[], 1 << 16);
            load_rates = Some(load(exact.clone(), &corpus, new).await?);
            exact
                .pool()
                .get()
                .await?
                .batch_execute(&format!(
                    "VACUUM ANALYZE {schema}.memories, {schema}.postings, {schema}.terms"
                ))
                .await?;
            PostgresStore::connect(pg_config(&schema, DenseMode::Exact)).await?
        };
        let (hybrid, dense_only) = requests(&corpus, &mut rng, opts.queries);
        // The trace and profile modes search at the first `--pg-ef`, when one is given.
        let traced = match opts.ef_sweep.first() {
            Some(&w) => with_width(pg_config(&schema, DenseMode::Hnsw), w),
            None => pg_config(&schema, DenseMode::Hnsw),
        };
        if let Some(window) = opts.profile {
            profile(traced, &schema, &hybrid, window).await?;
            continue;
        }
        if let Some(repeat) = opts.trace {
            trace(traced, &schema, &hybrid, repeat, opts.explain).await?;
            continue;
        }
        if opts.explain {
            explain(&exact, "exact", &[&hybrid[0], &hybrid[1], &hybrid[2]]).await?;
        }
        eprintln!("exact searches...");
        let exact_h = run(&exact, &hybrid).await?;
        let paths = exact.diagnostics().lexical_paths();
        let exact_d = run(&exact, &dense_only).await?;

        // The same searches with BM25 pruning off, side by side.
        let unpruned = PostgresStore::connect(PostgresConfig {
            prune_budget: 0,
            ..pg_config(&schema, DenseMode::Exact)
        })
        .await?;
        eprintln!("exact searches, pruning off...");
        let unpruned_h = run(&unpruned, &hybrid).await?;
        // Shares of the hybrid searches (with the warm-up ones) by BM25 path.
        let searches = paths.total().max(1) as f64;
        let share = |n: u64| n as f64 * 100.0 / searches;

        let built = exact.diagnostics().hnsw_built_with().await?;
        let lists = exact.diagnostics().ivfflat_lists().await?;
        // A kept schema's index of the other kind, or built with other settings: dropped,
        // so that the searches use the one asked for, timed afresh.
        let stale = match opts.ann_index {
            AnnIndex::Hnsw => [built.is_some_and(|b| b != opts.hnsw_build), lists.is_some()],
            AnnIndex::IvfFlat => [
                built.is_some(),
                lists.is_some_and(|l| opts.ivf_lists.is_some_and(|want| want != l)),
            ],
        };
        let indexes = [
            "memories_embedding_hnsw_half",
            "memories_embedding_ivfflat_half",
        ];
        for (index, _) in indexes.into_iter().zip(stale).filter(|(_, stale)| *stale) {
            eprintln!("dropping {index} (HNSW built with {built:?}, IVFFlat lists {lists:?})...");
            exact
                .pool()
                .get()
                .await?
                .batch_execute(&format!("DROP INDEX IF EXISTS {schema}.{index}"))
                .await?;
        }
        let HnswBuild { m, ef_construction } = opts.hnsw_build;
        match opts.ann_index {
            AnnIndex::Hnsw => eprintln!(
                "building the HNSW index (m = {m}, ef_construction = {ef_construction})..."
            ),
            AnnIndex::IvfFlat => {
                eprintln!("building the IVFFlat index (lists {:?})...", opts.ivf_lists)
            }
        }
        let start = Instant::now();
        let hnsw = PostgresStore::connect(pg_config(&schema, DenseMode::Hnsw)).await?;
        let build = start.elapsed();
        if opts.explain {
            explain(&hnsw, "hnsw", &[&dense_only[0], &hybrid[0]]).await?;
        }
        eprintln!("{kind} searches...");
        // The default, measured paired with every search on one connection (the dense
        // side after the BM25 side instead of beside it).
        let serial = PostgresStore::connect(PostgresConfig {
            parallel_search: false,
            ..pg_config(&schema, DenseMode::Hnsw)
        })
        .await?;
        for r in hybrid.iter().take(5) {
            hnsw.search(USER, r).await?;
            serial.search(USER, r).await?;
        }
        let (hnsw_h, serial_h) = paired(&hnsw, &serial, &hybrid).await?;
        let RarestFirstLookups {
            candidates,
            looked_up,
        } = hnsw_h.lookups;
        let hnsw_d = run(&hnsw, &dense_only).await?;
        let overlaps = (
            overlap(&exact_h.results, &hnsw_h.results),
            overlap(&exact_d.results, &hnsw_d.results),
        );

        let rates = |f: fn((f64, f64)) -> f64| {
            load_rates
                .map(f)
                .filter(|r| r.is_finite())
                .map_or("-".into(), |r| format!("{r:.0}"))
        };
        let line = |mode: &str,
                    h: &Run,
                    d: &Run,
                    build: &str,
                    overlap: String,
                    one: String,
                    many: String| {
            println!(
                "| {n} | {one} | {many} | {build} | {mode} | {:.1} | {:.1} | {:.1} | {:.1} | {overlap} |",
                h.latencies.p50(),
                h.latencies.p95(),
                d.latencies.p50(),
                d.latencies.p95(),
            );
        };
        line(
            "exact",
            &exact_h,
            &exact_d,
            "-",
            "1.000 / 1.000".into(),
            rates(|r| r.0),
            rates(|r| r.1),
        );
        println!(
            "| {n} | | | - | exact, BM25 pruning off | {:.1} | {:.1} | | | (BM25 paths of the hybrid searches: pruned {:.0}%, of which rarest-first {:.0}% and past the budget {:.0}%; within the budget {:.0}%; one term in impact order {:.0}%; full {:.0}%) |",
            unpruned_h.latencies.p50(),
            unpruned_h.latencies.p95(),
            share(paths.pruned_total()),
            share(paths.rarest_first),
            share(paths.pruned_extended),
            share(paths.once),
            share(paths.impact),
            share(paths.full)
        );
        line(
            kind,
            &hnsw_h,
            &hnsw_d,
            &format!("{:.1}", secs(build)),
            format!("{:.3} / {:.3}", overlaps.0, overlaps.1),
            String::new(),
            String::new(),
        );
        // An index larger than shared_buffers is read through the kernel's cache.
        let memory = hnsw.diagnostics().hnsw_memory().await?;
        let lists = hnsw.diagnostics().ivfflat_lists().await?;
        println!(
            "| {n} | | | | {kind} index {:.0} MB{}, shared_buffers {:.0} MB ({}) | | | | | |",
            memory.index_bytes as f64 / 1e6,
            match (opts.ann_index, lists) {
                (AnnIndex::IvfFlat, Some(l)) => format!(", {l} lists"),
                _ => String::new(),
            },
            memory.shared_buffers_bytes as f64 / 1e6,
            if memory.fits() {
                "fits"
            } else {
                "does not fit"
            }
        );
        let by_path = |run: &Run| {
            PATHS
                .iter()
                .zip(&run.by_path)
                .filter(|(_, s)| !s.is_empty())
                .map(|(name, s)| format!("{name} {} at p50 {:.1} ms", s.len(), s.p50()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "| {n} | | | | {kind} hybrid searches by BM25 path | | | | | {}; rarest-first: {looked_up} of {candidates} candidates looked up; {} of {} searches with the dense side on a second connection; {} walked the index twice |",
            by_path(&hnsw_h),
            hnsw_h.side_by_side,
            hnsw_h.latencies.len(),
            hnsw_h.rewalks
        );
        println!(
            "| {n} | | | | {kind}, one connection per search | {:.1} | {:.1} | | | (paired with the {kind} row, alternating per query: p50 {:.2}x, p95 {:.2}x the {kind} row's) |",
            serial_h.latencies.p50(),
            serial_h.latencies.p95(),
            serial_h.latencies.p50() / hnsw_h.latencies.p50(),
            serial_h.latencies.p95() / hnsw_h.latencies.p95(),
        );
        let mut sweep = Vec::new();
        for &ef in &opts.ef_sweep {
            // The default (the graph walked first without the iterative scan), paired
            // query by query with the iterative scan from the start.
            let connect = |plain_walk| {
                PostgresStore::connect(with_width(
                    PostgresConfig {
                        plain_walk,
                        ..pg_config(&schema, DenseMode::Hnsw)
                    },
                    ef,
                ))
            };
            let (store, iterative) = (connect(true).await?, connect(false).await?);
            for r in hybrid.iter().chain(&dense_only).take(5) {
                store.search(USER, r).await?;
                iterative.search(USER, r).await?;
            }
            let (h, hi) = paired(&store, &iterative, &hybrid).await?;
            let (d, di) = paired(&store, &iterative, &dense_only).await?;
            let o = (
                overlap(&exact_h.results, &h.results),
                overlap(&exact_d.results, &d.results),
            );
            // The two walks must agree search by search (see `PostgresConfig::plain_walk`).
            let same = h
                .results
                .iter()
                .chain(&d.results)
                .zip(hi.results.iter().chain(&di.results))
                .filter(|(a, b)| a == b)
                .count();
            line(
                &format!("{kind}, {width_name} {ef}"),
                &h,
                &d,
                "",
                format!("{:.3} / {:.3}", o.0, o.1),
                String::new(),
                String::new(),
            );
            line(
                &format!("{kind}, {width_name} {ef}, iterative scan from the start"),
                &hi,
                &di,
                "",
                format!(
                    "{:.3} / {:.3} (paired with the row above: p50 {:.2}x hybrid, {:.2}x dense-only; the row above walked twice in {} of {} searches; the same results in {} of them)",
                    overlap(&exact_h.results, &hi.results),
                    overlap(&exact_d.results, &di.results),
                    hi.latencies.p50() / h.latencies.p50(),
                    di.latencies.p50() / d.latencies.p50(),
                    h.rewalks + d.rewalks,
                    h.latencies.len() + d.latencies.len(),
                    same,
                ),
                String::new(),
                String::new(),
            );
            sweep.push(json!({ width_name: ef, "hybrid_p50_ms": h.latencies.p50(),
                "dense_p50_ms": d.latencies.p50(), "overlap_hybrid": o.0, "overlap_dense": o.1,
                "iterative_hybrid_p50_ms": hi.latencies.p50(), "iterative_dense_p50_ms": di.latencies.p50(),
                "rewalks": h.rewalks + d.rewalks }));
        }
        let mut budgets = Vec::new();
        let settings = opts
            .budget_sweep
            .iter()
            .map(|&b| (b, DEFAULT_LOOKUP_COST))
            .chain(opts.lookup_sweep.iter().map(|&c| (DEFAULT_PRUNE_BUDGET, c)));
        for (budget, lookup_cost) in settings {
            let store = PostgresStore::connect(PostgresConfig {
                prune_budget: budget,
                lookup_cost,
                ..pg_config(&schema, DenseMode::Hnsw)
            })
            .await?;
            let h = run(&store, &hybrid).await?;
            println!(
                "| {n} | | | | {kind}, prune budget {budget}, lookup cost {lookup_cost} | {:.1} | {:.1} | | | {:.3} / - ({}) |",
                h.latencies.p50(),
                h.latencies.p95(),
                overlap(&exact_h.results, &h.results),
                by_path(&h)
            );
            budgets.push(json!({ "prune_budget": budget, "lookup_cost": lookup_cost,
                "hybrid_p50_ms": h.latencies.p50(), "hybrid_p95_ms": h.latencies.p95() }));
        }
        rows.push(json!({
            "ef_sweep": sweep,
            "budget_sweep": budgets,
            "n": n,
            "memorize_one_client_per_s": load_rates.map(|r| r.0),
            "memorize_concurrent_per_s": load_rates.map(|r| r.1).filter(|r| r.is_finite()),
            "ann_index": kind,
            "ivfflat_lists": lists,
            "index_build_s": secs(build),
            "hnsw_m": m,
            "hnsw_ef_construction": ef_construction,
            "hnsw_index_bytes": memory.index_bytes,
            "shared_buffers_bytes": memory.shared_buffers_bytes,
            "exact_unpruned": { "hybrid_p50_ms": unpruned_h.latencies.p50(), "hybrid_p95_ms": unpruned_h.latencies.p95() },
            "lexical_paths": { "full": paths.full, "once": paths.once, "pruned": paths.pruned, "pruned_extended": paths.pruned_extended, "impact": paths.impact, "rarest_first": paths.rarest_first },
            "exact": { "hybrid_p50_ms": exact_h.latencies.p50(), "hybrid_p95_ms": exact_h.latencies.p95(),
                       "dense_p50_ms": exact_d.latencies.p50(), "dense_p95_ms": exact_d.latencies.p95() },
            "hnsw": { "hybrid_p50_ms": hnsw_h.latencies.p50(), "hybrid_p95_ms": hnsw_h.latencies.p95(),
                      "dense_p50_ms": hnsw_d.latencies.p50(), "dense_p95_ms": hnsw_d.latencies.p95(),
                      "overlap_hybrid": overlaps.0, "overlap_dense": overlaps.1,
                      "rarest_first_candidates": candidates, "rarest_first_looked_up": looked_up,
                      "side_by_side_searches": hnsw_h.side_by_side, "rewalks": hnsw_h.rewalks },
            "hnsw_one_connection": { "hybrid_p50_ms": serial_h.latencies.p50(), "hybrid_p95_ms": serial_h.latencies.p95() },
        }));
        if !opts.keep {
            hnsw.pool()
                .get()
                .await?
                .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .await?;
        }
    }
    Ok(Value::Array(rows))
}

pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}
