//! Filters and paging: recall and list restricted by kind, tags and creation time, with
//! a query and without, and pages that reach every memory exactly once.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use cortex_core::tokenizer::query_terms;
use cortex_core::{
    engine::CortexMemory, error::CortexError, filter::MemoryFilter, hybrid::ScoredMemory,
    hybrid::hybrid_retrieve, hybrid::hybrid_retrieve_filtered, memory::Memory, memory::MemoryKind,
    provider::EmbedTask, provider::LLMProvider, store::MemoryStore, store::SearchRequest,
};
use cortex_providers::FakeProvider;

use crate::StoreFactory;
use crate::reference::hybrid_ranking_where;
use crate::scenarios::{CORPUS, QUERIES};
use crate::support::{DIM, applies, engine, user};

/// The day the corpus starts; memory `i` is dated `i` days later.
fn day(i: usize) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .map(|t| t.with_timezone(&Utc))
        .unwrap()
        + Duration::days(i as i64)
}

/// Memory `i`'s kind and tags: every kind and several overlapping tags occur.
fn labels(i: usize) -> (MemoryKind, Vec<String>) {
    let kind = MemoryKind::ALL[i % MemoryKind::ALL.len()];
    let mut tags = Vec::new();
    if i.is_multiple_of(2) {
        tags.push("even".to_owned());
    }
    if i.is_multiple_of(3) {
        tags.push("three".to_owned());
    }
    if i == 7 {
        tags.push("only-seven".to_owned());
    }
    (kind, tags)
}

/// The corpus, labelled and dated, with one exact duplicate (a tie) and one forgotten
/// memory; returns the live memories in insertion order.
async fn labelled_corpus(engine: &CortexMemory, u: &str) -> Vec<Memory> {
    let mut stored = Vec::new();
    for (i, text) in CORPUS.iter().chain([&CORPUS[0]]).enumerate() {
        let (kind, tags) = labels(i);
        let m = engine
            .memorize(
                u,
                text,
                kind,
                &tags,
                &cortex_core::engine::MemorizeOptions {
                    created_at: Some(day(i)),
                    ..Default::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("memorize {text:?}: {e}"))
            .memory;
        stored.push(m);
    }
    let gone = stored.remove(4);
    engine.forget(u, &gone.id.to_string()).await.unwrap();
    stored
}

fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

/// Each filter with the condition it stands for, written out independently of
/// `MemoryFilter::matches`, and a name for failure messages.
type Case = (&'static str, MemoryFilter, fn(&Memory) -> bool);

fn cases() -> Vec<Case> {
    let f = |kinds: &[MemoryKind], tags: &[&str], all: &[&str], since, until| {
        MemoryFilter::new(kinds, &strings(tags), &strings(all), since, until).unwrap()
    };
    vec![
        ("no filter", MemoryFilter::default(), |_| true),
        (
            "kinds",
            f(
                &[MemoryKind::Fact, MemoryKind::Decision],
                &[],
                &[],
                None,
                None,
            ),
            |m| matches!(m.kind, MemoryKind::Fact | MemoryKind::Decision),
        ),
        (
            "tags any",
            f(&[], &["three", "only-seven"], &[], None, None),
            |m| m.tags.iter().any(|t| t == "three" || t == "only-seven"),
        ),
        (
            "tags all",
            f(&[], &[], &["even", "three"], None, None),
            |m| m.tags.iter().any(|t| t == "even") && m.tags.iter().any(|t| t == "three"),
        ),
        ("since", f(&[], &[], &[], Some(day(10)), None), |m| {
            m.created_at >= day(10)
        }),
        ("until", f(&[], &[], &[], None, Some(day(6))), |m| {
            m.created_at < day(6)
        }),
        (
            "window and kind and tag",
            f(
                &[MemoryKind::Note, MemoryKind::Fact],
                &["even"],
                &[],
                Some(day(3)),
                Some(day(19)),
            ),
            |m| {
                matches!(m.kind, MemoryKind::Note | MemoryKind::Fact)
                    && m.tags.iter().any(|t| t == "even")
                    && m.created_at >= day(3)
                    && m.created_at < day(19)
            },
        ),
        (
            "exactly one",
            f(&[], &["only-seven"], &[], None, None),
            |m| m.tags.iter().any(|t| t == "only-seven"),
        ),
        (
            "nothing",
            f(&[MemoryKind::Instruction], &[], &["only-seven"], None, None),
            |_| false,
        ),
        (
            "before every memory",
            f(&[], &[], &[], None, Some(day(0))),
            |_| false,
        ),
    ]
}

fn ids(hits: &[ScoredMemory]) -> Vec<uuid::Uuid> {
    hits.iter().map(|h| h.memory.id).collect()
}

/// Filtered recall equals the contract's brute-force reference restricted to the memories
/// that pass, returns only those, and as many as `limit` allows; the empty filter is
/// exactly unfiltered recall.
pub async fn filtered_recall_equals_reference(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, fake) = engine(store.clone());
    let u = user("filtered");
    let live = labelled_corpus(&engine, &u).await;
    let docs: Vec<_> = live
        .iter()
        .map(|m| (m.clone(), fake.vector(&m.content)))
        .collect();
    for (name, filter, passes) in cases() {
        let passing = live.iter().filter(|m| passes(m)).count();
        for query in QUERIES {
            for top_k in [1, 3, 10, 40] {
                let got = engine
                    .recall_filtered(&u, query, top_k, &filter)
                    .await
                    .unwrap();
                let expected =
                    hybrid_ranking_where(&docs, query, &fake.vector(query), top_k, passes);
                assert_eq!(ids(&got), expected, "{name}: query {query:?} top_k {top_k}");
                assert!(got.iter().all(|h| passes(&h.memory)), "{name}: {query:?}");
                // Dense ranks every memory that passes, so only the limit cuts.
                assert_eq!(got.len(), top_k.min(passing), "{name}: {query:?} {top_k}");
            }
        }
    }
    for query in QUERIES {
        let plain = engine.recall(&u, query, 10).await.unwrap();
        let empty = engine
            .recall_filtered(&u, query, 10, &MemoryFilter::default())
            .await
            .unwrap();
        assert_eq!(plain, empty, "the empty filter is no filter: {query:?}");
    }
}

/// What two result lists must agree on: ids in order, scores bit for bit, both ranks.
fn fingerprint(hits: &[ScoredMemory]) -> Vec<(uuid::Uuid, u64, Option<u32>, Option<u32>)> {
    hits.iter()
        .map(|h| (h.memory.id, h.score.to_bits(), h.dense_rank, h.lexical_rank))
        .collect()
}

/// Gated on `search`: the pushdown with every kind of filter returns exactly what the
/// in-process path returns with it, ids, ranks and bit-equal scores.
pub async fn filtered_search_equals_in_process_retrieval(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    if !applies(
        "filtered_search_equals_in_process_retrieval",
        "search",
        store.capabilities().search,
    ) {
        return;
    }
    let (engine, fake) = engine(store.clone());
    let u = user("filtered-parity");
    labelled_corpus(&engine, &u).await;
    let built = store.build_index(&u, DIM).await.unwrap();
    let queries = QUERIES
        .iter()
        .copied()
        .chain(["zzzz unknown words only", CORPUS[0]]);
    for query in queries {
        let embedding = query_vector(&fake, query).await;
        let terms = query_terms(query);
        for (name, filter, _) in cases() {
            for top_k in [1, 3, 10, 40, 100] {
                let request = SearchRequest {
                    query: query.to_owned(),
                    terms: terms.clone(),
                    embedding: embedding.clone(),
                    top_k,
                    filter: filter.clone(),
                };
                let pushed = store
                    .search(&u, &request)
                    .await
                    .unwrap_or_else(|e| panic!("{name}: search failed: {e}"));
                let local =
                    hybrid_retrieve_filtered(&built.index, &embedding, &terms, top_k, &filter)
                        .unwrap();
                assert_eq!(
                    fingerprint(&pushed),
                    fingerprint(&local),
                    "{name}: query {query:?} top_k {top_k}"
                );
                if filter.is_empty() {
                    let plain = hybrid_retrieve(&built.index, &embedding, &terms, top_k).unwrap();
                    assert_eq!(fingerprint(&local), fingerprint(&plain));
                }
            }
        }
    }
}

async fn query_vector(fake: &FakeProvider, query: &str) -> Vec<f32> {
    fake.embed(&[query.to_owned()], EmbedTask::Query)
        .await
        .unwrap()
        .vectors
        .remove(0)
}

/// How many memories the paging scenario writes: the 5,000.
const PAGED: usize = 5_000;

/// Every memory of a 5,000-memory store is on exactly one page, newest first, while new
/// memories are written between pages; a filtered walk returns exactly the memories that
/// pass; the last page has no cursor.
pub async fn pages_reach_every_memory_once(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, _) = engine(store.clone());
    let u = user("paging");
    let mut originals = Vec::with_capacity(PAGED);
    for i in 0..PAGED {
        let kind = if i.is_multiple_of(10) {
            MemoryKind::Decision
        } else {
            MemoryKind::Note
        };
        let m = engine
            .memorize(
                &u,
                &format!("paged memory number {i}"),
                kind,
                &[],
                &Default::default(),
            )
            .await
            .unwrap()
            .memory;
        originals.push(m);
    }
    let walk = |filter: MemoryFilter, limit: usize, write_between: bool| {
        let (engine, u) = (&engine, &u);
        async move {
            let mut seen = Vec::new();
            let mut cursor: Option<String> = None;
            let mut pages = 0;
            loop {
                let page = engine
                    .list_page(u, &filter, limit, cursor.as_deref())
                    .await
                    .unwrap();
                assert!(page.memories.len() <= limit);
                seen.extend(page.memories.iter().map(|m| (m.id, m.seq, m.kind)));
                pages += 1;
                if write_between {
                    engine
                        .memorize(
                            u,
                            &format!("written during page {pages}"),
                            MemoryKind::Decision,
                            &[],
                            &Default::default(),
                        )
                        .await
                        .unwrap();
                }
                match page.next_cursor {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
                assert!(pages <= PAGED, "the walk does not end");
            }
            seen
        }
    };
    let seen = walk(MemoryFilter::default(), 333, true).await;
    let expected: Vec<uuid::Uuid> = originals.iter().rev().map(|m| m.id).collect();
    let got: Vec<uuid::Uuid> = seen.iter().map(|s| s.0).collect();
    assert_eq!(
        got.len(),
        PAGED,
        "only the memories there when the walk began"
    );
    assert_eq!(got, expected, "newest first, each exactly once");
    let distinct: HashSet<_> = got.iter().collect();
    assert_eq!(distinct.len(), PAGED);

    // A filtered walk, pages of 7: only the decisions there at its start.
    let decisions = MemoryFilter::new(&[MemoryKind::Decision], &[], &[], None, None).unwrap();
    let before = engine.list_page(&u, &decisions, 1000, None).await.unwrap();
    let walked: Vec<uuid::Uuid> = walk(decisions.clone(), 7, false)
        .await
        .iter()
        .map(|s| s.0)
        .collect();
    let all_decisions: Vec<uuid::Uuid> = before.memories.iter().map(|m| m.id).collect();
    assert_eq!(walked, all_decisions);
    let original_decisions: Vec<uuid::Uuid> = originals
        .iter()
        .rev()
        .filter(|m| m.kind == MemoryKind::Decision)
        .map(|m| m.id)
        .collect();
    assert_eq!(original_decisions.len(), PAGED / 10);
    assert!(
        walked.ends_with(&original_decisions),
        "the originals, after the new ones"
    );

    // A limit that divides the total exactly still ends with an empty cursor, not an
    // empty page after it.
    let u2 = user("paging-exact");
    for i in 0..6 {
        engine
            .memorize(
                &u2,
                &format!("six {i}"),
                MemoryKind::Note,
                &[],
                &Default::default(),
            )
            .await
            .unwrap();
    }
    let first = engine
        .list_page(&u2, &MemoryFilter::default(), 3, None)
        .await
        .unwrap();
    let second = engine
        .list_page(
            &u2,
            &MemoryFilter::default(),
            3,
            first.next_cursor.as_deref(),
        )
        .await
        .unwrap();
    assert_eq!(second.memories.len(), 3);
    assert_eq!(second.next_cursor, None);
}

/// Bad filters and cursors are named errors that call no provider and change nothing.
pub async fn bad_filters_and_cursors_change_nothing(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, fake) = engine(store.clone());
    let u = user("bad-filter");
    labelled_corpus(&engine, &u).await;
    let count = store.count(&u).await.unwrap();
    let calls = fake.embed_calls();
    let backwards = MemoryFilter {
        created: cortex_core::records::TimeRange {
            since: Some(day(5)),
            until: Some(day(5)),
        },
        ..MemoryFilter::default()
    };
    let many = MemoryFilter {
        tags: (0..33).map(|i| format!("t{i}")).collect(),
        ..MemoryFilter::default()
    };
    for (filter, field) in [(backwards, "since"), (many, "tags")] {
        match engine.recall_filtered(&u, "deploy", 5, &filter).await {
            Err(CortexError::InvalidInput { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
        match engine.list_page(&u, &filter, 5, None).await {
            Err(CortexError::InvalidInput { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    for cursor in ["", "12", "c1.zz", "c1.", "c2.10", "c1.-5", "c1.+a", "c1.0"] {
        match engine
            .list_page(&u, &MemoryFilter::default(), 5, Some(cursor))
            .await
        {
            Err(CortexError::InvalidInput {
                field: "cursor", ..
            }) => {}
            other => panic!("cursor {cursor:?}: {other:?}"),
        }
    }
    assert_eq!(
        fake.embed_calls(),
        calls,
        "no provider call for a refused filter"
    );
    assert_eq!(store.count(&u).await.unwrap(), count);
}

/// A filtered list holds exactly the live memories that pass, newest first, whole or a
/// page of two at a time.
pub async fn filtered_list_is_exact(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, _) = engine(store.clone());
    let u = user("filtered-list");
    let live = labelled_corpus(&engine, &u).await;
    for (name, filter, passes) in cases() {
        let expected: Vec<uuid::Uuid> = live
            .iter()
            .rev()
            .filter(|m| passes(m))
            .map(|m| m.id)
            .collect();
        let whole = engine.list_page(&u, &filter, 1000, None).await.unwrap();
        let got: Vec<uuid::Uuid> = whole.memories.iter().map(|m| m.id).collect();
        assert_eq!(got, expected, "{name}");
        assert_eq!(whole.next_cursor, None, "{name}");
        let mut paged = Vec::new();
        let mut cursor = None;
        loop {
            let page = engine
                .list_page(&u, &filter, 2, cursor.as_deref())
                .await
                .unwrap();
            paged.extend(page.memories.iter().map(|m| m.id));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(paged, expected, "{name}, in pages of two");
    }
}
