//! Structure from the caller: the entities, relations and event an agent gives with
//! memorize, written in the memorize transaction as the extraction layer's records, so the
//! timeline and the graph work with no model and no layer flag.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use cortex_core::records::{Event, TimeRange};
use cortex_core::{
    dossier::Direction, dossier::Dossier, engine::CortexMemory, engine::EngineConfig,
    engine::Layers, engine::MemorizeOptions, engine::MemorizeStatus,
    enrichment_store::EnrichmentStore, enrichment_store::ExtractionRecords, error::CortexError,
    error::StoreError, memory::MemoryKind, new_memory::NewMemory, provider::LLMProvider,
    store::MemoryStore, structure::MemoryStructure, structure::StructureEntity,
    structure::StructureEvent, structure::StructureRelation,
};
use cortex_providers::FakeProvider;

use crate::StoreFactory;
use crate::support::{DIM, records, user};

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn entity(name: &str, entity_type: Option<&str>, aliases: &[&str]) -> StructureEntity {
    StructureEntity {
        name: name.into(),
        entity_type: entity_type.map(str::to_owned),
        aliases: aliases.iter().map(|a| (*a).to_owned()).collect(),
    }
}

fn relation(from: &str, label: &str, to: &str) -> StructureRelation {
    StructureRelation {
        from: from.into(),
        label: label.into(),
        to: to.into(),
    }
}

/// What the extraction scenario's model answers, as a caller would give it.
fn dinner() -> MemoryStructure {
    MemoryStructure {
        subject: Some("me".into()),
        entities: vec![
            entity("Ana Silva", Some("person"), &["Ana"]),
            entity("Lisbon", Some("place"), &[]),
        ],
        relations: vec![
            relation("I", "had dinner with", "Ana Silva"),
            relation("Ana Silva", "lives in", "Lisbon"),
        ],
        event: Some(StructureEvent {
            time: at("2024-05-01T18:00:00Z"),
            place: Some("Lisbon".into()),
            actor: Some("I".into()),
            event_type: Some("dinner".into()),
        }),
    }
}

const DINNER_ANSWER: &str = r#"{"event": {"event_time": "2024-05-01T18:00:00Z", "actor": "I", "location": "Lisbon", "event_type": "dinner"},
 "subject": "me",
 "entities": [{"name": "Ana Silva", "type": "person", "aliases": ["Ana"]}, {"name": "Lisbon", "type": "place"}],
 "relationships": [{"source": "I", "label": "had dinner with", "target": "Ana Silva"},
                   {"source": "Ana Silva", "label": "lives in", "target": "Lisbon"}]}"#;

const DINNER: &str = "Had dinner with Ana in Lisbon yesterday";

fn with_structure(structure: MemoryStructure) -> MemorizeOptions {
    MemorizeOptions {
        structure: Some(structure),
        ..MemorizeOptions::default()
    }
}

/// An engine with no model and no layer: only the embedder and the records.
fn plain(
    store: Arc<dyn MemoryStore>,
    records: Arc<dyn EnrichmentStore>,
    layers: Layers,
) -> (CortexMemory, Arc<FakeProvider>) {
    let fake = Arc::new(FakeProvider::new(DIM));
    let config = EngineConfig {
        layers,
        ..EngineConfig::default()
    };
    let engine = CortexMemory::with_config(store, fake.clone(), config).with_enrichment(records);
    (engine, fake)
}

/// A dossier as names, so two users' graphs compare: the entity, its type and aliases,
/// each relationship with the other end's name and type, and how many memories.
type DossierShape = (
    String,
    Option<String>,
    Vec<String>,
    Vec<(String, Direction, String, Option<String>)>,
    usize,
);

fn shape(d: &Dossier) -> DossierShape {
    (
        d.entity.name.clone(),
        d.entity.entity_type.clone(),
        d.entity.aliases.clone(),
        d.relationships
            .iter()
            .map(|r| {
                (
                    r.label.clone(),
                    r.direction,
                    r.other.name.clone(),
                    r.other.entity_type.clone(),
                )
            })
            .collect(),
        d.memories.len(),
    )
}

fn event_shape(
    e: &Event,
) -> (
    DateTime<Utc>,
    Option<String>,
    Option<String>,
    Option<String>,
) {
    (
        e.event_time,
        e.actor.clone(),
        e.location.clone(),
        e.event_type.clone(),
    )
}

/// With no model, no key and no layer flag, one memorize with the caller's structure
/// feeds the timeline and the dossier: one embed call, no generate call.
pub async fn caller_structure_feeds_timeline_and_graph(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let (engine, fake) = plain(
        storage.connect().await,
        records(&*storage).await,
        Layers::default(),
    );
    let u = user("structure");
    let m = engine
        .memorize(
            &u,
            DINNER,
            MemoryKind::Event,
            &[],
            &with_structure(dinner()),
        )
        .await
        .unwrap();
    assert_eq!(m.status, MemorizeStatus::Stored);
    assert_eq!((fake.embed_calls(), fake.generate_calls()), (1, 0));

    let timeline = engine
        .timeline(&u, &TimeRange::default(), 10)
        .await
        .unwrap();
    assert_eq!(timeline.len(), 1);
    assert_eq!(timeline[0].memory.id, m.memory.id);
    assert_eq!(
        event_shape(&timeline[0].event),
        (
            at("2024-05-01T18:00:00Z"),
            Some("self".into()),
            Some("Lisbon".into()),
            Some("dinner".into())
        )
    );

    let ana = engine.recall_about(&u, "ana", 10).await.unwrap();
    assert_eq!(ana.entity.name, "Ana Silva");
    let rels: Vec<(&str, Direction, &str)> = ana
        .relationships
        .iter()
        .map(|r| (r.label.as_str(), r.direction, r.other.name.as_str()))
        .collect();
    assert_eq!(
        rels,
        [
            ("had_dinner_with", Direction::In, "self"),
            ("lives_in", Direction::Out, "Lisbon")
        ]
    );
    assert_eq!(ana.memories[0].id, m.memory.id);
    let me = engine.recall_about(&u, "Me", 10).await.unwrap();
    assert_eq!(me.entity.entity_type.as_deref(), Some("self"));
    assert_eq!(me.memories[0].id, m.memory.id, "linked to its subject");

    // A later memory naming Ana by her alias joins the same node, newest first.
    let later = engine
        .memorize(
            &u,
            "Ana moved to Porto",
            MemoryKind::Fact,
            &[],
            &with_structure(MemoryStructure {
                entities: vec![entity("ana", None, &[])],
                ..MemoryStructure::default()
            }),
        )
        .await
        .unwrap();
    let ana = engine.recall_about(&u, "Ana Silva", 10).await.unwrap();
    let ids: Vec<_> = ana.memories.iter().map(|x| x.id).collect();
    assert_eq!(ids, [later.memory.id, m.memory.id]);
    assert_eq!((fake.embed_calls(), fake.generate_calls()), (2, 0));
}

/// The caller's structure and the extraction layer's reading of the same facts leave the
/// same records: the same events and the same graph around every entity.
pub async fn caller_structure_writes_what_extraction_writes(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let records = records(&*storage).await;
    let layers = Layers {
        episodic: true,
        graph: true,
        ..Layers::default()
    };
    let (extracting, fake) = plain(store.clone(), records.clone(), layers);
    let extracting = extracting.with_llm(fake.clone());
    let (by_model, by_caller) = (user("by-model"), user("by-caller"));
    fake.push_answer(DINNER_ANSWER);
    extracting
        .memorize(
            &by_model,
            DINNER,
            MemoryKind::Event,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(fake.generate_calls(), 1);
    // The same engine, layers on: the caller's structure stands in for the model's call.
    extracting
        .memorize(
            &by_caller,
            DINNER,
            MemoryKind::Event,
            &[],
            &with_structure(dinner()),
        )
        .await
        .unwrap();
    assert_eq!(fake.generate_calls(), 1, "no extraction call for it");

    let events = |u: String| {
        let engine = &extracting;
        async move {
            engine
                .timeline(&u, &TimeRange::default(), 10)
                .await
                .unwrap()
                .iter()
                .map(|t| event_shape(&t.event))
                .collect::<Vec<_>>()
        }
    };
    let model_events = events(by_model.clone()).await;
    assert_eq!(model_events.len(), 1);
    assert_eq!(model_events, events(by_caller.clone()).await);
    for name in ["Ana", "me", "Lisbon"] {
        let model = extracting.recall_about(&by_model, name, 10).await.unwrap();
        let caller = extracting.recall_about(&by_caller, name, 10).await.unwrap();
        assert_eq!(shape(&model), shape(&caller), "the graph around {name}");
    }
}

/// A structure that fails its checks costs no embed and writes nothing; records a store is
/// handed that name another memory are refused with the memory; and when the memory's write
/// fails after its records (a correction of a memory corrected meanwhile), the records are
/// taken back with it.
pub async fn caller_structure_is_written_whole_or_not_at_all(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let records = records(&*storage).await;
    let (engine, fake) = plain(store.clone(), records.clone(), Layers::default());
    let u = user("structure-whole");

    let bad = [
        MemoryStructure {
            entities: vec![entity("Ana", None, &[]), entity("  ", None, &[])],
            ..dinner()
        },
        MemoryStructure {
            relations: vec![relation("Ana", "--", "Bo")],
            ..dinner()
        },
        MemoryStructure {
            entities: vec![
                entity("Ana", None, &[]),
                entity("Ana Silva", None, &["ana"]),
            ],
            ..MemoryStructure::default()
        },
        MemoryStructure {
            entities: (0..33)
                .map(|i| entity(&format!("e{i}"), None, &[]))
                .collect(),
            ..MemoryStructure::default()
        },
    ];
    for structure in bad {
        let refused = engine
            .memorize(
                &u,
                DINNER,
                MemoryKind::Note,
                &[],
                &with_structure(structure),
            )
            .await;
        assert!(
            matches!(refused, Err(CortexError::InvalidInput { .. })),
            "{refused:?}"
        );
    }
    assert_eq!(fake.embed_calls(), 0, "refused before the embed call");
    assert_eq!(engine.count(&u).await.unwrap(), 0);
    assert!(records.find_entity(&u, "ana").await.unwrap().is_none());

    // A backend that cannot write records with a memory: refused before the embed call.
    let counting = Arc::new(crate::counting::CountingStore::new(store.clone()).claiming(
        cortex_core::store::Capabilities {
            records: false,
            ..store.capabilities()
        },
    ));
    let (limited, limited_fake) = plain(counting.clone(), records.clone(), Layers::default());
    assert!(matches!(
        limited
            .memorize(&u, DINNER, MemoryKind::Note, &[], &with_structure(dinner()))
            .await,
        Err(CortexError::Store(StoreError::Unsupported(_)))
    ));
    assert_eq!((limited_fake.embed_calls(), counting.calls("add")), (0, 0));

    // The store's own check: records that name another memory.
    let signature = fake.embedding_signature();
    let vector = vec![1.0_f32; DIM];
    let new = NewMemory::new(&u, "stray", MemoryKind::Note, &[], 1024).unwrap();
    let stray = new
        .clone()
        .with_records(ExtractionRecords::new(uuid::Uuid::new_v4()));
    assert!(matches!(
        store.add(&stray, &vector, &signature).await,
        Err(StoreError::InvalidRecord(_))
    ));
    assert!(store.get(&u, &new.id).await.unwrap().is_none());

    // A correction that loses the race: its records were written in its transaction
    // before the refusal, and are gone with it.
    let first = engine
        .memorize(
            &u,
            "the office is in Berlin",
            MemoryKind::Fact,
            &[],
            &Default::default(),
        )
        .await
        .unwrap()
        .memory;
    let options = MemorizeOptions {
        replaces: Some(first.id.to_string()),
        ..MemorizeOptions::default()
    };
    engine
        .memorize(
            &u,
            "the office is in Lisbon",
            MemoryKind::Fact,
            &[],
            &options,
        )
        .await
        .unwrap();
    let mut late = NewMemory::new(&u, "the office is in Porto", MemoryKind::Fact, &[], 1024)
        .unwrap()
        .replacing(first.id, "late");
    let mut late_records = ExtractionRecords::new(late.id);
    late_records
        .entities
        .push(cortex_core::records::EntityUpsert {
            name: "Porto office".into(),
            ..Default::default()
        });
    late_records.events.push(Event {
        memory_id: late.id,
        event_time: at("2024-06-01T00:00:00Z"),
        actor: None,
        location: Some("Porto".into()),
        event_type: None,
    });
    late = late.with_records(late_records);
    assert!(matches!(
        store.add(&late, &vector, &signature).await,
        Err(StoreError::AlreadySuperseded(id)) if id == first.id
    ));
    assert!(store.get(&u, &late.id).await.unwrap().is_none());
    assert!(
        records
            .find_entity(&u, "porto office")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        records
            .timeline(&u, &TimeRange::default(), 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(engine.count(&u).await.unwrap(), 1);
}

/// With dedup on, a memory the store holds already is not written again, but what the
/// caller says about it is kept, on the memory that is there.
pub async fn caller_structure_of_a_duplicate_is_kept(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let layers = Layers {
        dedup: true,
        ..Layers::default()
    };
    let (engine, _) = plain(storage.connect().await, records(&*storage).await, layers);
    let u = user("structure-dup");
    let first = engine
        .memorize(
            &u,
            "Bo runs the Friday standup",
            MemoryKind::Fact,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    let again = engine
        .memorize(
            &u,
            "Bo runs the Friday standup",
            MemoryKind::Fact,
            &[],
            &with_structure(MemoryStructure {
                subject: Some("Bo".into()),
                ..MemoryStructure::default()
            }),
        )
        .await
        .unwrap();
    assert_eq!(again.status, MemorizeStatus::Duplicate);
    assert_eq!(again.memory.id, first.memory.id);
    let bo = engine.recall_about(&u, "bo", 10).await.unwrap();
    let ids: Vec<_> = bo.memories.iter().map(|m| m.id).collect();
    assert_eq!(ids, [first.memory.id]);
    assert_eq!(engine.count(&u).await.unwrap(), 1);
}

/// A memory's records read back whole, and carried by a change of its kind or tags: the
/// new version is on the timeline and in every dossier the old one was in, and the old
/// version keeps its own records for its history (forgetting the new one restores it).
pub async fn retag_keeps_the_memorys_structure(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let records = records(&*storage).await;
    let (engine, _) = plain(storage.connect().await, records.clone(), Layers::default());
    let u = user("structure-retag");
    let old = engine
        .memorize(
            &u,
            DINNER,
            MemoryKind::Event,
            &[],
            &with_structure(dinner()),
        )
        .await
        .unwrap()
        .memory;
    let read = records.memory_records(&u, &old.id).await.unwrap();
    assert_eq!(read.events.len(), 1);
    let mut names: Vec<&str> = read.entities.iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["Ana Silva", "Lisbon", "self"]);
    assert_eq!(read.links.len(), 3);
    let mut labels: Vec<&str> = read.edges.iter().map(|e| e.label.as_str()).collect();
    labels.sort_unstable();
    assert_eq!(labels, ["had_dinner_with", "lives_in"]);
    assert!(
        records
            .memory_records(&user("stranger"), &old.id)
            .await
            .unwrap()
            .is_empty(),
        "another user's memory has no records for this one"
    );

    let change = cortex_core::engine::Retag {
        add: vec!["friends".into()],
        ..cortex_core::engine::Retag::default()
    };
    let new = engine
        .retag(&u, &old.id.to_string(), &change)
        .await
        .unwrap()
        .memory;
    let timeline = engine
        .timeline(&u, &TimeRange::default(), 10)
        .await
        .unwrap();
    let on_timeline: Vec<_> = timeline.iter().map(|t| t.memory.id).collect();
    assert!(on_timeline.contains(&new.id), "{on_timeline:?}");
    for name in ["Ana", "me", "Lisbon"] {
        let dossier = engine.recall_about(&u, name, 10).await.unwrap();
        let ids: Vec<_> = dossier.memories.iter().map(|m| m.id).collect();
        assert_eq!(ids, [new.id], "the dossier of {name}");
    }
    let ana = engine.recall_about(&u, "Ana", 10).await.unwrap();
    assert_eq!(ana.relationships.len(), 2, "no relationship is doubled");
    let carried = records.memory_records(&u, &new.id).await.unwrap();
    assert_eq!(carried.events.len(), 1);
    assert_eq!(carried.events[0].event_time, read.events[0].event_time);
    assert_eq!(carried.links.len(), 3);
    // A relationship is one edge per (source, label, target), kept with the memory that
    // first stated it: the dossier above shows both, once each.
    let mut before: Vec<_> = read.entities.iter().map(|e| e.id).collect();
    let mut after: Vec<_> = carried.entities.iter().map(|e| e.id).collect();
    before.retain(|id| carried.links.iter().any(|(e, _)| e == id));
    before.sort_unstable();
    after.sort_unstable();
    assert_eq!(before, after, "the same entities, not new ones");

    engine.forget(&u, &new.id.to_string()).await.unwrap();
    let ana = engine.recall_about(&u, "Ana", 10).await.unwrap();
    let ids: Vec<_> = ana.memories.iter().map(|m| m.id).collect();
    assert_eq!(
        ids,
        [old.id],
        "the old version is back with its own records"
    );
}
