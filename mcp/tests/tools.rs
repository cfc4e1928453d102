//! Every tool through a real MCP client, in process over a duplex pipe, against a temporary
//! SQLite file and the deterministic fake embedder. Errors included: each must come back as
//! a tool result with `isError: true` and a message that says what to do.

// Test helpers outside #[test] fns panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{DateTime, Utc};
use cortex_core::records::{EntityEdge, EntityRole, EntityUpsert, Event};
use cortex_core::{
    engine::CortexMemory, engine::EngineConfig, engine::Layers, enrichment_store::EnrichmentStore,
    memory::MemoryKind,
};
use cortex_mcp::{CortexServer, Engine, EngineError, LazyEngine, ServerConfig, build_engine};
use cortex_providers::FakeProvider;
use cortex_sqlite::SqliteStore;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tempfile::TempDir;

const USER: &str = "tester";

struct Harness {
    client: RunningService<RoleClient, ()>,
    memory: Arc<CortexMemory>,
    /// The server's store, for writing the layers' records as an extraction would.
    store: Arc<SqliteStore>,
    fake: Arc<FakeProvider>,
    _dir: TempDir,
}

/// A server over a fresh SQLite file, plus direct handles on its engine and embedder.
async fn harness(layers: Layers) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path().join("memory.db")).unwrap());
    let fake = Arc::new(FakeProvider::new(64));
    let config = EngineConfig {
        layers,
        ..EngineConfig::default()
    };
    let memory = Arc::new(
        CortexMemory::with_config(store.clone(), fake.clone(), config)
            .with_enrichment(store.clone()),
    );
    let engine = Engine {
        memory: memory.clone(),
        store: store.clone(),
        user_id: USER.into(),
        top_k: 10,
    };
    let client = connect(LazyEngine::ready(engine)).await;
    Harness {
        client,
        memory,
        store,
        fake,
        _dir: dir,
    }
}

async fn connect(engine: LazyEngine) -> RunningService<RoleClient, ()> {
    let server = CortexServer::new(Arc::new(engine));
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.unwrap()
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool} must answer with a tool result, got {e:?}"))
}

/// A success: returns the structured content after checking the text block says the same.
fn ok(result: CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "expected success: {result:?}");
    let structured = result
        .structured_content
        .clone()
        .expect("structured content");
    let text = &result.content[0].as_text().expect("a text block").text;
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), structured);
    structured
}

/// A refusal: returns its message.
fn err(result: CallToolResult) -> String {
    assert_eq!(
        result.is_error,
        Some(true),
        "expected a tool error: {result:?}"
    );
    result.content[0]
        .as_text()
        .expect("a text block")
        .text
        .clone()
}

impl Harness {
    async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        call(&self.client, tool, args).await
    }

    async fn memorize(&self, content: &str) -> String {
        let out = ok(self.call("memorize", json!({ "content": content })).await);
        out["id"].as_str().unwrap().to_owned()
    }

    async fn count(&self) -> u64 {
        self.memory.count(USER).await.unwrap()
    }
}

#[tokio::test]
async fn lists_the_six_tools_with_documented_schemas() {
    let h = harness(Layers::default()).await;
    let info = h.client.peer_info().unwrap();
    let instructions = info.instructions.as_deref().unwrap();
    assert!(instructions.contains("memorize") && instructions.contains("recall"));
    assert!(instructions.contains("chit-chat"));
    assert_eq!(info.server_info.as_ref().unwrap().name, "cortex-mcp");

    let tools = h.client.list_all_tools().await.unwrap();
    let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "forget",
            "list_memories",
            "memorize",
            "recall",
            "recall_about",
            "recall_timeline"
        ])
    );
    let required: HashMap<&str, Vec<&str>> = HashMap::from([
        ("memorize", vec!["content"]),
        ("recall", vec!["query"]),
        ("recall_about", vec!["entity"]),
        ("recall_timeline", vec![]),
        ("list_memories", vec![]),
        ("forget", vec!["memory_id"]),
    ]);
    for tool in &tools {
        let name = tool.name.as_ref();
        assert!(
            tool.description.as_deref().is_some_and(|d| d.len() > 80),
            "{name} needs a real description"
        );
        assert!(tool.output_schema.is_some(), "{name} has no output schema");
        let schema = Value::Object((*tool.input_schema).clone());
        let props = schema["properties"].as_object().unwrap();
        for (field, spec) in props {
            let described = spec["description"].as_str().is_some_and(|d| !d.is_empty());
            assert!(described, "{name}.{field} has no description");
        }
        let want: Vec<&str> = required[name].clone();
        let got: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        assert_eq!(got, want, "{name} required fields");
    }
    let forget = tools.iter().find(|t| t.name == "forget").unwrap();
    let annotations = forget.annotations.as_ref().unwrap();
    assert_eq!(annotations.destructive_hint, Some(true));
    let recall = tools.iter().find(|t| t.name == "recall").unwrap();
    assert_eq!(
        recall.annotations.as_ref().unwrap().read_only_hint,
        Some(true)
    );
}

/// Every tool states all four hints (MCP's defaults are the pessimistic ones) and an
/// output schema for its structured result; the server offers resources and prompts.
#[tokio::test]
async fn every_tool_states_its_hints_and_output_schema() {
    let h = harness(Layers::default()).await;
    let capabilities = &h.client.peer_info().unwrap().capabilities;
    assert!(capabilities.tools.is_some());
    assert!(capabilities.resources.is_some(), "resources advertised");
    assert!(capabilities.prompts.is_some(), "prompts advertised");
    // (readOnly, destructive, idempotent, openWorld)
    let expected: HashMap<&str, (bool, bool, bool, bool)> = HashMap::from([
        ("memorize", (false, false, false, false)),
        ("recall", (true, false, true, false)),
        ("recall_about", (true, false, true, false)),
        ("recall_timeline", (true, false, true, false)),
        ("list_memories", (true, false, true, false)),
        ("forget", (false, true, true, false)),
    ]);
    let tools = h.client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), expected.len());
    for tool in &tools {
        let name = tool.name.as_ref();
        let a = tool
            .annotations
            .as_ref()
            .unwrap_or_else(|| panic!("{name} has no annotations"));
        let hints = (
            a.read_only_hint,
            a.destructive_hint,
            a.idempotent_hint,
            a.open_world_hint,
        );
        let (r, d, i, o) = expected[name];
        assert_eq!(hints, (Some(r), Some(d), Some(i), Some(o)), "{name}");
        assert!(a.title.is_some(), "{name} has a title");
        let schema = tool
            .output_schema
            .as_ref()
            .unwrap_or_else(|| panic!("{name} has no output schema"));
        assert_eq!(schema.get("type"), Some(&json!("object")), "{name}");
        let properties = schema["properties"].as_object().unwrap();
        for required in schema["required"].as_array().unwrap() {
            let required = required.as_str().unwrap();
            assert!(properties.contains_key(required), "{name}.{required}");
        }
    }
}

/// A resource's one JSON text, parsed; or the JSON-RPC error of the read.
async fn read(h: &Harness, uri: &str) -> Result<Value, rmcp::ErrorData> {
    match h
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
        .await
    {
        Ok(result) => match &result.contents[..] {
            [
                rmcp::model::ResourceContents::TextResourceContents {
                    text, mime_type, ..
                },
            ] => {
                assert_eq!(mime_type.as_deref(), Some("application/json"), "{uri}");
                Ok(serde_json::from_str(text).unwrap())
            }
            other => panic!("{uri}: {other:?}"),
        },
        Err(rmcp::ServiceError::McpError(e)) => Err(e),
        Err(e) => panic!("{uri}: {e}"),
    }
}

/// In process (the Python SDK checks the same over both transports): each resource and the
/// prompt read the configured user's memories, and what does not exist is -32002.
#[tokio::test]
async fn resources_and_the_prompt_read_the_users_memories() {
    let h = harness(Layers::default()).await;
    let met = ok(h
        .call(
            "memorize",
            json!({"content": "Met Ana Silva from Acme in Lisbon",
                   "entities": [{"name": "Ana Silva", "aliases": ["Ana"]}],
                   "relations": [{"from": "Ana Silva", "label": "works at", "to": "Acme"}],
                   "event": {"time": "2026-11-20", "place": "Lisbon"}}),
        )
        .await)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let memory = read(&h, &format!("cortex://memory/{met}")).await.unwrap();
    assert_eq!(memory["memory"]["id"], json!(met));
    assert_eq!(memory["state"], json!("live"));
    let graph = read(&h, "cortex://graph").await.unwrap();
    assert_eq!(
        graph["relations"],
        json!([{"from": "Ana Silva", "label": "works_at", "to": "Acme"}])
    );
    let dossier = read(&h, "cortex://entity/ana").await.unwrap();
    assert_eq!(dossier["entity"]["name"], json!("Ana Silva"));
    let timeline = read(&h, "cortex://timeline?until=2026-12-01")
        .await
        .unwrap();
    assert_eq!(timeline["events"][0]["memory"]["id"], json!(met));
    for uri in [
        "cortex://memory/00000000-0000-4000-8000-000000000000",
        "cortex://entity/Nobody",
        "cortex://elsewhere",
    ] {
        let e = read(&h, uri).await.unwrap_err();
        assert_eq!(e.code, rmcp::model::ErrorCode::RESOURCE_NOT_FOUND, "{uri}");
        assert_eq!(e.message, "Resource not found");
        assert_eq!(e.data, Some(json!({ "uri": uri })));
    }
    let e = read(&h, "cortex://timeline?since=soon").await.unwrap_err();
    assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);

    let mut arguments = serde_json::Map::new();
    arguments.insert("task".into(), json!("meeting Ana in Lisbon"));
    let prompt = h
        .client
        .get_prompt(
            rmcp::model::GetPromptRequestParams::new("recall_context").with_arguments(arguments),
        )
        .await
        .unwrap();
    let text = match &prompt.messages[..] {
        [message] => serde_json::to_value(&message.content).unwrap()["text"]
            .as_str()
            .unwrap()
            .to_owned(),
        other => panic!("{other:?}"),
    };
    assert!(
        text.contains(&met) && text.contains("Met Ana Silva"),
        "{text}"
    );
    assert!(text.ends_with("Task: meeting Ana in Lisbon"), "{text}");
}

#[tokio::test]
async fn memorize_recall_list_and_forget() {
    let h = harness(Layers::default()).await;

    let out = ok(h
        .call(
            "memorize",
            json!({
                "content": "The user prefers Rust for systems programming",
                "kind": "Preference",
                "tags": ["Languages", "work", "languages"]
            }),
        )
        .await);
    assert_eq!(out["status"], "stored");
    assert_eq!(out["kind"], "preference");
    assert_eq!(out["tags"], json!(["languages", "work"]));
    assert_eq!(out["superseded"], json!([]));
    let rust_id = out["id"].as_str().unwrap().to_owned();
    assert_eq!(rust_id.len(), 36);
    let created: DateTime<Utc> = out["created_at"].as_str().unwrap().parse().unwrap();
    assert!((Utc::now() - created).num_seconds().abs() < 60);

    let coffee_id = h
        .memorize("The user drinks coffee black every morning")
        .await;
    let out = ok(h
        .call(
            "memorize",
            json!({ "content": "Project Atlas ships in May" }),
        )
        .await);
    assert_eq!(out["kind"], "note", "kind defaults to note");
    let atlas_id = out["id"].as_str().unwrap().to_owned();

    let found = ok(h
        .call(
            "recall",
            json!({ "query": "which programming language for systems" }),
        )
        .await);
    let memories = found["memories"].as_array().unwrap();
    assert!(!memories.is_empty());
    let top = &memories[0];
    assert_eq!(top["id"], rust_id.as_str());
    assert_eq!(
        top["content"],
        "The user prefers Rust for systems programming"
    );
    assert_eq!(top["kind"], "preference");
    assert_eq!(top["tags"], json!(["languages", "work"]));
    assert!(top["score"].as_f64().unwrap() > 0.0);
    assert_eq!(top["lexical_rank"], 1);
    assert!(top["dense_rank"].is_u64());
    assert!(top["created_at"].is_string());
    let scores: Vec<f64> = memories
        .iter()
        .map(|m| m["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "ranked order");

    let listed = ok(h.call("list_memories", json!({})).await);
    let ids: Vec<&str> = listed["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [atlas_id.as_str(), coffee_id.as_str(), rust_id.as_str()]
    );

    let out = ok(h.call("forget", json!({ "memory_id": rust_id })).await);
    assert_eq!(out, json!({ "forgotten": rust_id }));
    let out = ok(h
        .call(
            "forget",
            json!({ "memory_id": coffee_id[..8].to_uppercase() }),
        )
        .await);
    assert_eq!(out, json!({ "forgotten": coffee_id }));
    assert_eq!(h.count().await, 1);

    let found = ok(h
        .call("recall", json!({ "query": "systems programming" }))
        .await);
    let ids: Vec<&str> = found["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(
        !ids.contains(&rust_id.as_str()),
        "forgotten memories are not recalled"
    );
}

#[tokio::test]
async fn recall_on_an_empty_store_returns_nothing() {
    let h = harness(Layers::default()).await;
    let found = ok(h.call("recall", json!({ "query": "anything" })).await);
    assert_eq!(found, json!({ "memories": [] }));
    let listed = ok(h.call("list_memories", json!({ "limit": 5 })).await);
    assert_eq!(listed, json!({ "memories": [] }));
}

#[tokio::test]
async fn bad_memorize_input_is_refused_and_stores_nothing() {
    let h = harness(Layers::default()).await;

    let msg = err(h
        .call("memorize", json!({ "content": "x", "kind": "opinion" }))
        .await);
    assert!(msg.contains("unknown kind \"opinion\""), "{msg}");
    assert!(msg.contains("fact, preference, event, decision"), "{msg}");

    let msg = err(h.call("memorize", json!({ "content": "  \n " })).await);
    assert!(
        msg.contains("content") && msg.contains("must not be empty"),
        "{msg}"
    );

    let oversized = "a".repeat(32 * 1024 + 1);
    let msg = err(h.call("memorize", json!({ "content": oversized })).await);
    assert!(
        msg.contains("32769 bytes") && msg.contains("limit is 32768"),
        "{msg}"
    );

    let tags: Vec<String> = (0..17).map(|i| format!("t{i}")).collect();
    let msg = err(h
        .call("memorize", json!({ "content": "x", "tags": tags }))
        .await);
    assert!(msg.contains("at most 16 tags"), "{msg}");

    // A missing or mistyped argument is also an in-band tool error, not a protocol error.
    let msg = err(h.call("memorize", json!({ "kind": "fact" })).await);
    assert!(msg.contains("content"), "{msg}");
    let msg = err(h
        .call("recall", json!({ "query": "x", "limit": "many" }))
        .await);
    assert!(
        msg.contains("limit") || msg.contains("invalid type"),
        "{msg}"
    );

    let msg = err(h.call("recall", json!({ "query": "" })).await);
    assert!(
        msg.contains("query") && msg.contains("must not be empty"),
        "{msg}"
    );

    assert_eq!(h.count().await, 0);
}

#[tokio::test]
async fn memorize_takes_a_past_created_at_and_refuses_bad_ones() {
    let h = harness(Layers::default()).await;
    let out = ok(h
        .call(
            "memorize",
            json!({ "content": "Ada moved to Lisbon", "created_at": "2021-03-04" }),
        )
        .await);
    assert_eq!(out["created_at"], "2021-03-04T00:00:00Z", "{out}");
    let out = ok(h
        .call(
            "memorize",
            json!({ "content": "the lease was signed", "created_at": "2020-01-02T03:04:05.123456789+01:00" }),
        )
        .await);
    assert_eq!(out["created_at"], "2020-01-02T02:04:05.123456Z", "{out}");
    for (value, expect) in [
        ("2999-01-01", "future"),
        ("yesterday", "ISO-8601"),
        ("2021-13-01", "ISO-8601"),
    ] {
        let msg = err(h
            .call("memorize", json!({ "content": "x", "created_at": value }))
            .await);
        assert!(
            msg.contains("created_at") && msg.contains(expect),
            "{value}: {msg}"
        );
    }
    assert_eq!(h.count().await, 2);
}

#[tokio::test]
async fn forget_refuses_unknown_short_and_malformed_ids() {
    let h = harness(Layers::default()).await;
    let id = h.memorize("a memory to keep").await;

    let unknown = uuid::Uuid::new_v4().to_string();
    let msg = err(h.call("forget", json!({ "memory_id": unknown })).await);
    assert!(
        msg.contains("no memory matches") && msg.contains("list_memories"),
        "{msg}"
    );

    let msg = err(h.call("forget", json!({ "memory_id": &id[..3] })).await);
    assert!(msg.contains("at least 4 hex characters"), "{msg}");

    let msg = err(h.call("forget", json!({ "memory_id": "not-an-id" })).await);
    assert!(msg.contains("memory_id"), "{msg}");

    // A well-formed prefix that matches nothing.
    let other = if id.starts_with("ffff") {
        "0000"
    } else {
        "ffff"
    };
    let msg = err(h.call("forget", json!({ "memory_id": other })).await);
    assert!(msg.contains("no memory matches"), "{msg}");

    assert_eq!(h.count().await, 1);
}

/// One seeded store serves both the ambiguous-prefix and the clamping checks: past 1000
/// memories, 4-hex prefixes (65,536 of them) almost surely collide, and a limit of 5000
/// visibly becomes 1000.
#[tokio::test]
async fn ambiguous_prefixes_and_limit_clamping() {
    let h = harness(Layers::default()).await;
    let mut by_prefix: HashMap<String, Vec<String>> = HashMap::new();
    let mut n = 0;
    while n < 1001 || !by_prefix.values().any(|ids| ids.len() > 1) {
        let m = h
            .memory
            .memorize(
                USER,
                &format!("seeded memory number {n}"),
                MemoryKind::Note,
                &[],
                &Default::default(),
            )
            .await
            .unwrap();
        let id = m.memory.id.to_string();
        by_prefix.entry(id[..4].to_owned()).or_default().push(id);
        n += 1;
        assert!(n < 20_000, "no 4-hex prefix collision in {n} ids");
    }
    let total = h.count().await;

    let (prefix, ids) = by_prefix.iter().find(|(_, ids)| ids.len() > 1).unwrap();
    let msg = err(h.call("forget", json!({ "memory_id": prefix })).await);
    assert!(
        msg.contains(&format!("matches {} memories", ids.len())),
        "{msg}"
    );
    assert!(msg.contains("Nothing was deleted"), "{msg}");
    assert_eq!(
        h.count().await,
        total,
        "an ambiguous prefix deletes nothing"
    );
    // A longer prefix of one of them is unambiguous.
    let out = ok(h
        .call("forget", json!({ "memory_id": &ids[0][..13] }))
        .await);
    assert_eq!(out["forgotten"], ids[0].as_str());
    assert_eq!(h.count().await, total - 1);

    let len = |v: &Value| v["memories"].as_array().unwrap().len();
    let listed = ok(h.call("list_memories", json!({ "limit": 0 })).await);
    assert_eq!(len(&listed), 1, "0 is clamped to 1");
    let listed = ok(h.call("list_memories", json!({ "limit": -4 })).await);
    assert_eq!(len(&listed), 1, "negative is clamped to 1");
    let listed = ok(h.call("list_memories", json!({ "limit": 5000 })).await);
    assert_eq!(len(&listed), 1000, "5000 is clamped to 1000");
    let listed = ok(h.call("list_memories", json!({})).await);
    assert_eq!(len(&listed), 10, "the default is the configured top-k");

    let found = ok(h
        .call("recall", json!({ "query": "seeded memory", "limit": 5000 }))
        .await);
    assert_eq!(len(&found), 1000);
    let found = ok(h
        .call("recall", json!({ "query": "seeded memory", "limit": 0 }))
        .await);
    assert_eq!(len(&found), 1);
    let found = ok(h
        .call("recall", json!({ "query": "seeded memory number 7" }))
        .await);
    assert_eq!(len(&found), 10);
}

#[tokio::test]
async fn the_graph_and_timeline_reads_need_no_layer_flag() {
    let h = harness(Layers::default()).await;
    let msg = err(h.call("recall_about", json!({ "entity": "Ada" })).await);
    assert!(msg.contains("no entity named \"Ada\""), "{msg}");
    assert!(msg.contains("`entities`"), "{msg}");
    assert!(!msg.contains("CORTEX_GRAPH"), "{msg}");
    let out = ok(h.call("recall_timeline", json!({})).await);
    assert_eq!(out, json!({ "events": [] }));
}

/// The structure of issue 31 item 8, as an agent sends it.
fn structured(content: &str) -> Value {
    json!({
        "content": content,
        "kind": "event",
        "subject": "Ana Silva",
        "entities": [
            { "name": "Ana Silva", "type": "Person", "aliases": ["Ana"] },
            { "name": "Acme", "type": "organization" }
        ],
        "relations": [{ "from": "Ana Silva", "label": "works at", "to": "Acme" }],
        "event": { "time": "2026-11-20", "place": "Lisbon", "actor": "Ana", "type": "Meeting" }
    })
}

/// With no layer flag and no model at all, the caller's structure is what recall_about
/// and recall_timeline read.
#[tokio::test]
async fn memorize_structure_feeds_recall_about_and_the_timeline_without_a_model() {
    // The harness attaches no generation model.
    let h = harness(Layers::default()).await;
    let out = ok(h
        .call(
            "memorize",
            structured("Met Ana Silva from Acme in Lisbon on 20 November 2026"),
        )
        .await);
    assert_eq!(out["status"], "stored");
    let id = out["id"].as_str().unwrap().to_owned();
    // A memory without structure writes no records.
    h.memorize("The user likes green tea").await;

    let about = ok(h.call("recall_about", json!({ "entity": " ana " })).await);
    assert_eq!(about["entity"]["name"], "Ana Silva", "{about}");
    assert_eq!(about["entity"]["entity_type"], "person", "{about}");
    assert_eq!(about["entity"]["aliases"], json!(["ana"]), "{about}");
    let rels = about["relationships"].as_array().unwrap();
    assert_eq!(rels.len(), 1, "{about}");
    assert_eq!(rels[0]["label"], "works_at");
    assert_eq!(rels[0]["direction"], "out");
    assert_eq!(rels[0]["other"]["name"], "Acme");
    assert_eq!(rels[0]["other"]["entity_type"], "organization");
    let memories = about["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 1, "{about}");
    assert_eq!(memories[0]["id"], id.as_str());
    assert_eq!(memories[0]["kind"], "event");

    let acme = ok(h.call("recall_about", json!({ "entity": "ACME" })).await);
    assert_eq!(acme["relationships"][0]["direction"], "in", "{acme}");
    assert_eq!(acme["relationships"][0]["other"]["name"], "Ana Silva");
    assert_eq!(acme["memories"][0]["id"], id.as_str(), "a mention links it");

    let timeline = ok(h.call("recall_timeline", json!({})).await);
    assert_eq!(
        timeline["events"].as_array().unwrap().len(),
        1,
        "{timeline}"
    );
    let event = &timeline["events"][0];
    assert_eq!(event["event_time"], "2026-11-20T00:00:00Z");
    assert_eq!(event["location"], "Lisbon");
    assert_eq!(event["actor"], "Ana");
    assert_eq!(event["event_type"], "meeting");
    assert_eq!(event["memory"]["id"], id.as_str());
    let november = ok(h
        .call(
            "recall_timeline",
            json!({ "since": "2026-11-01", "until": "2026-12-01" }),
        )
        .await);
    assert_eq!(november["events"][0]["memory"]["id"], id.as_str());
    let earlier = ok(h
        .call("recall_timeline", json!({ "until": "2026-11-20" }))
        .await);
    assert_eq!(earlier, json!({ "events": [] }));

    // "I" is the user's own node, which recall_about finds as "me".
    ok(h.call(
        "memorize",
        json!({
            "content": "I manage Project Atlas",
            "relations": [{ "from": "I", "label": "manages", "to": "Project Atlas" }]
        }),
    )
    .await);
    let me = ok(h.call("recall_about", json!({ "entity": "me" })).await);
    assert_eq!(me["relationships"][0]["label"], "manages", "{me}");
    assert_eq!(me["relationships"][0]["other"]["name"], "Project Atlas");
}

#[tokio::test]
async fn a_bad_structure_is_a_tool_error_and_writes_nothing() {
    let h = harness(Layers::default()).await;
    let with = |patch: Value| {
        let mut args = structured("Met Ana Silva in Lisbon");
        for (k, v) in patch.as_object().unwrap() {
            args[k] = v.clone();
        }
        args
    };
    for (args, needles) in [
        (
            with(json!({ "entities": [{ "name": "  " }] })),
            vec!["invalid entities", "name of item 0", "blank"],
        ),
        (
            with(json!({ "event": { "time": "next tuesday" } })),
            vec!["invalid event", "\"next tuesday\"", "YYYY-MM-DD"],
        ),
        (
            with(json!({ "event": { "time": "2026-11-20", "date": "2026-11-20" } })),
            vec!["unknown field `date`"],
        ),
        (
            with(json!({ "entities": [{ "name": "Ana", "kind": "person" }] })),
            vec!["unknown field `kind`"],
        ),
        (
            with(json!({ "relations": [{ "from": "Ana", "label": "...", "to": "Acme" }] })),
            vec!["invalid relations", "label of item 0"],
        ),
        (
            with(json!({ "entities": [{ "name": "Ana" }, { "name": "ana" }] })),
            vec!["invalid entities", "entities 0 and 1"],
        ),
        (
            with(json!({ "subject": "a\u{7}b" })),
            vec!["invalid subject"],
        ),
        (
            with(json!({ "relation": [] })),
            vec!["unknown field `relation`"],
        ),
    ] {
        let msg = err(h.call("memorize", args.clone()).await);
        for needle in needles {
            assert!(msg.contains(needle), "{args}: {msg}");
        }
    }
    // Refused before the embed call, and nothing stored: no memory, no entity, no event.
    assert_eq!(h.fake.embed_calls(), 0);
    let listed = ok(h.call("list_memories", json!({})).await);
    assert_eq!(listed, json!({ "memories": [] }));
    assert!(err(h.call("recall_about", json!({ "entity": "Ana" })).await).contains("no entity"));
    let timeline = ok(h.call("recall_timeline", json!({})).await);
    assert_eq!(timeline, json!({ "events": [] }));
}

#[tokio::test]
async fn memorize_lists_the_structure_fields_with_examples() {
    let h = harness(Layers::default()).await;
    let tools = h.client.list_all_tools().await.unwrap();
    let memorize = tools.iter().find(|t| t.name == "memorize").unwrap();
    let description = memorize.description.as_deref().unwrap();
    assert!(
        description.contains("recall_about") && description.contains("recall_timeline"),
        "{description}"
    );
    let schema = Value::Object((*memorize.input_schema).clone());
    let props = &schema["properties"];
    for field in ["subject", "entities", "relations", "event"] {
        let spec = &props[field];
        assert!(
            spec["description"].as_str().is_some_and(|d| d.len() > 40),
            "{field}: {spec}"
        );
        assert!(
            spec["examples"].as_array().is_some_and(|e| !e.is_empty()),
            "{field} has no example: {spec}"
        );
    }
    assert_eq!(
        props["entities"]["examples"][0],
        json!([{ "name": "Ana Silva", "type": "person", "aliases": ["Ana"] }])
    );
    assert_eq!(
        props["relations"]["examples"][0],
        json!([{ "from": "Ana Silva", "label": "works at", "to": "Acme" }])
    );
    assert_eq!(
        props["event"]["examples"][0],
        json!({ "time": "2026-11-20", "place": "Lisbon", "type": "meeting" })
    );
    // The parts are spelled out in place (no $ref to resolve), each field described, and
    // unknown fields refused.
    let entity = &props["entities"]["items"];
    let relation = &props["relations"]["items"];
    let event = &props["event"];
    for (part, fields, required) in [
        (entity, vec!["name", "type", "aliases"], vec!["name"]),
        (
            relation,
            vec!["from", "label", "to"],
            vec!["from", "label", "to"],
        ),
        (event, vec!["time", "place", "actor", "type"], vec!["time"]),
    ] {
        assert_eq!(part["additionalProperties"], false, "{part}");
        for field in fields {
            let described = part["properties"][field]["description"]
                .as_str()
                .is_some_and(|d| !d.is_empty());
            assert!(described, "{field} has no description: {part}");
        }
        assert_eq!(part["required"], json!(required), "{part}");
    }
    assert!(!schema.to_string().contains("$ref"), "{schema}");
}

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

#[tokio::test]
async fn recall_timeline_returns_dated_events_oldest_first() {
    let h = harness(Layers::default()).await;
    let store = h.store.clone();
    let mut seeded = Vec::new();
    for (content, when, actor) in [
        ("Moved to Lisbon", "2024-03-10T09:00:00Z", Some("user")),
        ("Started at Acme", "2024-01-15T00:00:00Z", None),
        ("Visited Porto", "2024-05-02T18:30:00Z", Some("user")),
    ] {
        let id: uuid::Uuid = h.memorize(content).await.parse().unwrap();
        store
            .add_event(
                USER,
                &Event {
                    memory_id: id,
                    event_time: at(when),
                    actor: actor.map(str::to_owned),
                    location: None,
                    event_type: Some("move".into()),
                },
            )
            .await
            .unwrap();
        seeded.push(id);
    }

    let out = ok(h.call("recall_timeline", json!({})).await);
    let events = out["events"].as_array().unwrap();
    let times: Vec<&str> = events
        .iter()
        .map(|e| e["event_time"].as_str().unwrap())
        .collect();
    assert_eq!(
        times,
        [
            "2024-01-15T00:00:00Z",
            "2024-03-10T09:00:00Z",
            "2024-05-02T18:30:00Z"
        ]
    );
    assert_eq!(events[0]["memory"]["content"], "Started at Acme");
    assert_eq!(events[0]["actor"], Value::Null);
    assert_eq!(events[1]["actor"], "user");
    assert_eq!(events[1]["event_type"], "move");

    // A plain date is midnight UTC; `until` is exclusive.
    let out = ok(h
        .call(
            "recall_timeline",
            json!({ "since": "2024-02-01", "until": "2024-05-02T18:30:00Z" }),
        )
        .await);
    let events = out["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["memory"]["content"], "Moved to Lisbon");

    let out = ok(h
        .call("recall_timeline", json!({ "since": "", "limit": 1 }))
        .await);
    assert_eq!(out["events"].as_array().unwrap().len(), 1);

    let msg = err(h
        .call("recall_timeline", json!({ "since": "last week" }))
        .await);
    assert!(
        msg.contains("invalid since") && msg.contains("YYYY-MM-DD"),
        "{msg}"
    );
    let msg = err(h
        .call("recall_timeline", json!({ "until": "2024-02-30" }))
        .await);
    assert!(msg.contains("invalid until"), "{msg}");
    let msg = err(h
        .call(
            "recall_timeline",
            json!({ "since": "2024-06-01", "until": "2024-01-01" }),
        )
        .await);
    assert!(
        msg.contains("since") && msg.contains("after until"),
        "{msg}"
    );
}

#[tokio::test]
async fn recall_about_returns_the_entity_dossier() {
    let h = harness(Layers::default()).await;
    let store = h.store.clone();
    let memory_id: uuid::Uuid = h
        .memorize("Ada Lovelace works with Charles Babbage")
        .await
        .parse()
        .unwrap();
    let upsert = |name: &str, kind: &str, aliases: &[&str]| EntityUpsert {
        name: name.into(),
        entity_type: Some(kind.into()),
        aliases: aliases.iter().map(|a| (*a).to_owned()).collect(),
    };
    let ada = store
        .upsert_entity(USER, &upsert("Ada Lovelace", "person", &["Ada"]))
        .await
        .unwrap();
    let charles = store
        .upsert_entity(USER, &upsert("Charles Babbage", "person", &[]))
        .await
        .unwrap();
    store
        .add_edge(
            USER,
            &EntityEdge {
                source: ada.id,
                target: charles.id,
                label: "works_with".into(),
                memory_id: Some(memory_id),
                created_at: Utc::now(),
            },
        )
        .await
        .unwrap();
    store
        .link_entity(USER, &memory_id, &ada.id, EntityRole::Subject)
        .await
        .unwrap();

    let out = ok(h.call("recall_about", json!({ "entity": "  ADA " })).await);
    assert_eq!(out["entity"]["name"], "Ada Lovelace");
    assert_eq!(out["entity"]["entity_type"], "person");
    assert_eq!(out["entity"]["aliases"], json!(["ada"]));
    assert_eq!(
        out["relationships"],
        json!([{
            "label": "works_with",
            "direction": "out",
            "other": {
                "id": charles.id.to_string(),
                "name": "Charles Babbage",
                "entity_type": "person",
                "aliases": []
            }
        }])
    );
    assert_eq!(out["memories"][0]["id"], memory_id.to_string());

    let out = ok(h
        .call("recall_about", json!({ "entity": "Charles Babbage" }))
        .await);
    assert_eq!(out["relationships"][0]["direction"], "in");
    assert_eq!(out["memories"], json!([]));

    let msg = err(h
        .call("recall_about", json!({ "entity": "Grace Hopper" }))
        .await);
    assert!(msg.contains("no entity named \"Grace Hopper\""), "{msg}");
    let msg = err(h.call("recall_about", json!({ "entity": " " })).await);
    assert!(
        msg.contains("entity") && msg.contains("must not be empty"),
        "{msg}"
    );
}

#[tokio::test]
async fn provider_failures_are_tool_errors_and_change_nothing() {
    let h = harness(Layers::default()).await;
    h.memorize("kept before the outage").await;
    h.fake.set_fail_embeds(true);
    let msg = err(h.call("memorize", json!({ "content": "lost?" })).await);
    assert!(msg.contains("embedding provider failed"), "{msg}");
    assert!(msg.contains("Nothing was changed"), "{msg}");
    let msg = err(h.call("recall", json!({ "query": "outage" })).await);
    assert!(msg.contains("embedding provider failed"), "{msg}");
    // Reads that need no embedding still work.
    let listed = ok(h.call("list_memories", json!({})).await);
    assert_eq!(listed["memories"].as_array().unwrap().len(), 1);
    h.fake.set_fail_embeds(false);
    h.memorize("stored after the outage").await;
    assert_eq!(h.count().await, 2);
}

#[tokio::test]
async fn the_engine_is_built_on_first_use_and_a_failed_build_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("lazy.db");
    let attempts = Arc::new(AtomicUsize::new(0));
    let builder = {
        let attempts = attempts.clone();
        let db = db.clone();
        move || {
            let attempt = attempts.fetch_add(1, Ordering::SeqCst);
            let db = db.clone();
            async move {
                if attempt == 0 {
                    return Err(EngineError::Unsupported(
                        "GEMINI_API_KEY is not set (simulated)".into(),
                    ));
                }
                let store = Arc::new(SqliteStore::open(db)?);
                let memory = CortexMemory::new(store.clone(), Arc::new(FakeProvider::new(32)));
                Ok(Engine {
                    memory: Arc::new(memory),
                    store,
                    user_id: USER.into(),
                    top_k: 3,
                })
            }
        }
    };
    let client = connect(LazyEngine::new(builder)).await;

    // Listing tools needs no engine.
    assert_eq!(client.list_all_tools().await.unwrap().len(), 6);
    assert_eq!(attempts.load(Ordering::SeqCst), 0);
    assert!(!db.exists());

    let msg = err(call(&client, "memorize", json!({ "content": "first" })).await);
    assert!(msg.contains("Cortex is not set up"), "{msg}");
    assert!(msg.contains("GEMINI_API_KEY"), "{msg}");
    assert!(msg.contains("next call tries again"), "{msg}");

    let out = ok(call(&client, "memorize", json!({ "content": "second" })).await);
    assert_eq!(out["status"], "stored");
    ok(call(&client, "list_memories", json!({})).await);
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        2,
        "built once it succeeded"
    );
    assert!(db.exists());
}

fn env_config(pairs: &[(&str, &str)]) -> ServerConfig {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    ServerConfig::from_lookup(&|name| map.get(name).cloned()).unwrap()
}

#[tokio::test]
async fn an_engine_built_from_environment_settings_serves_calls() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nested").join("env.db");
    let config = env_config(&[
        ("CORTEX_DB_PATH", db.to_str().unwrap()),
        ("CORTEX_EMBED_PROVIDER", "fake"),
        ("CORTEX_USER_ID", "alice"),
        ("CORTEX_TOP_K", "2"),
        ("CORTEX_DEDUP", "yes"),
    ]);
    let engine = build_engine(&config).await.unwrap();
    assert_eq!((engine.user_id.as_str(), engine.top_k), ("alice", 2));
    assert!(engine.memory.config().layers.dedup);
    let memory = engine.memory.clone();
    let client = connect(LazyEngine::ready(engine)).await;

    for content in ["one fact", "two facts", "three facts"] {
        ok(call(&client, "memorize", json!({ "content": content })).await);
    }
    // CORTEX_DEDUP is wired: the same statement again is a duplicate of the first.
    let again = ok(call(&client, "memorize", json!({ "content": "one fact" })).await);
    assert_eq!(again["status"], "duplicate");
    let listed = ok(call(&client, "list_memories", json!({})).await);
    assert_eq!(listed["memories"].as_array().unwrap().len(), 2, "top-k 2");
    assert_eq!(memory.count("alice").await.unwrap(), 3);
    assert!(db.exists());
}

#[tokio::test]
async fn a_missing_key_fails_the_build_with_the_variable_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("never.db");
    let config = env_config(&[
        ("CORTEX_DB_PATH", db.to_str().unwrap()),
        ("CORTEX_EMBED_PROVIDER", "gemini"),
    ]);
    let err = build_engine(&config).await.unwrap_err();
    assert!(err.to_string().contains("GEMINI_API_KEY"), "{err}");
    assert!(!db.exists(), "a failed build leaves no database behind");

    // Nothing chosen and nothing available: the message lists every way out.
    let config = env_config(&[("CORTEX_DB_PATH", db.to_str().unwrap())]);
    let err = build_engine(&config).await.unwrap_err().to_string();
    for hint in [
        "GEMINI_API_KEY",
        "CORTEX_EMBED_PROVIDER",
        "CORTEX_EMBED_MODEL_PATH",
    ] {
        assert!(err.contains(hint), "{err}");
    }
    assert!(!db.exists());
}

#[tokio::test]
async fn recall_and_list_take_filters_and_list_pages() {
    let h = harness(Layers::default()).await;
    // The filters are in both tools' schemas, with examples.
    let tools = h.client.list_all_tools().await.unwrap();
    for name in ["recall", "list_memories"] {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        let props = Value::Object((*tool.input_schema).clone())["properties"].clone();
        for field in ["kinds", "tags", "tags_all", "since", "until"] {
            let examples = props[field]["examples"].as_array();
            assert!(
                examples.is_some_and(|e| !e.is_empty()),
                "{name}.{field} has no example: {}",
                props[field]
            );
        }
    }
    let memorize = |content: &str, kind: &str, tags: Value, at: &str| json!({"content": content, "kind": kind, "tags": tags, "created_at": at});
    for args in [
        memorize(
            "We decided billing runs on Stripe",
            "decision",
            json!(["billing"]),
            "2026-10-05",
        ),
        memorize(
            "Billing emails go out on the 1st",
            "fact",
            json!(["billing", "ops"]),
            "2026-11-02",
        ),
        memorize(
            "We decided to invoice yearly for billing",
            "decision",
            json!(["billing"]),
            "2026-11-20",
        ),
        memorize(
            "Deploys happen on Fridays",
            "decision",
            json!(["ops"]),
            "2026-11-21",
        ),
    ] {
        ok(h.call("memorize", args).await);
    }
    let contents = |out: &Value| -> Vec<String> {
        out["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .collect()
    };
    // "What did we decide about billing last month": decisions, since November.
    let out = ok(h
        .call(
            "recall",
            json!({"query": "billing decision", "kinds": ["decision"], "since": "2026-11-01"}),
        )
        .await);
    let got = contents(&out);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], "We decided to invoice yearly for billing");
    let out = ok(h
        .call(
            "recall",
            json!({"query": "billing", "tags_all": ["billing", "ops"], "until": "2026-12-01"}),
        )
        .await);
    assert_eq!(contents(&out), ["Billing emails go out on the 1st"]);
    // Pages of two, newest first, and the filter applies to them.
    let first = ok(h.call("list_memories", json!({"limit": 2})).await);
    assert_eq!(
        contents(&first),
        [
            "Deploys happen on Fridays",
            "We decided to invoice yearly for billing"
        ]
    );
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let second = ok(h
        .call("list_memories", json!({"limit": 2, "cursor": cursor}))
        .await);
    assert_eq!(
        contents(&second),
        [
            "Billing emails go out on the 1st",
            "We decided billing runs on Stripe"
        ]
    );
    assert!(second.get("next_cursor").is_none(), "{second}");
    let tagged = ok(h.call("list_memories", json!({"tags": ["ops"]})).await);
    assert_eq!(
        contents(&tagged),
        [
            "Deploys happen on Fridays",
            "Billing emails go out on the 1st"
        ]
    );
    // Bad filters are tool errors that name the argument, and cost no embed call.
    let calls = h.fake.embed_calls();
    for (tool, args, needle) in [
        (
            "recall",
            json!({"query": "x", "kinds": ["decisions"]}),
            "kinds",
        ),
        (
            "recall",
            json!({"query": "x", "since": "yesterday"}),
            "since",
        ),
        (
            "recall",
            json!({"query": "x", "since": "2026-12-01", "until": "2026-11-01"}),
            "until",
        ),
        ("list_memories", json!({"cursor": "page-2"}), "cursor"),
        (
            "list_memories",
            json!({"tags_all": (0..33).map(|i| format!("t{i}")).collect::<Vec<_>>()}),
            "tags_all",
        ),
    ] {
        let msg = err(h.call(tool, args.clone()).await);
        assert!(msg.contains(needle), "{tool} {args}: {msg}");
    }
    assert_eq!(h.fake.embed_calls(), calls);
    assert_eq!(h.count().await, 4);
}

#[tokio::test]
async fn memorize_replaces_a_memory_it_corrects() {
    let h = harness(Layers::default()).await;
    let old = h.memorize("Ada's manager is Bob Stone").await;
    let out = ok(h
        .call(
            "memorize",
            json!({"content": "Ada's manager is Carol Wu", "replaces": &old[..8]}),
        )
        .await);
    assert_eq!(out["status"], "superseded");
    assert_eq!(out["superseded"], json!([old]));
    let found = ok(h.call("recall", json!({"query": "Ada manager"})).await);
    let ids: Vec<&str> = found["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [out["id"].as_str().unwrap()]);
    // The same memory cannot be replaced twice; an empty `replaces` is no correction.
    let msg = err(h
        .call(
            "memorize",
            json!({"content": "Ada's manager is Dan", "replaces": old}),
        )
        .await);
    assert!(
        msg.contains("replaces") && msg.contains("already replaced"),
        "{msg}"
    );
    let plain = ok(h
        .call(
            "memorize",
            json!({"content": "Ada likes tea", "replaces": ""}),
        )
        .await);
    assert_eq!(plain["status"], "stored");
    assert_eq!(h.count().await, 2);
}

#[tokio::test]
async fn memorize_takes_an_expiry_and_list_shows_it() {
    let h = harness(Layers::default()).await;
    let out = ok(h
        .call(
            "memorize",
            json!({"content": "The canteen is closed for repairs", "expires_at": "2999-01-01"}),
        )
        .await);
    let listed = ok(h
        .call("list_memories", json!({"include_expired": true}))
        .await);
    assert_eq!(listed["memories"][0]["id"], out["id"]);
    assert_eq!(listed["memories"][0]["expires_at"], "2999-01-01T00:00:00Z");
    for (value, needle) in [("2001-01-01", "not in the future"), ("soon", "expires_at")] {
        let msg = err(h
            .call("memorize", json!({"content": "x", "expires_at": value}))
            .await);
        assert!(msg.contains(needle), "{value}: {msg}");
    }
    assert_eq!(h.count().await, 1);
}
