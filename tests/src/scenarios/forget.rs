//! Forgetting by full id and by prefix.

use cortex_core::{error::CortexError, memory::MemoryKind, store::MemoryStore};

use crate::StoreFactory;
use crate::support::{engine, remember_all, user};

pub async fn forget_by_full_id(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, _) = engine(store.clone());
    let u = user("forget-id");
    let m = remember_all(&engine, &u, &["forget me", "keep me"]).await;
    // Upper case and surrounding spaces name the same id.
    let given = format!(" {} ", m[0].id.to_string().to_uppercase());
    assert_eq!(engine.forget(&u, &given).await.unwrap(), m[0].id);
    assert!(store.get(&u, &m[0].id).await.unwrap().is_none());
    assert!(store.get(&u, &m[1].id).await.unwrap().is_some());
    let recalled = engine.recall(&u, "forget me", 5).await.unwrap();
    assert!(recalled.iter().all(|s| s.memory.id != m[0].id));
}

pub async fn forget_by_unique_prefix(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, _) = engine(store.clone());
    let u = user("forget-prefix");
    let m = remember_all(&engine, &u, &["short id target"])
        .await
        .remove(0);
    let full = m.id.to_string();
    assert_eq!(engine.forget(&u, &full[..6]).await.unwrap(), m.id);
    assert_eq!(engine.count(&u).await.unwrap(), 0);

    // A prefix that runs past the first hyphen works too.
    let m = remember_all(&engine, &u, &["second target"])
        .await
        .remove(0);
    let full = m.id.to_string();
    assert_eq!(engine.forget(&u, &full[..11]).await.unwrap(), m.id);
}

/// Two memories sharing a prefix: the prefix is refused, naming the count, and nothing is
/// deleted.
pub async fn ambiguous_prefix_deletes_nothing(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, _) = engine(store.clone());
    let u = user("ambiguous");
    // Random v4 ids share a 4-hex prefix by chance only rarely, so write until two do.
    let mut seen: std::collections::HashMap<String, uuid::Uuid> = Default::default();
    let prefix = loop {
        let m = engine
            .memorize(
                &u,
                "collision hunting",
                MemoryKind::Note,
                &[],
                &Default::default(),
            )
            .await
            .unwrap()
            .memory;
        let p = m.id.to_string()[..4].to_owned();
        if seen.insert(p.clone(), m.id).is_some() {
            break p;
        }
        assert!(seen.len() < 5000, "no shared prefix after 5000 ids");
    };
    let before = engine.count(&u).await.unwrap();
    match engine.forget(&u, &prefix).await {
        Err(CortexError::AmbiguousPrefix { prefix: p, count }) => {
            assert_eq!(p, prefix);
            assert_eq!(count, 2);
        }
        other => panic!("expected AmbiguousPrefix, got {other:?}"),
    }
    assert_eq!(engine.count(&u).await.unwrap(), before, "nothing deleted");
    assert_eq!(store.find_by_prefix(&u, &prefix).await.unwrap().len(), 2);
}

pub async fn unknown_id_is_not_found(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let (engine, _) = engine(storage.connect().await);
    let u = user("unknown");
    remember_all(&engine, &u, &["something"]).await;
    let missing = uuid::Uuid::new_v4().to_string();
    assert!(matches!(
        engine.forget(&u, &missing).await,
        Err(CortexError::NotFound { .. })
    ));
    // A well-formed prefix that matches nothing.
    let stored = engine.list_memories(&u, 1).await.unwrap();
    let other_prefix = if stored[0].id.to_string().starts_with("ffff") {
        "0000"
    } else {
        "ffff"
    };
    assert!(matches!(
        engine.forget(&u, other_prefix).await,
        Err(CortexError::NotFound { .. })
    ));
    assert_eq!(engine.count(&u).await.unwrap(), 1);
}

pub async fn short_or_malformed_prefix_is_refused(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let (engine, _) = engine(storage.connect().await);
    let u = user("short");
    let m = remember_all(&engine, &u, &["only one"]).await.remove(0);
    let full = m.id.to_string();
    for bad in [
        &full[..3],
        "",
        "   ",
        "zzzz",
        "ab%_",
        "1234' OR 1=1 --",
        &"a".repeat(40),
    ] {
        assert!(
            matches!(
                engine.forget(&u, bad).await,
                Err(CortexError::InvalidInput {
                    field: "memory_id",
                    ..
                })
            ),
            "{bad:?} must be refused"
        );
    }
    assert_eq!(engine.count(&u).await.unwrap(), 1, "nothing deleted");
}
