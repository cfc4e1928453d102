//! Recall on the SQLite path, per memory count and dimension: warm recall through the
//! engine, the same work split into its parts (embed, dense, BM25, fusion) against the
//! machine's memory-bandwidth floor, the seed's rebuild-per-recall, dense-only beside
//! sqlite-vec, and the cold openings (see `cold_open`).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use cortex_core::tokenizer::query_terms;
use cortex_core::{
    engine::CortexMemory, hybrid::hybrid_retrieve, index::MemoryIndex, index::PARALLEL_LISTS_FROM,
    memory::MemoryKind, new_memory::NewMemory, signature::EmbeddingSignature, store::MemoryStore,
};
use cortex_providers::FakeProvider;
use cortex_providers::fake::FAKE_MODEL;
use cortex_sqlite::{SqliteConfig, SqliteStore};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde_json::{Value, json};

use crate::cold_open::{self, FirstOpenings};
use crate::corpus::{self, Corpus};
use crate::stats::Samples;
use crate::{BoxError, USER, peer};

/// Measures every size at every dimension (`--sizes`, `--dims`, else the defaults of a
/// full or a `quick` run) and prints the recall table, then the cold table; the rows.
pub(crate) async fn run(
    quick: bool,
    sizes: Option<Vec<usize>>,
    dims: Option<Vec<usize>>,
) -> Result<Vec<Value>, BoxError> {
    let (default_sizes, default_dims, queries) = if quick {
        (vec![1_000, 5_000], vec![384], 20)
    } else {
        (vec![1_000, 10_000, 100_000], vec![384, 768], 200)
    };
    let sizes = sizes.unwrap_or(default_sizes);
    let dims = dims.unwrap_or(default_dims);
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
    cold_open::print_table(&report);
    Ok(report)
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

/// `n` memories of dimension `d` in a fresh file, `queries` recalls: one row of the tables.
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
    let (cold, (engine, store)) = FirstOpenings::measure(&path, &fake, &query_texts[0]).await?;
    let recall = warm_recall(&engine, &query_texts).await?;

    // The same work split into its parts, on an index built the same way.
    let built = store.build_index(USER, d).await?;
    let index = &built.index;
    let resident = resident(index, &corpus)?;
    let mut parts = Parts::measure((n, d), index, &resident, &fake, &query_texts)?;
    let rebuild = rebuild_per_recall(&path, n, d, &fake, &query_texts).await?;
    let peer = PeerComparison::measure(index, &corpus, n, queries)?;

    drop((engine, store));
    let (cold_behind_ms, opened) =
        cold_open::behind(&path, n, &fake, &signature, &query_texts[0]).await?;
    let (keep_ms, cold_kept_ms) =
        cold_open::kept_stop(opened, &path, n, &fake, &query_texts[0]).await?;

    let floor = floor_ms(n, d);
    Ok(json!({
        "n": n, "d": d,
        "floor_ms": floor,
        "cold_open_and_first_recall_ms": cold.from_snapshot_ms,
        "cold_from_rows_ms": cold.from_rows_ms,
        "cold_writing_snapshot_ms": cold.writing_ms,
        "cold_snapshot_behind_1pct_ms": cold_behind_ms,
        "keep_at_stop_ms": keep_ms,
        "cold_after_kept_stop_ms": cold_kept_ms,
        "snapshot_bytes_per_memory": cold.snapshot_bytes as f64 / n as f64,
        "recall_p50_ms": recall.p50(), "recall_p95_ms": recall.p95(),
        "embed_p50_ms": parts.embed.p50(), "dense_p50_ms": parts.dense.p50(), "bm25_p50_ms": parts.bm25.p50(),
        "fusion_p50_ms": parts.fusion_p50(n), "hybrid_p50_ms": parts.hybrid.p50(),
        "rebuild_p50_ms": rebuild.p50(), "rebuild_p95_ms": rebuild.p95(),
        "dense_only_p50_ms": peer.dense_only.p50(), "sqlite_vec_p50_ms": peer.sqlite_vec.p50(),
        "top10_agreement_with_sqlite_vec": peer.agreement,
        "index_bytes_per_memory": index.approx_bytes() as f64 / n as f64,
        "resident_index_bytes_per_memory": resident.approx_bytes() as f64 / n as f64,
        "resident_dense_p50_ms": parts.resident_dense.p50(),
        "dense_rows_scored_median": median(&mut parts.scored),
        "bytes_per_memory": cold.rss_growth as f64 / n as f64,
    }))
}

/// Warm recall through the engine (index cached).
async fn warm_recall(engine: &CortexMemory, query_texts: &[String]) -> Result<Samples, BoxError> {
    let mut recall = Samples::default();
    for q in query_texts {
        let started = Instant::now();
        let hits = engine.recall(USER, q, 10).await?;
        recall.push(started.elapsed());
        std::hint::black_box(hits);
    }
    Ok(recall)
}

/// The same memories with every f32 row in memory, as an index without a vector source
/// keeps them: what reading the candidates' vectors from the file costs.
fn resident(index: &MemoryIndex, corpus: &Corpus) -> Result<MemoryIndex, BoxError> {
    let mut resident = MemoryIndex::new(corpus.dimension);
    for row in 0..index.len() {
        let memory = index.memory(row).clone();
        let at = usize::try_from(memory.seq - 1)?;
        resident.insert(memory, corpus.vector(at))?;
    }
    Ok(resident)
}

/// A recall's parts, each timed alone over the same queries.
struct Parts {
    embed: Samples,
    /// Dense search over the index reading its vectors from the file.
    dense: Samples,
    /// The same over the resident index.
    resident_dense: Samples,
    bm25: Samples,
    hybrid: Samples,
    /// Per query, the rows the dense search scored exactly.
    scored: Vec<usize>,
}

impl Parts {
    /// Fails when the index over the file and the resident one, of `n` memories of
    /// dimension `d`, disagree on a search.
    fn measure(
        (n, d): (usize, usize),
        index: &MemoryIndex,
        resident: &MemoryIndex,
        fake: &FakeProvider,
        query_texts: &[String],
    ) -> Result<Parts, BoxError> {
        let (mut embed, mut dense, mut bm25, mut hybrid) = (
            Samples::default(),
            Samples::default(),
            Samples::default(),
            Samples::default(),
        );
        let mut resident_dense = Samples::default();
        let mut scored = Vec::with_capacity(query_texts.len());
        for q in query_texts {
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
        Ok(Parts {
            embed,
            dense,
            resident_dense,
            bm25,
            hybrid,
            scored,
        })
    }

    /// The fusion's share of a hybrid search over `n` memories: what the two lists leave.
    fn fusion_p50(&self, n: usize) -> f64 {
        // From PARALLEL_LISTS_FROM memories the two lists are ranked side by side.
        let lists_p50 = if n >= PARALLEL_LISTS_FROM {
            self.dense.p50().max(self.bm25.p50())
        } else {
            self.dense.p50() + self.bm25.p50()
        };
        (self.hybrid.p50() - lists_p50).max(0.0)
    }
}

/// The seed's way: rebuild the user's index from the rows on every recall.
async fn rebuild_per_recall(
    path: &Path,
    n: usize,
    d: usize,
    fake: &FakeProvider,
    query_texts: &[String],
) -> Result<Samples, BoxError> {
    let rows_store = SqliteStore::open_with(&SqliteConfig {
        index_snapshots: false,
        ..SqliteConfig::new(path)
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
    Ok(rebuild)
}

/// Dense-only against sqlite-vec, same vectors, same queries, k = 10.
struct PeerComparison {
    dense_only: Samples,
    sqlite_vec: Samples,
    /// The share of our top 10 that sqlite-vec's holds too.
    agreement: f64,
}

impl PeerComparison {
    fn measure(
        index: &MemoryIndex,
        corpus: &Corpus,
        n: usize,
        queries: usize,
    ) -> Result<PeerComparison, BoxError> {
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
        let (sqlite_vec, theirs) = peer::knn_latency(corpus, &qvecs, 10)?;
        let agreement = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| a.iter().filter(|x| b.contains(x)).count())
            .sum::<usize>() as f64
            / (10 * qvecs.len()) as f64;
        Ok(PeerComparison {
            dense_only,
            sqlite_vec,
            agreement,
        })
    }
}

fn median(values: &mut [usize]) -> usize {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}
