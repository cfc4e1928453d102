//! `cortex import --from mcp-memory`, `--from basic-memory` and `--from mem0`, end to end
//! over the built binary and a SQLite file, on hand-written files
//! (tests/fixtures/import/): the memories arrive, recall finds them, the graph sources
//! answer `recall_about` for every entity they had (through the engine the MCP tool
//! calls), a second import adds nothing, and a file cut short names its last record read
//! whole and writes nothing of the one it cut.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_support;
mod import_support;

use admin_support::*;
use cortex_core::dossier::Direction;
use import_support::*;
use serde_json::Value;

#[tokio::test]
async fn mcp_memory_entities_answer_recall_about_and_a_second_import_adds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let env = sqlite_env(&dir.path().join("memory.db"));
    let file = fixture("mcp-memory/memory.jsonl");
    let first = import(&env, "mcp-memory", &file, &[]);
    // Five observations and three relations; five entities (one with nothing said about
    // it), each written once.
    assert_eq!(count(&first, "memory"), 8, "{first}");
    assert_eq!(count(&first, "entity"), 5, "{first}");
    assert_eq!(count(&first, "edge"), 3, "{first}");
    assert_eq!(count(&first, "link"), 11, "{first}");

    assert_eq!(
        best(&env, "ada", "which languages does John speak"),
        "John_Smith: Speaks fluent Spanish"
    );
    assert!(best(&env, "ada", "where does John_Smith work").contains("works at Acme_Robotics"));

    // recall_about, as the MCP tool calls it, for every entity of the file.
    let engine = engine(&env).await;
    let text = std::fs::read_to_string(&file).unwrap();
    let entities: Vec<Value> = text
        .lines()
        .map(json)
        .filter(|v| v["type"] == "entity")
        .collect();
    assert_eq!(entities.len(), 5);
    for entity in &entities {
        let name = entity["name"].as_str().unwrap();
        let dossier = engine.memory.recall_about("ada", name, 20).await.unwrap();
        assert_eq!(dossier.entity.name, name);
        assert_eq!(
            dossier.entity.entity_type.as_deref(),
            entity["entityType"].as_str()
        );
        for observation in entity["observations"].as_array().unwrap() {
            let said = format!("{name}: {}", observation.as_str().unwrap());
            assert!(
                dossier.memories.iter().any(|m| m.content == said),
                "{name}: {said}"
            );
        }
    }
    let john = engine
        .memory
        .recall_about("ada", "john_smith", 20)
        .await
        .unwrap();
    let mut labels: Vec<(&str, &str)> = john
        .relationships
        .iter()
        .filter(|r| r.direction == Direction::Out)
        .map(|r| (r.label.as_str(), r.other.name.as_str()))
        .collect();
    labels.sort();
    assert_eq!(
        labels,
        [
            ("lives_in", "Porto"),
            ("member_of", "Tea Club"),
            ("works_at", "Acme_Robotics")
        ]
    );
    // Porto has no observation: the relation's memory is what it has.
    let porto = engine
        .memory
        .recall_about("ada", "Porto", 20)
        .await
        .unwrap();
    assert_eq!(porto.memories.len(), 1);
    assert_eq!(porto.memories[0].content, "John_Smith lives in Porto");

    let second = import(&env, "mcp-memory", &file, &[]);
    for kind in ["memory", "entity", "edge", "link"] {
        assert_eq!(count(&second, kind), 0, "{kind}: {second}");
    }
    assert_eq!(count(&second, "memory already present"), 8, "{second}");
    assert_eq!(count(&second, "entity already present"), 5, "{second}");
    assert_eq!(count(&second, "edge already present"), 3, "{second}");
    assert_eq!(count(&second, "link already present"), 11, "{second}");
}

#[test]
fn an_mcp_memory_file_cut_short_names_its_last_line_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let marker = r#"{"type":"relation","from":"John_Smith","to":"Porto""#;
    let cut_file = cut_fixture(
        dir.path(),
        "mcp-memory/memory.jsonl",
        marker,
        10,
        "memory.jsonl",
    );
    let db = dir.path().join("memory.db");
    let env = sqlite_env(&db);
    let err = import_refused(&env, "mcp-memory", &cut_file, &[]);
    assert!(
        err.contains("line 7 ends in the middle of a record"),
        "{err}"
    );
    assert!(
        err.contains("line 6 'relation John_Smith works_at Acme_Robotics' was the last read whole"),
        "{err}"
    );
    assert!(err.contains("Nothing was imported"), "{err}");
    assert!(!db.exists());
}

#[tokio::test]
async fn basic_memory_notes_become_memories_with_their_graph() {
    let dir = tempfile::tempdir().unwrap();
    let env = sqlite_env(&dir.path().join("memory.db"));
    let folder = fixture("basic-memory");
    let first = import(&env, "basic-memory", &folder, &[]);
    assert_eq!(count(&first, "note read"), 2, "{first}");
    // Coffee: two observations, two relations, its text (with the task box); Ana: three
    // observations, two relations, no text beyond headings.
    assert_eq!(count(&first, "memory"), 10, "{first}");

    assert_eq!(
        best(&env, "ada", "what does Ana do for a living"),
        "Ana Silva: Ana is a marine biologist at the university aquarium"
    );
    let pour_over = recall(&env, "ada", "which beans for pour over")[0].clone();
    assert_eq!(pour_over["kind"], "preference", "the category names a kind");
    assert_eq!(
        tags(&pour_over),
        [
            "basic-memory",
            "coffee",
            "brewing",
            "category:preference",
            "beans"
        ]
    );
    let all = contents(&env, "ada");
    assert!(
        all.iter()
            .any(|c| c.contains("moka pot on Sundays") && c.contains("[ ] buy paper filters")),
        "{all:?}"
    );

    let engine = engine(&env).await;
    for name in [
        "Ana Silva",
        "people/ana-silva",
        "Coffee Brewing Methods",
        "University Aquarium",
        "Burr Grinder",
    ] {
        let dossier = engine.memory.recall_about("ada", name, 20).await.unwrap();
        assert!(!dossier.memories.is_empty(), "{name}");
    }
    let ana = engine
        .memory
        .recall_about("ada", "Ana Silva", 20)
        .await
        .unwrap();
    assert_eq!(ana.entity.entity_type.as_deref(), Some("person"));
    assert!(
        ana.relationships
            .iter()
            .any(|r| r.label == "works_at" && r.other.name == "University Aquarium")
    );

    let second = import(&env, "basic-memory", &folder, &[]);
    assert_eq!(count(&second, "memory"), 0, "{second}");
    assert_eq!(count(&second, "memory already present"), 10, "{second}");
    assert_eq!(count(&second, "entity"), 0, "{second}");
}

#[test]
fn a_basic_memory_note_cut_short_names_the_last_note_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("notes");
    for relative in ["notes/coffee-brewing.md", "people/ana-silva.md"] {
        let to = folder.join(relative);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(fixture(&format!("basic-memory/{relative}")), to).unwrap();
    }
    let ana = folder.join("people/ana-silva.md");
    let text = std::fs::read_to_string(&ana).unwrap();
    std::fs::write(&ana, cut_after(&text, "permalink: people/", 3)).unwrap();
    let db = dir.path().join("memory.db");
    let env = sqlite_env(&db);
    let err = import_refused(&env, "basic-memory", &folder, &[]);
    assert!(
        err.contains("note people/ana-silva.md is cut short"),
        "{err}"
    );
    assert!(
        err.contains(
            "note notes/coffee-brewing.md 'Coffee Brewing Methods' (id notes/coffee-brewing-methods) \
             was the last read whole"
        ),
        "{err}"
    );
    assert!(err.contains("Nothing was imported"), "{err}");
    assert!(!db.exists());
}

#[test]
fn mem0_memories_go_to_their_users_in_every_shape() {
    let dir = tempfile::tempdir().unwrap();
    let env = sqlite_env(&dir.path().join("memory.db"));
    let array = fixture("mem0/memories.json");
    let first = import(&env, "mem0", &array, &[]);
    assert_eq!(count(&first, "memory"), 3, "{first}");
    // mem0's user ids are Cortex users.
    assert_eq!(contents(&env, "alice").len(), 2);
    assert_eq!(
        contents(&env, "bob"),
        ["Keeps bees on a farm outside Braga"]
    );
    assert!(contents(&env, "ada").is_empty());
    let peanuts = &recall(&env, "alice", "food allergies")[0];
    assert_eq!(peanuts["content"], "Is allergic to peanuts");
    assert_eq!(peanuts["kind"], "fact");
    assert_eq!(peanuts["created_at"], "2024-07-20T08:36:43.123456Z");
    assert_eq!(
        tags(peanuts),
        [
            "mem0",
            "health",
            "food",
            "confidence:0.9",
            "source:onboarding"
        ]
    );

    let second = import(&env, "mem0", &array, &[]);
    assert_eq!(count(&second, "memory"), 0, "{second}");
    assert_eq!(count(&second, "memory already present"), 3, "{second}");

    // mem0's own answer object, filed under one user with --as-user.
    let results = import(
        &env,
        "mem0",
        &fixture("mem0/results.json"),
        &["--as-user", "zed"],
    );
    assert_eq!(count(&results, "memory"), 2, "{results}");
    assert_eq!(contents(&env, "zed").len(), 2);
    assert!(contents(&env, "carol").is_empty());
    // JSON Lines.
    let lines = import(&env, "mem0", &fixture("mem0/memories.jsonl"), &[]);
    assert_eq!(count(&lines, "memory"), 2, "{lines}");
    assert!(best(&env, "dana", "dana commutes how").contains("bicycle"));
}

#[test]
fn a_mem0_export_cut_short_names_the_last_memory_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let cut_file = cut_fixture(
        dir.path(),
        "mem0/memories.json",
        "Keeps bees",
        4,
        "memories.json",
    );
    let db = dir.path().join("memory.db");
    let env = sqlite_env(&db);
    let err = import_refused(&env, "mem0", &cut_file, &[]);
    assert!(
        err.contains(
            "memory 2 'Plays the cello in a community orchestra' \
             (id 8f0e5c1a-0000-4000-8000-000000000002) was the last read whole"
        ),
        "{err}"
    );
    assert!(!db.exists());

    let cut_file = cut_fixture(
        dir.path(),
        "mem0/memories.jsonl",
        "Commutes",
        3,
        "memories.jsonl",
    );
    let err = import_refused(&env, "mem0", &cut_file, &[]);
    assert!(
        err.contains("line 2 ends in the middle of a record"),
        "{err}"
    );
    assert!(
        err.contains("line 1 'Learning Portuguese on weekends'"),
        "{err}"
    );
    assert!(!db.exists());
}
