//! Export, import and re-embedding through [`TransferStore`]: what `cortex export`,
//! `import`, `migrate` and `reembed` are built on.

use std::sync::Arc;

use chrono::Utc;
use cortex_core::memory::Supersession;
use cortex_core::records::{Entity, EntityEdge, EntityRole, EntityUpsert, Event, TimeRange};
use cortex_core::{
    enrichment_store::EnrichmentStore, enrichment_store::ExtractionRecords, error::StoreError,
    memory::MemoryKind, new_memory::NewMemory, signature::EmbeddingSignature, transfer::EntityLink,
    transfer::ImportItem, transfer::Imported, transfer::Record, transfer::RecordKind,
    transfer::StoredMemory, transfer::Switch, transfer::TransferStore,
};

use crate::support::{DIM, engine, remember_all, user};
use crate::{StoreFactory, TestStorage};

async fn transfer(storage: &dyn TestStorage) -> Arc<dyn TransferStore> {
    storage
        .connect_transfer()
        .await
        .expect("the backend runs transfer_suite!, so it implements TransferStore")
}

/// Every memory and record of `user`, read `page` at a time.
async fn read_all(
    store: &dyn TransferStore,
    user: &str,
    page: usize,
) -> (Vec<StoredMemory>, Vec<Record>) {
    let mut memories = Vec::new();
    let mut after = 0;
    loop {
        let got = store.memories_after(user, after, page).await.unwrap();
        assert!(got.len() <= page);
        let Some(last) = got.last() else { break };
        after = last.memory.seq;
        memories.extend(got);
    }
    let mut records = Vec::new();
    for kind in RecordKind::ALL {
        let mut offset = 0;
        loop {
            let got = store.records(user, kind, offset, page).await.unwrap();
            assert!(got.iter().all(|r| r.kind() == kind));
            if got.is_empty() {
                break;
            }
            offset += got.len() as u64;
            records.extend(got);
        }
    }
    (memories, records)
}

/// Writes what `read_all` read into `store`, in export order; returns the outcomes.
async fn write_all(
    store: &dyn TransferStore,
    user: &str,
    memories: &[StoredMemory],
    records: &[Record],
    signature: &EmbeddingSignature,
) -> Vec<Imported> {
    let mut out = Vec::new();
    for m in memories {
        let new = NewMemory {
            id: m.memory.id,
            user_id: m.memory.user_id.clone(),
            content: m.memory.content.clone(),
            kind: m.memory.kind,
            tags: m.memory.tags.clone(),
            created_at: m.memory.created_at,
            supersedes: Vec::new(),
            expires_at: m.memory.expires_at,
            records: None,
        };
        out.push(
            store
                .import_memory(&new, &m.embedding, signature)
                .await
                .unwrap(),
        );
    }
    for r in records {
        out.push(match r {
            Record::Supersession(s) => store.import_supersession(user, s).await.unwrap(),
            Record::Event(e) => store.import_event(user, e).await.unwrap(),
            Record::Entity(e) => store.import_entity(user, e).await.unwrap().outcome,
            Record::Edge(e) => store.import_edge(user, e).await.unwrap(),
            Record::Link(l) => store.import_link(user, l).await.unwrap(),
        });
    }
    out
}

/// Memories without their store-assigned sequence, records as a sorted multiset (backends
/// keep some record types in key order rather than insertion order).
fn comparable(read: &(Vec<StoredMemory>, Vec<Record>)) -> (Vec<String>, Vec<String>) {
    let memories = read
        .0
        .iter()
        .map(|m| {
            let mut memory = m.memory.clone();
            memory.seq = 0;
            format!("{memory:?} {} {:?}", m.superseded, m.embedding)
        })
        .collect();
    let mut records: Vec<String> = read.1.iter().map(|r| format!("{r:?}")).collect();
    records.sort();
    (memories, records)
}

/// A user with memories of several kinds and tags, a supersession, events, entities, an
/// edge and links.
async fn seed(store: Arc<dyn TransferStore>, u: &str) {
    let (engine, _) = engine(store.clone());
    let m = remember_all(
        &engine,
        u,
        &[
            "Ada lives in Porto",
            "Ada moved to Lisbon",
            "Ada's sister Bea visits in June",
            "the garden needs water on Sundays",
            "green tea, never coffee",
        ],
    )
    .await;
    engine
        .memorize(
            u,
            "tagged decision",
            MemoryKind::Decision,
            &["Work".into()],
            &Default::default(),
        )
        .await
        .unwrap();
    let now = cortex_core::memory::now();
    store
        .supersede(
            u,
            &Supersession {
                old_id: m[0].id,
                new_id: m[1].id,
                reason: "moved".into(),
                created_at: now,
            },
        )
        .await
        .unwrap();
    for (memory_id, actor) in [
        (m[1].id, Some("Ada")),
        (m[2].id, None),
        (m[2].id, Some("Bea")),
    ] {
        store
            .add_event(
                u,
                &Event {
                    memory_id,
                    event_time: "2024-06-01T10:00:00Z".parse().unwrap(),
                    actor: actor.map(str::to_owned),
                    location: None,
                    event_type: Some("visit".into()),
                },
            )
            .await
            .unwrap();
    }
    let upsert = |name: &str, aliases: &[&str]| EntityUpsert {
        name: name.into(),
        entity_type: Some("person".into()),
        aliases: aliases.iter().map(|a| (*a).to_owned()).collect(),
    };
    let ada = store
        .upsert_entity(u, &upsert("Ada", &["Ada L."]))
        .await
        .unwrap();
    let bea = store.upsert_entity(u, &upsert("Bea", &[])).await.unwrap();
    store
        .add_edge(
            u,
            &EntityEdge {
                source: ada.id,
                target: bea.id,
                label: "sister of".into(),
                memory_id: Some(m[2].id),
                created_at: now,
            },
        )
        .await
        .unwrap();
    for (memory, entity, role) in [
        (m[2].id, ada.id, EntityRole::Subject),
        (m[2].id, bea.id, EntityRole::Mention),
        (m[1].id, ada.id, EntityRole::Subject),
    ] {
        store.link_entity(u, &memory, &entity, role).await.unwrap();
    }
}

pub async fn transfer_copies_every_record_and_keeps_recall(factory: &dyn StoreFactory) {
    let (from, to) = (factory.create().await, factory.create().await);
    let (source, target) = (transfer(&*from).await, transfer(&*to).await);
    let u = user("transfer");
    seed(source.clone(), &u).await;
    let read = read_all(&*source, &u, 2).await;
    assert_eq!(read.0.len(), 6);
    assert_eq!(read.0.iter().filter(|m| m.superseded).count(), 1);
    for kind in RecordKind::ALL {
        assert!(read.1.iter().any(|r| r.kind() == kind), "{kind:?} seeded");
    }
    let signature = source.signature().await.unwrap().unwrap();
    let outcomes = write_all(&*target, &u, &read.0, &read.1, &signature).await;
    assert!(
        outcomes.iter().all(|o| *o == Imported::Written),
        "{outcomes:?}"
    );
    assert_eq!(target.signature().await.unwrap(), Some(signature));
    assert_eq!(
        comparable(&read_all(&*target, &u, 3).await),
        comparable(&read)
    );
    assert_eq!(target.users().await.unwrap(), vec![u.clone()]);

    // Recall on the copy: the same memories, the same order, the same scores.
    let (a, _) = engine(source.clone());
    let (b, _) = engine(target.clone());
    for query in [
        "where does Ada live",
        "tea",
        "garden water",
        "Bea June visit",
    ] {
        let (x, y) = (
            a.recall(&u, query, 10).await.unwrap(),
            b.recall(&u, query, 10).await.unwrap(),
        );
        let ids = |v: &[cortex_core::hybrid::ScoredMemory]| {
            v.iter()
                .map(|s| (s.memory.id, s.score.to_bits()))
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&x), ids(&y), "{query}");
    }
}

pub async fn transfer_import_is_idempotent(factory: &dyn StoreFactory) {
    let (from, to) = (factory.create().await, factory.create().await);
    let (source, target) = (transfer(&*from).await, transfer(&*to).await);
    let u = user("idempotent");
    seed(source.clone(), &u).await;
    let read = read_all(&*source, &u, 100).await;
    let signature = source.signature().await.unwrap().unwrap();
    write_all(&*target, &u, &read.0, &read.1, &signature).await;
    let generation = target.generation(&u).await.unwrap();
    let again = write_all(&*target, &u, &read.0, &read.1, &signature).await;
    assert!(again.iter().all(|o| *o == Imported::Present), "{again:?}");
    assert_eq!(
        target.generation(&u).await.unwrap(),
        generation,
        "nothing changed"
    );
    assert_eq!(
        comparable(&read_all(&*target, &u, 100).await),
        comparable(&read)
    );
}

pub async fn transfer_pages_cover_everything_once(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = transfer(&*storage).await;
    let (u, other) = (user("pages"), user("pages-other"));
    let (engine, _) = engine(store.clone());
    let texts: Vec<String> = (0..11).map(|i| format!("memory number {i}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mine = remember_all(&engine, &u, &refs).await;
    remember_all(&engine, &other, &["someone else's"]).await;
    for page in [1, 4, 11, 50] {
        let (memories, records) = read_all(&*store, &u, page).await;
        let ids: Vec<_> = memories.iter().map(|m| m.memory.id).collect();
        assert_eq!(
            ids,
            mine.iter().map(|m| m.id).collect::<Vec<_>>(),
            "page {page}"
        );
        assert!(
            memories
                .iter()
                .all(|m| m.embedding.len() == DIM && !m.superseded)
        );
        assert!(records.is_empty());
    }
    let mut users = vec![u, other];
    users.sort();
    assert_eq!(store.users().await.unwrap(), users);
}

pub async fn transfer_entity_known_by_name_keeps_the_stores_id(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = transfer(&*storage).await;
    let u = user("entity-by-name");
    let (engine, _) = engine(store.clone());
    let m = remember_all(&engine, &u, &["Ada writes code"]).await;
    let known = store
        .upsert_entity(
            &u,
            &EntityUpsert {
                name: "Ada".into(),
                entity_type: None,
                aliases: vec![],
            },
        )
        .await
        .unwrap();
    let mut incoming = known.clone();
    incoming.id = uuid::Uuid::new_v4();
    let done = store.import_entity(&u, &incoming).await.unwrap();
    assert_eq!((done.outcome, done.id), (Imported::Present, known.id));
    let fresh = cortex_core::records::Entity {
        id: uuid::Uuid::new_v4(),
        name: "Grace".into(),
        normalized_name: "grace".into(),
        entity_type: Some("person".into()),
        aliases: vec!["amazing grace".into()],
        created_at: "2020-02-02T00:00:00Z".parse().unwrap(),
    };
    let done = store.import_entity(&u, &fresh).await.unwrap();
    assert_eq!((done.outcome, done.id), (Imported::Written, fresh.id));
    // Another entity whose name is only an alias of this one's is its own entity.
    let namesake = cortex_core::records::Entity {
        id: uuid::Uuid::new_v4(),
        name: "Amazing Grace".into(),
        normalized_name: "amazing grace".into(),
        aliases: vec![],
        ..fresh.clone()
    };
    let done = store.import_entity(&u, &namesake).await.unwrap();
    assert_eq!((done.outcome, done.id), (Imported::Written, namesake.id));
    assert_eq!(
        store.entity(&u, &fresh.id).await.unwrap(),
        Some(fresh.clone())
    );
    let link = EntityLink {
        memory_id: m[0].id,
        entity_id: fresh.id,
        role: EntityRole::Mention,
    };
    assert_eq!(
        store.import_link(&u, &link).await.unwrap(),
        Imported::Written
    );
    assert_eq!(
        store.import_link(&u, &link).await.unwrap(),
        Imported::Present
    );
    // Events: an identical one is there already; one differing only in a null is not.
    let event = Event {
        memory_id: m[0].id,
        event_time: Utc::now().with_timezone(&Utc),
        actor: None,
        location: Some("home".into()),
        event_type: None,
    };
    let event = Event {
        event_time: cortex_core::memory::now(),
        ..event
    };
    assert_eq!(
        store.import_event(&u, &event).await.unwrap(),
        Imported::Written
    );
    assert_eq!(
        store.import_event(&u, &event).await.unwrap(),
        Imported::Present
    );
    let other = Event {
        actor: Some("Ada".into()),
        ..event.clone()
    };
    assert_eq!(
        store.import_event(&u, &other).await.unwrap(),
        Imported::Written
    );
}

pub async fn transfer_switch_waits_for_every_memory(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = transfer(&*storage).await;
    let (u, v) = (user("switch"), user("switch-other"));
    let (engine, _) = engine(store.clone());
    let mine = remember_all(&engine, &u, &["one", "two", "three"]).await;
    let theirs = remember_all(&engine, &v, &["four"]).await;
    let old = store.signature().await.unwrap().unwrap();
    let new = EmbeddingSignature::new("another-model", 8);
    let vector = |i: usize| {
        (0..8)
            .map(|d| ((i + 1) * (d + 2)) as f32)
            .collect::<Vec<f32>>()
    };

    let before = read_all(&*store, &u, 100).await;
    let all_ids: Vec<_> = mine.iter().chain(&theirs).map(|m| m.id).collect();
    let todo: Vec<_> = store
        .unstaged(&new, 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(todo, all_ids, "every user's memories, in sequence order");

    store
        .stage_vectors(&new, &[(mine[0].id, vector(0)), (theirs[0].id, vector(3))])
        .await
        .unwrap();
    let left: Vec<_> = store
        .unstaged(&new, 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(left, vec![mine[1].id, mine[2].id]);
    assert_eq!(
        store.switch_vectors(&new).await.unwrap(),
        Switch::Missing { memories: 2 }
    );
    // Nothing changed: the old signature, the old vectors, recall as before.
    assert_eq!(store.signature().await.unwrap(), Some(old.clone()));
    assert_eq!(
        comparable(&read_all(&*store, &u, 100).await),
        comparable(&before)
    );
    assert!(!engine.recall(&u, "two", 3).await.unwrap().is_empty());

    // A wrong size is refused; a memory that is gone (forgotten meanwhile) is skipped.
    assert!(
        store
            .stage_vectors(&new, &[(mine[1].id, vec![1.0; 3])])
            .await
            .is_err()
    );
    store
        .stage_vectors(&new, &[(uuid::Uuid::new_v4(), vector(9))])
        .await
        .unwrap();
    assert_eq!(store.unstaged(&new, 0, 100).await.unwrap().len(), 2);

    let generation = store.generation(&u).await.unwrap();
    store
        .stage_vectors(&new, &[(mine[1].id, vector(1)), (mine[2].id, vector(2))])
        .await
        .unwrap();
    assert!(store.unstaged(&new, 0, 100).await.unwrap().is_empty());
    assert_eq!(
        store.switch_vectors(&new).await.unwrap(),
        Switch::Switched { memories: 4 }
    );
    assert_eq!(store.signature().await.unwrap(), Some(new.clone()));
    assert!(
        store.generation(&u).await.unwrap() > generation,
        "cached indexes rebuild"
    );
    let after = read_all(&*store, &u, 100).await;
    let vectors: Vec<_> = after.0.iter().map(|m| m.embedding.clone()).collect();
    assert_eq!(vectors, vec![vector(0), vector(1), vector(2)]);
    assert_eq!(read_all(&*store, &v, 100).await.0[0].embedding, vector(3));
    // Nothing is staged any more, and the old model is refused.
    assert_eq!(store.unstaged(&new, 0, 100).await.unwrap().len(), 4);
    let refused = store
        .add(
            &NewMemory::new(&u, "late", MemoryKind::Note, &[], 1024).unwrap(),
            &vec![0.5; old.dimension],
            &old,
        )
        .await;
    assert!(refused.is_err());
}

pub async fn transfer_staging_another_model_starts_over(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = transfer(&*storage).await;
    let u = user("restage");
    let (engine, _) = engine(store.clone());
    let mine = remember_all(&engine, &u, &["one", "two"]).await;
    let first = EmbeddingSignature::new("first-model", 4);
    let second = EmbeddingSignature::new("second-model", 4);
    store
        .stage_vectors(
            &first,
            &[(mine[0].id, vec![1.0; 4]), (mine[1].id, vec![2.0; 4])],
        )
        .await
        .unwrap();
    assert!(store.unstaged(&first, 0, 10).await.unwrap().is_empty());
    store
        .stage_vectors(&second, &[(mine[0].id, vec![3.0; 4])])
        .await
        .unwrap();
    assert_eq!(store.unstaged(&first, 0, 10).await.unwrap().len(), 2);
    assert_eq!(
        store.switch_vectors(&first).await.unwrap(),
        Switch::Missing { memories: 2 }
    );
    assert_eq!(
        store.switch_vectors(&second).await.unwrap(),
        Switch::Missing { memories: 1 }
    );
    // Staging the same memory again replaces its vector.
    store
        .stage_vectors(
            &second,
            &[(mine[0].id, vec![5.0; 4]), (mine[1].id, vec![6.0; 4])],
        )
        .await
        .unwrap();
    assert_eq!(
        store.switch_vectors(&second).await.unwrap(),
        Switch::Switched { memories: 2 }
    );
    let (memories, _) = read_all(&*store, &u, 10).await;
    assert_eq!(memories[0].embedding, vec![5.0; 4]);
    assert_eq!(memories[1].embedding, vec![6.0; 4]);
}

fn named(name: &str, aliases: &[&str]) -> EntityUpsert {
    EntityUpsert {
        name: name.into(),
        entity_type: None,
        aliases: aliases.iter().map(|a| (*a).to_owned()).collect(),
    }
}

/// An id that is another user's memory or entity is refused as such, alone or in a batch,
/// and neither user's records change.
pub async fn transfer_refuses_ids_of_another_user(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = transfer(&*storage).await;
    let (owner, other) = (user("owner"), user("owner-other"));
    let (engine, _) = engine(store.clone());
    let m = remember_all(&engine, &owner, &["Ada writes code"]).await;
    let ada = store
        .upsert_entity(&owner, &named("Ada", &[]))
        .await
        .unwrap();
    let signature = store.signature().await.unwrap().unwrap();
    let taken = NewMemory {
        id: m[0].id,
        user_id: other.clone(),
        content: "not the owner's".into(),
        kind: MemoryKind::Note,
        tags: vec![],
        created_at: m[0].created_at,
        supersedes: Vec::new(),
        expires_at: None,
        records: None,
    };
    let embedding = vec![0.5; DIM];
    let refused = store.import_memory(&taken, &embedding, &signature).await;
    assert!(
        matches!(refused, Err(StoreError::ForeignId(_))),
        "{refused:?}"
    );
    let batch = [ImportItem::Memory {
        memory: taken.clone(),
        embedding: embedding.clone(),
    }];
    let refused = store.import_batch(&batch, &signature).await;
    assert!(
        matches!(refused, Err(StoreError::ForeignId(_))),
        "{refused:?}"
    );
    let entity = Entity {
        name: "Grace".into(),
        normalized_name: "grace".into(),
        ..ada.clone()
    };
    let refused = store.import_entity(&other, &entity).await;
    assert!(
        matches!(refused, Err(StoreError::ForeignId(_))),
        "{refused:?}"
    );

    assert!(
        store
            .memories_after(&other, 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .records(&other, RecordKind::Entity, 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.users().await.unwrap(), vec![owner.clone()]);
    let kept = store.get(&owner, &m[0].id).await.unwrap().unwrap();
    assert_eq!(kept.content, "Ada writes code");
    assert_eq!(store.entity(&owner, &ada.id).await.unwrap(), Some(ada));
}

/// An imported edge, link or event must name the user's own memory and entities, checked
/// before anything else: an edge whose (source, target, label) is there already is still
/// refused when its memory is not the user's.
pub async fn transfer_imports_check_references_first(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = transfer(&*storage).await;
    let (u, other) = (user("refs"), user("refs-other"));
    let (engine, _) = engine(store.clone());
    let m = remember_all(&engine, &u, &["Ada met Bea"]).await;
    let ada = store.upsert_entity(&u, &named("Ada", &[])).await.unwrap();
    let bea = store.upsert_entity(&u, &named("Bea", &[])).await.unwrap();
    let edge = EntityEdge {
        source: ada.id,
        target: bea.id,
        label: "met".into(),
        memory_id: Some(m[0].id),
        created_at: cortex_core::memory::now(),
    };
    assert_eq!(
        store.import_edge(&u, &edge).await.unwrap(),
        Imported::Written
    );
    assert_eq!(
        store.import_edge(&u, &edge).await.unwrap(),
        Imported::Present
    );
    let ghost = EntityEdge {
        memory_id: Some(uuid::Uuid::new_v4()),
        ..edge.clone()
    };
    let refused = store.import_edge(&u, &ghost).await;
    assert!(
        matches!(refused, Err(StoreError::MissingReference(_))),
        "{refused:?}"
    );
    let refused = store.import_edge(&other, &edge).await;
    assert!(
        matches!(refused, Err(StoreError::MissingReference(_))),
        "{refused:?}"
    );
    let link = EntityLink {
        memory_id: m[0].id,
        entity_id: ada.id,
        role: EntityRole::Subject,
    };
    let refused = store.import_link(&other, &link).await;
    assert!(
        matches!(refused, Err(StoreError::MissingReference(_))),
        "{refused:?}"
    );
    let event = Event {
        memory_id: m[0].id,
        event_time: "2024-06-01T10:00:00Z".parse().unwrap(),
        actor: None,
        location: None,
        event_type: None,
    };
    let refused = store.import_event(&other, &event).await;
    assert!(
        matches!(refused, Err(StoreError::MissingReference(_))),
        "{refused:?}"
    );
    let edges = store.edges(&u, &ada.id).await.unwrap();
    assert_eq!(edges.len(), 1);
    assert_eq!(edges[0].memory_id, Some(m[0].id));
    assert!(store.users().await.unwrap().iter().all(|x| x != &other));
}

/// A name or alias several of the user's entities answer to resolves to the oldest of
/// them (by creation time, an imported entity keeping its own), for a lookup and for an
/// upsert alike, however they were written.
pub async fn transfer_names_resolve_to_the_oldest_entity(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = transfer(&*storage).await;
    let u = user("oldest");
    let ada = store
        .upsert_entity(&u, &named("Ada", &["A. L."]))
        .await
        .unwrap();
    let augusta = Entity {
        id: uuid::Uuid::new_v4(),
        name: "Augusta".into(),
        normalized_name: "augusta".into(),
        entity_type: None,
        aliases: vec!["a. l.".into()],
        created_at: "1815-12-10T00:00:00Z".parse().unwrap(),
    };
    let done = store.import_entity(&u, &augusta).await.unwrap();
    assert_eq!((done.outcome, done.id), (Imported::Written, augusta.id));
    let found = store.find_entity(&u, " a. L. ").await.unwrap();
    assert_eq!(found.map(|e| e.id), Some(augusta.id));
    let merged = store
        .upsert_entity(&u, &named("A. L.", &["Countess"]))
        .await
        .unwrap();
    assert_eq!(merged.id, augusta.id);
    assert_eq!(merged.aliases, ["a. l.", "countess"]);
    let found = store.find_entity(&u, "ada").await.unwrap();
    assert_eq!(found.map(|e| e.id), Some(ada.id));
    assert_eq!(store.entity(&u, &ada.id).await.unwrap(), Some(ada));
}

/// A store that keeps its data on disk says how much it takes, and more after more is
/// written; only one that keeps nothing there (the in-memory store) may not know.
pub async fn transfer_size_is_known_on_disk(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = transfer(&*storage).await;
    let u = user("size");
    let (engine, _) = engine(store.clone());
    remember_all(&engine, &u, &["a first memory"]).await;
    let before = store.size_bytes().await.unwrap();
    // Distinct words, so no compression (Postgres TOAST) makes the writes take no room.
    let texts: Vec<String> = (0..40)
        .map(|i| {
            (0..150)
                .map(|j| format!("w{}", i * 1000 + j))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    remember_all(&engine, &u, &refs).await;
    let after = store.size_bytes().await.unwrap();
    match (before, after) {
        (Some(before), Some(after)) => assert!(
            before > 0 && after > before,
            "{before} bytes, then {after} after 40 memories of about 1 KB and their vectors"
        ),
        (None, None) => assert!(
            !store.capabilities().persistent,
            "a store that keeps its data on disk must tell how much it takes"
        ),
        other => panic!("the store knew its size only once: {other:?}"),
    }
}

/// A memory imported with a correction and the caller's structure has them written as
/// `add` writes them, in its one transaction: the old memory superseded and the event on
/// the timeline. Importing it again changes nothing, and a second correction of the same
/// memory is refused whole: neither it nor its event is written.
pub async fn transfer_import_memory_keeps_its_corrections_and_records(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = transfer(&*storage).await;
    // The caller's structure only where the store claims it (others refuse it); the
    // correction in every store.
    let records = store.capabilities().records;
    let u = user("import-corrections");
    let (engine, _) = engine(store.clone());
    let old = remember_all(&engine, &u, &["Ada lives in Paris"]).await;
    let signature = store.signature().await.unwrap().unwrap();
    let correction = |content: &str| {
        let mut memory = NewMemory::new(&u, content, MemoryKind::Fact, &[], 10_000).unwrap();
        memory.supersedes = vec![Supersession {
            old_id: old[0].id,
            new_id: memory.id,
            reason: "moved".into(),
            created_at: cortex_core::memory::now(),
        }];
        let event = Event {
            memory_id: memory.id,
            event_time: "2024-05-01T09:00:00Z".parse().unwrap(),
            actor: Some("Ada".into()),
            location: None,
            event_type: Some("move".into()),
        };
        memory.records = records.then(|| {
            Box::new(ExtractionRecords {
                memory_id: memory.id,
                events: vec![event.clone()],
                entities: Vec::new(),
                links: Vec::new(),
                edges: Vec::new(),
            })
        });
        (memory, event)
    };
    let events = async || {
        let timeline = store.timeline(&u, &TimeRange::default(), 10).await.unwrap();
        timeline.into_iter().map(|t| t.event).collect::<Vec<_>>()
    };
    let embedding = vec![0.5; DIM];
    let (memory, event) = correction("Ada lives in Lisbon");
    for expected in [Imported::Written, Imported::Present] {
        let imported = store.import_memory(&memory, &embedding, &signature).await;
        assert_eq!(imported.unwrap(), expected);
        let history = store.supersessions(&u, &old[0].id).await.unwrap();
        assert_eq!(history.len(), 1, "{history:?}");
        assert_eq!(history[0].new_id, memory.id);
        if records {
            assert_eq!(events().await, std::slice::from_ref(&event));
        }
    }

    let (late, _) = correction("Ada lives in Porto");
    let refused = store.import_memory(&late, &embedding, &signature).await;
    assert!(
        matches!(refused, Err(StoreError::AlreadySuperseded(id)) if id == old[0].id),
        "{refused:?}"
    );
    assert_eq!(store.get(&u, &late.id).await.unwrap(), None);
    assert_eq!(store.supersessions(&u, &old[0].id).await.unwrap().len(), 1);
    if records {
        assert_eq!(events().await, [event]);
    }
}
