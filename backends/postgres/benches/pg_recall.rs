//! Recall and latency of the Postgres pushdown at 10k and 100k memories: exact vs HNSW
//! dense candidates (p50/p95 of one search), HNSW's overlap@10 with exact search, the
//! HNSW build time, and memorize throughput through the store's `add`.
//!
//! Not a test: run it by hand and copy the table into docs/BENCHMARKS.md.
//!
//! ```text
//! CORTEX_BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
//!   cargo bench -p cortex-postgres --bench pg_recall
//! ```
//!
//! `CORTEX_BENCH_SIZES` (default `10000,100000`) and `CORTEX_BENCH_QUERIES` (default 200)
//! shrink it. Vectors: 384 dimensions, unit length, 64 Gaussian clusters of varying
//! spread. Texts: 4-24 words drawn Zipf-like from a 400-word vocabulary. One user holds
//! every memory (the per-user filter keeps everything, the HNSW best case).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cortex_core::tokenizer::query_terms;
use cortex_core::{EmbeddingSignature, MemoryKind, MemoryStore, NewMemory, SearchRequest};
use cortex_postgres::{DenseMode, PostgresConfig, PostgresStore};

const DIM: usize = 384;
const CLUSTERS: usize = 64;
const WRITERS: usize = 8;
const USER: &str = "bench";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: usize) -> usize {
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

struct Corpus {
    texts: Vec<String>,
    vectors: Vec<Vec<f32>>,
}

fn corpus(n: usize, rng: &mut Rng) -> Corpus {
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

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn config(url: &str, schema: &str, mode: DenseMode) -> PostgresConfig {
    PostgresConfig {
        schema: Some(schema.to_owned()),
        dense_mode: mode,
        pool_size: WRITERS,
        ..PostgresConfig::new(url)
    }
}

async fn load(store: Arc<PostgresStore>, corpus: &Corpus) -> (f64, f64) {
    let sig = EmbeddingSignature::new("bench", DIM);
    let new =
        |i: usize| NewMemory::new(USER, &corpus.texts[i], MemoryKind::Note, &[], 1 << 16).unwrap();
    // One client, one memorize at a time.
    let sequential = 2000.min(corpus.texts.len());
    let start = Instant::now();
    for i in 0..sequential {
        store.add(&new(i), &corpus.vectors[i], &sig).await.unwrap();
    }
    let one = sequential as f64 / start.elapsed().as_secs_f64();
    // The rest from WRITERS concurrent clients.
    let rest = corpus.texts.len() - sequential;
    let start = Instant::now();
    let chunks: Vec<Vec<(NewMemory, Vec<f32>)>> = (0..WRITERS)
        .map(|w| {
            (sequential..corpus.texts.len())
                .filter(|i| i % WRITERS == w)
                .map(|i| (new(i), corpus.vectors[i].clone()))
                .collect()
        })
        .collect();
    let tasks: Vec<_> = chunks
        .into_iter()
        .map(|chunk| {
            let store = store.clone();
            let sig = sig.clone();
            tokio::spawn(async move {
                for (m, v) in chunk {
                    store.add(&m, &v, &sig).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let many = rest as f64 / start.elapsed().as_secs_f64().max(1e-9);
    (one, many)
}

struct Run {
    latencies: Vec<Duration>,
    results: Vec<Vec<uuid::Uuid>>,
}

async fn run(store: &PostgresStore, requests: &[SearchRequest]) -> Run {
    // Warm the statement cache and the buffers.
    for r in requests.iter().take(5) {
        store.search(USER, r).await.unwrap();
    }
    let mut latencies = Vec::new();
    let mut results = Vec::new();
    for r in requests {
        let start = Instant::now();
        let hits = store.search(USER, r).await.unwrap();
        latencies.push(start.elapsed());
        results.push(hits.iter().map(|h| h.memory.id).collect());
    }
    latencies.sort();
    Run { latencies, results }
}

fn overlap(a: &[Vec<uuid::Uuid>], b: &[Vec<uuid::Uuid>]) -> f64 {
    let mut shared = 0usize;
    let mut total = 0usize;
    for (x, y) in a.iter().zip(b) {
        shared += x.iter().filter(|id| y.contains(id)).count();
        total += x.len().max(1);
    }
    shared as f64 / total as f64
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Ok(url) = std::env::var("CORTEX_BENCH_DATABASE_URL")
        .or_else(|_| std::env::var("CORTEX_TEST_DATABASE_URL"))
    else {
        eprintln!("set CORTEX_BENCH_DATABASE_URL=postgres://... to run this benchmark");
        return;
    };
    let sizes: Vec<usize> = std::env::var("CORTEX_BENCH_SIZES")
        .unwrap_or_else(|_| "10000,100000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("CORTEX_BENCH_SIZES"))
        .collect();
    let query_count: usize = std::env::var("CORTEX_BENCH_QUERIES")
        .ok()
        .map(|s| s.parse().expect("CORTEX_BENCH_QUERIES"))
        .unwrap_or(200);
    let top_k = 10;
    println!(
        "| memories | memorize, 1 client (/s) | memorize, {WRITERS} clients (/s) | HNSW build (s) | mode | hybrid p50 (ms) | hybrid p95 (ms) | dense-only p50 (ms) | dense-only p95 (ms) | overlap@10 with exact (hybrid / dense-only) |"
    );
    println!("|---:|---:|---:|---:|---|---:|---:|---:|---:|---|");
    for n in sizes {
        let schema = format!("cortex_bench_{n}");
        let mut rng = Rng(n as u64);
        let corpus = corpus(n, &mut rng);
        let exact = Arc::new(
            PostgresStore::connect(config(&url, &schema, DenseMode::Exact))
                .await
                .unwrap(),
        );
        let client = exact.pool().get().await.unwrap();
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .await
            .unwrap();
        drop(client);
        let exact = Arc::new(
            PostgresStore::connect(config(&url, &schema, DenseMode::Exact))
                .await
                .unwrap(),
        );
        eprintln!("loading {n} memories...");
        let (one, many) = load(exact.clone(), &corpus).await;
        exact
            .pool()
            .get()
            .await
            .unwrap()
            .batch_execute(&format!(
                "VACUUM ANALYZE {schema}.memories, {schema}.postings"
            ))
            .await
            .unwrap();

        let words = vocabulary();
        let hybrid: Vec<SearchRequest> = (0..query_count)
            .map(|_| {
                let near = &corpus.vectors[rng.below(n)];
                let embedding = unit(near.iter().map(|x| x + 0.03 * rng.normal()).collect());
                let text = (0..1 + rng.below(3))
                    .map(|_| words[rng.zipf(words.len())].as_str())
                    .collect::<Vec<_>>()
                    .join(" ");
                SearchRequest {
                    terms: query_terms(&text),
                    query: text,
                    embedding,
                    top_k,
                }
            })
            .collect();
        let dense_only: Vec<SearchRequest> = hybrid
            .iter()
            .map(|r| SearchRequest {
                terms: Vec::new(),
                ..r.clone()
            })
            .collect();

        if std::env::var("CORTEX_BENCH_EXPLAIN").is_ok() {
            for line in exact.explain_search(USER, &dense_only[0]).await.unwrap() {
                eprintln!("{line}");
            }
        }
        eprintln!("exact searches...");
        let exact_h = run(&exact, &hybrid).await;
        let exact_d = run(&exact, &dense_only).await;

        eprintln!("building the HNSW index...");
        let start = Instant::now();
        let hnsw = PostgresStore::connect(config(&url, &schema, DenseMode::Hnsw))
            .await
            .unwrap();
        let build = start.elapsed().as_secs_f64();
        if std::env::var("CORTEX_BENCH_EXPLAIN").is_ok() {
            for request in [&dense_only[0], &hybrid[0], &hybrid[1], &hybrid[2]] {
                eprintln!("-- {:?}", request.terms);
                for line in hnsw.explain_search(USER, request).await.unwrap() {
                    eprintln!("{line}");
                }
            }
        }
        eprintln!("HNSW searches...");
        let hnsw_h = run(&hnsw, &hybrid).await;
        let hnsw_d = run(&hnsw, &dense_only).await;

        let row = |mode: &str, h: &Run, d: &Run, overlap: &str, load: (&str, &str, &str)| {
            println!(
                "| {n} | {} | {} | {} | {mode} | {:.1} | {:.1} | {:.1} | {:.1} | {overlap} |",
                load.0,
                load.1,
                load.2,
                percentile(&h.latencies, 0.5),
                percentile(&h.latencies, 0.95),
                percentile(&d.latencies, 0.5),
                percentile(&d.latencies, 0.95),
            );
        };
        let (one, many, build) = (
            format!("{one:.0}"),
            format!("{many:.0}"),
            format!("{build:.1}"),
        );
        row(
            "exact",
            &exact_h,
            &exact_d,
            "1.000 / 1.000",
            (&one, &many, "-"),
        );
        row(
            "hnsw",
            &hnsw_h,
            &hnsw_d,
            &format!(
                "{:.3} / {:.3}",
                overlap(&exact_h.results, &hnsw_h.results),
                overlap(&exact_d.results, &hnsw_d.results)
            ),
            ("", "", &build),
        );
        let client = exact.pool().get().await.unwrap();
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .await
            .unwrap();
    }
}
