//! Filters on the Postgres store: the search pushdown with a filter returns exactly what
//! `hybrid_retrieve_filtered` returns over `build_index` (the same ids in the same order,
//! the same ranks and bit-equal scores) for filters of every kind, on the dense side run
//! behind the BM25 side (one connection) and beside it (two), and in HNSW
//! mode when the filter sends the search to the exact plan; HNSW mode with a selective
//! filter still fills its results; and `list` with filters and a cursor pages as the
//! in-memory store does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use chrono::{DateTime, Duration, SubsecRound, Utc};
use cortex_core::memory::Supersession;
use cortex_core::tokenizer::query_terms;
use cortex_core::{
    filter::MemoryFilter, hybrid::ScoredMemory, hybrid::hybrid_retrieve_filtered,
    in_memory::InMemoryStore, memory::MemoryId, memory::MemoryKind, new_memory::NewMemory,
    signature::EmbeddingSignature, store::ListKey, store::ListQuery, store::MemoryStore,
    store::SearchRequest,
};
use cortex_postgres::{DenseMode, PostgresConfig, PostgresStore};
use cortex_providers::FakeProvider;
use support::{Rng, TestSchema, VOCABULARY};

/// The tags memories draw from (each with some chance), besides the special ones.
const TAGS: [&str; 5] = ["work", "home", "urgent", "q3", "billing"];

fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| (*s).to_owned()).collect()
}

/// Which memory of the corpus is where: its creation time is `base + i hours`.
struct Corpus {
    base: DateTime<Utc>,
}

impl Corpus {
    fn at(&self, i: i64) -> DateTime<Utc> {
        self.base + Duration::hours(i)
    }
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

fn filter(
    kinds: &[MemoryKind],
    tags: &[&str],
    tags_all: &[&str],
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
) -> MemoryFilter {
    MemoryFilter::new(kinds, &strings(tags), &strings(tags_all), since, until).unwrap()
}

/// Filters of every kind over a corpus of `n` memories dated `corpus.at(0..n)`, each
/// named: `solo` passes exactly one live memory, `gone` only a forgotten one, `none` no
/// memory at all.
fn filters(corpus: &Corpus, n: i64) -> Vec<(&'static str, MemoryFilter)> {
    use MemoryKind::*;
    let (lo, hi) = (corpus.at(n / 4), corpus.at(3 * n / 4));
    vec![
        ("kind", filter(&[Fact], &[], &[], None, None)),
        (
            "kinds",
            filter(&[Preference, Decision, Event], &[], &[], None, None),
        ),
        ("tag", filter(&[], &["work"], &[], None, None)),
        (
            "any tags",
            filter(&[], &["urgent", "billing"], &[], None, None),
        ),
        (
            "all tags",
            filter(&[], &[], &["work", "urgent"], None, None),
        ),
        ("since", filter(&[], &[], &[], Some(lo), None)),
        ("until", filter(&[], &[], &[], None, Some(hi))),
        ("window", filter(&[], &[], &[], Some(lo), Some(hi))),
        (
            "everything",
            filter(
                &[Fact, Note, Preference],
                &["work", "home"],
                &["q3"],
                Some(corpus.at(n / 8)),
                Some(corpus.at(7 * n / 8)),
            ),
        ),
        ("solo", filter(&[], &["solo"], &[], None, None)),
        ("gone", filter(&[], &["gone"], &[], None, None)),
        ("none", filter(&[Fact], &["never-used"], &[], None, None)),
        (
            "none in time",
            filter(&[], &[], &[], Some(corpus.at(n + 10)), None),
        ),
    ]
}

/// The user's memories, written to `stores` alike: `n` generated ones (a tenth exact
/// copies of an earlier one, so equal vectors and equal BM25 scores tie, with other kinds
/// and tags), one tagged `solo` and one tagged `gone`; another user's memories with the
/// same tags between them. Then some forgotten (`gone` among them) and some superseded.
/// Returns the user's live memories' ids in writing order.
async fn write_corpus(
    stores: &[&dyn MemoryStore],
    fake: &FakeProvider,
    corpus: &Corpus,
    user: &str,
    n: usize,
) -> Vec<MemoryId> {
    let mut rng = Rng(17);
    let signature = EmbeddingSignature::new("filters", fake_dimension(fake));
    let words: Vec<&str> = VOCABULARY.split_whitespace().collect();
    let mut texts: Vec<String> = Vec::new();
    let mut ids = Vec::new();
    let (mut solo, mut gone) = (None, None);
    for i in 0..n {
        let text = if !texts.is_empty() && rng.below(10) == 0 {
            texts[rng.below(texts.len())].clone()
        } else {
            let len = 2 + rng.below(12);
            (0..len)
                .map(|_| words[rng.zipf(words.len())])
                .collect::<Vec<_>>()
                .join(" ")
        };
        texts.push(text.clone());
        let kind = MemoryKind::ALL[rng.below(MemoryKind::ALL.len())];
        let mut tags: Vec<String> = TAGS
            .iter()
            .filter(|_| rng.below(3) == 0)
            .map(|t| (*t).to_owned())
            .collect();
        if i == n / 3 {
            tags.push("solo".into());
        }
        if i == n / 2 {
            tags.push("gone".into());
        }
        let owner = match i % 13 == 4 {
            true => format!("{user}-other"),
            false => user.to_owned(),
        };
        let new = NewMemory::new(&owner, &text, kind, &tags, 64 * 1024)
            .unwrap()
            .dated(corpus.at(i as i64))
            .unwrap();
        for store in stores {
            store
                .add(&new, &fake.vector(&text), &signature)
                .await
                .unwrap();
        }
        if owner == user {
            ids.push(new.id);
            if i == n / 3 {
                solo = Some(new.id);
            }
            if i == n / 2 {
                gone = Some(new.id);
            }
        }
    }
    let (solo, gone) = (solo.unwrap(), gone.unwrap());
    // Forget some (the `gone` one among them), then supersede some: both leave gaps in the
    // sequence that the neighbours step over.
    let mut forgotten = vec![gone];
    for _ in 0..n / 20 {
        let id = ids[rng.below(ids.len())];
        if id != solo && !forgotten.contains(&id) {
            forgotten.push(id);
        }
    }
    for id in &forgotten {
        for store in stores {
            assert!(store.delete(user, id).await.unwrap().is_some());
        }
    }
    ids.retain(|id| !forgotten.contains(id));
    let mut superseded = Vec::new();
    for _ in 0..n / 25 {
        let (old, new) = (ids[rng.below(ids.len())], ids[rng.below(ids.len())]);
        if old == new || old == solo || superseded.contains(&old) || superseded.contains(&new) {
            continue;
        }
        let s = Supersession {
            old_id: old,
            new_id: new,
            reason: "filters".into(),
            created_at: Utc::now(),
        };
        for store in stores {
            store.supersede(user, &s).await.unwrap();
        }
        superseded.push(old);
    }
    ids.retain(|id| !superseded.contains(id));
    ids
}

fn fake_dimension(fake: &FakeProvider) -> usize {
    cortex_core::provider::LLMProvider::embedding_signature(fake).dimension
}

fn queries() -> Vec<String> {
    let mut out = strings(&[
        "deploy release friday",
        "budget",
        "alice meeting tomorrow at the office",
        "zq7731 xylophone",
        "?!",
    ]);
    // More distinct terms than the sums unroll (the ordered aggregate).
    out.push(
        VOCABULARY
            .split_whitespace()
            .take(40)
            .collect::<Vec<_>>()
            .join(" "),
    );
    out
}

const TOP_KS: [usize; 5] = [1, 3, 10, 40, 100];

/// Every filter, query and `top_k` on the pushdown against `hybrid_retrieve_filtered` over
/// `build_index`: on two connections (the dense side beside the BM25 side), on one (behind
/// it), and in HNSW mode sent to the exact plan by the filter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filtered_search_matches_the_core() {
    if !support::require_database().await {
        return;
    }
    let schema = TestSchema::new("filters", true, DenseMode::Exact).await;
    let two = schema.store().await;
    let base = support::config(&schema.url, &schema.schema, true, DenseMode::Exact);
    let one = PostgresStore::connect(PostgresConfig {
        pool_size: 1,
        ..base.clone()
    })
    .await
    .unwrap();
    let fake = FakeProvider::new(64);
    let corpus = Corpus {
        base: (Utc::now() - Duration::days(60)).trunc_subsecs(0),
    };
    let user = "filters";
    let n = 400;
    write_corpus(&[&two], &fake, &corpus, user, n).await;
    // Every filter in HNSW mode passes fewer memories than this: each search is exact.
    let hnsw = PostgresStore::connect(PostgresConfig {
        dense_mode: DenseMode::Hnsw,
        hnsw_threshold: 1_000,
        ..base.clone()
    })
    .await
    .unwrap();
    let index = two
        .build_index(user, fake_dimension(&fake))
        .await
        .unwrap()
        .index;
    let stores = [
        ("two connections", &two),
        ("one connection", &one),
        ("hnsw mode, exact by the filter", &hnsw),
    ];
    let mut rng = Rng(99);
    let (mut compared, mut with_terms) = (0u64, 0u64);
    for (name, filter) in filters(&corpus, n as i64) {
        let passing = (0..index.len())
            .filter(|&row| filter.matches(index.memory(row)))
            .count();
        match name {
            "solo" => assert_eq!(passing, 1),
            "gone" | "none" | "none in time" => assert_eq!(passing, 0, "{name}"),
            _ => assert!(
                passing > 1 && passing < index.len(),
                "{name}: {passing} pass"
            ),
        }
        for query in queries() {
            // Half the queries sit exactly on a stored vector (distance-0 ties).
            let embedding = match rng.below(2) {
                0 => fake.vector(&index.memory(rng.below(index.len())).content),
                _ => fake.vector(&query),
            };
            let terms = query_terms(&query);
            for top_k in TOP_KS {
                let expected =
                    hybrid_retrieve_filtered(&index, &embedding, &terms, top_k, &filter).unwrap();
                assert_eq!(expected.len(), passing.min(top_k), "{name}, {query:?}");
                assert!(expected.iter().all(|s| filter.matches(&s.memory)));
                let request = SearchRequest {
                    query: query.clone(),
                    terms: terms.clone(),
                    embedding: embedding.clone(),
                    top_k,
                    filter: filter.clone(),
                };
                for (label, store) in &stores {
                    let got = store.search(user, &request).await.unwrap();
                    same(
                        &format!("filter {name}, query {query:?}, top_k {top_k}, {label}"),
                        &expected,
                        &got,
                    );
                }
                compared += 1;
                with_terms += u64::from(!terms.is_empty());
            }
        }
    }
    eprintln!("filters: {compared} (filter, query, top_k) triples identical on every store");
    // Every filtered search with query terms scored the passing memories' postings in
    // full (a search without terms counts as scored once, with nothing to score).
    for (label, store) in &stores {
        let paths = store.diagnostics().lexical_paths();
        assert_eq!(paths.full, with_terms, "{label}: {paths:?}");
        assert_eq!(paths.total(), compared, "{label}: {paths:?}");
        assert_eq!(paths.once, compared - with_terms, "{label}: {paths:?}");
    }
    assert!(two.diagnostics().parallel_searches() > 0);
    assert_eq!(one.diagnostics().parallel_searches(), 0);
    assert_eq!(hnsw.diagnostics().filtered_exact_searches(), compared);
    assert_eq!(two.diagnostics().filtered_exact_searches(), 0);

    // The empty filter is the unfiltered search, pruned paths and all.
    let request = SearchRequest {
        query: "deploy release friday".into(),
        terms: query_terms("deploy release friday"),
        embedding: fake.vector("deploy release friday"),
        top_k: 10,
        filter: MemoryFilter::default(),
    };
    let expected =
        cortex_core::hybrid::hybrid_retrieve(&index, &request.embedding, &request.terms, 10)
            .unwrap();
    same(
        "no filter",
        &expected,
        &one.search(user, &request).await.unwrap(),
    );
    let paths = one.diagnostics().lexical_paths();
    assert_eq!(paths.total(), compared + 1);
    assert_eq!(
        paths.full, with_terms,
        "the unfiltered search scored in full: {paths:?}"
    );
}

/// HNSW mode with a filter that 1% of the memories pass: the iterative scan fills the
/// dense side with every memory that passes (no fallback, and the planner kept from the
/// exact scan it rightly prefers here, so that the index serves the filter), and with the
/// default threshold the search is exact and equals exact mode's. A broad filter keeps
/// the index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hnsw_with_a_selective_filter_is_not_short() {
    if !support::require_database().await {
        return;
    }
    let schema = TestSchema::new("fhnsw", true, DenseMode::Hnsw).await;
    let base = support::config(&schema.url, &schema.schema, true, DenseMode::Hnsw);
    // No fallback: the index alone, with its iterative scan. With statistics the planner
    // reads the 15 memories that pass and sorts them (exact); these settings leave it the
    // index's ordered scan.
    let separator = if schema.url.contains('?') { '&' } else { '?' };
    let index_only = format!(
        "{}{separator}options=-c%20enable_seqscan%3Doff%20-c%20enable_sort%3Doff",
        schema.url
    );
    let iterative = PostgresStore::connect(PostgresConfig {
        hnsw_threshold: 0,
        ..support::config(&index_only, &schema.schema, true, DenseMode::Hnsw)
    })
    .await
    .unwrap();
    let dim = 16;
    let signature = EmbeddingSignature::new("hnsw", dim);
    let user = "h";
    let n = 1500;
    let mut rng = Rng(5);
    let mut vectors = Vec::new();
    for i in 0..n {
        let v: Vec<f32> = (0..dim).map(|_| rng.float()).collect();
        let mut tags = Vec::new();
        if i % 100 == 37 {
            tags.push("rare".to_owned());
        }
        if i % 2 == 0 {
            tags.push("half".to_owned());
        }
        let new = NewMemory::new(
            user,
            &format!("note {i} about topic {}", i % 7),
            MemoryKind::Note,
            &tags,
            4096,
        )
        .unwrap();
        iterative.add(&new, &v, &signature).await.unwrap();
        vectors.push(v);
    }
    let client = iterative.pool().get().await.unwrap();
    client
        .batch_execute(&format!("ANALYZE \"{}\".memories", schema.schema))
        .await
        .unwrap();
    drop(client);
    // The default threshold: 15 memories pass, far fewer, so the search is exact.
    let fallback = PostgresStore::connect(base.clone()).await.unwrap();
    let exact = PostgresStore::connect(PostgresConfig {
        dense_mode: DenseMode::Exact,
        ..base.clone()
    })
    .await
    .unwrap();
    // A threshold the broad filter's 750 memories pass: the index is kept.
    let broad = PostgresStore::connect(PostgresConfig {
        hnsw_threshold: 100,
        ..base.clone()
    })
    .await
    .unwrap();
    let rare = filter(&[], &["rare"], &[], None, None);
    let half = filter(&[], &["half"], &[], None, None);
    let index = exact.build_index(user, dim).await.unwrap().index;
    let passing = (0..index.len())
        .filter(|&row| rare.matches(index.memory(row)))
        .count();
    assert_eq!(passing, n / 100);
    let request = SearchRequest {
        query: "?!".into(),
        terms: Vec::new(),
        embedding: vectors[3].clone(),
        top_k: 10,
        filter: rare.clone(),
    };
    let plan = iterative
        .diagnostics()
        .explain_search(user, &request)
        .await
        .unwrap()
        .join("\n");
    if std::env::var_os("EXPLAIN").is_some() {
        eprintln!("{plan}");
    }
    assert!(
        plan.contains("Index Scan using memories_embedding_hnsw_half"),
        "the filtered search did not use the index: {plan}"
    );
    let mut searches = 0;
    for (q, query) in vectors
        .iter()
        .take(10)
        .zip(["?!", "topic 3"].iter().cycle())
    {
        for top_k in [10, 40] {
            let request = SearchRequest {
                query: (*query).to_owned(),
                terms: query_terms(query),
                embedding: q.clone(),
                top_k,
                filter: rare.clone(),
            };
            let expected =
                hybrid_retrieve_filtered(&index, q, &request.terms, top_k, &rare).unwrap();
            assert_eq!(expected.len(), passing.min(top_k));
            let got = iterative.search(user, &request).await.unwrap();
            assert_eq!(
                got.len(),
                expected.len(),
                "the iterative scan came back short"
            );
            assert!(got.iter().all(|s| rare.matches(&s.memory)));
            // Every memory that passes is in the dense list.
            let dense = got.iter().filter(|s| s.dense_rank.is_some()).count();
            assert_eq!(dense, passing.min(top_k), "{got:?}");
            same(
                &format!("top_k {top_k}, exact by the threshold"),
                &expected,
                &fallback.search(user, &request).await.unwrap(),
            );
            same(
                &format!("top_k {top_k}, exact mode"),
                &expected,
                &exact.search(user, &request).await.unwrap(),
            );
            let request = SearchRequest {
                filter: half.clone(),
                ..request
            };
            let got = broad.search(user, &request).await.unwrap();
            assert_eq!(got.len(), top_k, "the broad filter came back short");
            assert!(got.iter().all(|s| half.matches(&s.memory)));
            searches += 1;
        }
    }
    assert_eq!(iterative.diagnostics().filtered_exact_searches(), 0);
    assert_eq!(fallback.diagnostics().filtered_exact_searches(), searches);
    assert_eq!(broad.diagnostics().filtered_exact_searches(), 0);
    // The settings stayed inside the searches' transactions.
    let client = iterative.pool().get().await.unwrap();
    let scan: String = client
        .query_one("SHOW hnsw.iterative_scan", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(scan, "off");
}

/// `list` with every filter, paged by `before` at several page sizes, equals the
/// in-memory store's `list` on the same writes (ids page by page; each store's cursor is
/// its own last memory's position, whose sequence number is the store's own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filtered_list_pages_match_the_in_memory_store() {
    if !support::require_database().await {
        return;
    }
    let schema = TestSchema::new("flist", true, DenseMode::Exact).await;
    let pg = schema.store().await;
    let memory = InMemoryStore::new();
    let fake = FakeProvider::new(16);
    let corpus = Corpus {
        base: (Utc::now() - Duration::days(30)).trunc_subsecs(0),
    };
    let user = "lister";
    let n = 120;
    let live = write_corpus(&[&pg, &memory], &fake, &corpus, user, n).await;
    let mut every = filters(&corpus, n as i64);
    every.push(("no filter", MemoryFilter::default()));
    for (name, filter) in every {
        for limit in [1, 3, 7, 50, 1000] {
            let (mut pg_cursor, mut memory_cursor) = (None, None);
            let mut pages = 0;
            let mut seen = Vec::new();
            loop {
                let page = |before| ListQuery {
                    filter: filter.clone(),
                    limit,
                    before,
                };
                let a = pg.list(user, &page(pg_cursor)).await.unwrap();
                let b = memory.list(user, &page(memory_cursor)).await.unwrap();
                let ids =
                    |m: &[cortex_core::memory::Memory]| m.iter().map(|m| m.id).collect::<Vec<_>>();
                assert_eq!(
                    ids(&a),
                    ids(&b),
                    "filter {name}, limit {limit}, page {pages}"
                );
                assert!(a.len() <= limit);
                assert!(a.iter().all(|m| filter.matches(m)));
                assert!(
                    a.windows(2)
                        .all(|w| ListKey::of(&w[0]) > ListKey::of(&w[1])),
                    "newest first"
                );
                for (x, y) in a.iter().zip(&b) {
                    assert_eq!(
                        (&x.content, x.kind, &x.tags, x.created_at),
                        (&y.content, y.kind, &y.tags, y.created_at)
                    );
                }
                seen.extend(ids(&a));
                pages += 1;
                if a.len() < limit {
                    break;
                }
                pg_cursor = a.last().map(ListKey::of);
                memory_cursor = b.last().map(ListKey::of);
            }
            // Every live memory that passes, once.
            let mut expected: Vec<MemoryId> = Vec::new();
            for id in live.iter().rev() {
                let m = pg.get(user, id).await.unwrap().unwrap();
                if filter.matches(&m) {
                    expected.push(*id);
                }
            }
            assert_eq!(seen, expected, "filter {name}, limit {limit}");
        }
    }
    // A cursor in the middle, with a filter: only older memories that pass.
    let window = filter(&[], &["work"], &[], None, None);
    let all = pg
        .list(
            user,
            &ListQuery {
                filter: window.clone(),
                limit: 1000,
                before: None,
            },
        )
        .await
        .unwrap();
    let middle = &all[all.len() / 2];
    let older = pg
        .list(
            user,
            &ListQuery {
                filter: window.clone(),
                limit: 1000,
                before: Some(ListKey::of(middle)),
            },
        )
        .await
        .unwrap();
    assert_eq!(older[..], all[all.len() / 2 + 1..]);
}
