//! Expiry: from `expires_at` on a memory is never a candidate and listed only when asked,
//! exactly at the boundary (the engine's clock injected, never slept on); `prune` deletes
//! it for good.

use std::sync::Arc;

use chrono::Duration;
use cortex_core::tokenizer::query_terms;
use cortex_core::{
    clock::ManualClock, engine::MemorizeOptions, error::CortexError, filter::MemoryFilter,
    hybrid::ScoredMemory, hybrid::hybrid_retrieve, hybrid::hybrid_retrieve_filtered,
    memory::MemoryKind, provider::EmbedTask, provider::LLMProvider,
};

use crate::StoreFactory;
use crate::support::{DIM, engine, user};

fn fingerprint(hits: &[ScoredMemory]) -> Vec<(uuid::Uuid, u64, Option<u32>, Option<u32>)> {
    hits.iter()
        .map(|h| (h.memory.id, h.score.to_bits(), h.dense_rank, h.lexical_rank))
        .collect()
}

pub async fn expiry_is_exact_at_the_boundary(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let start = cortex_core::memory::now();
    let clock = Arc::new(ManualClock::new(start));
    let (engine, fake) = engine(store.clone());
    let engine = engine.with_clock(clock.clone());
    let u = user("expiry");
    let at = start + Duration::hours(1);
    let expiring = |t| MemorizeOptions {
        expires_at: Some(t),
        ..MemorizeOptions::default()
    };
    let closed = engine
        .memorize(
            &u,
            "The office is closed until Friday",
            MemoryKind::Fact,
            &[],
            &expiring(at),
        )
        .await
        .unwrap()
        .memory;
    assert_eq!(closed.expires_at, Some(at));
    let lasting = engine
        .memorize(
            &u,
            "The office wifi is called Cortex-5G",
            MemoryKind::Fact,
            &[],
            &Default::default(),
        )
        .await
        .unwrap()
        .memory;
    let later = engine
        .memorize(
            &u,
            "The office coffee machine is broken",
            MemoryKind::Fact,
            &[],
            &expiring(at + Duration::hours(1)),
        )
        .await
        .unwrap()
        .memory;
    // Born expired: refused, nothing written.
    match engine
        .memorize(&u, "already over", MemoryKind::Fact, &[], &expiring(start))
        .await
    {
        Err(CortexError::InvalidInput {
            field: "expires_at",
            ..
        }) => {}
        other => panic!("an expiry that is not in the future: {other:?}"),
    }
    assert_eq!(store.count(&u).await.unwrap(), 3);

    let query = "is the office closed";
    let embedding = fake
        .embed(&[query.to_owned()], EmbedTask::Query)
        .await
        .unwrap()
        .vectors
        .remove(0);
    let terms = query_terms(query);
    let ids = |hits: &[ScoredMemory]| hits.iter().map(|h| h.memory.id).collect::<Vec<_>>();
    let listed = |include_expired: bool| {
        let engine = &engine;
        let u = &u;
        async move {
            let filter = MemoryFilter {
                include_expired,
                ..MemoryFilter::default()
            };
            let page = engine.list_page(u, &filter, 10, None).await.unwrap();
            page.memories.iter().map(|m| m.id).collect::<Vec<_>>()
        }
    };

    // A microsecond before: everything, exactly as with no expiry at all.
    clock.set(at - Duration::microseconds(1));
    let got = engine.recall(&u, query, 10).await.unwrap();
    assert!(ids(&got).contains(&closed.id));
    let built = store.build_index(&u, DIM).await.unwrap();
    let plain = hybrid_retrieve(&built.index, &embedding, &terms, 10).unwrap();
    assert_eq!(fingerprint(&got), fingerprint(&plain), "before any expiry");
    assert_eq!(listed(false).await, [later.id, lasting.id, closed.id]);

    // At the instant: gone from recall and list, on every path alike.
    clock.set(at);
    let got = engine.recall(&u, query, 10).await.unwrap();
    assert!(!ids(&got).contains(&closed.id), "{got:?}");
    assert_eq!(got.len(), 2);
    let alive = MemoryFilter {
        alive_at: Some(at),
        ..MemoryFilter::default()
    };
    let built = store.build_index(&u, DIM).await.unwrap();
    let local = hybrid_retrieve_filtered(&built.index, &embedding, &terms, 10, &alive).unwrap();
    assert_eq!(fingerprint(&got), fingerprint(&local), "at the expiry");
    let facts = MemoryFilter::new(&[MemoryKind::Fact], &[], &[], None, None).unwrap();
    let got = engine.recall_filtered(&u, query, 10, &facts).await.unwrap();
    assert!(
        !ids(&got).contains(&closed.id),
        "with a caller's filter too"
    );
    assert_eq!(listed(false).await, [later.id, lasting.id]);
    assert_eq!(listed(true).await, [later.id, lasting.id, closed.id]);

    // Prune: a dry run deletes nothing; then the expired memory goes for good, and only it.
    let dry = engine.prune_expired(&u, true).await.unwrap();
    assert_eq!(ids_of(&dry), [closed.id]);
    assert!(store.get(&u, &closed.id).await.unwrap().is_some());
    let pruned = engine.prune_expired(&u, false).await.unwrap();
    assert_eq!(ids_of(&pruned), [closed.id]);
    assert!(store.get(&u, &closed.id).await.unwrap().is_none());
    assert_eq!(store.count(&u).await.unwrap(), 2);
    assert_eq!(listed(true).await, [later.id, lasting.id]);
}

fn ids_of(memories: &[cortex_core::memory::Memory]) -> Vec<uuid::Uuid> {
    memories.iter().map(|m| m.id).collect()
}
