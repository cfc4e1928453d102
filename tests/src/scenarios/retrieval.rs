//! Hybrid recall: what it finds, that it equals the contract's reference, and that the
//! cached index stays exactly current.

use std::collections::HashMap;
use std::sync::Arc;

use cortex_core::embedding::normalized;
use cortex_core::{
    engine::CortexMemory, hybrid::ScoredMemory, memory::MemoryKind, store::MemoryStore,
};
use cortex_providers::FakeProvider;

use crate::reference::hybrid_ranking;
use crate::support::{TableProvider, engine, remember_all, user};
use crate::{StoreFactory, TestStorage};

/// Sentences with overlapping vocabulary, so dense and BM25 disagree in places.
pub const CORPUS: &[&str] = &[
    "The deploy pipeline runs every night at 02:00 UTC",
    "Alice prefers tea over coffee in the morning",
    "Bob's birthday is on the 14th of March",
    "The staging database lives on host db-staging-3",
    "Remember to rotate the API keys every 90 days",
    "Alice moved to the Berlin office in 2023",
    "The coffee machine on floor 3 is broken again",
    "Deploy freezes start two weeks before the holidays",
    "Bob and Alice share the on-call rotation in March",
    "The night build failed because of a flaky test",
    "Project Zephyr ships its first beta in April",
    "Tea, coffee and water are free in the Berlin office",
    "The API gateway times out after 30 seconds",
    "Alice's manager is Carol from the platform team",
    "Carol wants weekly status reports every Friday",
    "The flaky test lives in the payments service",
    "Use the staging database for load tests only",
    "Zephyr's beta needs the new API gateway",
    "Bob is allergic to peanuts",
    "The holidays start on the 20th of December",
    "Weekly reports go to the platform team channel",
    "On-call rotation swaps happen on Mondays",
    "The payments service owns the refund API",
    "Morning standup is at 09:30 in Berlin time",
];

pub const QUERIES: &[&str] = &[
    "when does the deploy run",
    "what does Alice drink",
    "Bob birthday March",
    "staging database host",
    "flaky test payments",
    "Zephyr beta API gateway",
    "Berlin office coffee tea",
    "weekly status reports platform team",
    "holidays",
    "nothing matches xylophone",
];

/// A memory that shares one rare token with the query but whose vector sits far from it is
/// ranked low by dense search alone, and BM25 lifts it into the top results.
pub async fn rare_exact_token_is_recalled(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let query = "what is blocking zq7731";
    let target = "zq7731 waits on vendor signoff";
    let dim = 8;
    let mut table = HashMap::new();
    table.insert(
        query.to_owned(),
        vec![1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    );
    table.insert(
        target.to_owned(),
        vec![0.05, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
    );
    // Ten paraphrase-like neighbours: close to the query, sharing none of its words.
    let neighbours: Vec<String> = (0..10)
        .map(|i| format!("release stuck on review step {i}"))
        .collect();
    for (i, text) in neighbours.iter().enumerate() {
        table.insert(
            text.clone(),
            vec![1.0, 0.1 * (i as f32 + 1.0), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        );
    }
    let provider = Arc::new(TableProvider {
        table,
        fallback: FakeProvider::new(dim),
    });
    let engine = CortexMemory::new(store, provider);
    let u = user("rare-token");
    let mut texts: Vec<&str> = neighbours.iter().map(String::as_str).collect();
    texts.insert(4, target);
    remember_all(&engine, &u, &texts).await;

    let top_k = 3;
    let hits = engine.recall(&u, query, top_k).await.unwrap();
    let hit = hits
        .iter()
        .find(|h| h.memory.content == target)
        .unwrap_or_else(|| panic!("{target:?} not in the top {top_k}: {hits:#?}"));
    let dense_rank = hit.dense_rank.expect("within the dense pool");
    assert!(
        dense_rank > top_k as u32,
        "dense alone ranks it {dense_rank}, below the top {top_k}"
    );
    assert_eq!(hit.lexical_rank, Some(1));
    assert_eq!(hits[0].memory.content, target, "hybrid ranks it first");
}

/// Recall equals a brute-force ranking computed from the contract, for several queries and
/// depths, and stays equal when computed again from a fresh index.
pub async fn recall_equals_brute_force_reference(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine_a, fake) = engine(store.clone());
    let u = user("reference");
    let stored = remember_all(&engine_a, &u, CORPUS).await;
    // Forget two, so the reference also proves deleted memories leave the statistics.
    engine_a
        .forget(&u, &stored[3].id.to_string())
        .await
        .unwrap();
    engine_a
        .forget(&u, &stored[11].id.to_string())
        .await
        .unwrap();
    let docs: Vec<_> = stored
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 11)
        .map(|(_, m)| (m.clone(), fake.vector(&m.content)))
        .collect();
    let (engine_b, _) = engine(store.clone());
    for query in QUERIES {
        for top_k in [1, 3, 5, 10, 30] {
            let expected = hybrid_ranking(&docs, query, &fake.vector(query), top_k);
            let got: Vec<_> = ids(&engine_a.recall(&u, query, top_k).await.unwrap());
            assert_eq!(got, expected, "query {query:?} top_k {top_k}");
            let again = ids(&engine_b.recall(&u, query, top_k).await.unwrap());
            assert_eq!(
                again, expected,
                "fresh index, query {query:?} top_k {top_k}"
            );
        }
    }
}

fn ids(hits: &[ScoredMemory]) -> Vec<uuid::Uuid> {
    hits.iter().map(|h| h.memory.id).collect()
}

/// Two handles, two engines, same data: identical results down to the scores and ranks.
pub async fn recall_is_deterministic_across_handles(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let u = user("deterministic");
    let (first_handle, second_handle) = two_handles(&*storage).await;
    let (first, _) = engine(first_handle);
    remember_all(&first, &u, CORPUS).await;
    let (second, _) = engine(second_handle);
    for query in QUERIES {
        let a = first.recall(&u, query, 7).await.unwrap();
        let b = second.recall(&u, query, 7).await.unwrap();
        assert_eq!(a, b, "query {query:?}");
        for pair in a.windows(2) {
            assert!(pair[0].score >= pair[1].score, "ranked by score");
            if pair[0].score == pair[1].score {
                assert!(pair[0].memory.seq < pair[1].memory.seq, "ties by insertion");
            }
        }
    }
}

pub async fn recall_on_empty_store_is_empty(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let (engine, fake) = engine(storage.connect().await);
    let u = user("empty");
    assert!(
        engine
            .recall(&u, "anything at all", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(fake.embed_calls(), 1);
    // A store with another user's memories is still empty for this one.
    remember_all(&engine, &user("someone-else"), &["not yours"]).await;
    assert!(engine.recall(&u, "not yours", 10).await.unwrap().is_empty());
}

/// This engine's own memorize and forget update its cached index in place, and the result
/// equals a fresh build from the store.
pub async fn cached_index_follows_own_writes(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine_a, _) = engine(store.clone());
    let u = user("cache-own");
    let stored = remember_all(&engine_a, &u, &CORPUS[..12]).await;
    engine_a.recall(&u, "warm the cache", 5).await.unwrap();
    let before = store.generation(&u).await.unwrap();
    let added = remember_all(&engine_a, &u, &["brand new fact about quokkas"])
        .await
        .remove(0);
    engine_a
        .forget(&u, &stored[0].id.to_string())
        .await
        .unwrap();
    assert!(store.generation(&u).await.unwrap() > before);
    let hits = engine_a.recall(&u, "quokkas", 3).await.unwrap();
    assert_eq!(hits[0].memory.id, added.id);
    let deploy = engine_a
        .recall(&u, "deploy pipeline night", 12)
        .await
        .unwrap();
    assert!(
        deploy.iter().all(|h| h.memory.id != stored[0].id),
        "forgotten memory gone"
    );
    let (fresh, _) = engine(store.clone());
    for query in QUERIES {
        assert_eq!(
            engine_a.recall(&u, query, 10).await.unwrap(),
            fresh.recall(&u, query, 10).await.unwrap(),
            "in-place index equals a rebuilt one for {query:?}"
        );
    }
}

/// Two handles on one storage: separate connections (other processes, in effect) when the
/// store is `shared`; otherwise two engines in this process share one handle.
async fn two_handles(storage: &dyn TestStorage) -> (Arc<dyn MemoryStore>, Arc<dyn MemoryStore>) {
    let first = storage.connect().await;
    let second = match first.capabilities().shared {
        true => storage.connect().await,
        false => first.clone(),
    };
    (first, second)
}

/// A write through another handle (another process, in effect) is seen by the next recall
/// of an engine whose index is cached.
pub async fn cached_index_sees_other_handles_writes(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let u = user("cache-other");
    let (reader_handle, writer_handle) = two_handles(&*storage).await;
    let (reader, _) = engine(reader_handle);
    let (writer, _) = engine(writer_handle);
    remember_all(&writer, &u, &CORPUS[..6]).await;
    assert!(
        reader
            .recall(&u, "okapi", 5)
            .await
            .unwrap()
            .iter()
            .all(|h| !h.memory.content.contains("okapi"))
    );
    let m = writer
        .memorize(
            &u,
            "The okapi is related to the giraffe",
            MemoryKind::Fact,
            &[],
            &Default::default(),
        )
        .await
        .unwrap()
        .memory;
    let hits = reader.recall(&u, "okapi", 5).await.unwrap();
    assert_eq!(
        hits[0].memory.id, m.id,
        "the reader sees the other handle's write"
    );
    writer.forget(&u, &m.id.to_string()).await.unwrap();
    let hits = reader.recall(&u, "okapi", 5).await.unwrap();
    assert!(hits.iter().all(|h| h.memory.id != m.id), "and its delete");
}

/// memorize is exactly one embed call and no generate call; recall likewise.
pub async fn one_embed_per_memorize_and_recall(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let (engine, fake) = engine(storage.connect().await);
    let u = user("calls");
    engine
        .memorize(
            &u,
            "count my calls",
            MemoryKind::Note,
            &["x".into()],
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            fake.embed_calls(),
            fake.embedded_texts(),
            fake.generate_calls()
        ),
        (1, 1, 0)
    );
    engine.recall(&u, "calls", 5).await.unwrap();
    assert_eq!(
        (
            fake.embed_calls(),
            fake.embedded_texts(),
            fake.generate_calls()
        ),
        (2, 2, 0)
    );
    engine.list_memories(&u, 5).await.unwrap();
    engine.count(&u).await.unwrap();
    assert_eq!(
        fake.embed_calls(),
        2,
        "list and count make no provider call"
    );
}

/// CJK, emoji, right-to-left text, combining marks and SQL-looking text are stored and
/// returned byte for byte, and CJK tokens are recallable.
pub async fn unicode_and_sql_text_verbatim(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, _) = engine(store.clone());
    let u = user("unicode");
    let texts = [
        "東京タワー は 赤い",
        "Party time 🎉🎈 with 👩‍👩‍👧",
        "שלום עולם — مرحبا بالعالم",
        "e\u{301}clair vs éclair",
        "'); DROP TABLE memories; -- %_ \\ \" `",
        "line one\nline two\ttabbed\r\n",
    ];
    let stored = remember_all(&engine, &u, &texts).await;
    for (m, text) in stored.iter().zip(texts) {
        assert_eq!(store.get(&u, &m.id).await.unwrap().unwrap().content, text);
    }
    let hits = engine.recall(&u, "東京タワー", 1).await.unwrap();
    assert_eq!(hits[0].memory.content, texts[0]);
    let hits = engine.recall(&u, "DROP TABLE memories", 1).await.unwrap();
    assert_eq!(hits[0].memory.content, texts[4]);
    assert_eq!(engine.count(&u).await.unwrap(), texts.len() as u64);
    // The tags path too.
    let m = engine
        .memorize(
            &u,
            "tagged",
            MemoryKind::Note,
            &["日本".into(), "'; --".into()],
            &Default::default(),
        )
        .await
        .unwrap()
        .memory;
    assert_eq!(
        store.get(&u, &m.id).await.unwrap().unwrap().tags,
        ["日本", "'; --"]
    );
}

/// With nothing changed, recall reads one change counter and no rows; this engine's own
/// writes keep the cache without a rebuild; another handle's write costs one rebuild. With
/// every layer off, memorize is one write and recall reads only the recall methods.
pub async fn unchanged_store_is_not_reread(factory: &dyn StoreFactory) {
    use crate::counting::{CountingStore, RECALL_METHODS};

    let storage = factory.create().await;
    let counting = Arc::new(CountingStore::new(storage.connect().await));
    let (engine, _) = engine(counting.clone());
    let u = user("no-reread");
    remember_all(&engine, &u, &CORPUS[..8]).await;
    let pushdown = counting.capabilities().search;
    counting.reset();
    for query in QUERIES {
        engine.recall(&u, query, 5).await.unwrap();
    }
    if pushdown {
        assert_eq!(counting.calls("search"), QUERIES.len() as u64);
        // The fused head's own vectors, for the current-over-stale stage.
        assert_eq!(counting.calls("embeddings"), QUERIES.len() as u64);
        assert_eq!(counting.calls("build_index"), 0);
    } else {
        assert_eq!(
            counting.calls("build_index"),
            1,
            "built once, then served from cache"
        );
        assert_eq!(counting.calls("generation"), QUERIES.len() as u64);
    }
    let calls = counting.snapshot();
    let touched: Vec<_> = calls
        .keys()
        .filter(|k| !RECALL_METHODS.contains(k))
        .collect();
    assert!(touched.is_empty(), "recall touched {touched:?}");
    let per_recall: u64 = calls.values().sum::<u64>() / QUERIES.len() as u64;
    let most = if pushdown { 3 } else { 2 };
    assert!(per_recall <= most, "store calls per warm recall: {calls:?}");

    counting.reset();
    remember_all(&engine, &u, &["one more memory about otters"]).await;
    let hits = engine.recall(&u, "otters", 1).await.unwrap();
    assert_eq!(hits[0].memory.content, "one more memory about otters");
    assert_eq!(
        counting.calls("build_index"),
        0,
        "own write applied in place"
    );
    let touched: Vec<_> = counting
        .snapshot()
        .into_keys()
        .filter(|k| *k != "add" && !RECALL_METHODS.contains(k))
        .collect();
    assert!(touched.is_empty(), "memorize touched {touched:?}");

    let (other, _) = crate::support::engine(storage.connect().await);
    remember_all(&other, &u, &["written elsewhere about badgers"]).await;
    counting.reset();
    let hits = engine.recall(&u, "badgers", 1).await.unwrap();
    assert_eq!(hits[0].memory.content, "written elsewhere about badgers");
    if !pushdown {
        assert_eq!(
            counting.calls("build_index"),
            1,
            "a foreign write costs one rebuild"
        );
    }
}

/// A cache bounded below one user's index: every recall of another user evicts the last
/// one's, and recall still returns what an unbounded engine returns. Off the in-process
/// path (a pushdown) the cache is not used and holds nothing.
pub async fn bounded_cache_evicts_and_recall_stays_right(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let fake = Arc::new(FakeProvider::new(crate::support::DIM));
    let config = cortex_core::engine::EngineConfig {
        cache_max_bytes: Some(1),
        ..cortex_core::engine::EngineConfig::default()
    };
    let bounded = CortexMemory::with_config(store.clone(), fake.clone(), config);
    let (unbounded, _) = engine(store.clone());
    let users: Vec<String> = (0..3).map(|n| user(&format!("cache{n}"))).collect();
    for (n, u) in users.iter().enumerate() {
        let texts = [
            format!("user {n} likes green tea"),
            format!("user {n} rides a red bike"),
        ];
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        remember_all(&bounded, u, &texts).await;
    }
    for _round in 0..2 {
        for u in &users {
            let got = bounded.recall(u, "green tea bike", 10).await.unwrap();
            let want = unbounded.recall(u, "green tea bike", 10).await.unwrap();
            assert!(!got.is_empty(), "{u}");
            assert_eq!(got, want, "{u}");
        }
    }
    let stats = bounded.cache_stats();
    if store.capabilities().search {
        assert_eq!(stats.users, 0, "a pushdown uses no cache: {stats:?}");
        return;
    }
    // Each of the six recalls found the previous user's index in its way.
    assert_eq!(stats.misses, 6, "{stats:?}");
    assert!(stats.evictions >= 5, "{stats:?}");
    assert_eq!(
        stats.users, 1,
        "only the last user's index is held: {stats:?}"
    );
}

/// Vectors built where an 8-bit bound is widest or a tie is closest: random rows, exact
/// duplicates, copies one ulp apart, permutations (equal scores from different vectors),
/// extreme input norms, one dominant component with tiny others, all components equal;
/// and queries that equal a row, sit between near-ties or have one dominant component.
fn adversarial_vectors(d: usize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % 2_000_001) as f32 / 1_000_000.0 - 1.0
    };
    let mut rows: Vec<Vec<f32>> = (0..60).map(|_| (0..d).map(|_| next()).collect()).collect();
    let base: Vec<f32> = (0..d).map(|_| next()).collect();
    for i in 0..30 {
        let mut v = base.clone();
        match i % 6 {
            0 => {}
            1 => v[i % d] = v[i % d].next_up(),
            2 => v[(i + 1) % d] = v[(i + 1) % d].next_down(),
            3 => v.rotate_left(i % d),
            4 => v.iter_mut().for_each(|x| *x *= 1e30),
            _ => v.iter_mut().for_each(|x| *x *= 1e-30),
        }
        rows.push(v);
    }
    for i in 0..d {
        let mut spike: Vec<f32> = (0..d).map(|_| next() * 1e-6).collect();
        spike[i] = 1.0;
        rows.push(spike);
    }
    rows.push(vec![1.0; d]);
    let mut between = base.clone();
    between[0] = between[0].next_up();
    let mut dominant: Vec<f32> = (0..d).map(|_| next() * 1e-3).collect();
    dominant[d / 2] = 1.0;
    let mut queries = vec![base, rows[7].clone(), between, dominant, vec![1.0; d]];
    queries.extend((0..5).map(|_| (0..d).map(|_| next()).collect::<Vec<f32>>()));
    (rows, queries)
}

/// The dense list of a store's index (an 8-bit scan that scores in full only the rows
/// that could reach the pool, `core/src/index/compact.rs`) is the exhaustive scan's on
/// vectors built to defeat it: ids, order, and scores to the bit of each row's cosine
/// (unit vectors, f64 sum, rounded to f32), ties by insertion.
pub async fn dense_list_is_exact_on_adversarial_vectors(factory: &dyn StoreFactory) {
    const D: usize = 16;
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (rows, queries) = adversarial_vectors(D);
    let texts: Vec<String> = (0..rows.len())
        .map(|i| format!("adversarial row {i}"))
        .collect();
    let provider = Arc::new(TableProvider {
        table: texts.iter().cloned().zip(rows.iter().cloned()).collect(),
        fallback: FakeProvider::new(D),
    });
    let engine = CortexMemory::new(store.clone(), provider);
    let u = user("adversarial");
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let stored = remember_all(&engine, &u, &refs).await;
    let built = store.build_index(&u, D).await.unwrap();
    let index = &built.index;
    assert_eq!(index.len(), rows.len());
    let unit_dot = |a: &[f32], b: &[f32]| -> f32 {
        let (a, b) = (normalized(a), normalized(b));
        a.iter()
            .zip(&b)
            .map(|(x, y)| f64::from(*x) * f64::from(*y))
            .sum::<f64>() as f32
    };
    for (q, query) in queries.iter().enumerate() {
        for pool in [1, 2, 5, 40, rows.len()] {
            let mut expected: Vec<(uuid::Uuid, u32, i64)> = stored
                .iter()
                .zip(&rows)
                .map(|(m, v)| (m.id, unit_dot(v, query).to_bits(), m.seq))
                .collect();
            expected.sort_by(|a, b| {
                f32::from_bits(b.1)
                    .total_cmp(&f32::from_bits(a.1))
                    .then(a.2.cmp(&b.2))
            });
            expected.truncate(pool);
            let got: Vec<(uuid::Uuid, u32, i64)> = index
                .dense_search(query, pool)
                .unwrap()
                .iter()
                .map(|h| {
                    let m = index.memory(h.row);
                    (m.id, (h.score as f32).to_bits(), m.seq)
                })
                .collect();
            assert_eq!(got, expected, "query {q}, pool {pool}");
        }
    }
}

/// Of two facts on one topic (their own vectors close), the later-written is recalled
/// first, at every limit, although the earlier one reads closer to the question; a
/// question that asks for the earlier value gets fusion's order; a memory on another topic
/// never moves, and neither do notes.
pub async fn the_current_memory_outranks_the_stale_one(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let dim = 8;
    let old = "the test command is make test";
    let new = "the suite now runs under cargo nextest";
    let other = "the staging port is 8443";
    // Neither question shares a word with the two, so the dense list alone orders them.
    let query = "how is it invoked";
    let past = "how was it invoked originally";
    let unit = |v: [f32; 8]| v.to_vec();
    let mut table = HashMap::new();
    table.insert(
        query.to_owned(),
        unit([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    );
    table.insert(
        past.to_owned(),
        unit([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    );
    // old and new: cosine 0.98 with each other; old a little closer to the question.
    table.insert(
        old.to_owned(),
        unit([0.9, 0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    );
    table.insert(
        new.to_owned(),
        unit([0.8, 0.4, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0]),
    );
    table.insert(
        other.to_owned(),
        unit([0.6, 0.0, 0.0, 0.8, 0.0, 0.0, 0.0, 0.0]),
    );
    let provider = Arc::new(TableProvider {
        table,
        fallback: FakeProvider::new(dim),
    });
    let engine = CortexMemory::new(store, provider);
    let u = user("current");
    for text in [old, other, new] {
        engine
            .memorize(&u, text, MemoryKind::Fact, &[], &Default::default())
            .await
            .unwrap();
    }

    let contents = |hits: &[ScoredMemory]| -> Vec<String> {
        hits.iter().map(|h| h.memory.content.clone()).collect()
    };
    let three = engine.recall(&u, query, 3).await.unwrap();
    assert_eq!(contents(&three), [new, old, other], "{three:#?}");
    assert!(three[0].score > three[1].score && three[1].score >= three[2].score);
    assert_eq!(
        three[1].dense_rank,
        Some(1),
        "fusion alone put the stale one first"
    );
    for top_k in [1, 2] {
        let fewer = engine.recall(&u, query, top_k).await.unwrap();
        assert_eq!(fewer[..], three[..top_k], "a prefix at limit {top_k}");
    }
    let asked_for_the_past = engine.recall(&u, past, 3).await.unwrap();
    assert_eq!(asked_for_the_past[0].memory.content, old);

    // Notes (and events) are never stale: a later note on a topic is not a correction.
    let notes = user("current-notes");
    remember_all(&engine, &notes, &[old, other, new]).await;
    let hits = engine.recall(&notes, query, 3).await.unwrap();
    assert_eq!(contents(&hits), [old, new, other], "{hits:#?}");
}
