//! Storing, reading, listing, counting; isolation and persistence.

use std::sync::Arc;

use cortex_core::{memory::MemoryKind, store::MemoryStore};

use crate::StoreFactory;
use crate::support::{applies, engine, remember_all, user};

/// Every field written comes back unchanged, through get, list and recall.
pub async fn round_trip_every_field(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, _) = engine(store.clone());
    let u = user("round-trip");
    let tags = vec![
        "Work".to_owned(),
        "  project-x ".to_owned(),
        "work".to_owned(),
    ];
    let stored = engine
        .memorize(
            &u,
            "  Deploy window is Friday 18:00 UTC  ",
            MemoryKind::Decision,
            &tags,
            &Default::default(),
        )
        .await
        .unwrap()
        .memory;
    assert_eq!(stored.content, "  Deploy window is Friday 18:00 UTC  ");
    assert_eq!(stored.kind, MemoryKind::Decision);
    assert_eq!(stored.tags, ["work", "project-x"]);
    assert_eq!(stored.user_id, u);
    assert_eq!(stored.id.get_version_num(), 4);

    let got = store
        .get(&u, &stored.id)
        .await
        .unwrap()
        .expect("stored memory");
    assert_eq!(got, stored, "get returns every field as written");
    let listed = engine.list_memories(&u, 10).await.unwrap();
    assert_eq!(listed, vec![stored.clone()]);
    let recalled = engine.recall(&u, "deploy window", 5).await.unwrap();
    assert_eq!(recalled[0].memory, stored);

    for kind in MemoryKind::ALL {
        let m = engine
            .memorize(
                &u,
                &format!("a {kind} memory"),
                kind,
                &[],
                &Default::default(),
            )
            .await
            .unwrap()
            .memory;
        assert_eq!(store.get(&u, &m.id).await.unwrap().unwrap().kind, kind);
    }
}

/// list gives the newest first and honours the limit.
pub async fn list_is_newest_first_with_limit(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let (engine, _) = engine(storage.connect().await);
    let u = user("list");
    let stored = remember_all(&engine, &u, &["one", "two", "three", "four", "five"]).await;
    let seqs: Vec<i64> = stored.iter().map(|m| m.seq).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "seq increases: {seqs:?}"
    );

    let listed = engine.list_memories(&u, 3).await.unwrap();
    let contents: Vec<&str> = listed.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["five", "four", "three"]);
    assert_eq!(engine.list_memories(&u, 1000).await.unwrap().len(), 5);
    assert!(engine.list_memories(&u, 0).await.is_err());
    assert!(engine.list_memories(&u, 1001).await.is_err());
}

/// Newest first means the `created_at` a memory shows, not when it was stored: a memory
/// dated in the past goes below newer ones whenever it was written, and of two with the
/// same date the later-stored goes first. Pages of any size walk that order once.
pub async fn list_is_newest_first_by_created_at(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let (engine, _) = engine(storage.connect().await);
    let u = user("list-dated");
    let date = |text: &str| {
        chrono::DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&chrono::Utc)
    };
    let written = [
        ("started at Acme", Some("2024-03-01T00:00:00Z")),
        ("moved to Lisbon", None),
        ("born in Porto", Some("1990-05-17T00:00:00Z")),
        ("first tie", Some("2010-09-01T00:00:00Z")),
        ("second tie", Some("2010-09-01T00:00:00Z")),
    ];
    for (text, at) in written {
        engine
            .memorize(
                &u,
                text,
                MemoryKind::Fact,
                &[],
                &cortex_core::engine::MemorizeOptions {
                    created_at: at.map(date),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
    }
    let expected = [
        "moved to Lisbon",
        "started at Acme",
        "second tie",
        "first tie",
        "born in Porto",
    ];
    let contents = |memories: &[cortex_core::memory::Memory]| {
        memories
            .iter()
            .map(|m| m.content.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        contents(&engine.list_memories(&u, 10).await.unwrap()),
        expected
    );
    for limit in [1, 2, 3] {
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = engine
                .list_page(
                    &u,
                    &cortex_core::filter::MemoryFilter::default(),
                    limit,
                    cursor.as_deref(),
                )
                .await
                .unwrap();
            seen.extend(contents(&page.memories));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
            assert!(seen.len() <= expected.len(), "{seen:?}");
        }
        assert_eq!(seen, expected, "pages of {limit}");
    }
}

/// count follows writes and deletes.
pub async fn count_counts_live_memories(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let (engine, _) = engine(storage.connect().await);
    let u = user("count");
    assert_eq!(engine.count(&u).await.unwrap(), 0);
    let stored = remember_all(&engine, &u, &["a1", "b2", "c3"]).await;
    assert_eq!(engine.count(&u).await.unwrap(), 3);
    engine.forget(&u, &stored[1].id.to_string()).await.unwrap();
    assert_eq!(engine.count(&u).await.unwrap(), 2);
}

/// Another user's memories are never listed, counted, recalled, read, resolved by prefix
/// or deleted.
pub async fn users_are_isolated(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, _) = engine(store.clone());
    let (alice, bob) = (user("alice"), user("bob"));
    let secret = remember_all(&engine, &alice, &["alice secret zanzibar"])
        .await
        .remove(0);
    remember_all(&engine, &bob, &["bob note"]).await;

    assert_eq!(engine.count(&bob).await.unwrap(), 1);
    let bob_list = engine.list_memories(&bob, 100).await.unwrap();
    assert!(bob_list.iter().all(|m| m.user_id == bob));
    let recalled = engine
        .recall(&bob, "alice secret zanzibar", 10)
        .await
        .unwrap();
    assert!(recalled.iter().all(|s| s.memory.user_id == bob));
    assert!(store.get(&bob, &secret.id).await.unwrap().is_none());
    let prefix = &secret.id.to_string()[..8];
    assert!(store.find_by_prefix(&bob, prefix).await.unwrap().is_empty());
    assert!(matches!(
        engine.forget(&bob, &secret.id.to_string()).await,
        Err(cortex_core::error::CortexError::NotFound { .. })
    ));
    assert!(matches!(
        engine.forget(&bob, prefix).await,
        Err(cortex_core::error::CortexError::NotFound { .. })
    ));
    assert!(store.delete(&bob, &secret.id).await.unwrap().is_none());
    assert_eq!(
        engine.count(&alice).await.unwrap(),
        1,
        "alice's memory survives"
    );
}

/// Memories written concurrently are all stored, with distinct increasing sequence numbers.
pub async fn concurrent_memorize_keeps_every_memory(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let (engine, _) = engine(storage.connect().await);
    let engine = Arc::new(engine);
    let u = user("concurrent");
    let tasks: Vec<_> = (0..24)
        .map(|i| {
            let (engine, u) = (engine.clone(), u.clone());
            tokio::spawn(async move {
                engine
                    .memorize(
                        &u,
                        &format!("parallel memory {i}"),
                        MemoryKind::Note,
                        &[],
                        &Default::default(),
                    )
                    .await
                    .unwrap()
                    .memory
            })
        })
        .collect();
    let mut seqs = Vec::new();
    for t in tasks {
        seqs.push(t.await.unwrap().seq);
    }
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 24, "every memory got its own seq");
    assert_eq!(engine.count(&u).await.unwrap(), 24);
    let hits = engine.recall(&u, "parallel memory 7", 24).await.unwrap();
    assert_eq!(
        hits.len(),
        24,
        "the cached index holds every concurrent write"
    );
}

/// Everything written is there after every handle is dropped and the store reopened.
pub async fn survives_close_and_reopen(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let persistent = storage.connect().await.capabilities().persistent;
    if !applies("survives_close_and_reopen", "persistent", persistent) {
        return;
    }
    let u = user("persist");
    let (written, before) = {
        let store: Arc<dyn MemoryStore> = storage.connect().await;
        let (engine, _) = engine(store);
        let written = remember_all(&engine, &u, &["kept across restarts", "second one"]).await;
        let before = engine.recall(&u, "restarts", 2).await.unwrap();
        (written, before)
    };
    let store = storage.connect().await;
    let (engine, _) = engine(store.clone());
    assert_eq!(engine.count(&u).await.unwrap(), 2);
    let listed = engine.list_memories(&u, 10).await.unwrap();
    assert_eq!(listed, written.into_iter().rev().collect::<Vec<_>>());
    let after = engine.recall(&u, "restarts", 2).await.unwrap();
    assert_eq!(after, before, "recall after reopen equals recall before");
    assert!(store.signature().await.unwrap().is_some());
}
