//! Corrections without a model: `memorize(replaces)` writes the new memory and its
//! supersession of the old one in one transaction.

use cortex_core::{
    engine::MemorizeOptions, engine::MemorizeStatus, engine::REPLACED_BY_CALLER,
    error::CortexError, error::StoreError, memory::MemoryKind, new_memory::NewMemory,
    store::MemoryStore,
};

use crate::StoreFactory;
use crate::support::{engine, remember_all, user};

/// The replaced memory leaves recall and list at once, `history` shows the chain, a
/// second correction of the same memory is refused, forgetting the correction restores
/// the original, and a store write whose supersession names a missing memory writes
/// nothing at all.
pub async fn replaces_supersedes_in_one_transaction(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, fake) = engine(store.clone());
    let u = user("replaces");
    let old = remember_all(
        &engine,
        &u,
        &["Ada's manager is Bob Stone", "Ada drinks green tea"],
    )
    .await;
    // A recall first, so the engine's cached index must follow the correction in place.
    let before = engine.recall(&u, "who is Ada's manager", 10).await.unwrap();
    assert_eq!(before[0].memory.id, old[0].id);
    let prefix: String = old[0].id.to_string().chars().take(8).collect();
    let options = MemorizeOptions {
        replaces: Some(prefix.clone()),
        ..MemorizeOptions::default()
    };
    let done = engine
        .memorize(
            &u,
            "Ada's manager is Carol Wu",
            MemoryKind::Fact,
            &[],
            &options,
        )
        .await
        .unwrap();
    assert_eq!(done.status, MemorizeStatus::Superseded);
    assert_eq!(done.superseded, [old[0].id]);
    let new = done.memory;

    let recalled = engine.recall(&u, "who is Ada's manager", 10).await.unwrap();
    let ids: Vec<_> = recalled.iter().map(|h| h.memory.id).collect();
    assert!(ids.contains(&new.id), "{recalled:?}");
    assert!(
        !ids.contains(&old[0].id),
        "the replaced memory is not recalled"
    );
    let listed: Vec<_> = engine
        .list_memories(&u, 10)
        .await
        .unwrap()
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(listed, [new.id, old[1].id]);
    assert_eq!(store.count(&u).await.unwrap(), 2);

    let chain = engine.history(&u, &new.id.to_string()).await.unwrap();
    assert_eq!(chain.len(), 2);
    assert_eq!(chain[0].memory.id, old[0].id);
    assert_eq!(chain[0].superseded_by, [new.id]);
    assert_eq!(chain[0].reason.as_deref(), Some(REPLACED_BY_CALLER));
    assert!(chain[0].valid_until.is_some());
    assert_eq!(chain[1].memory.id, new.id);
    assert_eq!(chain[1].valid_until, None);

    // Refusals: each writes nothing and costs no embed call.
    let calls = fake.embed_calls();
    let again = |replaces: &str| MemorizeOptions {
        replaces: Some(replaces.to_owned()),
        ..MemorizeOptions::default()
    };
    match engine
        .memorize(
            &u,
            "Ada's manager is Dan",
            MemoryKind::Fact,
            &[],
            &again(&prefix),
        )
        .await
    {
        Err(CortexError::InvalidInput {
            field: "replaces",
            reason,
        }) => {
            assert!(reason.contains(&new.id.to_string()), "{reason}")
        }
        other => panic!("a replaced memory replaced again: {other:?}"),
    }
    let unknown = uuid::Uuid::new_v4().to_string();
    match engine
        .memorize(&u, "x", MemoryKind::Fact, &[], &again(&unknown))
        .await
    {
        Err(CortexError::NotFound { .. }) => {}
        other => panic!("an unknown id: {other:?}"),
    }
    let theirs = user("replaces-other");
    match engine
        .memorize(
            &theirs,
            "x",
            MemoryKind::Fact,
            &[],
            &again(&new.id.to_string()),
        )
        .await
    {
        Err(CortexError::NotFound { .. }) => {}
        other => panic!("another user's memory: {other:?}"),
    }
    match engine
        .memorize(&u, "x", MemoryKind::Fact, &[], &again("zz"))
        .await
    {
        Err(CortexError::InvalidInput {
            field: "replaces", ..
        }) => {}
        other => panic!("a malformed id: {other:?}"),
    }
    assert_eq!(fake.embed_calls(), calls);
    assert_eq!(store.count(&u).await.unwrap(), 2);
    assert_eq!(store.count(&theirs).await.unwrap(), 0);

    // Forgetting the correction brings the original back.
    engine.forget(&u, &new.id.to_string()).await.unwrap();
    let recalled = engine.recall(&u, "who is Ada's manager", 10).await.unwrap();
    assert!(recalled.iter().any(|h| h.memory.id == old[0].id));

    // One transaction: a supersession of a memory that does not exist fails the write of
    // the new memory too.
    let signature = store.signature().await.unwrap().unwrap();
    let orphan = NewMemory::new(&u, "never written", MemoryKind::Note, &[], 1 << 15)
        .unwrap()
        .replacing(uuid::Uuid::new_v4(), REPLACED_BY_CALLER);
    let vector = fake.vector("never written");
    match store.add(&orphan, &vector, &signature).await {
        Err(StoreError::MissingReference(_)) => {}
        other => panic!("a supersession of nothing: {other:?}"),
    }
    assert!(store.get(&u, &orphan.id).await.unwrap().is_none());
    assert_eq!(store.count(&u).await.unwrap(), 2);

    // Nor may a write supersede another user's memory, or one already superseded (the
    // check is inside the write, so two racing corrections cannot both commit).
    let foreign = NewMemory::new(&theirs, "not yours", MemoryKind::Note, &[], 1 << 15)
        .unwrap()
        .replacing(old[1].id, REPLACED_BY_CALLER);
    match store.add(&foreign, &vector, &signature).await {
        Err(StoreError::MissingReference(_)) => {}
        other => panic!("another user's memory superseded: {other:?}"),
    }
    assert!(
        engine
            .list_memories(&u, 10)
            .await
            .unwrap()
            .iter()
            .any(|m| m.id == old[1].id)
    );
    let first = NewMemory::new(&u, "first fix", MemoryKind::Note, &[], 1 << 15)
        .unwrap()
        .replacing(old[1].id, REPLACED_BY_CALLER);
    store.add(&first, &vector, &signature).await.unwrap();
    let second = NewMemory::new(&u, "second fix", MemoryKind::Note, &[], 1 << 15)
        .unwrap()
        .replacing(old[1].id, REPLACED_BY_CALLER);
    match store.add(&second, &vector, &signature).await {
        Err(StoreError::AlreadySuperseded(id)) => assert_eq!(id, old[1].id),
        other => panic!("a second successor: {other:?}"),
    }
    assert!(store.get(&u, &second.id).await.unwrap().is_none());
    assert_eq!(store.count(&theirs).await.unwrap(), 0);
}

/// A change of kind or tags is a correction: same content and date, the new labels, the
/// old version in `history` with what changed; the filters see the new labels at once.
pub async fn retag_is_recorded_in_history(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, _) = engine(store.clone());
    let u = user("retag");
    let tags = vec!["billing".to_owned(), "draft".to_owned()];
    let old = engine
        .memorize(
            &u,
            "Invoices go out on the 1st",
            MemoryKind::Note,
            &tags,
            &Default::default(),
        )
        .await
        .unwrap()
        .memory;
    let change = cortex_core::engine::Retag {
        kind: Some(MemoryKind::Decision),
        add: vec!["Finance".to_owned()],
        remove: vec!["draft".to_owned()],
    };
    let done = engine
        .retag(&u, &old.id.to_string()[..6], &change)
        .await
        .unwrap();
    let new = done.memory;
    assert_eq!(done.superseded, [old.id]);
    assert_eq!(new.kind, MemoryKind::Decision);
    assert_eq!(new.tags, ["billing", "finance"]);
    assert_eq!(
        (new.content.as_str(), new.created_at),
        (old.content.as_str(), old.created_at)
    );
    let listed = engine.list_memories(&u, 10).await.unwrap();
    assert_eq!(listed, std::slice::from_ref(&new));
    let chain = engine.history(&u, &new.id.to_string()).await.unwrap();
    let reason = chain[0].reason.clone().unwrap_or_default();
    for part in ["kind note -> decision", "+finance", "-draft"] {
        assert!(reason.contains(part), "{reason}");
    }
    let finance =
        cortex_core::filter::MemoryFilter::new(&[], &["finance".to_owned()], &[], None, None)
            .unwrap();
    let found = engine
        .recall_filtered(&u, "invoices", 5, &finance)
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].memory.id, new.id);
    // Nothing to change, or a version already replaced: refused, nothing written.
    let same = cortex_core::engine::Retag {
        add: vec!["billing".to_owned()],
        ..cortex_core::engine::Retag::default()
    };
    assert!(matches!(
        engine.retag(&u, &new.id.to_string(), &same).await,
        Err(CortexError::InvalidInput { .. })
    ));
    // Removing and adding back the same tag only reorders it: no change either.
    let shuffle = cortex_core::engine::Retag {
        add: vec!["billing".to_owned()],
        remove: vec!["billing".to_owned()],
        ..cortex_core::engine::Retag::default()
    };
    assert!(matches!(
        engine.retag(&u, &new.id.to_string(), &shuffle).await,
        Err(CortexError::InvalidInput { .. })
    ));
    assert!(matches!(
        engine.retag(&u, &old.id.to_string(), &change).await,
        Err(CortexError::InvalidInput {
            field: "replaces",
            ..
        })
    ));
    assert_eq!(store.count(&u).await.unwrap(), 1);
}

/// A correction that gives no tags carries the old memory's over; one that gives tags has
/// exactly those. A retag that removes every tag still leaves none: it says what the tags
/// are, it does not leave them out.
pub async fn a_correction_keeps_the_old_tags_unless_it_gives_its_own(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, _) = engine(store.clone());
    let u = user("correction-tags");
    let tags = |t: &[&str]| t.iter().map(|t| t.to_string()).collect::<Vec<_>>();
    let old = engine
        .memorize(
            &u,
            "The deploy window is Friday",
            MemoryKind::Decision,
            &tags(&["ops", "Release"]),
            &Default::default(),
        )
        .await
        .unwrap()
        .memory;
    let correct = |replaces: String, content: &'static str, given: Vec<String>| {
        let engine = &engine;
        let u = &u;
        async move {
            let options = MemorizeOptions {
                replaces: Some(replaces),
                ..MemorizeOptions::default()
            };
            engine
                .memorize(u, content, MemoryKind::Decision, &given, &options)
                .await
                .unwrap()
                .memory
        }
    };
    let carried = correct(
        old.id.to_string()[..8].to_owned(),
        "The deploy window is Thursday",
        Vec::new(),
    )
    .await;
    assert_eq!(carried.tags, ["ops", "release"], "carried over");
    assert_eq!(store.get(&u, &carried.id).await.unwrap().unwrap(), carried);

    let given = correct(
        carried.id.to_string(),
        "The deploy window is Wednesday",
        tags(&["Infra"]),
    )
    .await;
    assert_eq!(given.tags, ["infra"], "the correction's own tags win");
    let listed = engine.list_memories(&u, 10).await.unwrap();
    assert_eq!(listed, std::slice::from_ref(&given));

    let bare = engine
        .retag(
            &u,
            &given.id.to_string(),
            &cortex_core::engine::Retag {
                remove: tags(&["infra"]),
                ..cortex_core::engine::Retag::default()
            },
        )
        .await
        .unwrap()
        .memory;
    assert!(bare.tags.is_empty(), "{:?}", bare.tags);
}
