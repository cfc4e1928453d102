//! The enrichment records: events, entities, edges, links and supersessions.

use chrono::{DateTime, Utc};
use cortex_core::memory::Supersession;
use cortex_core::records::{EntityEdge, EntityRole, EntityUpsert, Event, TimeRange};
use cortex_core::{
    enrichment_store::EnrichmentStore, enrichment_store::ExtractedEdge,
    enrichment_store::ExtractedLink, enrichment_store::ExtractionRecords, error::StoreError,
    store::MemoryStore,
};

use crate::StoreFactory;
use crate::support::{engine, records, remember_all, user};

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn event(memory_id: uuid::Uuid, time: &str) -> Event {
    Event {
        memory_id,
        event_time: at(time),
        actor: Some("self".into()),
        location: Some("Berlin".into()),
        event_type: Some("meeting".into()),
    }
}

fn upsert(name: &str, aliases: &[&str]) -> EntityUpsert {
    EntityUpsert {
        name: name.into(),
        entity_type: None,
        aliases: aliases.iter().map(|a| (*a).to_owned()).collect(),
    }
}

fn edge(
    source: uuid::Uuid,
    target: uuid::Uuid,
    label: &str,
    memory: Option<uuid::Uuid>,
) -> EntityEdge {
    EntityEdge {
        source,
        target,
        label: label.into(),
        memory_id: memory,
        created_at: Utc::now(),
    }
}

pub async fn events_timeline_range_and_order(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let records = records(&*storage).await;
    let (engine, _) = engine(store.clone());
    let u = user("timeline");
    let m = remember_all(
        &engine,
        &u,
        &[
            "march event",
            "january event",
            "february event",
            "same time later",
        ],
    )
    .await;
    records
        .add_event(&u, &event(m[0].id, "2024-03-05T10:00:00Z"))
        .await
        .unwrap();
    records
        .add_event(&u, &event(m[1].id, "2024-01-05T10:00:00Z"))
        .await
        .unwrap();
    records
        .add_event(&u, &event(m[2].id, "2024-02-05T10:00:00Z"))
        .await
        .unwrap();
    records
        .add_event(&u, &event(m[3].id, "2024-02-05T10:00:00Z"))
        .await
        .unwrap();

    let all = records
        .timeline(&u, &TimeRange::default(), 100)
        .await
        .unwrap();
    let contents: Vec<&str> = all.iter().map(|t| t.memory.content.as_str()).collect();
    assert_eq!(
        contents,
        [
            "january event",
            "february event",
            "same time later",
            "march event"
        ]
    );
    assert_eq!(all[0].event, event(m[1].id, "2024-01-05T10:00:00Z"));

    let feb = TimeRange {
        since: Some(at("2024-02-01T00:00:00Z")),
        until: Some(at("2024-03-05T10:00:00Z")),
    };
    let got = records.timeline(&u, &feb, 100).await.unwrap();
    assert_eq!(got.len(), 2, "since inclusive, until exclusive");
    let got = records
        .timeline(
            &u,
            &TimeRange {
                since: Some(at("2024-02-05T10:00:00Z")),
                until: None,
            },
            2,
        )
        .await
        .unwrap();
    assert_eq!(got.len(), 2, "limit");
    assert_eq!(got[0].memory.id, m[2].id);

    let missing = event(uuid::Uuid::new_v4(), "2024-01-01T00:00:00Z");
    assert!(matches!(
        records.add_event(&u, &missing).await,
        Err(StoreError::MissingReference(_))
    ));
}

pub async fn entity_upsert_is_idempotent(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let records = records(&*storage).await;
    let u = user("entities");
    let first = records
        .upsert_entity(&u, &upsert("Ada Lovelace", &[]))
        .await
        .unwrap();
    assert_eq!(first.normalized_name, "ada lovelace");
    let again = records
        .upsert_entity(&u, &upsert("  ada   LOVELACE ", &[]))
        .await
        .unwrap();
    assert_eq!(again, first, "same entity, nothing changed");
    let merged = records
        .upsert_entity(
            &u,
            &EntityUpsert {
                entity_type: Some("person".into()),
                ..upsert("Ada Lovelace", &["Ada", "Countess of Lovelace"])
            },
        )
        .await
        .unwrap();
    assert_eq!(merged.id, first.id);
    assert_eq!(merged.aliases, ["ada", "countess of lovelace"]);
    assert_eq!(merged.entity_type.as_deref(), Some("person"));
    // Found by an alias, in any case and spacing.
    let by_alias = records.find_entity(&u, " ADA ").await.unwrap().unwrap();
    assert_eq!(by_alias, merged);
    let via_alias = records
        .upsert_entity(&u, &upsert("Ada", &[]))
        .await
        .unwrap();
    assert_eq!(via_alias.id, first.id);
    assert!(
        records
            .find_entity(&u, "Charles Babbage")
            .await
            .unwrap()
            .is_none()
    );
    let other = records
        .upsert_entity(&u, &upsert("Charles Babbage", &[]))
        .await
        .unwrap();
    assert_ne!(other.id, first.id);
}

pub async fn edges_and_links(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let records = records(&*storage).await;
    let (engine, _) = engine(store.clone());
    let u = user("graph");
    let m = remember_all(
        &engine,
        &u,
        &["Ada works with Charles", "Ada wrote notes", "Unrelated"],
    )
    .await;
    let ada = records
        .upsert_entity(&u, &upsert("Ada", &[]))
        .await
        .unwrap();
    let charles = records
        .upsert_entity(&u, &upsert("Charles", &[]))
        .await
        .unwrap();
    let notes = records
        .upsert_entity(&u, &upsert("The Notes", &[]))
        .await
        .unwrap();
    records
        .add_edge(&u, &edge(ada.id, charles.id, "works_with", Some(m[0].id)))
        .await
        .unwrap();
    records
        .add_edge(&u, &edge(ada.id, charles.id, "works_with", Some(m[0].id)))
        .await
        .unwrap();
    records
        .add_edge(&u, &edge(ada.id, notes.id, "wrote", Some(m[1].id)))
        .await
        .unwrap();
    records
        .add_edge(&u, &edge(charles.id, ada.id, "mentors", None))
        .await
        .unwrap();

    let ada_edges = records.edges(&u, &ada.id).await.unwrap();
    let labels: Vec<(&str, bool)> = ada_edges
        .iter()
        .map(|e| (e.label.as_str(), e.source == ada.id))
        .collect();
    assert_eq!(
        labels,
        [("works_with", true), ("wrote", true), ("mentors", false)],
        "out and in, oldest first, no duplicate"
    );
    assert_eq!(records.edges(&u, &notes.id).await.unwrap().len(), 1);
    assert_eq!(
        records.entity(&u, &charles.id).await.unwrap(),
        Some(charles.clone())
    );
    assert_eq!(
        records.entity(&u, &uuid::Uuid::new_v4()).await.unwrap(),
        None
    );

    records
        .link_entity(&u, &m[0].id, &ada.id, EntityRole::Subject)
        .await
        .unwrap();
    records
        .link_entity(&u, &m[0].id, &ada.id, EntityRole::Subject)
        .await
        .unwrap();
    records
        .link_entity(&u, &m[0].id, &charles.id, EntityRole::Mention)
        .await
        .unwrap();
    records
        .link_entity(&u, &m[1].id, &ada.id, EntityRole::Subject)
        .await
        .unwrap();
    let ada_memories = records.entity_memories(&u, &ada.id, 10).await.unwrap();
    let ids: Vec<_> = ada_memories.iter().map(|x| x.id).collect();
    assert_eq!(ids, [m[1].id, m[0].id], "newest first, each once");
    assert_eq!(
        records.entity_memories(&u, &ada.id, 1).await.unwrap().len(),
        1
    );
    assert_eq!(
        records
            .entity_memories(&u, &charles.id, 10)
            .await
            .unwrap()
            .len(),
        1
    );

    let ghost = uuid::Uuid::new_v4();
    assert!(matches!(
        records
            .link_entity(&u, &ghost, &ada.id, EntityRole::Mention)
            .await,
        Err(StoreError::MissingReference(_))
    ));
    assert!(matches!(
        records
            .link_entity(&u, &m[2].id, &ghost, EntityRole::Mention)
            .await,
        Err(StoreError::MissingReference(_))
    ));
    assert!(matches!(
        records.add_edge(&u, &edge(ada.id, ghost, "x", None)).await,
        Err(StoreError::MissingReference(_))
    ));
}

pub async fn supersession_hides_and_forget_restores(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, _) = engine(store.clone());
    let u = user("supersede");
    let m = remember_all(
        &engine,
        &u,
        &[
            "my laptop is a thinkpad",
            "my laptop is a macbook now",
            "other note",
        ],
    )
    .await;
    let warm = engine.recall(&u, "laptop", 5).await.unwrap();
    assert!(
        warm.iter().any(|h| h.memory.id == m[0].id),
        "live before superseding"
    );
    let s = Supersession {
        old_id: m[0].id,
        new_id: m[1].id,
        reason: "replaced".into(),
        created_at: Utc::now(),
    };
    store.supersede(&u, &s).await.unwrap();
    let hits = engine.recall(&u, "laptop thinkpad", 5).await.unwrap();
    assert!(
        hits.iter().all(|h| h.memory.id != m[0].id),
        "superseded memory never recalled"
    );
    assert_eq!(engine.count(&u).await.unwrap(), 2);
    assert!(
        engine
            .list_memories(&u, 10)
            .await
            .unwrap()
            .iter()
            .all(|x| x.id != m[0].id)
    );
    assert!(
        store.get(&u, &m[0].id).await.unwrap().is_some(),
        "kept for history"
    );
    let history = store.supersessions(&u, &m[0].id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(
        (
            history[0].old_id,
            history[0].new_id,
            history[0].reason.as_str()
        ),
        (m[0].id, m[1].id, "replaced")
    );
    assert_eq!(store.supersessions(&u, &m[1].id).await.unwrap().len(), 1);

    engine.forget(&u, &m[1].id.to_string()).await.unwrap();
    let hits = engine.recall(&u, "laptop thinkpad", 5).await.unwrap();
    assert_eq!(
        hits[0].memory.id, m[0].id,
        "forgetting the newer memory restores the older"
    );
    assert_eq!(engine.count(&u).await.unwrap(), 2);
    assert!(store.supersessions(&u, &m[0].id).await.unwrap().is_empty());
}

pub async fn forget_cascades_enrichment(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let records = records(&*storage).await;
    let (engine, _) = engine(store.clone());
    let u = user("cascade");
    let m = remember_all(&engine, &u, &["met Dana in Lisbon", "Dana likes jazz"]).await;
    let dana = records
        .upsert_entity(&u, &upsert("Dana", &[]))
        .await
        .unwrap();
    let lisbon = records
        .upsert_entity(&u, &upsert("Lisbon", &[]))
        .await
        .unwrap();
    records
        .add_event(&u, &event(m[0].id, "2024-05-01T12:00:00Z"))
        .await
        .unwrap();
    records
        .link_entity(&u, &m[0].id, &dana.id, EntityRole::Subject)
        .await
        .unwrap();
    records
        .link_entity(&u, &m[1].id, &dana.id, EntityRole::Subject)
        .await
        .unwrap();
    records
        .add_edge(&u, &edge(dana.id, lisbon.id, "visited", Some(m[0].id)))
        .await
        .unwrap();
    records
        .add_edge(&u, &edge(dana.id, lisbon.id, "likes", Some(m[1].id)))
        .await
        .unwrap();

    engine.forget(&u, &m[0].id.to_string()).await.unwrap();
    assert!(
        records
            .timeline(&u, &TimeRange::default(), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let left: Vec<_> = records
        .entity_memories(&u, &dana.id, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|x| x.id)
        .collect();
    assert_eq!(left, [m[1].id]);
    let labels: Vec<String> = records
        .edges(&u, &dana.id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.label)
        .collect();
    assert_eq!(
        labels,
        ["likes"],
        "edges read from the forgotten memory go with it"
    );
    assert!(
        records.find_entity(&u, "dana").await.unwrap().is_some(),
        "entities stay"
    );
}

pub async fn enrichment_is_isolated_per_user(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let records = records(&*storage).await;
    let (engine, _) = engine(store.clone());
    let (a, b) = (user("enrich-a"), user("enrich-b"));
    let ma = remember_all(&engine, &a, &["a's memory", "a's newer"]).await;
    let mb = remember_all(&engine, &b, &["b's memory"]).await;
    let ent = records
        .upsert_entity(&a, &upsert("Shared Name", &[]))
        .await
        .unwrap();
    records
        .add_event(&a, &event(ma[0].id, "2024-01-01T00:00:00Z"))
        .await
        .unwrap();
    records
        .link_entity(&a, &ma[0].id, &ent.id, EntityRole::Subject)
        .await
        .unwrap();

    assert!(
        records
            .timeline(&b, &TimeRange::default(), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        records
            .find_entity(&b, "shared name")
            .await
            .unwrap()
            .is_none()
    );
    assert!(records.edges(&b, &ent.id).await.unwrap().is_empty());
    assert!(records.entity(&b, &ent.id).await.unwrap().is_none());
    assert!(
        records
            .entity_memories(&b, &ent.id, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // B cannot write against A's records.
    assert!(matches!(
        records
            .add_event(&b, &event(ma[0].id, "2024-01-01T00:00:00Z"))
            .await,
        Err(StoreError::MissingReference(_))
    ));
    assert!(matches!(
        records
            .link_entity(&b, &ma[0].id, &ent.id, EntityRole::Mention)
            .await,
        Err(StoreError::MissingReference(_))
    ));
    let cross = Supersession {
        old_id: ma[0].id,
        new_id: mb[0].id,
        reason: "x".into(),
        created_at: Utc::now(),
    };
    assert!(matches!(
        store.supersede(&b, &cross).await,
        Err(StoreError::MissingReference(_))
    ));
    assert!(matches!(
        store.supersede(&a, &cross).await,
        Err(StoreError::MissingReference(_))
    ));
    assert!(store.supersessions(&b, &ma[0].id).await.unwrap().is_empty());
    // B's own entity of the same name is a different node.
    let b_ent = records
        .upsert_entity(&b, &upsert("shared name", &[]))
        .await
        .unwrap();
    assert_ne!(b_ent.id, ent.id);
    assert_eq!(engine.count(&a).await.unwrap(), 2);
}

/// The engine's keyed reads: refused while the engine has no enrichment handle; with one,
/// and no layer flag at all (the records may come from the caller), the timeline and the
/// dossier (relationships both ways, memories newest first) without a single provider call.
pub async fn timeline_and_dossier_reads(factory: &dyn StoreFactory) {
    use cortex_core::{dossier::Direction, engine::CortexMemory, error::CortexError};
    use std::sync::Arc;

    let storage = factory.create().await;
    let store = storage.connect().await;
    let records = records(&*storage).await;
    let (off, _) = engine(store.clone());
    let u = user("reads");
    assert!(matches!(
        off.timeline(&u, &TimeRange::default(), 10).await,
        Err(CortexError::Store(StoreError::Unsupported(_)))
    ));
    assert!(matches!(
        off.recall_about(&u, "Dana", 10).await,
        Err(CortexError::Store(StoreError::Unsupported(_)))
    ));

    let fake = Arc::new(cortex_providers::FakeProvider::new(crate::support::DIM));
    let on = CortexMemory::new(store.clone(), fake.clone()).with_enrichment(records.clone());
    let m = remember_all(
        &on,
        &u,
        &["Dana joined in May", "Dana leads the Lisbon team"],
    )
    .await;
    let calls = fake.embed_calls();
    let dana = records
        .upsert_entity(&u, &upsert("Dana Scully", &["Dana"]))
        .await
        .unwrap();
    let lisbon = records
        .upsert_entity(&u, &upsert("Lisbon team", &[]))
        .await
        .unwrap();
    let me = records
        .upsert_entity(&u, &upsert("self", &[]))
        .await
        .unwrap();
    records
        .add_edge(&u, &edge(dana.id, lisbon.id, "leads", Some(m[1].id)))
        .await
        .unwrap();
    records
        .add_edge(&u, &edge(me.id, dana.id, "manages", None))
        .await
        .unwrap();
    records
        .link_entity(&u, &m[0].id, &dana.id, EntityRole::Subject)
        .await
        .unwrap();
    records
        .link_entity(&u, &m[1].id, &dana.id, EntityRole::Subject)
        .await
        .unwrap();
    records
        .add_event(&u, &event(m[0].id, "2024-05-01T09:00:00Z"))
        .await
        .unwrap();

    let dossier = on.recall_about(&u, "  DANA ", 10).await.unwrap();
    assert_eq!(dossier.entity.id, dana.id);
    let rels: Vec<(&str, Direction, &str)> = dossier
        .relationships
        .iter()
        .map(|r| (r.label.as_str(), r.direction, r.other.name.as_str()))
        .collect();
    assert_eq!(
        rels,
        [
            ("leads", Direction::Out, "Lisbon team"),
            ("manages", Direction::In, "self")
        ]
    );
    let ids: Vec<_> = dossier.memories.iter().map(|x| x.id).collect();
    assert_eq!(ids, [m[1].id, m[0].id]);
    assert_eq!(
        on.recall_about(&u, "dana", 1).await.unwrap().memories.len(),
        1
    );
    assert!(matches!(
        on.recall_about(&u, "nobody", 10).await,
        Err(CortexError::NotFound { .. })
    ));
    assert!(matches!(
        on.recall_about(&u, "  ", 10).await,
        Err(CortexError::InvalidInput {
            field: "entity",
            ..
        })
    ));

    let timeline = on.timeline(&u, &TimeRange::default(), 10).await.unwrap();
    assert_eq!(timeline.len(), 1);
    assert_eq!(timeline[0].memory.id, m[0].id);
    let backwards = TimeRange {
        since: Some(at("2024-06-01T00:00:00Z")),
        until: Some(at("2024-01-01T00:00:00Z")),
    };
    assert!(matches!(
        on.timeline(&u, &backwards, 10).await,
        Err(CortexError::InvalidInput { field: "since", .. })
    ));
    assert_eq!(
        fake.embed_calls(),
        calls,
        "keyed reads make no provider call"
    );
    assert_eq!(fake.generate_calls(), 0);
}

/// One extraction's event, entities, links and edges are written in one transaction: a
/// refused record (an edge to an entity the extraction lacks, a memory that is gone)
/// leaves nothing behind, and a good one is all there.
pub async fn extraction_is_written_whole_or_not_at_all(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let records = records(&*storage).await;
    let (engine, _) = engine(store.clone());
    let u = user("whole");
    let m = remember_all(&engine, &u, &["Ada met Bea in Paris"]).await;
    let good = ExtractionRecords {
        memory_id: m[0].id,
        events: vec![event(m[0].id, "2024-05-01T09:00:00Z")],
        entities: vec![
            upsert("Ada", &["Ada L."]),
            upsert("Bea", &[]),
            upsert("ada", &[]),
        ],
        links: vec![
            ExtractedLink {
                entity: 0,
                role: EntityRole::Subject,
            },
            ExtractedLink {
                entity: 1,
                role: EntityRole::Mention,
            },
            // "ada" is Ada again: linked once, as the subject.
            ExtractedLink {
                entity: 2,
                role: EntityRole::Mention,
            },
        ],
        edges: vec![ExtractedEdge {
            source: 0,
            target: 1,
            label: "met".into(),
            created_at: Utc::now(),
        }],
    };

    // Refused before anything is written: a position out of range, a foreign event, a
    // memory the user does not have.
    let mut bad_edge = good.clone();
    bad_edge.edges[0].target = 7;
    let mut foreign_event = good.clone();
    foreign_event.events = vec![event(uuid::Uuid::new_v4(), "2024-05-01T09:00:00Z")];
    let mut missing_memory = good.clone();
    missing_memory.memory_id = uuid::Uuid::new_v4();
    missing_memory.events.clear();
    for (what, bad) in [
        ("bad edge", &bad_edge),
        ("foreign event", &foreign_event),
        ("missing memory", &missing_memory),
    ] {
        let refused = records.record_extraction(&u, bad).await;
        assert!(
            matches!(
                refused,
                Err(StoreError::InvalidRecord(_) | StoreError::MissingReference(_))
            ),
            "{what}: {refused:?}"
        );
        assert!(
            records
                .timeline(&u, &TimeRange::default(), 10)
                .await
                .unwrap()
                .is_empty(),
            "{what}: no event"
        );
        assert_eq!(
            records.find_entity(&u, "Ada").await.unwrap(),
            None,
            "{what}: no entity"
        );
        assert_eq!(
            records.find_entity(&u, "Bea").await.unwrap(),
            None,
            "{what}: no entity"
        );
    }

    // Another user's memory is as missing as no memory: nothing is written for either.
    let other = user("whole-other");
    let refused = records.record_extraction(&other, &good).await;
    assert!(
        matches!(refused, Err(StoreError::MissingReference(_))),
        "{refused:?}"
    );
    assert_eq!(records.find_entity(&other, "Ada").await.unwrap(), None);

    let entities = records.record_extraction(&u, &good).await.unwrap();
    assert_eq!(entities.len(), 3);
    assert_eq!(entities[0].id, entities[2].id, "\"ada\" resolves to Ada");
    let (ada, bea) = (&entities[0], &entities[1]);
    let timeline = records
        .timeline(&u, &TimeRange::default(), 10)
        .await
        .unwrap();
    assert_eq!(timeline.len(), 1);
    assert_eq!(timeline[0].memory.id, m[0].id);
    let edges = records.edges(&u, &ada.id).await.unwrap();
    assert_eq!(edges.len(), 1);
    assert_eq!(
        (
            edges[0].source,
            edges[0].target,
            edges[0].label.as_str(),
            edges[0].memory_id
        ),
        (ada.id, bea.id, "met", Some(m[0].id))
    );
    for entity in [ada, bea] {
        let linked = records.entity_memories(&u, &entity.id, 10).await.unwrap();
        assert_eq!(linked.iter().map(|m| m.id).collect::<Vec<_>>(), [m[0].id]);
    }
    assert_eq!(
        records
            .find_entity(&u, "ada l.")
            .await
            .unwrap()
            .map(|e| e.id),
        Some(ada.id)
    );
    // Forgetting the memory takes its extraction with it; the entities stay.
    engine.forget(&u, &m[0].id.to_string()).await.unwrap();
    assert!(records.edges(&u, &ada.id).await.unwrap().is_empty());
    assert!(
        records
            .timeline(&u, &TimeRange::default(), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// An entity is keyed by its normalised name: one without a usable name (blank, or only
/// whitespace, aliases included) is refused whether it comes alone or in an extraction,
/// and nothing is written for it.
pub async fn entity_without_a_usable_name_is_refused(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let records = records(&*storage).await;
    let (engine, _) = engine(store.clone());
    let u = user("blank-entity");
    let m = remember_all(&engine, &u, &["a memory"]).await;
    for blank in [upsert("", &[]), upsert(" \t ", &["  "])] {
        for attempt in 0..2 {
            let refused = records.upsert_entity(&u, &blank).await;
            assert!(
                matches!(refused, Err(StoreError::InvalidRecord(_))),
                "{blank:?}, attempt {attempt}: {refused:?}"
            );
        }
        let mut extraction = ExtractionRecords::new(m[0].id);
        extraction.entities.push(blank.clone());
        let refused = records.record_extraction(&u, &extraction).await;
        assert!(
            matches!(refused, Err(StoreError::InvalidRecord(_))),
            "{blank:?} in an extraction: {refused:?}"
        );
    }
    assert_eq!(records.find_entity(&u, "").await.unwrap(), None);
    assert_eq!(records.find_entity(&u, " \t ").await.unwrap(), None);
    // A blank alias beside a usable name is dropped, not refused.
    let named = records
        .upsert_entity(&u, &upsert("Ada", &["  "]))
        .await
        .unwrap();
    assert_eq!(
        (named.normalized_name.as_str(), named.aliases.len()),
        ("ada", 0)
    );
}
