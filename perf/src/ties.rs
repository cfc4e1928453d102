//! Mass ties on the Postgres pushdown: every memory stores the same vector, so every dense
//! distance ties and the exact tie-break (the core's own arithmetic, which only it can
//! order near-equal distances by) meets its worst case. Duplicate-heavy data, or the fake
//! embedder on texts with the same words, looks like this.
//!
//! Measured: one exact `search` (one-word query, limit 10) against `hybrid_retrieve` over
//! the same memories in process, with the results checked equal; as the control, the same
//! texts with a distinct vector each (no ties: the common case, which the tie-break must
//! not slow down); and each memory with the fake embedder's vector of its own words,
//! queried with a word none holds: every memory scores 0 with a vector of its own (the
//! fake embedder's usual case, 560 ms at 3,000 memories before such ties were proven zero
//! without an exact score each).

use std::time::Instant;

use cortex_core::tokenizer::query_terms;
use cortex_core::{
    hybrid::hybrid_retrieve, memory::MemoryKind, new_memory::NewMemory,
    signature::EmbeddingSignature, store::MemoryStore, store::SearchRequest,
};
use cortex_postgres::{DenseMode, PostgresConfig, PostgresStore};
use cortex_providers::FakeProvider;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::BoxError;
use crate::postgres::schema::{drop_schema, vacuum};
use crate::stats::Samples;

const DIM: usize = 384;
const USER: &str = "bench";
const TOP_K: usize = 10;
const WORDS: [&str; 12] = [
    "deploy", "review", "budget", "lisbon", "coffee", "invoice", "backup", "kernel", "garden",
    "piano", "ticket", "flight",
];

/// `sizes` memories each, `queries` timed searches per size; prints a row per size and
/// kind of vectors.
pub async fn measure(url: &str, sizes: &[usize], queries: usize) -> Result<Value, BoxError> {
    println!(
        "\n| memories | vectors | pushdown p50 (ms) | pushdown p95 (ms) | in-process p50 (ms) | pushdown / in-process |"
    );
    println!("|---:|---|---:|---:|---:|---:|");
    let mut rows = Vec::new();
    for &n in sizes {
        for vectors in [Vectors::Shared, Vectors::Random, Vectors::OwnWords] {
            rows.push(measure_one(url, n, vectors, queries).await?);
        }
    }
    Ok(Value::Array(rows))
}

/// What vectors the memories get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vectors {
    /// One vector for all: every distance ties.
    Shared,
    /// A random vector each: no ties (the control).
    Random,
    /// The fake embedder's vector of its own words, queried with a word none holds.
    OwnWords,
}

impl Vectors {
    fn label(self) -> &'static str {
        match self {
            Vectors::Shared => "one shared",
            Vectors::Random => "distinct",
            Vectors::OwnWords => "own words, none in the query",
        }
    }
}

/// `n` memories with `vectors`.
async fn measure_one(
    url: &str,
    n: usize,
    vectors: Vectors,
    queries: usize,
) -> Result<Value, BoxError> {
    let fake = FakeProvider::new(DIM);
    let signature = EmbeddingSignature::new("bench-ties", DIM);
    let mut rng = SmallRng::seed_from_u64(n as u64);
    let mut vector = |text: &str| -> Vec<f32> {
        match vectors {
            Vectors::Shared => fake.vector("the same words in every memory"),
            Vectors::Random => (0..DIM).map(|_| rng.random_range(-1.0f32..1.0)).collect(),
            Vectors::OwnWords => fake.vector(text),
        }
    };
    let kind = vectors.label();
    let schema = format!("cortex_bench_ties_{n}");
    let config = PostgresConfig {
        schema: Some(schema.clone()),
        dense_mode: DenseMode::Exact,
        ..PostgresConfig::new(url)
    };
    drop_schema(&PostgresStore::connect(config.clone()).await?, &schema).await?;
    let store = PostgresStore::connect(config).await?;
    eprintln!("loading {n} memories, {kind} vectors...");
    for i in 0..n {
        let text = text(i);
        let memory = NewMemory::new(USER, &text, MemoryKind::Note, &[], 1 << 16)?;
        store.add(&memory, &vector(&text), &signature).await?;
    }
    vacuum(&store, &schema).await?;
    let query = match vectors {
        Vectors::OwnWords => "lighthouse",
        Vectors::Shared | Vectors::Random => "meeting",
    };
    let request = SearchRequest {
        query: query.into(),
        terms: query_terms(query),
        embedding: fake.vector(query),
        top_k: TOP_K,
        filter: Default::default(),
    };
    let index = store.build_index(USER, DIM).await?.index;
    let expected = hybrid_retrieve(&index, &request.embedding, &request.terms, TOP_K)?;
    let got = store.search(USER, &request).await?;
    let view = |hits: &[cortex_core::hybrid::ScoredMemory]| -> Vec<(uuid::Uuid, u64)> {
        hits.iter()
            .map(|h| (h.memory.id, h.score.to_bits()))
            .collect()
    };
    if view(&expected) != view(&got) {
        return Err(format!("{n} memories, {kind} vectors: the pushdown differs").into());
    }
    let (mut pushdown, mut local) = (Samples::default(), Samples::default());
    for _ in 0..queries {
        let start = Instant::now();
        std::hint::black_box(store.search(USER, &request).await?);
        pushdown.push(start.elapsed());
        std::hint::black_box(
            local.time(|| hybrid_retrieve(&index, &request.embedding, &request.terms, TOP_K))?,
        );
    }
    println!(
        "| {n} | {kind} | {:.1} | {:.1} | {:.2} | {:.1}x |",
        pushdown.p50(),
        pushdown.p95(),
        local.p50(),
        pushdown.p50() / local.p50()
    );
    let row = json!({
        "n": n,
        "vectors": kind,
        "pushdown_p50_ms": pushdown.p50(),
        "pushdown_p95_ms": pushdown.p95(),
        "in_process_p50_ms": local.p50(),
    });
    drop_schema(&store, &schema).await?;
    Ok(row)
}

/// The `i`-th memory's text: "meeting" in every memory, so the one-word query's BM25 side
/// also ranks them all; lengths vary so its scores do not all tie too.
fn text(i: usize) -> String {
    let extra = (0..1 + i % 7)
        .map(|j| WORDS[(i * 5 + j * 3) % WORDS.len()])
        .collect::<Vec<_>>()
        .join(" ");
    format!("meeting {extra} {i}")
}
