//! `cortex add --structure`: the entities, relations and event a caller knows, written to
//! the graph and the timeline with the memory, with no layer flag and no model. Read back
//! through `cortex export` and through the engine the same settings build (the path the
//! MCP tools `recall_about` and `recall_timeline` take); a bad structure writes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_support;

use std::collections::HashMap;

use admin_support::*;
use cortex_app::{ServerConfig, build_engine};
use cortex_core::records::TimeRange;
use cortex_core::{dossier::Direction, error::CortexError};
use serde_json::Value;

const STRUCTURE: &str = r#"{
    "subject": "Ana Silva",
    "entities": [{"name": "Ana Silva", "type": "Person", "aliases": ["Ana"]}, {"name": "Acme"}],
    "relations": [{"from": "Ana Silva", "label": "works at", "to": "Acme"}],
    "event": {"time": "2026-11-20T15:00:00+01:00", "place": "Lisbon", "type": "meeting"}
}"#;

async fn engine(env: &Env) -> cortex_app::Engine {
    let map: HashMap<String, String> = env.iter().cloned().collect();
    let config = ServerConfig::from_lookup(&|name| map.get(name).cloned()).unwrap();
    build_engine(&config).await.unwrap()
}

fn lines_of(lines: &[String], kind: &str) -> Vec<Value> {
    lines
        .iter()
        .map(|l| json(l))
        .filter(|v| v["type"] == kind)
        .collect()
}

#[tokio::test]
async fn add_with_a_structure_writes_the_graph_and_the_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let env = sqlite_env(&dir.path().join("memory.db"));
    let added = json(&ok(
        &env,
        &[
            "add",
            "Met Ana Silva from Acme in Lisbon",
            "--kind",
            "event",
            "--structure",
            STRUCTURE,
            "--json",
        ],
    ));
    assert_eq!(added["status"], "stored");
    let id = added["id"].as_str().unwrap().to_owned();

    // The export carries the records, written with no layer flag set.
    let exported = export_lines(&env, false);
    let events = lines_of(&exported, "event");
    assert_eq!(events.len(), 1, "{exported:?}");
    assert_eq!(events[0]["memory_id"], id.as_str());
    assert_eq!(events[0]["event_time"], "2026-11-20T14:00:00Z");
    assert_eq!(events[0]["location"], "Lisbon");
    assert_eq!(events[0]["event_type"], "meeting");
    let mut names: Vec<String> = lines_of(&exported, "entity")
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["Acme", "Ana Silva"], "{exported:?}");
    assert_eq!(lines_of(&exported, "edge").len(), 1, "{exported:?}");
    assert_eq!(lines_of(&exported, "link").len(), 2, "{exported:?}");

    // What recall_about and recall_timeline read, from an engine built as the server does.
    let engine = engine(&env).await;
    let dossier = engine.memory.recall_about("ada", "ana", 10).await.unwrap();
    assert_eq!(dossier.entity.name, "Ana Silva");
    assert_eq!(dossier.entity.entity_type.as_deref(), Some("person"));
    assert_eq!(dossier.relationships.len(), 1);
    assert_eq!(dossier.relationships[0].label, "works_at");
    assert_eq!(dossier.relationships[0].direction, Direction::Out);
    assert_eq!(dossier.relationships[0].other.name, "Acme");
    assert_eq!(dossier.memories.len(), 1);
    assert_eq!(dossier.memories[0].id.to_string(), id);
    let timeline = engine
        .memory
        .timeline("ada", &TimeRange::default(), 10)
        .await
        .unwrap();
    assert_eq!(timeline.len(), 1);
    assert_eq!(timeline[0].memory.id.to_string(), id);
    assert_eq!(timeline[0].event.location.as_deref(), Some("Lisbon"));

    // An empty object is no structure: the memory alone.
    let plain = json(&ok(
        &env,
        &["add", "Ana likes green tea", "--structure", "{}", "--json"],
    ));
    assert_eq!(plain["status"], "stored");
    assert_eq!(
        lines_of(&export_lines(&env, false), "event").len(),
        1,
        "no new record"
    );
}

#[tokio::test]
async fn a_bad_structure_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("memory.db");
    let env = sqlite_env(&db);
    for (structure, needles) in [
        (
            r#"{"entities": ["#,
            vec!["--structure", "not a structure object"],
        ),
        (
            r#"{"entities": [{"name": "Ana", "kind": "person"}]}"#,
            vec!["unknown field `kind`"],
        ),
        (r#"{"relation": []}"#, vec!["unknown field `relation`"]),
        (
            r#"{"entities": [{"name": "   "}]}"#,
            vec!["invalid entities", "name of item 0"],
        ),
        (
            r#"{"event": {"time": "next tuesday"}}"#,
            vec!["invalid event", "\"next tuesday\"", "YYYY-MM-DD"],
        ),
        (
            r#"{"relations": [{"from": "Ana", "label": "?!", "to": "Acme"}]}"#,
            vec!["invalid relations", "label of item 0"],
        ),
        (r#"[]"#, vec!["--structure"]),
    ] {
        let err = refused(&env, &["add", "Met Ana", "--structure", structure]);
        for needle in needles {
            assert!(err.contains(needle), "{structure}: {err}");
        }
    }
    // Refused before the store was opened: no database file at all.
    assert!(!db.exists(), "a refused structure creates nothing");
    ok(&env, &["add", "A memory without structure"]);
    let exported = export_lines(&env, false);
    assert_eq!(memory_lines(&exported).len(), 1);
    assert_eq!(exported.len(), 1, "no record: {exported:?}");
    let engine = engine(&env).await;
    let missing = engine.memory.recall_about("ada", "Ana", 10).await;
    assert!(
        matches!(missing, Err(CortexError::NotFound { .. })),
        "{missing:?}"
    );
}
