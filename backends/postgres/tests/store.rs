//! Postgres-specific behaviour the shared suite cannot see: migrations under concurrency,
//! the SQL cosine's bit-equality with the core, HNSW mode, exact statistics under
//! concurrent writers, the dimension constraint, the missing-extension error and TLS.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use cortex_core::embedding::normalized;
use cortex_core::hybrid::MIN_POOL;
use cortex_core::memory::Supersession;
use cortex_core::tokenizer::query_terms;
use cortex_core::{
    error::StoreError, filter::MemoryFilter, index::MemoryIndex, memory::MemoryKind,
    new_memory::NewMemory, signature::EmbeddingSignature, store::MemoryStore, store::SearchRequest,
};
use cortex_postgres::{
    AnnIndex, DenseMode, HnswBuild, IvfFlat, LexicalPaths, PostgresConfig, PostgresStore,
    RarestFirstLookups, SCHEMA_VERSION,
};
use pgvector::Vector;
use support::TestSchema;

macro_rules! require_db {
    () => {
        if !support::require_database().await {
            return;
        }
    };
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn float(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

fn memory(user: &str, text: &str) -> NewMemory {
    NewMemory::new(user, text, MemoryKind::Note, &[], 64 * 1024).unwrap()
}

/// Writes `texts` for user "u", the i-th with the vector [1, i, 0.5].
async fn add_in_order(store: &PostgresStore, texts: &[&str], sig: &EmbeddingSignature) {
    for (i, text) in texts.iter().enumerate() {
        store
            .add(&memory("u", text), &[1.0, i as f32, 0.5], sig)
            .await
            .unwrap();
    }
}

/// Writes 30 memories "note 0" to "note 29" for user "u", with random vectors of `dim`
/// (SplitMix64 from `seed`).
async fn add_random_notes(store: &PostgresStore, dim: usize, seed: u64) -> EmbeddingSignature {
    let sig = EmbeddingSignature::new("m", dim);
    let mut rng = Rng(seed);
    for i in 0..30 {
        let v: Vec<f32> = (0..dim).map(|_| rng.float()).collect();
        store
            .add(&memory("u", &format!("note {i}")), &v, &sig)
            .await
            .unwrap();
    }
    sig
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_connects_migrate_once() {
    require_db!();
    let schema = Arc::new(TestSchema::new("migrate", true, DenseMode::Exact).await);
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let schema = schema.clone();
            tokio::spawn(async move { schema.store().await })
        })
        .collect();
    let mut stores = Vec::new();
    for t in tasks {
        stores.push(t.await.unwrap());
    }
    let client = stores[0].pool().get().await.unwrap();
    let version: String = client
        .query_one(
            &format!(
                "SELECT value FROM \"{}\".meta WHERE key = 'schema_version'",
                schema.schema
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, SCHEMA_VERSION.to_string());
}

/// A store written at schema version 1 (no per-term statistics) upgrades in place: the
/// migration fills `terms` from the postings, and the pushdown then returns what it
/// returned before the upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_one_store_upgrades_with_its_term_statistics() {
    require_db!();
    let schema = TestSchema::new("upgrade", true, DenseMode::Exact).await;
    let store = schema.store().await;
    let sig = EmbeddingSignature::new("m", 3);
    let texts = [
        "deploy the api on friday",
        "the api gateway times out",
        "friday deploy freeze, the api too",
        "lunch with alice on friday",
    ];
    add_in_order(&store, &texts, &sig).await;
    let request = SearchRequest {
        query: "friday api deploy".into(),
        terms: query_terms("friday api deploy"),
        embedding: vec![1.0, 1.0, 0.5],
        top_k: 3,
        filter: Default::default(),
    };
    let before = store.search("u", &request).await.unwrap();
    assert_eq!(before.len(), 3);
    let s = &schema.schema;
    let client = store.pool().get().await.unwrap();
    // Back to what version 1 wrote.
    client
        .batch_execute(&format!(
            "DROP TABLE \"{s}\".terms;
             DROP TRIGGER postings_added ON \"{s}\".postings;
             DROP TRIGGER postings_removed ON \"{s}\".postings;
             DROP FUNCTION \"{s}\".cortex_postings_added();
             DROP FUNCTION \"{s}\".cortex_postings_removed();
             ALTER TABLE \"{s}\".postings DROP CONSTRAINT postings_pkey,
                 ADD PRIMARY KEY (user_id, term, seq);
             DROP INDEX \"{s}\".postings_impact;
             DROP TABLE \"{s}\".staged_embeddings;
             DROP TABLE \"{s}\".api_keys;
             DROP INDEX \"{s}\".memories_tags;
             DROP INDEX \"{s}\".memories_user_created;
             DROP INDEX \"{s}\".memories_user_kind;
             DROP INDEX \"{s}\".memories_user_expiry;
             ALTER TABLE \"{s}\".memories DROP COLUMN expires_at;
             UPDATE \"{s}\".meta SET value = '1' WHERE key = 'schema_version';"
        ))
        .await
        .unwrap();
    drop(client);
    drop(store);
    let store = schema.store().await;
    let client = store.pool().get().await.unwrap();
    let df: i64 = client
        .query_one(
            &format!("SELECT df FROM \"{s}\".terms WHERE user_id = 'u' AND term = 'friday'"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(df, 3);
    let impact: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'postings_impact'",
            &[s],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(impact, 1, "the impact-ordered index is rebuilt");
    assert_eq!(store.search("u", &request).await.unwrap(), before);
    // And the triggers are back: a new memory counts.
    store
        .add(&memory("u", "friday again"), &[0.0, 1.0, 0.0], &sig)
        .await
        .unwrap();
    let df: i64 = client
        .query_one(
            &format!("SELECT df FROM \"{s}\".terms WHERE user_id = 'u' AND term = 'friday'"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(df, 4);
}

/// BM25 pruning: with a rare and a common query term, the rare term carries the pool
/// alone, so the search reads only its postings that could reach it (in impact order),
/// looks the common term up for those, and the results equal those of a search that
/// scores everything and of the core's index. With a mid-frequency term too, the rare one
/// no longer carries the pool; that term, past the budget but able to reach the pool, is
/// scanned (the extended path), and the common one still skipped. When lookups are deemed
/// never worth it, every one of these scans every posting instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruned_search_equals_full_scoring() {
    require_db!();
    let schema = TestSchema::new("prune", true, DenseMode::Exact).await;
    let store = schema.store().await;
    let sig = EmbeddingSignature::new("m", 4);
    let mut rng = Rng(9);
    for i in 0..240 {
        // "ox" everywhere (a common word: the analyser drops "the", which stood here);
        // "zebra" in every sixth memory, more often in shorter ones.
        let mut text = format!("ox note {i} ox {}", "filler ".repeat(i % 9));
        if i % 6 == 0 {
            text.push_str(&" zebra".repeat(1 + i % 4));
        }
        // "yak" in every third: past a budget of 100 with "zebra" before it.
        if i % 3 == 1 {
            text.push_str(&" yak".repeat(1 + i % 5));
        }
        let v = [rng.float(), rng.float(), rng.float(), 1.0];
        store.add(&memory("u", &text), &v, &sig).await.unwrap();
    }
    let at = |budget: u64, lookup_cost: u64| {
        let config = PostgresConfig {
            prune_budget: budget,
            lookup_cost,
            ..support::config(&schema.url, &schema.schema, true, DenseMode::Exact)
        };
        async move { PostgresStore::connect(config).await.unwrap() }
    };
    // Survivors always looked up, pruning off, and lookups deemed never worth it (the
    // prunable searches scan every posting after all).
    let (pruning, full, scanning) = (at(100, 0).await, at(0, 0).await, at(100, u64::MAX).await);
    let index = store.build_index("u", 4).await.unwrap().index;
    for (query, top_k) in [
        ("ox zebra", 3),
        ("zebra ox note", 5),
        ("ox", 2),
        ("ox yak zebra", 10),
        // One term past the budget, read in impact order: every memory holds "ox" and
        // "note" with one tf, nine lengths tie 27 memories each, so the pool's floor
        // falls inside a run of ties.
        ("ox", 10),
        ("note", 7),
    ] {
        let request = SearchRequest {
            query: query.into(),
            terms: query_terms(query),
            embedding: vec![0.3, 0.2, 0.1, 1.0],
            top_k,
            filter: Default::default(),
        };
        let expected =
            cortex_core::hybrid::hybrid_retrieve(&index, &request.embedding, &request.terms, top_k)
                .unwrap();
        assert_eq!(
            pruning.search("u", &request).await.unwrap(),
            expected,
            "{query}"
        );
        assert_eq!(
            full.search("u", &request).await.unwrap(),
            expected,
            "{query}"
        );
        assert_eq!(
            scanning.search("u", &request).await.unwrap(),
            expected,
            "{query}"
        );
    }
    // The queries of "zebra" and "ox" (and "note") rarest-first, the one with "yak" past
    // the budget but essential; the one-term queries read in impact order.
    assert_eq!(
        pruning.diagnostics().lexical_paths(),
        LexicalPaths {
            full: 0,
            once: 0,
            pruned: 0,
            pruned_extended: 1,
            impact: 3,
            rarest_first: 2,
        }
    );
    for store in [&full, &scanning] {
        assert_eq!(
            store.diagnostics().lexical_paths(),
            LexicalPaths {
                full: 3,
                impact: 3,
                ..LexicalPaths::default()
            }
        );
    }
}

/// The rarest-first lookups run in stages. The counts here are for a pool of 4; the
/// corpus is scaled by MIN_POOL / 4 for the pool a one-result search has. "rare" (200
/// memories, lengths rising steadily: BM25's b = 0.3 needs a wider spread of lengths for
/// the same spread of scores) carries the pool, but "common"'s bound (set by one
/// three-word memory of it alone) is wide beside the spread of "rare"'s scores, so every
/// posting of "rare" is a candidate. The best 16 lack "common", so the first stage's
/// floor prunes nothing; the next 64 hold it, so the second stage's floor stops the third
/// stage partway, and the longest memories are never looked up.
#[tokio::test]
async fn rarest_first_looks_up_in_stages() {
    require_db!();
    let schema = TestSchema::new("stages", true, DenseMode::Exact).await;
    let store = schema.store().await;
    let sig = EmbeddingSignature::new("m", 4);
    let mut rng = Rng(21);
    // The corpus of a pool of 4, scaled to the pool of MIN_POOL.
    let x = MIN_POOL / 4;
    let mut texts = Vec::new();
    for j in 0..200 * x {
        let mut text = format!("r{j} {}rare", "pad ".repeat(2 + 3 * j / (8 * x)));
        if (16 * x..80 * x).contains(&j) || (j >= 80 * x && j % 2 == 0) {
            text.push_str(" common");
        }
        texts.push(text);
    }
    for i in 0..400 * x {
        let common = if i % 2 == 0 { " common" } else { "" };
        texts.push(format!("w{i} {}{common}", "pad ".repeat(3 + i % 20)));
    }
    texts.push("common common common".into());
    for text in &texts {
        let v = [rng.float(), rng.float(), rng.float(), 1.0];
        store.add(&memory("u", text), &v, &sig).await.unwrap();
    }
    let staged = PostgresStore::connect(PostgresConfig {
        lookup_cost: 0,
        ..support::config(&schema.url, &schema.schema, true, DenseMode::Exact)
    })
    .await
    .unwrap();
    let index = store.build_index("u", 4).await.unwrap().index;
    let search = |top_k: usize| {
        let request = SearchRequest {
            query: "common rare".into(),
            terms: query_terms("common rare"),
            embedding: vec![0.3, 0.2, 0.1, 1.0],
            top_k,
            filter: Default::default(),
        };
        let expected =
            cortex_core::hybrid::hybrid_retrieve(&index, &request.embedding, &request.terms, top_k)
                .unwrap();
        let staged = &staged;
        async move { (staged.search("u", &request).await.unwrap(), expected) }
    };
    let (got, expected) = search(1).await;
    assert_eq!(got, expected);
    assert_eq!(staged.diagnostics().lexical_paths().rarest_first, 1);
    let RarestFirstLookups {
        candidates,
        looked_up,
    } = staged.diagnostics().rarest_first_lookups();
    // The first two stages hold the best 16 + 64 candidates (scaled), and at most one
    // run of tied scores (memories of one length) more.
    assert_eq!(
        candidates,
        200 * x as u64,
        "every posting of \"rare\" is a candidate"
    );
    assert!(
        looked_up > 90 * x as u64 && looked_up < candidates,
        "{looked_up} of {candidates} candidates looked up: the third stage looked up none, \
         or every one"
    );
    for top_k in [2, 3, 5, 8] {
        let (got, expected) = search(top_k).await;
        assert_eq!(got, expected, "top_k {top_k}");
    }
}

/// A term's score bound is its best posting's score, not its largest tf in its shortest
/// memory: "ox" reaches tf 9 only in a 120-word memory, so bounded by tf 9 at 2 words
/// (about 2.51 here) it would outweigh "zebra"'s pool-th score (1.71) and the search
/// would scan every posting; bounded by its best posting (1.44) "zebra" carries the pool.
#[tokio::test]
async fn term_bounds_come_from_the_best_posting() {
    require_db!();
    let schema = TestSchema::new("bound", true, DenseMode::Exact).await;
    let store = schema.store().await;
    let sig = EmbeddingSignature::new("m", 4);
    // The corpus of a pool of 4, every memory repeated for the pool of MIN_POOL.
    let x = MIN_POOL / 4;
    let mut texts: Vec<String> = (0..20 * x).map(|i| format!("f{i} g{i} h{i}")).collect();
    texts.extend((0..10 * x).map(|i| format!("ox a{i}")));
    texts.extend((0..x).map(|_| format!("{}{}", "ox ".repeat(9), "pad ".repeat(111))));
    texts.extend((0..8 * x).map(|i| format!("zebra z{i} y{i}")));
    let mut rng = Rng(3);
    for text in &texts {
        let v = [rng.float(), rng.float(), rng.float(), 1.0];
        store.add(&memory("u", text), &v, &sig).await.unwrap();
    }
    let pruning = PostgresStore::connect(PostgresConfig {
        prune_budget: 100,
        lookup_cost: 0,
        ..support::config(&schema.url, &schema.schema, true, DenseMode::Exact)
    })
    .await
    .unwrap();
    let index = store.build_index("u", 4).await.unwrap().index;
    let request = SearchRequest {
        query: "ox zebra".into(),
        terms: query_terms("ox zebra"),
        embedding: vec![0.3, 0.2, 0.1, 1.0],
        top_k: 1,
        filter: Default::default(),
    };
    let expected =
        cortex_core::hybrid::hybrid_retrieve(&index, &request.embedding, &request.terms, 1)
            .unwrap();
    assert_eq!(pruning.search("u", &request).await.unwrap(), expected);
    assert_eq!(
        pruning.diagnostics().lexical_paths(),
        LexicalPaths {
            rarest_first: 1,
            ..LexicalPaths::default()
        }
    );

    // Above the tfs read one by one the bound must still hold: another user's "yak" is 40
    // times in a memory of its own (the best "yak" memory by far, and the nearest), and
    // once in 16 four-word ones. Bounded by those alone, "yak" would let "zebra" carry the
    // pool, and the long memory would lose its lexical rank.
    let query = [0.3, 0.2, 0.1, 1.0];
    for i in 0..16 * x {
        let v = [rng.float(), rng.float(), rng.float(), 1.0];
        let text = format!("zebra z{i} y{i}");
        store.add(&memory("v", &text), &v, &sig).await.unwrap();
        let text = format!("yak b{i} c{i} d{i}");
        store.add(&memory("v", &text), &v, &sig).await.unwrap();
    }
    let long = "yak ".repeat(40);
    store.add(&memory("v", &long), &query, &sig).await.unwrap();
    let index = store.build_index("v", 4).await.unwrap().index;
    let request = SearchRequest {
        query: "zebra yak".into(),
        terms: query_terms("zebra yak"),
        embedding: query.to_vec(),
        top_k: 3,
        filter: Default::default(),
    };
    let expected =
        cortex_core::hybrid::hybrid_retrieve(&index, &request.embedding, &request.terms, 3)
            .unwrap();
    assert_eq!(expected[0].memory.content, long);
    assert_eq!(expected[0].lexical_rank, Some(1));
    assert_eq!(pruning.search("v", &request).await.unwrap(), expected);
}

/// The SQL cosine equals the core's dense score bit for bit, on dimensions with and
/// without a tail after the eight lanes, on tiny and huge magnitudes and on ties.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_cosine_equals_the_core_bit_for_bit() {
    require_db!();
    let schema = TestSchema::new("cosine", true, DenseMode::Exact).await;
    let store = schema.store().await;
    let client = store.pool().get().await.unwrap();
    let sql = format!(
        "SELECT \"{}\".cortex_unit_dot($1::vector::real[], $2::vector::real[])",
        schema.schema
    );
    let mut rng = Rng(9);
    let mut checked = 0;
    for dimension in [1usize, 3, 7, 8, 9, 16, 17, 100, 384, 1536] {
        for case in 0..12 {
            let scale = match case % 4 {
                0 => 1.0,
                1 => 1e-20,
                2 => 1e18,
                _ => 0.37,
            };
            let doc: Vec<f32> = (0..dimension).map(|_| rng.float() * scale).collect();
            let mut query: Vec<f32> = (0..dimension).map(|_| rng.float()).collect();
            if case == 5 {
                query = doc.clone();
            }
            if case == 6 && dimension > 1 {
                // One tiny component next to big ones: its unit value underflows f32.
                query[0] = 1e-38;
                query[1] = 1e30;
            }
            let mut index = MemoryIndex::new(dimension);
            index
                .insert(
                    cortex_core::memory::Memory {
                        id: uuid::Uuid::new_v4(),
                        user_id: "u".into(),
                        content: "x".into(),
                        kind: MemoryKind::Note,
                        tags: vec![],
                        created_at: Utc::now(),
                        seq: 1,
                        expires_at: None,
                    },
                    &doc,
                )
                .unwrap();
            let core = index.dense_search(&query, 1).unwrap()[0].score as f32;
            let got: f32 = client
                .query_one(
                    &sql,
                    &[
                        &Vector::from(doc.clone()),
                        &Vector::from(normalized(&query)),
                    ],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(
                got.to_bits(),
                core.to_bits(),
                "dimension {dimension} case {case}: sql {got} core {core}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 120);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dimension_is_fixed_by_a_check_constraint() {
    require_db!();
    let schema = TestSchema::new("dim", true, DenseMode::Exact).await;
    let store = schema.store().await;
    let sig = EmbeddingSignature::new("m", 4);
    store
        .add(&memory("u", "four dims"), &[1.0, 0.0, 0.0, 0.0], &sig)
        .await
        .unwrap();
    let client = store.pool().get().await.unwrap();
    let err = client
        .execute(
            &format!(
                "INSERT INTO \"{}\".memories (id, user_id, content, kind, tags, created_at, \
                 doc_len, embedding) VALUES (gen_random_uuid(), 'u', 'x', 'note', '{{}}', now(), \
                 1, '[1,2,3]')",
                schema.schema
            ),
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::CHECK_VIOLATION)
    );
    // And the store refuses a vector that disagrees with the signature before any SQL.
    assert!(
        store
            .add(&memory("u", "three"), &[1.0, 2.0, 3.0], &sig)
            .await
            .is_err()
    );
    assert_eq!(store.count("u").await.unwrap(), 1);
}

/// A search whose dense side runs on a second connection reads the same snapshot on both:
/// a memory committed in between, nearest to the query of all, is either seen by both
/// sides or by neither. (Were the dense side's snapshot newer, its best candidate would be
/// missing from the fused statement's snapshot, and the search would return fewer than
/// `top_k` memories.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sides_read_one_snapshot_under_concurrent_writes() {
    require_db!();
    let schema = TestSchema::new("snapshot", true, DenseMode::Exact).await;
    let store = Arc::new(schema.store().await);
    let sig = EmbeddingSignature::new("m", 3);
    let user = "snap";
    // A few lexical matches far from the query, and enough other memories that every
    // search has `top_k` to return.
    for i in 0..5 {
        let m = memory(user, &format!("alpha beta seed {i}"));
        store.add(&m, &[-1.0, 0.0, i as f32], &sig).await.unwrap();
    }
    for i in 0..12 {
        let m = memory(user, &format!("filler {i}"));
        store.add(&m, &[0.0, 1.0, i as f32], &sig).await.unwrap();
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Each new memory is nearer the query [1, 0, 0] than every earlier one: the dense
    // side's first candidate as soon as it is visible.
    let writer = {
        let (store, sig, stop) = (store.clone(), sig.clone(), stop.clone());
        tokio::spawn(async move {
            let mut written = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let m = memory(user, &format!("nearest {written}"));
                let v = [1.0, 1.0 / (written as f32 + 2.0), 0.0];
                store.add(&m, &v, &sig).await.unwrap();
                written += 1;
            }
            written
        })
    };
    let request = SearchRequest {
        query: "alpha beta".into(),
        terms: query_terms("alpha beta"),
        embedding: vec![1.0, 0.0, 0.0],
        top_k: 10,
        filter: Default::default(),
    };
    for i in 0..300 {
        let found = store.search(user, &request).await.unwrap();
        assert_eq!(found.len(), 10, "search {i}: {found:#?}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.await.unwrap();
    assert!(written > 20, "the writer wrote only {written} memories");
    assert_eq!(store.diagnostics().parallel_searches(), 300);
}

/// A search given up midway (its future dropped while a statement of its read-only
/// transaction is still running) leaves no transaction behind on the pooled connection:
/// the next caller on it can write, and reads what is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_dropped_midway_leaves_no_transaction_behind() {
    require_db!();
    let schema = TestSchema::new("dropped", true, DenseMode::Exact).await;
    let store = PostgresStore::connect(PostgresConfig {
        pool_size: 1,
        ..support::config(&schema.url, &schema.schema, true, DenseMode::Exact)
    })
    .await
    .unwrap();
    let sig = EmbeddingSignature::new("m", 3);
    for i in 0..5 {
        let m = memory("u", &format!("alpha beta note {i}"));
        store.add(&m, &[1.0, i as f32, 0.0], &sig).await.unwrap();
    }
    let request = SearchRequest {
        query: "alpha beta".into(),
        terms: query_terms("alpha beta"),
        embedding: vec![1.0, 0.0, 0.0],
        top_k: 10,
        filter: Default::default(),
    };
    assert_eq!(store.search("u", &request).await.unwrap().len(), 5);
    // Another session holds the postings table, so the BM25 statement waits inside the
    // search's transaction until the search is given up.
    let (locker, connection) = tokio_postgres::connect(&schema.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    locker
        .batch_execute(&format!(
            "BEGIN; LOCK TABLE \"{}\".postings IN ACCESS EXCLUSIVE MODE",
            schema.schema
        ))
        .await
        .unwrap();
    let given_up =
        tokio::time::timeout(Duration::from_millis(500), store.search("u", &request)).await;
    assert!(given_up.is_err(), "the search did not wait for the lock");
    locker.batch_execute("COMMIT").await.unwrap();
    // The pool's one connection again: a write, then a search that sees it.
    let m = memory("u", "alpha beta written after");
    store.add(&m, &[1.0, 9.0, 0.0], &sig).await.unwrap();
    let found = store.search("u", &request).await.unwrap();
    assert_eq!(found.len(), 6);
    assert!(found.iter().any(|f| f.memory.id == m.id));
}

/// Statistics, postings and the change counter stay exact with writers racing on one user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_stay_exact_under_concurrent_writers() {
    require_db!();
    let schema = TestSchema::new("stats", true, DenseMode::Exact).await;
    let store = Arc::new(schema.store().await);
    let sig = EmbeddingSignature::new("m", 3);
    let user = "racer";
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let store = store.clone();
            let sig = sig.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for i in 0..15 {
                    let text = format!("writer {w} note {i} shared words {}", "x ".repeat(i));
                    let m = memory(user, &text);
                    store
                        .add(&m, &[1.0, w as f32, i as f32], &sig)
                        .await
                        .unwrap();
                    ids.push(m.id);
                }
                ids
            })
        })
        .collect();
    let mut ids = Vec::new();
    for w in writers {
        ids.extend(w.await.unwrap());
    }
    // Supersede and delete concurrently too.
    let ops: Vec<_> = (0..6)
        .map(|k| {
            let store = store.clone();
            let (old, new, gone) = (ids[k], ids[k + 20], ids[k + 40]);
            tokio::spawn(async move {
                let s = Supersession {
                    old_id: old,
                    new_id: new,
                    reason: "race".into(),
                    created_at: Utc::now(),
                };
                store.supersede(user, &s).await.unwrap();
                store.delete(user, &gone).await.unwrap().unwrap();
            })
        })
        .collect();
    for op in ops {
        op.await.unwrap();
    }
    store.delete(user, &ids[20]).await.unwrap().unwrap(); // restores ids[0]
    let client = store.pool().get().await.unwrap();
    let s = &schema.schema;
    let row = client
        .query_one(
            &format!(
                "SELECT u.doc_count, u.total_len, u.generation,
                        (SELECT count(*) FROM \"{s}\".memories m
                          WHERE m.user_id = u.user_id AND NOT m.superseded),
                        (SELECT COALESCE(sum(doc_len), 0)::int8 FROM \"{s}\".memories m
                          WHERE m.user_id = u.user_id AND NOT m.superseded),
                        (SELECT COALESCE(sum(tf), 0)::int8 FROM \"{s}\".postings p
                          WHERE p.user_id = u.user_id)
                 FROM \"{s}\".users u WHERE u.user_id = $1"
            ),
            &[&user],
        )
        .await
        .unwrap();
    let (docs, total, generation, live, live_len, tf_sum): (i64, i64, i64, i64, i64, i64) = (
        row.get(0),
        row.get(1),
        row.get(2),
        row.get(3),
        row.get(4),
        row.get(5),
    );
    // 60 written, 6 deleted, 6 superseded, then one superseder deleted: 60-6-6-1+1.
    assert_eq!(live, 48);
    assert_eq!(
        (docs, total),
        (live, live_len),
        "statistics equal a recount"
    );
    assert_eq!(
        tf_sum, live_len,
        "postings hold exactly the live memories' tokens"
    );
    assert_eq!(generation, 60 + 6 + 6 + 1);
    // The per-term statistics the triggers keep: df equals a recount of the postings
    // (no row for a term no live memory holds), and the bounds still bound.
    let wrong: i64 = client
        .query_one(
            &format!(
                "SELECT count(*) FROM
                   (SELECT user_id, term, count(*) AS df, max(tf) AS tf, min(doc_len) AS len
                    FROM \"{s}\".postings GROUP BY user_id, term) p
                 FULL JOIN \"{s}\".terms t USING (user_id, term)
                 WHERE p.df IS DISTINCT FROM t.df OR t.max_tf < p.tf OR t.min_len > p.len"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        wrong, 0,
        "terms rows that disagree with a recount of the postings"
    );
    let terms: i64 = client
        .query_one(&format!("SELECT count(*) FROM \"{s}\".terms"), &[])
        .await
        .unwrap()
        .get(0);
    assert!(terms > 10, "the writes left {terms} term rows");
    assert_eq!(store.count(user).await.unwrap(), 48);
}

/// HNSW mode: the index is built once the dimension is known, the query shape uses it, the
/// search settings stay inside the search's transaction, and on a small corpus the
/// results agree with exact search.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hnsw_mode_uses_the_index_and_keeps_settings_local() {
    require_db!();
    let schema = TestSchema::new("hnsw", true, DenseMode::Hnsw).await;
    let url = schema.url.clone();
    let hnsw = PostgresStore::connect(PostgresConfig {
        pool_size: 1,
        ..support::config(&url, &schema.schema, true, DenseMode::Hnsw)
    })
    .await
    .unwrap();
    let dim = 16;
    let sig = EmbeddingSignature::new("m", dim);
    let mut rng = Rng(3);
    let user = "h";
    let mut vectors = Vec::new();
    for i in 0..300 {
        let v: Vec<f32> = (0..dim).map(|_| rng.float()).collect();
        hnsw.add(
            &memory(user, &format!("note {i} about topic {}", i % 7)),
            &v,
            &sig,
        )
        .await
        .unwrap();
        vectors.push(v);
    }
    let exact = schema.store().await;
    let exact = PostgresStore::connect(PostgresConfig {
        dense_mode: DenseMode::Exact,
        ..exact.config().clone()
    })
    .await
    .unwrap();
    // EXPLAIN=1 prints the search's plan for a reader; the checks run all the same, so
    // setting it never turns the test into one that cannot fail.
    if std::env::var_os("EXPLAIN").is_some() {
        let request = SearchRequest {
            query: "topic 3".into(),
            terms: query_terms("topic 3"),
            embedding: vectors[0].clone(),
            top_k: 10,
            filter: Default::default(),
        };
        let plan = hnsw
            .diagnostics()
            .explain_search(user, &request)
            .await
            .unwrap();
        let _ = writeln!(std::io::stderr(), "{}", plan.join("\n"));
    }
    let mut agree = 0;
    for q in vectors.iter().take(20) {
        let request = SearchRequest {
            query: "topic 3".into(),
            terms: query_terms("topic 3"),
            embedding: q.clone(),
            top_k: 10,
            filter: Default::default(),
        };
        let a = hnsw.search(user, &request).await.unwrap();
        let b = exact.search(user, &request).await.unwrap();
        assert_eq!(a.len(), 10);
        agree += usize::from(a == b);
    }
    assert!(agree >= 18, "HNSW agreed with exact on {agree}/20 queries");

    let client = hnsw.pool().get().await.unwrap();
    let ef: String = client
        .query_one("SHOW hnsw.ef_search", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        ef, "40",
        "the search's SET LOCAL did not leak into the session"
    );
    let scan: String = client
        .query_one("SHOW hnsw.iterative_scan", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(scan, "off");
    client
        .batch_execute(&format!(
            "ANALYZE \"{}\".memories; BEGIN; SET LOCAL enable_sort = off",
            schema.schema
        ))
        .await
        .unwrap();
    let plan: Vec<String> = client
        .query(
            &format!(
                "EXPLAIN SELECT m.seq FROM \"{}\".memories m WHERE m.user_id = $1 \
                 AND NOT m.superseded ORDER BY (m.embedding::halfvec({dim})) \
                 <=> ($2::vector::halfvec({dim})) LIMIT 10",
                schema.schema
            ),
            &[&user, &Vector::from(vectors[0].clone())],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    client.batch_execute("COMMIT").await.unwrap();
    assert!(
        plan.iter()
            .any(|l| l.contains("memories_embedding_hnsw_half")),
        "{plan:#?}"
    );
}

/// With `ann_index = ivfflat` the store builds IVFFlat lists instead of the HNSW graph, at
/// its first search (lists trained on one row would be worthless), and searches them with
/// `ivfflat.probes` set for the search alone. Probing every list reads every vector, so
/// the results equal exact mode's, query for query; probing one of them must miss some of
/// the exact neighbours, which shows the searches went through the lists. The planner is
/// kept off sorting, so it takes the index even on this small table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ivfflat_mode_builds_lists_and_equals_exact_when_probing_them_all() {
    require_db!();
    let schema = TestSchema::new("ivf", true, DenseMode::Hnsw).await;
    let separator = if schema.url.contains('?') { '&' } else { '?' };
    let url = format!("{}{separator}options=-c%20enable_sort%3Doff", schema.url);
    let connect = |lists: Option<u32>, probes: u32| {
        PostgresStore::connect(PostgresConfig {
            url: url.clone(),
            ann_index: AnnIndex::IvfFlat,
            ivfflat: IvfFlat {
                lists,
                probes: Some(probes),
            },
            ..support::config(&schema.url, &schema.schema, true, DenseMode::Hnsw)
        })
    };
    let all = connect(Some(4), 4).await.unwrap();
    let dim = 16;
    let sig = EmbeddingSignature::new("m", dim);
    let mut rng = Rng(5);
    let mut vectors = Vec::new();
    for i in 0..400 {
        let v: Vec<f32> = (0..dim).map(|_| rng.float()).collect();
        // Two users: the lists hold both, a search must keep to its own.
        let user = if i % 4 == 3 { "other" } else { "v" };
        all.add(
            &memory(user, &format!("note {i} about topic {}", i % 7)),
            &v,
            &sig,
        )
        .await
        .unwrap();
        vectors.push(v);
    }
    assert_eq!(
        all.diagnostics().ivfflat_lists().await.unwrap(),
        None,
        "built before the first search"
    );
    let exact = PostgresStore::connect(PostgresConfig {
        dense_mode: DenseMode::Exact,
        ..support::config(&schema.url, &schema.schema, true, DenseMode::Exact)
    })
    .await
    .unwrap();
    let request = |q: &[f32], text: &str| SearchRequest {
        query: text.into(),
        terms: query_terms(text),
        embedding: q.to_vec(),
        top_k: 10,
        filter: Default::default(),
    };
    let (mut same, mut searches) = (0, 0);
    for q in vectors.iter().take(20) {
        for text in ["", "topic 3"] {
            let a = all.search("v", &request(q, text)).await.unwrap();
            let b = exact.search("v", &request(q, text)).await.unwrap();
            assert_eq!(a.len(), 10);
            assert!(a.iter().all(|h| h.memory.user_id == "v"));
            same += usize::from(a == b);
            searches += 1;
        }
    }
    assert_eq!(same, searches, "every list probed: the exact results");
    assert_eq!(all.diagnostics().ivfflat_lists().await.unwrap(), Some(4));
    assert!(all.diagnostics().hnsw_memory().await.unwrap().index_bytes > 0);
    assert_eq!(all.diagnostics().hnsw_built_with().await.unwrap(), None);

    let one = connect(None, 1).await.unwrap();
    let mut missed = 0;
    for q in vectors.iter().skip(100).take(20) {
        let a = one.search("v", &request(q, "")).await.unwrap();
        let b = exact.search("v", &request(q, "")).await.unwrap();
        assert_eq!(a.len(), 10);
        missed += usize::from(a != b);
    }
    assert!(
        missed > 0,
        "one list of four probed found every exact top 10"
    );
    // The index built by the first handle is kept: lists are set when it is built.
    assert_eq!(one.diagnostics().ivfflat_lists().await.unwrap(), Some(4));
    let client = one.pool().get().await.unwrap();
    for setting in ["ivfflat.probes", "ivfflat.iterative_scan"] {
        let value: String = client
            .query_one(&format!("SHOW {setting}"), &[])
            .await
            .unwrap()
            .get(0);
        let default = if setting == "ivfflat.probes" {
            "1"
        } else {
            "off"
        };
        assert_eq!(
            value, default,
            "the search's {setting} leaked into the session"
        );
    }
}

/// Without `lists`, an IVFFlat index takes them from the live rows when it is built: one
/// per thousand, at least one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ivfflat_lists_follow_the_rows_at_build_time() {
    require_db!();
    let schema = TestSchema::new("ivfrows", true, DenseMode::Hnsw).await;
    let store = PostgresStore::connect(PostgresConfig {
        ann_index: AnnIndex::IvfFlat,
        ..support::config(&schema.url, &schema.schema, true, DenseMode::Hnsw)
    })
    .await
    .unwrap();
    let sig = EmbeddingSignature::new("m", 3);
    add_in_order(&store, &["ox", "deploy", "ox deploy"], &sig).await;
    let hits = store
        .search(
            "u",
            &SearchRequest {
                query: "ox".into(),
                terms: query_terms("ox"),
                embedding: vec![1.0, 2.0, 0.5],
                top_k: 3,
                filter: Default::default(),
            },
        )
        .await
        .unwrap();
    assert_eq!(hits.len(), 3);
    assert_eq!(store.diagnostics().ivfflat_lists().await.unwrap(), Some(1));
}

/// An unfiltered HNSW search walks the graph first without pgvector's iterative scan and
/// keeps that walk when it returned every candidate asked for; a user whose memories are
/// too few among the walk's nearest (here: sixty far from the query, among four hundred of
/// another user's near it) gets a second walk with the iterative scan, and scans
/// iteratively from then on. Wherever the dense statement runs (behind the BM25 side on one
/// connection, beside it on a second, alone without query terms), the results are those
/// of a store that always scans iteratively. The planner is kept
/// off sorting, so it takes the index even on this small table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hnsw_walks_without_the_iterative_scan_until_a_walk_comes_back_short() {
    require_db!();
    let schema = TestSchema::new("walk", true, DenseMode::Hnsw).await;
    let separator = if schema.url.contains('?') { '&' } else { '?' };
    let url = format!("{}{separator}options=-c%20enable_sort%3Doff", schema.url);
    let connect = |pool_size, plain_walk| {
        PostgresStore::connect(PostgresConfig {
            url: url.clone(),
            pool_size,
            plain_walk,
            ..support::config(&schema.url, &schema.schema, true, DenseMode::Hnsw)
        })
    };
    let two = connect(2, true).await.unwrap();
    let dim = 8;
    let sig = EmbeddingSignature::new("m", dim);
    let mut rng = Rng(11);
    let mut near = |sign: f32| -> Vec<f32> {
        (0..dim)
            .map(|d| sign * f32::from(d == 0) + 0.3 * rng.float())
            .collect()
    };
    for i in 0..400 {
        let v = near(1.0);
        two.add(&memory("big", &format!("note entry {i}")), &v, &sig)
            .await
            .unwrap();
    }
    for user in ["small", "other"] {
        for i in 0..60 {
            let v = near(-1.0);
            two.add(&memory(user, &format!("note entry {i}")), &v, &sig)
                .await
                .unwrap();
        }
    }
    let one = connect(1, true).await.unwrap();
    let iterative = connect(1, false).await.unwrap();
    let query = near(1.0);
    let request = |text: &str, filter: MemoryFilter| SearchRequest {
        query: text.into(),
        terms: query_terms(text),
        embedding: query.clone(),
        top_k: 10,
        filter,
    };
    // Two terms: side by side on `two`, one connection on `one`; no terms: one statement.
    let terms = request("note entry", MemoryFilter::default());
    let no_terms = request("", MemoryFilter::default());
    assert_eq!(terms.terms.len(), 2);
    assert!(no_terms.terms.is_empty());
    let check = |user: &'static str, requests: Vec<SearchRequest>| {
        let (one, two, iterative) = (&one, &two, &iterative);
        async move {
            for request in &requests {
                let want = iterative.search(user, request).await.unwrap();
                assert_eq!(want.len(), 10, "{user}: {want:#?}");
                let a = two.search(user, request).await.unwrap();
                let b = one.search(user, request).await.unwrap();
                assert_eq!(a, want, "{user}, {:?}: side by side", request.query);
                assert_eq!(b, want, "{user}, {:?}: one connection", request.query);
            }
        }
    };
    let rewalks = || {
        [
            two.diagnostics().hnsw_rewalks(),
            one.diagnostics().hnsw_rewalks(),
            iterative.diagnostics().hnsw_rewalks(),
        ]
    };
    // The first searches scan iteratively: the users' live counts are not known yet.
    for user in ["big", "small", "other"] {
        check(user, vec![terms.clone()]).await;
    }
    assert_eq!(rewalks(), [0, 0, 0]);
    check("big", vec![terms.clone(), no_terms.clone()]).await;
    assert_eq!(rewalks(), [0, 0, 0], "big's walks came back short");
    // small's walk with terms comes back short (on `two` beside the BM25 side, on `one`
    // behind it), other's without terms.
    check("small", vec![terms.clone()]).await;
    assert_eq!(rewalks(), [1, 1, 0], "small's walk was not short");
    check("other", vec![no_terms.clone()]).await;
    assert_eq!(rewalks(), [2, 2, 0], "other's walk was not short");
    // From then on they scan iteratively from the start; big still walks plainly.
    for user in ["small", "other", "big"] {
        check(user, vec![terms.clone(), no_terms.clone()]).await;
    }
    assert_eq!(rewalks(), [2, 2, 0]);
    assert_eq!(two.diagnostics().parallel_searches(), 8);
    assert_eq!(one.diagnostics().parallel_searches(), 0);
    // A filtered search scans iteratively from the start (a threshold of 10 keeps it on
    // the index: 60 memories pass).
    let fresh = PostgresStore::connect(PostgresConfig {
        hnsw_threshold: 10,
        ..two.config().clone()
    })
    .await
    .unwrap();
    let notes = MemoryFilter {
        kinds: vec![MemoryKind::Note],
        ..MemoryFilter::default()
    };
    for _ in 0..2 {
        let found = fresh
            .search("small", &request("note entry", notes.clone()))
            .await
            .unwrap();
        assert_eq!(found.len(), 10);
    }
    assert_eq!(fresh.diagnostics().filtered_exact_searches(), 0);
    assert_eq!(fresh.diagnostics().hnsw_rewalks(), 0);
}

/// Every search's dense statement (on either connection) is planned for its own values,
/// and its BM25 and fused statements generic, planned once, whatever plans the server
/// (here a session) asks for; the settings stay local to the search on every connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_plan_each_statement_as_designed() {
    require_db!();
    let schema = TestSchema::new("custom", true, DenseMode::Exact).await;
    let store = schema.store().await;
    let sig = EmbeddingSignature::new("m", 3);
    for i in 0..30 {
        let text = format!("note {i} about ox {}", ["deploy", "lunch", "api"][i % 3]);
        let v = [1.0, i as f32, 0.5];
        store.add(&memory("u", &text), &v, &sig).await.unwrap();
    }
    let separator = if schema.url.contains('?') { '&' } else { '?' };
    for pool_size in [1, 2] {
        for server in ["force_generic_plan", "force_custom_plan"] {
            for mode in [DenseMode::Exact, DenseMode::Hnsw] {
                let case = format!("pool {pool_size}, {server}, {mode:?}");
                let store = PostgresStore::connect(PostgresConfig {
                    url: format!(
                        "{}{separator}options=-c%20plan_cache_mode%3D{server}",
                        schema.url
                    ),
                    pool_size,
                    ..support::config(&schema.url, &schema.schema, true, mode)
                })
                .await
                .unwrap();
                let request = SearchRequest {
                    query: "ox deploy".into(),
                    terms: query_terms("ox deploy"),
                    embedding: vec![1.0, 2.0, 0.5],
                    top_k: 3,
                    filter: Default::default(),
                };
                for _ in 0..7 {
                    assert_eq!(store.search("u", &request).await.unwrap().len(), 3);
                }
                assert_eq!(
                    store.diagnostics().parallel_searches(),
                    if pool_size == 1 { 0 } else { 7 },
                    "{case}: searches run side by side"
                );
                // Every connection the searches used, held at once.
                let mut clients = Vec::new();
                for _ in 0..pool_size {
                    clients.push(store.pool().get().await.unwrap());
                }
                let plans = |pattern: &'static str, except: &'static str| {
                    let clients = &clients;
                    async move {
                        let mut sum = (0, 0);
                        for client in clients {
                            for row in client
                                .query(
                                    "SELECT generic_plans, custom_plans \
                                     FROM pg_prepared_statements \
                                     WHERE statement LIKE $1 AND statement NOT LIKE $2",
                                    &[&pattern, &except],
                                )
                                .await
                                .unwrap()
                            {
                                sum.0 += row.get::<_, i64>(0);
                                sum.1 += row.get::<_, i64>(1);
                            }
                        }
                        sum
                    }
                };
                // Generic: it reads both sides' ranks (see `search::transaction`).
                assert_eq!(
                    plans("WITH %\"fused\"%", "").await,
                    (7, 0),
                    "{case}: the fused statement's (generic, custom) plans"
                );
                // Its own statement on either connection, planned for its values.
                assert_eq!(
                    plans("WITH %\"dense\"%", "%\"fused\"%").await,
                    (0, 7),
                    "{case}: the dense statement's (generic, custom) plans"
                );
                assert_eq!(
                    plans("WITH %\"l_idf\"%", "").await,
                    (7, 0),
                    "{case}: the BM25 statement's (generic, custom) plans"
                );
                for client in &clients {
                    let setting: String = client
                        .query_one("SHOW plan_cache_mode", &[])
                        .await
                        .unwrap()
                        .get(0);
                    assert_eq!(setting, server, "{case}: the setting leaked");
                    let ef: String = client
                        .query_one("SHOW hnsw.ef_search", &[])
                        .await
                        .unwrap()
                        .get(0);
                    assert_eq!(ef, "40", "{case}: hnsw.ef_search leaked");
                }
                drop(clients);
                // EXPLAIN shows each statement planned as the search plans it: the BM25
                // and fused ones generic (the user is a parameter in their plans), the
                // dense one for its values (the user is the literal).
                let lines = store
                    .diagnostics()
                    .explain_search("u", &request)
                    .await
                    .unwrap();
                let plans: Vec<String> = lines
                    .split_inclusive(|l| l.starts_with("Execution Time"))
                    .map(|p| p.join("\n"))
                    .collect();
                assert_eq!(plans.len(), 3, "{case}: {lines:#?}");
                let user = "'u'::text";
                assert!(!plans[0].contains(user), "{case}: BM25 plan {}", plans[0]);
                assert!(plans[1].contains(user), "{case}: dense plan {}", plans[1]);
                assert!(!plans[2].contains(user), "{case}: fused plan {}", plans[2]);
            }
        }
    }
}

/// A store whose HNSW index predates the `halfvec` one gets it replaced on its first HNSW
/// search: an old `vector` index is rebuilt as `halfvec` and dropped, an old `halfvec`
/// one (above 2,000 dimensions) only renamed; searches use the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_hnsw_index_is_replaced() {
    require_db!();
    for (case, opclass) in [
        ("vector", "vector_cosine_ops"),
        ("halfvec", "halfvec_cosine_ops"),
    ] {
        let schema = TestSchema::new(&format!("legacy_{case}"), true, DenseMode::Exact).await;
        let store = schema.store().await;
        let dim = 8;
        add_random_notes(&store, dim, 5).await;
        let client = store.pool().get().await.unwrap();
        client
            .batch_execute(&format!(
                "CREATE INDEX memories_embedding_hnsw ON \"{s}\".memories USING hnsw \
                 ((embedding::{case}({dim})) {opclass}) WHERE NOT superseded",
                s = schema.schema
            ))
            .await
            .unwrap();
        let hnsw = PostgresStore::connect(PostgresConfig {
            dense_mode: DenseMode::Hnsw,
            ..store.config().clone()
        })
        .await
        .unwrap();
        let request = SearchRequest {
            query: "note".into(),
            terms: query_terms("note"),
            embedding: vec![0.5; dim],
            top_k: 5,
            filter: Default::default(),
        };
        assert_eq!(hnsw.search("u", &request).await.unwrap().len(), 5);
        let indexes: Vec<(String, String)> = client
            .query(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1 \
                 AND indexname LIKE 'memories_embedding_hnsw%' ORDER BY indexname",
                &[&schema.schema],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        assert_eq!(indexes.len(), 1, "{case}: {indexes:#?}");
        assert_eq!(indexes[0].0, "memories_embedding_hnsw_half", "{case}");
        assert!(
            indexes[0].1.contains("halfvec_cosine_ops"),
            "{case}: {indexes:#?}"
        );
    }
}

/// The HNSW index is built with the handle's `hnsw_build`, and an index built with other
/// settings is kept (a rebuild is the operator's call), as `hnsw_built_with` reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hnsw_index_is_built_with_its_settings_and_kept_under_others() {
    require_db!();
    let schema = TestSchema::new("hnsw_build", true, DenseMode::Exact).await;
    let exact = schema.store().await;
    let dim = 8;
    add_random_notes(&exact, dim, 9).await;
    assert_eq!(exact.diagnostics().hnsw_built_with().await.unwrap(), None);
    let before = exact.diagnostics().hnsw_memory().await.unwrap();
    assert_eq!(before.index_bytes, 0);
    // pg_settings counts shared_buffers in 8 kB blocks.
    let blocks: i64 = exact
        .pool()
        .get()
        .await
        .unwrap()
        .query_one(
            "SELECT setting::int8 FROM pg_settings WHERE name = 'shared_buffers'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(before.shared_buffers_bytes, blocks as u64 * 8192);
    let request = SearchRequest {
        query: "note".into(),
        terms: query_terms("note"),
        embedding: vec![0.5; dim],
        top_k: 5,
        filter: Default::default(),
    };
    let small = HnswBuild {
        m: 8,
        ef_construction: 32,
    };
    let hnsw = |build: HnswBuild| {
        PostgresStore::connect(PostgresConfig {
            dense_mode: DenseMode::Hnsw,
            hnsw_build: build,
            ..exact.config().clone()
        })
    };
    let first = hnsw(small).await.unwrap();
    assert_eq!(first.search("u", &request).await.unwrap().len(), 5);
    assert_eq!(
        first.diagnostics().hnsw_built_with().await.unwrap(),
        Some(small)
    );
    let built = first.diagnostics().hnsw_memory().await.unwrap();
    assert!(built.index_bytes >= 8192, "{built:?}");
    assert!(built.fits(), "{built:?}");
    let other = hnsw(HnswBuild::default()).await.unwrap();
    assert_eq!(
        other.search("u", &request).await.unwrap(),
        first.search("u", &request).await.unwrap()
    );
    assert_eq!(
        other.diagnostics().hnsw_built_with().await.unwrap(),
        Some(small),
        "the index built with other settings is kept"
    );
}

/// Stores of different schemas opening at once on a database without pgvector enabled:
/// each creates the extension if it is missing, and none fails on the others' creation
/// (the migration lock is per schema; the extension is per database). Seen first on a
/// fresh container, where the conformance suite's scenarios opened in parallel.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stores_opening_at_once_on_a_fresh_database_all_enable_pgvector() {
    require_db!();
    let url = support::database().await.unwrap();
    let admin = PostgresStore::connect(support::config(
        &url,
        &support::unique_schema("fresh"),
        true,
        DenseMode::Exact,
    ))
    .await
    .unwrap();
    let client = admin.pool().get().await.unwrap();
    let superuser: bool = client
        .query_one(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    if !superuser {
        cortex_conformance::skip_or_fail("the test database URL is not a superuser's");
        return;
    }
    // DROP DATABASE waits for a checkpoint: no statement timeout for these.
    client
        .batch_execute("SET statement_timeout = 0")
        .await
        .unwrap();
    let database = format!("cortex_t_fresh_{}", std::process::id());
    for statement in [
        format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"),
        format!("CREATE DATABASE {database} TEMPLATE template0"),
    ] {
        client.batch_execute(&statement).await.unwrap();
    }
    let (base, query) = url.split_once('?').unwrap_or((&url, ""));
    let authority_end = base
        .rfind('/')
        .filter(|&i| i > base.find("://").unwrap() + 2);
    let fresh_url = format!(
        "{}/{database}{}{query}",
        &base[..authority_end.unwrap_or(base.len())],
        if query.is_empty() { "" } else { "?" }
    );
    let mut opening = tokio::task::JoinSet::new();
    for i in 0..6 {
        let config = support::config(
            &fresh_url,
            &format!("cortex_t_fresh_{i}"),
            true,
            DenseMode::Exact,
        );
        opening.spawn(async move { PostgresStore::connect(config).await.map(|_| ()) });
    }
    let opened = opening.join_all().await;
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
        .await
        .unwrap();
    for (i, result) in opened.iter().enumerate() {
        assert!(result.is_ok(), "store {i}: {result:?}");
    }
}

/// A role that may not create the extension in a database without it gets an error that
/// says what to do. Needs a superuser URL to set the stage: skips without one (fails under CI).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_extension_privilege_is_explained() {
    require_db!();
    let url = support::database().await.unwrap();
    let admin = PostgresStore::connect(support::config(
        &url,
        &support::unique_schema("ext"),
        true,
        DenseMode::Exact,
    ))
    .await
    .unwrap();
    let client = admin.pool().get().await.unwrap();
    let superuser: bool = client
        .query_one(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    if !superuser {
        cortex_conformance::skip_or_fail("the test database URL is not a superuser's");
        return;
    }
    // DROP DATABASE waits for a checkpoint, which on a machine busy with the whole suite
    // took over 30 s (the pool's statement timeout) once.
    client
        .batch_execute("SET statement_timeout = 0")
        .await
        .unwrap();
    let tag = format!("cortex_t_noext_{}", std::process::id());
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS {tag} WITH (FORCE)"))
        .await
        .unwrap();
    client
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {tag}; CREATE ROLE {tag} LOGIN PASSWORD 'pw'"
        ))
        .await
        .unwrap();
    client
        .batch_execute(&format!(
            "CREATE DATABASE {tag} OWNER {tag} TEMPLATE template0"
        ))
        .await
        .unwrap();
    let config: tokio_postgres::Config = url.split('?').next().unwrap().parse().unwrap();
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        #[cfg(unix)]
        tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let role_url = format!("postgres://{tag}:pw@{host}:{port}/{tag}?sslmode=disable");
    let result = PostgresStore::connect(PostgresConfig::new(role_url)).await;
    client
        .batch_execute(&format!("DROP DATABASE IF EXISTS {tag} WITH (FORCE)"))
        .await
        .unwrap();
    client
        .batch_execute(&format!("DROP ROLE IF EXISTS {tag}"))
        .await
        .unwrap();
    match result {
        Err(StoreError::Schema(message)) => {
            assert!(message.contains("superuser must run"), "{message}");
            assert!(message.contains("CREATE EXTENSION vector"), "{message}");
        }
        other => panic!("expected a schema error, got {other:?}"),
    }
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
            admin.config().schema_name()
        ))
        .await
        .unwrap();
}

/// `sslmode=require` encrypts (the local server offers TLS with a self-signed
/// certificate, which require does not verify); `disable` does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_selects_tls() {
    require_db!();
    let url = support::database().await.unwrap();
    let schema = TestSchema::new("tls", true, DenseMode::Exact).await;
    let plain = {
        let base = url.split('?').next().unwrap();
        format!("{base}?sslmode=disable")
    };
    let store = PostgresStore::connect(support::config(
        &plain,
        &schema.schema,
        true,
        DenseMode::Exact,
    ))
    .await
    .unwrap();
    let client = store.pool().get().await.unwrap();
    let offers_tls: String = client.query_one("SHOW ssl", &[]).await.unwrap().get(0);
    assert!(!ssl_of(&client).await);
    if offers_tls != "on" {
        cortex_conformance::skip_or_fail(
            "the TLS half: the server does not offer TLS (ssl = off; scripts/install-pgvector.sh \
             turns it on)",
        );
        return;
    }
    let require = format!("{}?sslmode=require", url.split('?').next().unwrap());
    let store = PostgresStore::connect(support::config(
        &require,
        &schema.schema,
        true,
        DenseMode::Exact,
    ))
    .await
    .unwrap();
    let client = store.pool().get().await.unwrap();
    assert!(ssl_of(&client).await);
}

async fn ssl_of(client: &deadpool_postgres::Object) -> bool {
    client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

/// A store whose postings another analyser wrote (here: every word kept, unstemmed, and
/// wrong lengths) has its BM25 side re-derived on open, with content and vectors
/// untouched: the pushdown then returns what it returned before, and the statistics are
/// exact again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postings_of_another_analyser_are_rederived_on_open() {
    require_db!();
    let schema = TestSchema::new("reanalyze", true, DenseMode::Exact).await;
    let store = schema.store().await;
    let sig = EmbeddingSignature::new("m", 3);
    let texts = [
        "we deployed the api on friday",
        "the api gateway was timing out",
        "deploying on fridays is frozen",
        "lunch with alice on friday",
    ];
    add_in_order(&store, &texts, &sig).await;
    let request = SearchRequest {
        query: "the fridays deploy".into(),
        terms: query_terms("the fridays deploy"),
        embedding: vec![1.0, 1.0, 0.5],
        top_k: 4,
        filter: Default::default(),
    };
    let before = store.search("u", &request).await.unwrap();
    let s = &schema.schema;
    let client = store.pool().get().await.unwrap();
    let snapshot = format!(
        "SELECT string_agg(term || ':' || seq || ':' || tf || ':' || doc_len, ',' ORDER BY term, seq)
         FROM \"{s}\".postings"
    );
    let postings: String = client.query_one(&snapshot, &[]).await.unwrap().get(0);
    assert!(
        !postings.contains("the:"),
        "function words are not indexed: {postings}"
    );
    let total: i64 = client
        .query_one(&format!("SELECT total_len FROM \"{s}\".users"), &[])
        .await
        .unwrap()
        .get(0);
    // Postings as the plain split wrote them, and an older analyser recorded.
    client
        .batch_execute(&format!(
            "TRUNCATE \"{s}\".postings, \"{s}\".terms;
             INSERT INTO \"{s}\".postings (user_id, term, seq, tf, doc_len)
             SELECT user_id, w, seq, 1, 99 FROM \"{s}\".memories,
                    unnest(string_to_array(content, ' ')) AS w GROUP BY 1, 2, 3;
             UPDATE \"{s}\".memories SET doc_len = 99;
             UPDATE \"{s}\".users SET total_len = 12345;
             UPDATE \"{s}\".meta SET value = 'plain/0' WHERE key = 'analyzer';"
        ))
        .await
        .unwrap();
    assert_ne!(store.search("u", &request).await.unwrap(), before);
    drop(client);
    drop(store);

    let store = schema.store().await;
    let client = store.pool().get().await.unwrap();
    assert_eq!(store.search("u", &request).await.unwrap(), before);
    let rederived: String = client.query_one(&snapshot, &[]).await.unwrap().get(0);
    assert_eq!(rederived, postings);
    let again: i64 = client
        .query_one(&format!("SELECT total_len FROM \"{s}\".users"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(again, total);
    let df: i64 = client
        .query_one(
            &format!("SELECT df FROM \"{s}\".terms WHERE user_id = 'u' AND term = 'friday'"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(df, 3, "friday, fridays and friday");
    let analyzer: String = client
        .query_one(
            &format!("SELECT value FROM \"{s}\".meta WHERE key = 'analyzer'"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(analyzer, cortex_core::tokenizer::ANALYZER);
}
