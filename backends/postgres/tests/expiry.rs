//! Expiry on the Postgres store (migration 0008): a recall's `alive_at` leaves out every
//! memory expired at that instant (exactly: at `expires_at` a memory is expired), and the
//! pushdown returns what `hybrid_retrieve_filtered` returns over `build_index` with the
//! same filter (the same ids, ranks and bit-equal scores), on one and two connections and
//! in HNSW mode. While none of the user's live memories has expired, the search probes
//! that and leaves the condition out: it is then the unfiltered search, pruned BM25 paths,
//! plans and all. `list` honours `alive_at` (and lists everything when asked), and an
//! export read back into another store keeps every memory's `expires_at`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use chrono::{DateTime, Duration, Utc};
use cortex_core::memory::Supersession;
use cortex_core::tokenizer::query_terms;
use cortex_core::{
    filter::MemoryFilter, hybrid::ScoredMemory, hybrid::hybrid_retrieve,
    hybrid::hybrid_retrieve_filtered, in_memory::InMemoryStore, index::MemoryIndex, memory::Memory,
    memory::MemoryId, memory::MemoryKind, new_memory::NewMemory, signature::EmbeddingSignature,
    store::ListKey, store::ListQuery, store::MemoryStore, store::SearchRequest,
    transfer::ImportItem, transfer::TransferStore,
};
use cortex_postgres::{DenseMode, LexicalPaths, PostgresConfig, PostgresStore};
use cortex_providers::FakeProvider;
use support::{Rng, TestSchema, VOCABULARY};

const USER: &str = "expiring";
const DIMENSION: usize = 32;

fn signature() -> EmbeddingSignature {
    EmbeddingSignature::new("expiry", DIMENSION)
}

/// The instants the corpus's expiries are laid out from: `now` (when every memory is
/// written), and the live memories' expiries, one minute apart from an hour on.
struct Clock {
    now: DateTime<Utc>,
}

impl Clock {
    fn new() -> Self {
        Self {
            now: cortex_core::memory::now(),
        }
    }

    /// The `k`-th live expiry.
    fn expiry(&self, k: usize) -> DateTime<Utc> {
        self.now + Duration::hours(1) + Duration::minutes(k as i64)
    }

    /// Before every live expiry, after the superseded memory's and the other user's.
    fn early(&self) -> DateTime<Utc> {
        self.now + Duration::minutes(30)
    }
}

/// What [`write_corpus`] wrote: the user's live memories' ids in writing order, and the
/// live memories that expire, by expiry (earliest first).
struct Corpus {
    live: Vec<MemoryId>,
    expiring: Vec<(DateTime<Utc>, MemoryId, String)>,
}

/// `n` memories of the user, written to `stores` alike: every fifth expires (the `k`-th of
/// them at `clock.expiry(k)`), the rest never. Besides them, a memory that expires early
/// (`clock.early()` minus a minute) and is superseded, and another user's that expires as
/// early and stays live: neither may keep a search of the user's off its unfiltered paths.
async fn write_corpus(
    stores: &[&dyn MemoryStore],
    fake: &FakeProvider,
    clock: &Clock,
    n: usize,
) -> Corpus {
    let mut rng = Rng(31);
    let words: Vec<&str> = VOCABULARY.split_whitespace().collect();
    let mut texts: Vec<String> = Vec::new();
    let mut live = Vec::new();
    let mut expiring = Vec::new();
    let write = async |new: &NewMemory, text: &str| {
        for store in stores {
            store
                .add(new, &fake.vector(text), &signature())
                .await
                .unwrap();
        }
    };
    for i in 0..n {
        // A tenth are copies of an earlier text: equal vectors and BM25 scores tie.
        let text = if !texts.is_empty() && rng.below(10) == 0 {
            texts[rng.below(texts.len())].clone()
        } else {
            let len = 2 + rng.below(10);
            (0..len)
                .map(|_| words[rng.zipf(words.len())])
                .collect::<Vec<_>>()
                .join(" ")
        };
        texts.push(text.clone());
        let kind = MemoryKind::ALL[rng.below(MemoryKind::ALL.len())];
        let mut new = NewMemory::new(USER, &text, kind, &[], 64 * 1024).unwrap();
        if i % 5 == 2 {
            let at = clock.expiry(expiring.len());
            new = new.expiring(at, clock.now).unwrap();
            expiring.push((at, new.id, text.clone()));
        }
        write(&new, &text).await;
        live.push(new.id);
    }
    let early = clock.early() - Duration::minutes(1);
    let old = NewMemory::new(
        USER,
        "deploy budget superseded",
        MemoryKind::Note,
        &[],
        4096,
    )
    .unwrap()
    .expiring(early, clock.now)
    .unwrap();
    write(&old, "deploy budget superseded").await;
    let other = NewMemory::new("someone-else", "deploy budget", MemoryKind::Note, &[], 4096)
        .unwrap()
        .expiring(early, clock.now)
        .unwrap();
    write(&other, "deploy budget").await;
    let s = Supersession {
        old_id: old.id,
        new_id: live[0],
        reason: "expiry".into(),
        created_at: Utc::now(),
    };
    for store in stores {
        store.supersede(USER, &s).await.unwrap();
    }
    Corpus { live, expiring }
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

fn alive_at(at: DateTime<Utc>) -> MemoryFilter {
    MemoryFilter {
        alive_at: Some(at),
        ..MemoryFilter::default()
    }
}

/// `b - a`, path by path.
fn delta(a: LexicalPaths, b: LexicalPaths) -> LexicalPaths {
    LexicalPaths {
        full: b.full - a.full,
        once: b.once - a.once,
        pruned: b.pruned - a.pruned,
        pruned_extended: b.pruned_extended - a.pruned_extended,
        impact: b.impact - a.impact,
        rarest_first: b.rarest_first - a.rarest_first,
    }
}

fn queries(first: &str) -> Vec<String> {
    let mut out: Vec<String> = [
        "deploy release friday",
        "budget",
        "alice meeting tomorrow at the office",
        "zq7731 xylophone",
        "?!",
        // A common term beside a rare one: pruned unfiltered.
        "work zq7731",
        "work note idea jazz",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    // The first memory to expire, word for word: unfiltered, it is the best hit.
    out.push(first.to_owned());
    // More distinct terms than the pruned paths take.
    out.push(
        VOCABULARY
            .split_whitespace()
            .take(40)
            .collect::<Vec<_>>()
            .join(" "),
    );
    out
}

const TOP_KS: [usize; 4] = [1, 5, 20, 100];

/// The searches of one instant: every query and `top_k`, with `filter`, on every store,
/// each against `hybrid_retrieve_filtered` over `index`. Returns how many searches each
/// store ran and how many of them had query terms.
async fn search_all(
    stores: &[(&str, &PostgresStore)],
    index: &MemoryIndex,
    fake: &FakeProvider,
    queries: &[String],
    filter: &MemoryFilter,
    label: &str,
) -> (u64, u64) {
    let (mut searches, mut with_terms) = (0, 0);
    for (q, query) in queries.iter().enumerate() {
        // Every other query sits exactly on a stored vector (distance-0 ties).
        let embedding = match q % 2 {
            0 => fake.vector(query),
            _ => fake.vector(&index.memory(q * 7 % index.len()).content),
        };
        let terms = query_terms(query);
        for top_k in TOP_KS {
            let expected =
                hybrid_retrieve_filtered(index, &embedding, &terms, top_k, filter).unwrap();
            assert!(expected.iter().all(|s| filter.matches(&s.memory)));
            let request = SearchRequest {
                query: query.clone(),
                terms: terms.clone(),
                embedding: embedding.clone(),
                top_k,
                filter: filter.clone(),
            };
            for (name, store) in stores {
                let got = store.search(USER, &request).await.unwrap();
                same(
                    &format!("{label}, query {query:?}, top_k {top_k}, {name}"),
                    &expected,
                    &got,
                );
            }
            searches += 1;
            with_terms += u64::from(!terms.is_empty());
        }
    }
    (searches, with_terms)
}

/// Recall at instants before, at and after expiries. Before the first live expiry (also
/// after the superseded memory's and the other user's, and a nanosecond-fraction before
/// the first live one), the results are the unfiltered search's and so are the BM25 paths
/// taken (the probe found nothing expired, and the condition left out); at an expiry
/// instant that memory is gone; each equals the core's filtered retrieval, on every store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_leaves_out_expired_memories_exactly() {
    if !support::require_database().await {
        return;
    }
    let schema = TestSchema::new("expiry", true, DenseMode::Exact).await;
    // A small prune budget (and lookups always worth it): the corpus's commoner terms are
    // past it, so the unfiltered searches take the pruned paths (rarest-first, extended
    // MaxScore) besides one term's impact order.
    let base = PostgresConfig {
        prune_budget: 60,
        lookup_cost: 0,
        ..support::config(&schema.url, &schema.schema, true, DenseMode::Exact)
    };
    let two = PostgresStore::connect(base.clone()).await.unwrap();
    let one = PostgresStore::connect(PostgresConfig {
        pool_size: 1,
        ..base.clone()
    })
    .await
    .unwrap();
    // The corpus is smaller than the threshold: a filtered search in HNSW mode is exact.
    let hnsw = PostgresStore::connect(PostgresConfig {
        dense_mode: DenseMode::Hnsw,
        hnsw_threshold: 1_000,
        ..base.clone()
    })
    .await
    .unwrap();
    // Searches without the expiry condition, for the paths the unfiltered search takes.
    let plain = PostgresStore::connect(base.clone()).await.unwrap();
    let fake = FakeProvider::new(DIMENSION);
    let clock = Clock::new();
    let n = 300;
    let corpus = write_corpus(&[&two], &fake, &clock, n).await;
    assert_eq!(corpus.expiring.len(), n / 5);
    let index = two.build_index(USER, DIMENSION).await.unwrap().index;
    assert_eq!(index.len(), n, "expired or not, every memory is live");
    let stores = [
        ("two connections", &two),
        ("one connection", &one),
        ("hnsw mode", &hnsw),
    ];
    let (first_at, first_id, first_text) = corpus.expiring[0].clone();
    let queries = queries(&first_text);
    let mu = Duration::microseconds(1);
    let half_mu = Duration::nanoseconds(500);

    // Nothing of the user's live has expired: the unfiltered search, path for path.
    let unexpired = [
        ("now", clock.now),
        ("past the superseded and the other user's", clock.early()),
        ("a microsecond before the first", first_at - mu),
        ("half a microsecond before the first", first_at - half_mu),
    ];
    for (label, at) in unexpired {
        let filter = alive_at(at);
        assert!(
            (0..index.len()).all(|row| filter.matches(index.memory(row))),
            "{label}"
        );
        let before: Vec<LexicalPaths> = stores
            .iter()
            .map(|(_, s)| s.diagnostics().lexical_paths())
            .collect();
        let plain_before = plain.diagnostics().lexical_paths();
        let hnsw_exact = hnsw.diagnostics().filtered_exact_searches();
        // Exact stores only: unfiltered, HNSW mode is approximate (compared below).
        let (searches, _) = search_all(&stores[..2], &index, &fake, &queries, &filter, label).await;
        search_all(
            &[("unfiltered", &plain)],
            &index,
            &fake,
            &queries,
            &MemoryFilter::default(),
            label,
        )
        .await;
        let unfiltered = delta(plain_before, plain.diagnostics().lexical_paths());
        assert!(
            unfiltered.rarest_first > 0 && unfiltered.pruned_extended > 0 && unfiltered.impact > 0,
            "the unfiltered searches pruned nothing: {unfiltered:?}"
        );
        for (i, (name, store)) in stores[..2].iter().enumerate() {
            let paths = delta(before[i], store.diagnostics().lexical_paths());
            assert_eq!(paths, unfiltered, "{label}, {name}: the unfiltered paths");
            assert_eq!(paths.total(), searches);
        }
        // HNSW mode searches as it does unfiltered: the index, with no count of passing
        // memories first.
        for query in &queries {
            let request = SearchRequest {
                query: query.clone(),
                terms: query_terms(query),
                embedding: fake.vector(query),
                top_k: 10,
                filter: MemoryFilter::default(),
            };
            let unfiltered = hnsw.search(USER, &request).await.unwrap();
            let request = SearchRequest {
                filter: filter.clone(),
                ..request
            };
            let got = hnsw.search(USER, &request).await.unwrap();
            same(&format!("{label}, {query:?}, hnsw mode"), &unfiltered, &got);
        }
        assert_eq!(hnsw.diagnostics().filtered_exact_searches(), hnsw_exact);
    }
    // The first expiring memory is the best hit of its own text until it expires.
    let request = |filter: MemoryFilter| SearchRequest {
        query: first_text.clone(),
        terms: query_terms(&first_text),
        embedding: fake.vector(&first_text),
        top_k: 5,
        filter,
    };
    let unfiltered = request(MemoryFilter::default());
    let hits = hybrid_retrieve(&index, &unfiltered.embedding, &unfiltered.terms, 5).unwrap();
    assert!(hits.iter().any(|h| h.memory.id == first_id));
    same(
        "a microsecond before the first",
        &hits,
        &two.search(USER, &request(alive_at(first_at - mu)))
            .await
            .unwrap(),
    );

    // Some have expired: a filter like any other, which every store applies exactly.
    let (mid_at, mid_id, _) = corpus.expiring[corpus.expiring.len() / 2].clone();
    let expired = [
        ("at the first expiry", first_at, 1),
        ("half a microsecond past the first", first_at + half_mu, 1),
        (
            "at the middle expiry",
            mid_at,
            corpus.expiring.len() / 2 + 1,
        ),
        (
            "a day later",
            clock.now + Duration::days(1),
            corpus.expiring.len(),
        ),
    ];
    for (label, at, gone) in expired {
        let filter = alive_at(at);
        let passing = (0..index.len())
            .filter(|&row| filter.matches(index.memory(row)))
            .count();
        assert_eq!(passing, n - gone, "{label}");
        let before: Vec<LexicalPaths> = stores
            .iter()
            .map(|(_, s)| s.diagnostics().lexical_paths())
            .collect();
        let hnsw_exact = hnsw.diagnostics().filtered_exact_searches();
        let (searches, with_terms) =
            search_all(&stores, &index, &fake, &queries, &filter, label).await;
        for (i, (name, store)) in stores.iter().enumerate() {
            let paths = delta(before[i], store.diagnostics().lexical_paths());
            assert_eq!(paths.full, with_terms, "{label}, {name}: {paths:?}");
            assert_eq!(paths.once, searches - with_terms, "{label}, {name}");
        }
        assert_eq!(
            hnsw.diagnostics().filtered_exact_searches(),
            hnsw_exact + searches,
            "{label}: HNSW mode counted the passing memories and searched exactly"
        );
        let hits = two.search(USER, &request(filter.clone())).await.unwrap();
        assert!(hits.iter().all(|h| h.memory.id != first_id), "{label}");
        assert_eq!(hits.len(), 5);
        if at >= mid_at {
            let hits = two
                .search(
                    USER,
                    &SearchRequest {
                        top_k: n,
                        ..request(filter.clone())
                    },
                )
                .await
                .unwrap();
            assert!(hits.iter().all(|h| h.memory.id != mid_id), "{label}");
        }
    }

    // With another condition, both hold.
    let facts = MemoryFilter {
        kinds: vec![MemoryKind::Fact],
        alive_at: Some(mid_at),
        ..MemoryFilter::default()
    };
    search_all(
        &stores,
        &index,
        &fake,
        &queries,
        &facts,
        "facts at the middle",
    )
    .await;
    let facts_now = MemoryFilter {
        alive_at: Some(clock.now),
        ..facts
    };
    search_all(&stores, &index, &fake, &queries, &facts_now, "facts now").await;
}

/// `list` with `alive_at` pages as the in-memory store does (expired memories left out,
/// exactly at their instant), alone and with another condition; with `include_expired`
/// (and no `alive_at`, as the engine sends it) it lists every live memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_leaves_out_expired_memories_unless_asked() {
    if !support::require_database().await {
        return;
    }
    let schema = TestSchema::new("explist", true, DenseMode::Exact).await;
    let pg = schema.store().await;
    let memory = InMemoryStore::new();
    let fake = FakeProvider::new(DIMENSION);
    let clock = Clock::new();
    let n = 60;
    let corpus = write_corpus(&[&pg, &memory], &fake, &clock, n).await;
    let first_at = corpus.expiring[0].0;
    let mid_at = corpus.expiring[corpus.expiring.len() / 2].0;
    let mut filters: Vec<(String, MemoryFilter)> = Vec::new();
    for (label, at) in [
        ("now", clock.now),
        ("before the first", first_at - Duration::microseconds(1)),
        ("at the first", first_at),
        ("at the middle", mid_at),
        ("a day later", clock.now + Duration::days(1)),
    ] {
        filters.push((label.to_owned(), alive_at(at)));
        filters.push((
            format!("notes, {label}"),
            MemoryFilter {
                kinds: vec![MemoryKind::Note],
                ..alive_at(at)
            },
        ));
    }
    filters.push((
        "include_expired".into(),
        MemoryFilter {
            include_expired: true,
            ..MemoryFilter::default()
        },
    ));
    let view = |m: &[Memory]| {
        m.iter()
            .map(|m| (m.id, m.content.clone(), m.kind, m.created_at, m.expires_at))
            .collect::<Vec<_>>()
    };
    for (label, filter) in &filters {
        for limit in [1, 7, 1000] {
            let (mut pg_cursor, mut memory_cursor) = (None, None);
            let mut seen = Vec::new();
            loop {
                let page = |before| ListQuery {
                    filter: filter.clone(),
                    limit,
                    before,
                };
                let a = pg.list(USER, &page(pg_cursor)).await.unwrap();
                let b = memory.list(USER, &page(memory_cursor)).await.unwrap();
                assert_eq!(view(&a), view(&b), "{label}, limit {limit}");
                assert!(a.iter().all(|m| filter.matches(m)));
                seen.extend(a.iter().map(|m| m.id));
                if a.len() < limit {
                    break;
                }
                pg_cursor = a.last().map(ListKey::of);
                memory_cursor = b.last().map(ListKey::of);
            }
            let expected: Vec<MemoryId> = corpus
                .live
                .iter()
                .rev()
                .copied()
                .filter(|id| match filter.alive_at {
                    None => true,
                    Some(at) => !corpus
                        .expiring
                        .iter()
                        .any(|(e, expiring, _)| expiring == id && *e <= at),
                })
                .collect();
            if filter.kinds.is_empty() {
                assert_eq!(seen, expected, "{label}, limit {limit}");
            }
        }
    }
    // At the first expiry exactly one memory is gone; a day later every expiring one.
    let count = |at| {
        let pg = &pg;
        async move {
            let query = ListQuery {
                filter: alive_at(at),
                limit: 1000,
                before: None,
            };
            pg.list(USER, &query).await.unwrap().len()
        }
    };
    assert_eq!(count(first_at - Duration::microseconds(1)).await, n);
    assert_eq!(count(first_at).await, n - 1);
    assert_eq!(
        count(clock.now + Duration::days(1)).await,
        n - corpus.expiring.len()
    );
}

/// Export and import keep `expires_at`: memories read out of one store (as an export
/// reads them) and imported into another have their expiry there, an expired one too
/// (expired memories stay until `cortex prune`); the importing store then leaves out what
/// has expired, exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfer_keeps_expiry() {
    if !support::require_database().await {
        return;
    }
    let from_schema = TestSchema::new("expfrom", true, DenseMode::Exact).await;
    let to_schema = TestSchema::new("expto", true, DenseMode::Exact).await;
    let from = from_schema.store().await;
    let to = to_schema.store().await;
    let fake = FakeProvider::new(DIMENSION);
    let clock = Clock::new();
    let corpus = write_corpus(&[&from], &fake, &clock, 40).await;
    // One already expired, as an export taken before a prune holds it.
    let past = clock.now - Duration::hours(2);
    let expired = NewMemory {
        expires_at: Some(clock.now - Duration::hours(1)),
        records: None,
        ..NewMemory::new(
            USER,
            "deploy release friday expired",
            MemoryKind::Event,
            &[],
            4096,
        )
        .unwrap()
        .dated(past)
        .unwrap()
    };
    from.import_batch(
        &[ImportItem::Memory {
            memory: expired.clone(),
            embedding: fake.vector(&expired.content),
        }],
        &signature(),
    )
    .await
    .unwrap();
    let exported = from.memories_after(USER, 0, 1000).await.unwrap();
    assert_eq!(
        exported.len(),
        42,
        "40, the superseded one and the expired one"
    );
    let with_expiry = exported
        .iter()
        .filter(|s| s.memory.expires_at.is_some())
        .count();
    assert_eq!(with_expiry, corpus.expiring.len() + 2);
    for (at, id, _) in &corpus.expiring {
        let stored = exported.iter().find(|s| s.memory.id == *id).unwrap();
        assert_eq!(stored.memory.expires_at, Some(*at));
    }
    let items: Vec<ImportItem> = exported
        .iter()
        .map(|s| ImportItem::Memory {
            memory: NewMemory {
                id: s.memory.id,
                user_id: s.memory.user_id.clone(),
                content: s.memory.content.clone(),
                kind: s.memory.kind,
                tags: s.memory.tags.clone(),
                created_at: s.memory.created_at,
                supersedes: Vec::new(),
                expires_at: s.memory.expires_at,
                records: None,
            },
            embedding: s.embedding.clone(),
        })
        .collect();
    to.import_batch(&items, &signature()).await.unwrap();
    let imported = to.memories_after(USER, 0, 1000).await.unwrap();
    let view = |s: &[cortex_core::transfer::StoredMemory]| {
        s.iter()
            .map(|s| {
                let m = &s.memory;
                (m.id, m.content.clone(), m.created_at, m.expires_at)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(view(&imported), view(&exported));
    let got = to.get(USER, &expired.id).await.unwrap().unwrap();
    assert_eq!(got.expires_at, expired.expires_at);
    // The importing store searches as the core does: the expired memory is out (and the
    // probe found it, so the search was filtered).
    let index = to.build_index(USER, DIMENSION).await.unwrap().index;
    let filter = alive_at(clock.now);
    let request = SearchRequest {
        query: expired.content.clone(),
        terms: query_terms(&expired.content),
        embedding: fake.vector(&expired.content),
        top_k: 10,
        filter: filter.clone(),
    };
    let got = to.search(USER, &request).await.unwrap();
    same(
        "imported",
        &hybrid_retrieve_filtered(&index, &request.embedding, &request.terms, 10, &filter).unwrap(),
        &got,
    );
    assert!(got.iter().all(|h| h.memory.id != expired.id));
    assert_eq!(to.diagnostics().lexical_paths().full, 1);
}
