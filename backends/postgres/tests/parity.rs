//! Parity: the same memories, deletes and supersessions written to SQLite and to Postgres
//! give, for every query and depth, identical results from the Postgres pushdown (exact
//! mode), the Postgres build_index path and the SQLite build_index path: the same ids in
//! the same order, the same ranks and bit-equal fused scores.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use chrono::Utc;
use cortex_conformance::scenarios::{CORPUS, QUERIES};
use cortex_core::hybrid::MIN_POOL;
use cortex_core::memory::Supersession;
use cortex_core::tokenizer::query_terms;
use cortex_core::{
    hybrid::ScoredMemory, hybrid::hybrid_retrieve, memory::MemoryId, memory::MemoryKind,
    new_memory::NewMemory, signature::EmbeddingSignature, store::MemoryStore, store::SearchRequest,
};
use cortex_postgres::{
    DEFAULT_PRUNE_BUDGET, DenseMode, LexicalPaths, PostgresConfig, PostgresStore,
};
use cortex_providers::FakeProvider;
use cortex_sqlite::SqliteStore;
use support::TestSchema;

/// A small deterministic generator (SplitMix64), so every run writes the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Roughly Zipf: low indices far more often, like words in text.
    fn zipf(&mut self, n: usize) -> usize {
        let x = self.unit();
        ((n as f64).powf(x) - 1.0) as usize % n
    }

    fn normal(&mut self) -> f32 {
        ((0..4).map(|_| self.unit()).sum::<f64>() - 2.0) as f32
    }
}

// The head of the Zipf draw is content words, not function words: the analyser drops
// those, and the pruned paths need terms common enough to prune.
const VOCABULARY: &str = "work note idea task time day list mail chat food news shop game park walk team project \
    deploy release build test server database api user customer meeting call email report \
    budget plan review design code bug fix issue ticket sprint week month year monday friday \
    morning evening night today tomorrow yesterday alice bob carol dana erik fatima gina \
    berlin lisbon tokyo paris office home remote coffee tea lunch dinner birthday holiday \
    vacation flight hotel train car bike gym run doctor dentist appointment invoice payment \
    refund contract vendor signoff security key password rotate backup restore migrate \
    postgres sqlite rust python kubernetes docker cluster node latency error timeout retry \
    cache index search vector embedding model prompt token cost price quote prefers likes \
    hates allergic peanuts gluten vegan music jazz piano guitar book novel film garden cat \
    dog kid school exam deadline launch beta alpha roadmap okr goal metric dashboard alert \
    pager oncall rotation incident postmortem outage dns certificate tls domain invoice q3 \
    q4 2023 2024 2025 v2 v3 zq7731 東京 café zürich";

fn corpus(rng: &mut Rng, n: usize) -> Vec<String> {
    let words: Vec<&str> = VOCABULARY.split_whitespace().collect();
    let mut texts: Vec<String> = CORPUS.iter().map(|s| (*s).to_owned()).collect();
    while texts.len() < n {
        if !texts.is_empty() && rng.below(12) == 0 {
            // An exact duplicate of an earlier memory: equal vectors, equal BM25.
            let i = rng.below(texts.len());
            texts.push(texts[i].clone());
            continue;
        }
        let len = 3 + rng.below(18);
        let text: Vec<&str> = (0..len).map(|_| words[rng.zipf(words.len())]).collect();
        let mut text = text.join(" ");
        if rng.below(5) == 0 {
            text = format!("{}. {text}!", text.to_uppercase());
        }
        texts.push(text);
    }
    texts
}

fn queries(rng: &mut Rng, n: usize) -> Vec<String> {
    let words: Vec<&str> = VOCABULARY.split_whitespace().collect();
    let mut out: Vec<String> = QUERIES.iter().map(|s| (*s).to_owned()).collect();
    // More distinct terms than the search unrolls into columns: the ordered-sum form.
    out.push(
        VOCABULARY
            .split_whitespace()
            .take(45)
            .collect::<Vec<_>>()
            .join(" "),
    );
    // No term at all: the dense side alone (the statement builds no BM25 part).
    out.push("?!".to_owned());
    while out.len() < n {
        let len = 1 + rng.below(5);
        let mut q: Vec<&str> = (0..len).map(|_| words[rng.zipf(words.len())]).collect();
        if rng.below(6) == 0 {
            q.push("xylophone");
        }
        out.push(q.join(" "));
    }
    out
}

/// How memories and queries are embedded.
enum Embedder {
    /// The Fake: integer-valued feature hashes, full of exact cosine ties.
    Fake(FakeProvider),
    /// Clustered float vectors of dimension 384, some memories sharing a vector exactly,
    /// some scaled copies (by 2 and by 3) of another's vector.
    Clustered { centers: Vec<Vec<f32>> },
}

impl Embedder {
    fn dimension(&self) -> usize {
        match self {
            Embedder::Fake(f) => {
                cortex_core::provider::LLMProvider::embedding_signature(f).dimension
            }
            Embedder::Clustered { centers } => centers[0].len(),
        }
    }

    fn embed(&self, rng: &mut Rng, text: &str, earlier: &[Vec<f32>]) -> Vec<f32> {
        match self {
            Embedder::Fake(f) => f.vector(text),
            Embedder::Clustered { centers } => {
                if !earlier.is_empty() && rng.below(10) == 0 {
                    let base = &earlier[rng.below(earlier.len())];
                    let scale = [1.0f32, 2.0, 3.0][rng.below(3)];
                    return base.iter().map(|x| x * scale).collect();
                }
                let c = &centers[rng.below(centers.len())];
                let spread = 0.05 + 0.3 * rng.unit() as f32;
                let scale = 0.5 + 2.0 * rng.unit() as f32;
                c.iter()
                    .map(|x| (x + spread * rng.normal()) * scale)
                    .collect()
            }
        }
    }
}

fn clustered(rng: &mut Rng, dimension: usize, clusters: usize) -> Embedder {
    let centers = (0..clusters)
        .map(|_| (0..dimension).map(|_| rng.normal()).collect())
        .collect();
    Embedder::Clustered { centers }
}

fn same(label: &str, expected: &[ScoredMemory], got: &[ScoredMemory]) {
    let view = |hits: &[ScoredMemory]| -> Vec<(MemoryId, Option<u32>, Option<u32>, u64)> {
        hits.iter()
            .map(|h| (h.memory.id, h.dense_rank, h.lexical_rank, h.score.to_bits()))
            .collect()
    };
    assert_eq!(view(expected), view(got), "{label}");
    assert_eq!(expected, got, "{label}: whole records");
}

async fn run_parity(tag: &str, seed: u64, size: usize, embedder: Embedder, query_count: usize) {
    if !support::require_database().await {
        return;
    }
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(dir.path().join("parity.db")).unwrap();
    let schema = TestSchema::new(tag, true, DenseMode::Exact).await;
    let pg = schema.store().await;
    // The same tables searched with BM25 pruning at other budgets: off, and small enough
    // (against pools of at least MIN_POOL) that common terms fall outside the essential
    // set (bounds and cut both matter), with
    // the survivors always looked up (lookup cost 0) or never (the full scan instead).
    let mut budgets = Vec::new();
    for (budget, lookup_cost) in [(0, 0), (50, 0), (400, 0), (50, u64::MAX)] {
        let config = PostgresConfig {
            prune_budget: budget,
            lookup_cost,
            ..support::config(&schema.url, &schema.schema, true, DenseMode::Exact)
        };
        let store = PostgresStore::connect(config).await.unwrap();
        budgets.push(((budget, lookup_cost), store));
    }
    // The default settings on one connection: both sides one after the other, where `pg`
    // (a free second connection at every search) runs them side by side when the query
    // has several terms.
    let one_connection = PostgresStore::connect(PostgresConfig {
        pool_size: 1,
        ..support::config(&schema.url, &schema.schema, true, DenseMode::Exact)
    })
    .await
    .unwrap();
    let dimension = embedder.dimension();
    let signature = EmbeddingSignature::new("parity", dimension);
    let user = format!("parity-{tag}");
    let other = format!("parity-{tag}-other");

    let texts = corpus(&mut rng, size);
    let mut vectors: Vec<Vec<f32>> = Vec::new();
    let mut ids = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let vector = embedder.embed(&mut rng, text, &vectors);
        // Another user's memories share the tables and must change nothing.
        let owner = if i % 17 == 5 { &other } else { &user };
        let new = NewMemory::new(owner, text, MemoryKind::Note, &[], 64 * 1024).unwrap();
        let a = sqlite.add(&new, &vector, &signature).await.unwrap();
        let b = pg.add(&new, &vector, &signature).await.unwrap();
        assert_eq!(a.memory.content, b.memory.content);
        if owner == &user {
            ids.push(new.id);
        }
        vectors.push(vector);
    }

    // Forget some, supersede some, then forget some of the superseding ones so their
    // old memories come back.
    let mut superseders = Vec::new();
    for _ in 0..size / 20 {
        let id = ids[rng.below(ids.len())];
        let (x, y) = (
            sqlite.delete(&user, &id).await.unwrap(),
            pg.delete(&user, &id).await.unwrap(),
        );
        assert_eq!(x.map(|d| d.restored), y.map(|d| d.restored));
    }
    for _ in 0..size / 15 {
        let (old, new) = (ids[rng.below(ids.len())], ids[rng.below(ids.len())]);
        if old == new {
            continue;
        }
        let s = Supersession {
            old_id: old,
            new_id: new,
            reason: "parity".into(),
            created_at: Utc::now(),
        };
        let (x, y) = (
            sqlite.supersede(&user, &s).await.is_ok(),
            pg.supersede(&user, &s).await.is_ok(),
        );
        assert_eq!(x, y);
        if x {
            superseders.push(new);
        }
    }
    for new in superseders.iter().step_by(3) {
        let (x, y) = (
            sqlite.delete(&user, new).await.unwrap(),
            pg.delete(&user, new).await.unwrap(),
        );
        assert_eq!(x.map(|d| d.restored), y.map(|d| d.restored));
    }
    assert_eq!(
        sqlite.count(&user).await.unwrap(),
        pg.count(&user).await.unwrap()
    );

    let sqlite_index = sqlite.build_index(&user, dimension).await.unwrap().index;
    let pg_index = pg.build_index(&user, dimension).await.unwrap().index;
    assert_eq!(sqlite_index.len(), pg_index.len());

    let mut compared = 0;
    // Searches with several terms (one runs on one connection, see `search::transaction`).
    let mut several_terms = 0;
    for query in queries(&mut rng, query_count) {
        let embedding = match &embedder {
            Embedder::Fake(f) => f.vector(&query),
            // Half the queries sit exactly on a stored vector (distance-0 ties).
            Embedder::Clustered { .. } if rng.below(2) == 0 => {
                vectors[rng.below(vectors.len())].clone()
            }
            Embedder::Clustered { .. } => embedder.embed(&mut rng, &query, &[]),
        };
        let terms = query_terms(&query);
        for top_k in [1, 3, 5, 10, 25, 60] {
            let expected = hybrid_retrieve(&sqlite_index, &embedding, &terms, top_k).unwrap();
            let from_pg_index = hybrid_retrieve(&pg_index, &embedding, &terms, top_k).unwrap();
            let request = SearchRequest {
                query: query.clone(),
                terms: terms.clone(),
                embedding: embedding.clone(),
                top_k,
                filter: Default::default(),
            };
            let pushed = pg.search(&user, &request).await.unwrap();
            let label = format!("{tag}: query {query:?} top_k {top_k}");
            same(
                &format!("{label} (postgres build_index)"),
                &expected,
                &from_pg_index,
            );
            same(
                &format!("{label} (postgres pushdown, prune budget {DEFAULT_PRUNE_BUDGET})"),
                &expected,
                &pushed,
            );
            same(
                &format!("{label} (postgres pushdown, one connection)"),
                &expected,
                &one_connection.search(&user, &request).await.unwrap(),
            );
            several_terms += u64::from(terms.len() > 1);
            for ((budget, lookup_cost), store) in &budgets {
                let pushed = store.search(&user, &request).await.unwrap();
                same(
                    &format!(
                        "{label} (postgres pushdown, prune budget {budget}, lookup cost \
                         {lookup_cost})"
                    ),
                    &expected,
                    &pushed,
                );
            }
            compared += 1;
        }
    }
    let paths: Vec<((u64, u64), LexicalPaths)> = budgets
        .iter()
        .map(|(budget, store)| (*budget, store.diagnostics().lexical_paths()))
        .collect();
    eprintln!(
        "parity {tag}: {} live memories, {compared} (query, top_k) pairs identical; \
         BM25 paths by (prune budget, lookup cost): {paths:?}, default {:?}",
        pg_index.len(),
        pg.diagnostics().lexical_paths()
    );
    assert_eq!(paths[0].1.pruned_total(), 0, "budget 0 never prunes");
    assert!(
        paths[0].1.full > 0 && paths[0].1.impact > 0,
        "budget 0 left the full scan or the impact-ordered read untested"
    );
    // Lookups never pay: whatever could be pruned is scanned in full instead.
    assert_eq!(
        paths[3].1.pruned_total(),
        0,
        "lookups that never pay were made"
    );
    // A corpus within one pool (at least MIN_POOL candidates per list) is scored whole.
    if size > MIN_POOL {
        assert!(
            paths.iter().any(|(_, p)| p.pruned_total() > 0),
            "no budget pruned a search: the pruned path went untested"
        );
        assert!(
            paths.iter().any(|(_, p)| p.pruned_extended > 0),
            "no search pruned with essential terms past the budget: that path went untested"
        );
    }
    // Past ten pools' worth of memories the rarest term can carry the pool, the MaxScore
    // split still has its own cases, and lookups that pay at cost 0 are scans otherwise.
    if size >= 10 * MIN_POOL {
        assert!(
            paths.iter().any(|(_, p)| p.rarest_first > 0),
            "no search went rarest-first: that path went untested"
        );
        assert!(
            paths.iter().any(|(_, p)| p.pruned > 0),
            "no search pruned within the budget: that path went untested"
        );
        assert!(
            paths[3].1.full > paths[1].1.full,
            "no search fell back from pruning to the full scan: that path went untested"
        );
    }
    assert!(
        pg.diagnostics().lexical_paths().once + pg.diagnostics().lexical_paths().pruned_total() > 0,
        "the default budget neither scored once nor pruned"
    );
    assert!(several_terms > 0, "no query had several terms");
    assert_eq!(
        pg.diagnostics().parallel_searches(),
        several_terms,
        "searches with several terms that ran their sides on two connections"
    );
    assert_eq!(one_connection.diagnostics().parallel_searches(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_with_fake_embeddings() {
    run_parity(
        "fake24",
        1,
        CORPUS.len(),
        Embedder::Fake(FakeProvider::new(256)),
        10,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_corpus_with_fake_embeddings() {
    run_parity(
        "fake500",
        7,
        500,
        Embedder::Fake(FakeProvider::new(256)),
        40,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_corpus_with_clustered_embeddings() {
    let mut rng = Rng(42);
    let embedder = clustered(&mut rng, 384, 12);
    run_parity("clustered500", 11, 500, embedder, 40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_dimension_exercises_the_lane_tail() {
    let mut rng = Rng(5);
    let embedder = clustered(&mut rng, 13, 3);
    run_parity("dim13", 3, 200, embedder, 20).await;
}

/// A query of `count` distinct terms: numbers (kept by the tokenizer, never stemmed),
/// spread over the corpus's numbers and beyond it.
fn numbers_query(count: usize) -> String {
    (0..count)
        .map(|i| (i * 7 % 6007).to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A query of as many numbers as fit in `bytes` of UTF-8.
fn numbers_query_of_bytes(bytes: usize) -> String {
    let mut query = String::new();
    for i in 0.. {
        let next = i.to_string();
        if query.len() + next.len() + 1 > bytes {
            break;
        }
        if !query.is_empty() {
            query.push(' ');
        }
        query.push_str(&next);
    }
    query
}

/// Long queries: hundreds to thousands of distinct terms (a query of 32 KiB of numbers has
/// several thousand), each answered by the pushdown exactly as in process, with the dense
/// side on a second connection and inline on one, at every prune budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_queries_match_in_process() {
    let tag = "longq";
    if let Some(reason) = support::unavailable().await {
        eprintln!("SKIPPED parity {tag}: {reason}");
        return;
    }
    let schema = TestSchema::new(tag, true, DenseMode::Exact).await;
    let pg = schema.store().await;
    let mut stores = vec![("default, two connections".to_owned(), schema.store().await)];
    stores.push((
        "default, one connection".to_owned(),
        PostgresStore::connect(PostgresConfig {
            pool_size: 1,
            ..support::config(&schema.url, &schema.schema, true, DenseMode::Exact)
        })
        .await
        .unwrap(),
    ));
    for (budget, lookup_cost) in [(0, 0), (50, 0), (400, 0), (50, u64::MAX)] {
        let config = PostgresConfig {
            prune_budget: budget,
            lookup_cost,
            ..support::config(&schema.url, &schema.schema, true, DenseMode::Exact)
        };
        stores.push((
            format!("prune budget {budget}, lookup cost {lookup_cost}"),
            PostgresStore::connect(config).await.unwrap(),
        ));
    }
    let fake = FakeProvider::new(64);
    let signature = EmbeddingSignature::new("parity", 64);
    let user = format!("parity-{tag}");
    let mut rng = Rng(23);
    let words: Vec<&str> = VOCABULARY.split_whitespace().collect();
    for _ in 0..300 {
        let mut parts: Vec<String> = (0..(3 + rng.below(12)))
            .map(|_| (rng.zipf(6000)).to_string())
            .collect();
        parts.extend((0..(2 + rng.below(6))).map(|_| words[rng.zipf(words.len())].to_owned()));
        let text = parts.join(" ");
        let new = NewMemory::new(&user, &text, MemoryKind::Note, &[], 64 * 1024).unwrap();
        pg.add(&new, &fake.vector(&text), &signature).await.unwrap();
    }
    let index = pg.build_index(&user, 64).await.unwrap().index;
    let mut queries = vec![
        numbers_query(600),
        numbers_query(3000),
        numbers_query_of_bytes(32 * 1024),
    ];
    // Words and numbers together, the words common enough to prune around.
    queries.push(format!("{} {}", numbers_query(700), VOCABULARY));
    for query in &queries {
        let terms = query_terms(query);
        assert!(terms.len() >= 600, "{} terms", terms.len());
        let embedding = fake.vector(query);
        for top_k in [1, 10, 60] {
            let expected = hybrid_retrieve(&index, &embedding, &terms, top_k).unwrap();
            assert!(
                !index.lexical_search(&terms, 1).is_empty(),
                "the query matched no memory lexically"
            );
            let request = SearchRequest {
                query: query.clone(),
                terms: terms.clone(),
                embedding: embedding.clone(),
                top_k,
                filter: Default::default(),
            };
            for (label, store) in &stores {
                let pushed = store.search(&user, &request).await.unwrap();
                same(
                    &format!("{} terms, top_k {top_k}, {label}", terms.len()),
                    &expected,
                    &pushed,
                );
            }
        }
    }
    assert!(stores[0].1.diagnostics().parallel_searches() > 0);
    assert_eq!(stores[1].1.diagnostics().parallel_searches(), 0);
}
