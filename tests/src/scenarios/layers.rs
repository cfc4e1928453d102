//! The write-time layers through the engine: dedup, soft update with history, one
//! extraction call for episodic and graph, failures that never lose a memory, and the
//! guarantee that layers never change recall.

use std::sync::Arc;

use cortex_core::records::TimeRange;
use cortex_core::{
    dossier::Direction, engine::CortexMemory, engine::EngineConfig, engine::Layers,
    engine::MemorizeStatus, enrichment_store::EnrichmentStore, error::ProviderError,
    memory::MemoryKind, store::MemoryStore,
};
use cortex_providers::FakeProvider;

use crate::StoreFactory;
use crate::counting::{CountingStore, RECALL_METHODS};
use crate::scenarios::{CORPUS, QUERIES};
use crate::support::{DIM, engine, records, remember_all, user};

/// An engine with `layers` on and the Fake as both embedder and scripted LLM; the
/// episodic and graph layers keep their records in `records`.
fn layered(
    store: Arc<dyn MemoryStore>,
    records: Option<Arc<dyn EnrichmentStore>>,
    layers: Layers,
) -> (CortexMemory, Arc<FakeProvider>) {
    let fake = Arc::new(FakeProvider::new(DIM));
    let config = EngineConfig {
        layers,
        ..EngineConfig::default()
    };
    let engine = CortexMemory::with_config(store, fake.clone(), config).with_llm(fake.clone());
    let engine = match records {
        Some(records) => engine.with_enrichment(records),
        None => engine,
    };
    (engine, fake)
}

const ALL: Layers = Layers {
    episodic: true,
    graph: true,
    dedup: true,
    soft_update: true,
};

pub async fn dedup_returns_the_existing_memory(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, fake) = layered(
        store.clone(),
        None,
        Layers {
            dedup: true,
            ..Layers::default()
        },
    );
    let u = user("dedup");
    let first = engine
        .memorize(
            &u,
            "The sky over Lisbon is blue",
            MemoryKind::Fact,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(first.status, MemorizeStatus::Stored);
    let again = engine
        .memorize(
            &u,
            "the SKY over lisbon is blue!",
            MemoryKind::Fact,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(again.status, MemorizeStatus::Duplicate);
    assert_eq!(again.memory.id, first.memory.id);
    assert_eq!(
        engine.count(&u).await.unwrap(),
        1,
        "the duplicate was not written"
    );
    let other = engine
        .memorize(
            &u,
            "The sky over Porto is grey today",
            MemoryKind::Fact,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(other.status, MemorizeStatus::Stored);
    assert_eq!(engine.count(&u).await.unwrap(), 2);
    assert_eq!(fake.generate_calls(), 0, "dedup needs no model call");
    assert_eq!(
        fake.embed_calls(),
        3,
        "one embed per memorize, duplicate included"
    );
}

pub async fn soft_update_supersedes_and_keeps_history(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, fake) = layered(
        store.clone(),
        None,
        Layers {
            soft_update: true,
            dedup: true,
            ..Layers::default()
        },
    );
    let u = user("soft-update");
    let old = engine
        .memorize(
            &u,
            "my work laptop is a thinkpad x1",
            MemoryKind::Fact,
            &[],
            &Default::default(),
        )
        .await
        .unwrap()
        .memory;
    remember_all(&engine, &u, &["the office plant needs water on fridays"]).await;
    assert_eq!(
        fake.generate_calls(),
        0,
        "no candidate in the band, no arbiter call"
    );
    fake.push_answer(r#"{"stale": [1], "reason": "the laptop was replaced"}"#);
    let new = engine
        .memorize(
            &u,
            "my work laptop is a thinkpad x2",
            MemoryKind::Fact,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(fake.generate_calls(), 1, "one arbiter call");
    assert_eq!(new.status, MemorizeStatus::Superseded);
    assert_eq!(new.superseded, [old.id]);

    let hits = engine.recall(&u, "work laptop thinkpad", 10).await.unwrap();
    assert!(
        hits.iter().all(|h| h.memory.id != old.id),
        "recall never returns a superseded memory"
    );
    assert_eq!(hits[0].memory.id, new.memory.id);
    let history = engine.history(&u, &old.id.to_string()[..8]).await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].memory.id, old.id);
    assert_eq!(history[0].valid_from, old.created_at);
    assert!(history[0].valid_until.is_some());
    assert_eq!(history[0].superseded_by, [new.memory.id]);
    assert_eq!(
        history[0].reason.as_deref(),
        Some("the laptop was replaced")
    );
    assert_eq!(history[1].memory.id, new.memory.id);
    assert_eq!(history[1].valid_until, None);
    assert_eq!(
        engine
            .history(&u, &new.memory.id.to_string())
            .await
            .unwrap(),
        history,
        "same chain from either end"
    );

    engine.forget(&u, &new.memory.id.to_string()).await.unwrap();
    let hits = engine.recall(&u, "work laptop thinkpad", 10).await.unwrap();
    assert_eq!(
        hits[0].memory.id, old.id,
        "forgetting the newer memory makes the older live again"
    );
    assert_eq!(
        engine.history(&u, &old.id.to_string()).await.unwrap().len(),
        1
    );
}

pub async fn one_extraction_call_feeds_timeline_and_graph(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, fake) = layered(
        store.clone(),
        Some(records(&*storage).await),
        Layers {
            episodic: true,
            graph: true,
            ..Layers::default()
        },
    );
    let u = user("extract");
    fake.push_answer(
        r#"Sure:
```json
{"event": {"event_time": "2024-05-01T18:00:00Z", "actor": "I", "location": "Lisbon", "event_type": "dinner"},
 "subject": "me",
 "entities": [{"name": "Ana Silva", "type": "person", "aliases": ["Ana"]}, {"name": "Lisbon", "type": "place"}],
 "relationships": [{"source": "I", "label": "had dinner with", "target": "Ana Silva"},
                   {"source": "Ana Silva", "label": "lives in", "target": "Lisbon"}]}
```"#,
    );
    let m = engine
        .memorize(
            &u,
            "Had dinner with Ana in Lisbon yesterday",
            MemoryKind::Event,
            &[],
            &Default::default(),
        )
        .await
        .unwrap()
        .memory;
    assert_eq!(
        fake.generate_calls(),
        1,
        "episodic and graph share one call"
    );
    assert_eq!(fake.embed_calls(), 1);

    let timeline = engine
        .timeline(&u, &TimeRange::default(), 10)
        .await
        .unwrap();
    assert_eq!(timeline.len(), 1);
    assert_eq!(timeline[0].memory.id, m.id);
    assert_eq!(timeline[0].event.location.as_deref(), Some("Lisbon"));
    assert_eq!(timeline[0].event.actor.as_deref(), Some("self"));

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
    assert_eq!(ana.memories.len(), 1);
    let me = engine.recall_about(&u, "Me", 10).await.unwrap();
    assert_eq!(me.entity.normalized_name, "self");
    assert_eq!(
        me.memories[0].id, m.id,
        "the memory is linked to its subject"
    );
    assert_eq!(
        fake.generate_calls(),
        1,
        "dossier and timeline are keyed reads"
    );
    assert_eq!(engine.usage()["fake"].generate_calls, 1);
}

pub async fn failed_enrichment_never_loses_the_memory(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, fake) = layered(store.clone(), Some(records(&*storage).await), ALL);
    let u = user("enrich-fail");
    fake.push_failure(ProviderError::Transport {
        provider: "fake",
        message: "connection reset".into(),
    });
    fake.push_answer("I'm sorry, I cannot help with that.");
    fake.push_answer("{\"event\": {\"event_time\": \"not a date\"}, \"entities\": 7}");
    let texts = [
        "first durable fact",
        "second durable fact about ferns",
        "third one about cacti",
    ];
    for text in texts {
        let m = engine
            .memorize(&u, text, MemoryKind::Note, &[], &Default::default())
            .await
            .unwrap();
        assert_eq!(m.status, MemorizeStatus::Stored);
    }
    assert_eq!(engine.count(&u).await.unwrap(), 3, "every memory stored");
    assert_eq!(
        engine.enrichment_failures(),
        2,
        "a provider failure and a non-JSON answer"
    );
    assert!(
        engine
            .timeline(&u, &TimeRange::default(), 10)
            .await
            .unwrap()
            .is_empty()
    );
    // The arbiter failing is the same: the new memory is stored and nothing is superseded.
    fake.push_answer("[]");
    let before = engine.enrichment_failures();
    let m = engine
        .memorize(
            &u,
            "third one about cacti and succulents",
            MemoryKind::Note,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(m.status, MemorizeStatus::Stored);
    assert_eq!(engine.count(&u).await.unwrap(), 4);
    assert!(engine.enrichment_failures() > before);
    // Without any LLM the layers that need one are skipped, counted, and the memory kept.
    let no_llm = CortexMemory::with_config(
        store.clone(),
        Arc::new(FakeProvider::new(DIM)),
        EngineConfig {
            layers: ALL,
            ..EngineConfig::default()
        },
    )
    .with_enrichment(records(&*storage).await);
    no_llm
        .memorize(
            &u,
            "stored without a model",
            MemoryKind::Note,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(no_llm.enrichment_failures(), 1);
    assert_eq!(engine.count(&u).await.unwrap(), 5);
}

/// With every flag off memorize is one embed and one write, recall one embed and a
/// retrieval that reads nothing but the recall methods. With layers on, recall returns exactly
/// what it returns with them off.
pub async fn layers_never_change_recall(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let counting = Arc::new(CountingStore::new(storage.connect().await));
    let (plain, fake) = engine(counting.clone());
    let u = user("guarantee");
    plain
        .memorize(
            &u,
            "warm up the signature",
            MemoryKind::Note,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    counting.reset();
    plain
        .memorize(
            &u,
            "exactly one write",
            MemoryKind::Note,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        counting.snapshot().into_iter().collect::<Vec<_>>(),
        [("add", 1)],
        "memorize is one write"
    );
    assert_eq!((fake.embed_calls(), fake.generate_calls()), (2, 0));

    let (layered_engine, layered_fake) =
        layered(counting.clone(), Some(records(&*storage).await), ALL);
    let lu = user("guarantee-layered");
    for text in CORPUS {
        layered_fake.push_answer(
            r#"{"event": null, "subject": "self", "entities": [], "relationships": []}"#,
        );
        layered_engine
            .memorize(&lu, text, MemoryKind::Note, &[], &Default::default())
            .await
            .unwrap();
        plain
            .memorize(&u, text, MemoryKind::Note, &[], &Default::default())
            .await
            .unwrap();
    }
    // Leave `u` with exactly the corpus, like `lu`.
    for memory in plain.list_memories(&u, 1000).await.unwrap() {
        if !CORPUS.contains(&memory.content.as_str()) {
            plain.forget(&u, &memory.id.to_string()).await.unwrap();
        }
    }
    assert_eq!(
        plain.count(&u).await.unwrap(),
        layered_engine.count(&lu).await.unwrap()
    );
    // The caller's structure writes the same records, and is as invisible to recall.
    let structured =
        CortexMemory::new(counting.clone(), fake.clone()).with_enrichment(records(&*storage).await);
    let su = user("guarantee-structured");
    for (i, text) in CORPUS.iter().enumerate() {
        let structure = cortex_core::structure::MemoryStructure {
            subject: text.split_whitespace().next().map(str::to_owned),
            relations: vec![cortex_core::structure::StructureRelation {
                from: "me".into(),
                label: "noted".into(),
                to: format!("topic {}", i % 3),
            }],
            event: Some(cortex_core::structure::StructureEvent {
                time: chrono::Utc::now(),
                place: Some("home".into()),
                actor: None,
                event_type: None,
            }),
            ..Default::default()
        };
        let options = cortex_core::engine::MemorizeOptions {
            structure: Some(structure),
            ..Default::default()
        };
        structured
            .memorize(&su, text, MemoryKind::Note, &[], &options)
            .await
            .unwrap();
    }
    counting.reset();
    for query in QUERIES {
        let plain_hits = plain.recall(&u, query, 8).await.unwrap();
        let structured_hits = structured.recall(&su, query, 8).await.unwrap();
        let scored = |hits: &[cortex_core::hybrid::ScoredMemory]| {
            hits.iter()
                .map(|h| (h.memory.content.clone(), h.score.to_bits()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            scored(&plain_hits),
            scored(&structured_hits),
            "caller structure changed recall for {query:?}"
        );
    }
    for query in QUERIES {
        let a: Vec<String> = plain
            .recall(&u, query, 8)
            .await
            .unwrap()
            .into_iter()
            .map(|h| h.memory.content)
            .collect();
        let b: Vec<String> = layered_engine
            .recall(&lu, query, 8)
            .await
            .unwrap()
            .into_iter()
            .map(|h| h.memory.content)
            .collect();
        assert_eq!(a, b, "layers changed recall for {query:?}");
    }
    // The engine's recall path has no handle on the enrichment records at all (the
    // types say so); what it may touch of the memory store is the recall methods.
    let touched: Vec<_> = counting
        .snapshot()
        .into_keys()
        .filter(|k| !RECALL_METHODS.contains(k))
        .collect();
    assert!(touched.is_empty(), "recall touched {touched:?}");
}

/// A reranker reorders a deeper fused pool; any failure, timeout or nonsense answer falls
/// back to exactly the fused top k, so recall never fails because of reranking.
pub async fn reranker_reorders_and_failures_fall_back(factory: &dyn StoreFactory) {
    use crate::support::{RerankBehaviour, ScriptedReranker};
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    let storage = factory.create().await;
    let store = storage.connect().await;
    let (plain, _) = engine(store.clone());
    let u = user("rerank");
    remember_all(&plain, &u, CORPUS).await;
    let config = EngineConfig {
        rerank_depth: 12,
        rerank_timeout: Duration::from_millis(200),
        ..EngineConfig::default()
    };
    let with = |behaviour| {
        let reranker = Arc::new(ScriptedReranker::new(behaviour));
        let engine = CortexMemory::with_config(
            store.clone(),
            Arc::new(FakeProvider::new(DIM)),
            config.clone(),
        )
        .with_reranker(reranker.clone());
        (engine, reranker)
    };
    let query = "Alice coffee Berlin office";
    let rrf_deep = plain.recall(&u, query, 12).await.unwrap();
    let rrf_top = plain.recall(&u, query, 4).await.unwrap();

    let (reversing, reranker) = with(RerankBehaviour::Reverse);
    let got = reversing.recall(&u, query, 4).await.unwrap();
    assert_eq!(
        *reranker.seen.lock().unwrap(),
        12,
        "the reranker sees the deeper pool"
    );
    let expected: Vec<_> = rrf_deep.iter().rev().take(4).map(|h| h.memory.id).collect();
    assert_eq!(
        got.iter().map(|h| h.memory.id).collect::<Vec<_>>(),
        expected
    );
    assert!(got.iter().all(|h| h.rerank_score.is_some()));
    assert_eq!(reversing.usage()["scripted-reranker"].rerank_calls, 1);

    let (partial, _) = with(RerankBehaviour::OnlyLast);
    let got = partial.recall(&u, query, 4).await.unwrap();
    assert_eq!(got[0].memory.id, rrf_deep[11].memory.id);
    let rest: Vec<_> = got[1..].iter().map(|h| h.memory.id).collect();
    let rrf_rest: Vec<_> = rrf_deep.iter().take(3).map(|h| h.memory.id).collect();
    assert_eq!(rest, rrf_rest, "a short answer is completed in fused order");

    for behaviour in [
        RerankBehaviour::Fail,
        RerankBehaviour::Hang,
        RerankBehaviour::OutOfRange,
    ] {
        let (failing, reranker) = with(behaviour);
        let got = failing.recall(&u, query, 4).await.unwrap();
        assert_eq!(got, rrf_top, "{behaviour:?} falls back to the fused top k");
        assert_eq!(reranker.calls.load(Ordering::SeqCst), 1);
        assert_eq!(failing.rerank_failures(), 1);
    }

    // A limit past the depth: the reranker still reads only the depth's candidates, and
    // the rest follow in fused order.
    let (reversing, reranker) = with(RerankBehaviour::Reverse);
    let got = reversing.recall(&u, query, 20).await.unwrap();
    assert_eq!(*reranker.seen.lock().unwrap(), 12, "capped at the depth");
    let rrf_20 = plain.recall(&u, query, 20).await.unwrap();
    let mut expected: Vec<_> = rrf_20[..12].iter().rev().map(|h| h.memory.id).collect();
    expected.extend(rrf_20[12..].iter().map(|h| h.memory.id));
    assert_eq!(
        got.iter().map(|h| h.memory.id).collect::<Vec<_>>(),
        expected
    );
    assert!(got[12..].iter().all(|h| h.rerank_score.is_none()));
}
