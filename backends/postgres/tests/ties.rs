//! Mass ties on the pushdown: thousands of memories sharing a few vectors, so every dense
//! distance ties. The exact tie-break must still give the in-process ranks, ids and
//! bit-equal scores, and must score each distinct embedding once rather than each tied
//! memory (which cost a second per search at 4,600 memories).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use cortex_core::embedding::cosine;
use cortex_core::tokenizer::query_terms;
use cortex_core::{
    filter::MemoryFilter, hybrid::ScoredMemory, hybrid::hybrid_retrieve,
    hybrid::hybrid_retrieve_filtered, memory::MemoryKind, new_memory::NewMemory,
    signature::EmbeddingSignature, store::MemoryStore, store::SearchRequest,
};
use cortex_postgres::{DenseMode, PostgresConfig, PostgresStore};
use cortex_providers::FakeProvider;
use support::TestSchema;

const DIM: usize = 384;
const USER: &str = "ties";

/// The session setting the counting wrapper bumps, read back on the same connection.
const COUNTER: &str = "cortex_test.unit_dots";

/// Puts a counting wrapper in front of the schema's `cortex_unit_dot`: the search calls
/// the function by its qualified name, so every exact score it computes goes through the
/// wrapper, which counts in a session setting (a read-only snapshot may set those).
async fn count_unit_dots(store: &PostgresStore, schema: &str) {
    let client = store.pool().get().await.unwrap();
    client
        .batch_execute(&format!(
            r#"
            ALTER FUNCTION "{schema}".cortex_unit_dot(real[], real[])
                RENAME TO cortex_unit_dot_counted;
            CREATE FUNCTION "{schema}".cortex_unit_dot(e real[], q real[]) RETURNS real
            LANGUAGE plpgsql IMMUTABLE STRICT AS $fn$
            BEGIN
                PERFORM set_config('{COUNTER}', (COALESCE(NULLIF(
                    current_setting('{COUNTER}', true), ''), '0')::int + 1)::text, false);
                RETURN "{schema}".cortex_unit_dot_counted(e, q);
            END
            $fn$;
            "#
        ))
        .await
        .unwrap();
}

/// The exact scores computed since the last call, on the pool's one connection.
async fn unit_dots_since(store: &PostgresStore) -> u64 {
    let client = store.pool().get().await.unwrap();
    let row = client
        .query_one(
            &format!(
                "SELECT COALESCE(NULLIF(current_setting('{COUNTER}', true), ''), '0')::int8, \
                 set_config('{COUNTER}', '0', false)"
            ),
            &[],
        )
        .await
        .unwrap();
    u64::try_from(row.get::<_, i64>(0)).unwrap()
}

fn view(hits: &[ScoredMemory]) -> Vec<(uuid::Uuid, Option<u32>, Option<u32>, u64)> {
    hits.iter()
        .map(|h| (h.memory.id, h.dense_rank, h.lexical_rank, h.score.to_bits()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mass_ties_match_the_core_and_score_each_distinct_vector_once() {
    if !support::require_database().await {
        return;
    }
    let schema = TestSchema::new("ties", true, DenseMode::Exact).await;
    // One connection: the counter lives in its session, and no search runs a side on a
    // second one.
    let counted = PostgresStore::connect(PostgresConfig {
        pool_size: 1,
        ..support::config(&schema.url, &schema.schema, true, DenseMode::Exact)
    })
    .await
    .unwrap();
    let fake = FakeProvider::new(DIM);
    let signature = EmbeddingSignature::new("ties", DIM);
    // The fake embedder hashes words: every memory of one text shares its vector. Against
    // the query "meeting", "meeting alpha" and "meeting beta" lie at exactly the same
    // distance with different vectors (two classes within one tie, which the pool reaches
    // past the 30 copies of "meeting" itself, at distance zero).
    let classes = [
        ("meeting", 30),
        ("meeting alpha", 1400),
        ("meeting beta", 1400),
        ("meeting alpha beta", 200),
    ];
    let query = fake.vector("meeting");
    let (alpha, beta) = (fake.vector("meeting alpha"), fake.vector("meeting beta"));
    assert_ne!(
        alpha, beta,
        "the fake embedder hashed alpha and beta together"
    );
    assert_eq!(
        cosine(&query, &alpha),
        cosine(&query, &beta),
        "the two classes must tie exactly"
    );
    // Round robin over the classes, so each one's members are spread over the sequence.
    let longest = classes.iter().map(|(_, n)| *n).max().unwrap();
    let texts: Vec<&str> = (0..longest)
        .flat_map(|round| {
            classes
                .iter()
                .filter(move |(_, n)| round < *n)
                .map(|(text, _)| *text)
        })
        .collect();
    for text in &texts {
        let memory = NewMemory::new(USER, text, MemoryKind::Note, &[], 1 << 16).unwrap();
        counted
            .add(&memory, &fake.vector(text), &signature)
            .await
            .unwrap();
    }
    count_unit_dots(&counted, &schema.schema).await;
    let default = schema.store().await;
    let index = counted.build_index(USER, DIM).await.unwrap().index;
    assert_eq!(index.len(), texts.len());

    let distinct_vectors = classes.len() as u64;
    let mut most_scored = 0;
    for text in ["meeting", "meeting alpha", "alpha", "beta gamma"] {
        let embedding = fake.vector(text);
        let terms = query_terms(text);
        for top_k in [1, 10, 40, 60] {
            let request = SearchRequest {
                query: text.to_owned(),
                terms: terms.clone(),
                embedding: embedding.clone(),
                top_k,
                filter: Default::default(),
            };
            let expected = hybrid_retrieve(&index, &embedding, &terms, top_k).unwrap();
            assert_eq!(expected.len(), top_k);
            unit_dots_since(&counted).await;
            let got = counted.search(USER, &request).await.unwrap();
            let scored = unit_dots_since(&counted).await;
            let label = format!("query {text:?} top_k {top_k}");
            assert_eq!(view(&expected), view(&got), "{label}");
            assert_eq!(expected, got, "{label}: whole records");
            assert_eq!(
                view(&expected),
                view(&default.search(USER, &request).await.unwrap()),
                "{label}, default store"
            );
            // Each distinct tied embedding is scored once, however many memories hold it
            // (one per tied memory was 60 to thousands here). The dense side's first two,
            // whose gap weighs the lists, are scored by the core, not in SQL.
            assert!(
                scored <= distinct_vectors,
                "{label}: {scored} exact scores for {distinct_vectors} distinct vectors"
            );
            most_scored = most_scored.max(scored);
        }
    }
    eprintln!(
        "{} memories, {distinct_vectors} distinct vectors: at most {most_scored} exact scores \
         per search",
        texts.len()
    );
}

/// Memories sharing no word with the query all score ±0 with vectors that all differ: the
/// fake embedder's usual case (a recall over 3,000 of them took 560 ms on the pushdown
/// against 3 ms in process). They are proven to score 0 without an exact score each, and
/// the ranks stay the core's: the same ids, order and bit-equal scores, with and without a
/// filter, beside memories whose tiny non-zero products (±1e-6 on the query's slot) must
/// still be scored exactly and sort above or below the zeros.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ties_sharing_no_word_cost_no_exact_score_each() {
    if !support::require_database().await {
        return;
    }
    let schema = TestSchema::new("zero_ties", true, DenseMode::Exact).await;
    let counted = PostgresStore::connect(PostgresConfig {
        pool_size: 1,
        ..support::config(&schema.url, &schema.schema, true, DenseMode::Exact)
    })
    .await
    .unwrap();
    let fake = FakeProvider::new(DIM);
    let signature = EmbeddingSignature::new("ties", DIM);
    let query_text = "lighthouse";
    let query = fake.vector(query_text);
    let slot = query.iter().position(|x| *x != 0.0).unwrap();
    let mut nudged = 0u64;
    let mut vectors = Vec::new();
    let total = 3000;
    for i in 0..total {
        // Unique texts: every vector differs, and none holds the query's word ...
        let text = format!("note {i} item{i}");
        let mut vector = fake.vector(&text);
        // ... except a few that share a word with it, so the zero run starts past rank 1.
        let text = if i % 1000 == 7 {
            vector = fake.vector(&format!("{text} {query_text}"));
            format!("{text} {query_text}")
        } else {
            text
        };
        // And a few whose product with the query is tiny but not zero, either sign.
        if i % 250 == 3 && vector[slot] == 0.0 {
            vector[slot] = if i % 500 == 3 { 1e-6 } else { -1e-6 };
            nudged += 1;
        }
        let kind = if i % 3 == 0 {
            MemoryKind::Fact
        } else {
            MemoryKind::Note
        };
        let memory = NewMemory::new(USER, &text, kind, &[], 1 << 16).unwrap();
        counted.add(&memory, &vector, &signature).await.unwrap();
        vectors.push(vector);
    }
    assert!(nudged >= 10, "{nudged}");
    count_unit_dots(&counted, &schema.schema).await;
    let default = schema.store().await;
    let index = counted.build_index(USER, DIM).await.unwrap().index;
    let facts = MemoryFilter {
        kinds: vec![MemoryKind::Fact],
        ..MemoryFilter::default()
    };
    for text in [query_text, "nothing shares this"] {
        let embedding = fake.vector(text);
        let terms = query_terms(text);
        // The memories with any non-zero product with the query (the nudged ones, those
        // sharing its word, and any the hash put on one of its slots): only these may
        // need an exact score.
        let nonzero = vectors
            .iter()
            .filter(|v| v.iter().zip(&embedding).any(|(a, b)| a * b != 0.0))
            .count() as u64;
        assert!(nonzero < 100, "{text:?}: {nonzero} memories are not ties");
        for filter in [MemoryFilter::default(), facts.clone()] {
            for top_k in [1, 10, 40, 60] {
                let request = SearchRequest {
                    query: text.to_owned(),
                    terms: terms.clone(),
                    embedding: embedding.clone(),
                    top_k,
                    filter: filter.clone(),
                };
                let expected =
                    hybrid_retrieve_filtered(&index, &embedding, &terms, top_k, &filter).unwrap();
                if filter == MemoryFilter::default() {
                    assert_eq!(
                        expected,
                        hybrid_retrieve(&index, &embedding, &terms, top_k).unwrap()
                    );
                }
                assert_eq!(expected.len(), top_k);
                unit_dots_since(&counted).await;
                let got = counted.search(USER, &request).await.unwrap();
                let scored = unit_dots_since(&counted).await;
                let label = format!("query {text:?} top_k {top_k} filter {:?}", filter.kinds);
                assert_eq!(view(&expected), view(&got), "{label}");
                assert_eq!(expected, got, "{label}: whole records");
                assert_eq!(
                    view(&expected),
                    view(&default.search(USER, &request).await.unwrap()),
                    "{label}, default store"
                );
                // The non-zero ones may each need their own score: never one per tied
                // memory (the fusion's gap is the core's, not in SQL).
                assert!(
                    scored <= nonzero,
                    "{label}: {scored} exact scores for {total} memories ({nonzero} not \
                     proven zero)"
                );
            }
        }
    }
}
