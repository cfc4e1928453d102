//! The default no-key configuration end to end: the engine on SQLite with the in-process
//! model, each memorize and recall timed alone (one embedding, the store's transaction or
//! the retrieval, and everything between), as an agent calls them one at a time.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cortex_core::{
    engine::CortexMemory, engine::EngineConfig, memory::MemoryKind, provider::LLMProvider,
    reranker::Reranker, store::MemoryStore,
};
use cortex_providers::local::{LocalOptions, LocalProvider, LocalReranker};
use cortex_sqlite::SqliteStore;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::stats::Samples;
use crate::{BoxError, USER};

/// What people tell an assistant, in pieces recombined into sentences of 12-30 words: the
/// length of a memory an agent writes (the Zipf texts of the other measurements are
/// made-up words, each of which the model's tokenizer splits into several pieces).
const SUBJECTS: [&str; 8] = [
    "I",
    "My sister",
    "Our team",
    "The landlord",
    "My manager",
    "Alice",
    "The doctor",
    "We",
];
const ACTIONS: [&str; 10] = [
    "moved the dentist appointment to",
    "decided to switch the database migration to",
    "booked a flight to Lisbon for",
    "asked me to review the quarterly budget before",
    "started training for the half marathon on",
    "said the kitchen renovation will finish by",
    "recommended a vegan bakery near the office for",
    "scheduled the on-call rotation handover for",
    "cancelled the gym membership at the end of",
    "wants to adopt a rescue dog around",
];
const TIMES: [&str; 8] = [
    "next Friday",
    "the third week of March",
    "early tomorrow morning",
    "my birthday",
    "the end of the sprint",
    "Saturday afternoon",
    "the spring holidays",
    "last Tuesday",
];
const REASONS: [&str; 8] = [
    "because the car is still at the garage",
    "since the release slipped by two weeks",
    "so that the kids can come along",
    "after the outage on the payment service",
    "because prices go up in summer",
    "while the new laptop is being set up",
    "so we can celebrate together",
    "although nothing is confirmed yet",
];

fn pick(rng: &mut SmallRng, list: &[&'static str]) -> &'static str {
    list[rng.random_range(0..list.len())]
}

pub(crate) fn sentence(rng: &mut SmallRng) -> String {
    format!(
        "{} {} {} {}.",
        pick(rng, &SUBJECTS),
        pick(rng, &ACTIONS),
        pick(rng, &TIMES),
        pick(rng, &REASONS)
    )
}

fn question(rng: &mut SmallRng) -> String {
    format!("When did {} {}?", pick(rng, &SUBJECTS), pick(rng, &ACTIONS))
}

/// Memorizes `count` texts and then times `queries` recalls of limit 10.
/// Fused candidates the local reranker is measured at (`--rerank-model`).
const RERANK_DEPTHS: [usize; 3] = [10, 20, 30];

pub async fn measure(
    model: &Path,
    rerank_model: Option<&Path>,
    count: usize,
    queries: usize,
) -> Result<Value, BoxError> {
    let provider: Arc<dyn LLMProvider> =
        Arc::new(LocalProvider::load(model, &LocalOptions::default())?);
    let signature = provider.embedding_signature();
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(dir.path().join("local.db"))?);
    let engine = CortexMemory::new(store.clone(), provider.clone());
    let mut rng = SmallRng::seed_from_u64(23);
    let mut memorize = Samples::default();
    let started = Instant::now();
    for _ in 0..count {
        let text = sentence(&mut rng);
        let t = Instant::now();
        engine
            .memorize(USER, &text, MemoryKind::Note, &[], &Default::default())
            .await?;
        memorize.push(t.elapsed());
    }
    let ingest_seconds = started.elapsed().as_secs_f64();
    // The first recall builds the cached index; the rest are the steady state.
    let first = Instant::now();
    engine.recall(USER, "warm up the index", 10).await?;
    let first_ms = first.elapsed().as_secs_f64() * 1e3;
    let asked: Vec<String> = (0..queries).map(|_| question(&mut rng)).collect();
    let recall = time_recalls(&engine, &asked).await?;
    // The same recalls with the local reranker over the same store, one depth at a time,
    // in this run: the ratio to plain recall is the figure, not the milliseconds.
    let mut reranked = Vec::new();
    if let Some(dir) = rerank_model {
        let reranker: Arc<dyn Reranker> = Arc::new(LocalReranker::load(dir)?);
        for depth in RERANK_DEPTHS {
            let config = EngineConfig {
                rerank_depth: depth,
                rerank_timeout: Duration::from_secs(600),
                ..EngineConfig::default()
            };
            let engine = CortexMemory::with_config(store.clone(), provider.clone(), config)
                .with_reranker(reranker.clone());
            engine.recall(USER, "warm up the index", 10).await?;
            let samples = time_recalls(&engine, &asked).await?;
            if engine.rerank_failures() > 0 {
                return Err(format!("the reranker failed at depth {depth}").into());
            }
            reranked.push(json!({
                "depth": depth,
                "recall_p50_ms": samples.p50(),
                "recall_p95_ms": samples.p95(),
                "p50_ratio_to_plain": samples.p50() / recall.p50(),
            }));
        }
    }
    Ok(json!({
        "model": signature.model,
        "dimension": signature.dimension,
        "memories": count,
        "queries": queries,
        "ingest_seconds": ingest_seconds,
        "memorize_p50_ms": memorize.p50(),
        "memorize_p95_ms": memorize.p95(),
        "first_recall_ms": first_ms,
        "recall_p50_ms": recall.p50(),
        "recall_p95_ms": recall.p95(),
        "reranked": reranked,
    }))
}

async fn time_recalls(engine: &CortexMemory, queries: &[String]) -> Result<Samples, BoxError> {
    let mut samples = Samples::default();
    for query in queries {
        let t = Instant::now();
        engine.recall(USER, query, 10).await?;
        samples.push(t.elapsed());
    }
    Ok(samples)
}
