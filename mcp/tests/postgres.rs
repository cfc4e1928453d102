//! The tools over PostgreSQL, with the engine built from environment settings exactly as
//! the server builds it (`CORTEX_DATABASE_URL` selects Postgres). Needs
//! `CORTEX_TEST_DATABASE_URL`; without it the test prints one skip line, or fails under CI.

// Test helpers outside #[test] fns panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use cortex_mcp::{CortexServer, LazyEngine, ServerConfig, Storage, build_engine};
use cortex_postgres::PostgresStore;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};

fn settings(url: &str, schema: &str) -> ServerConfig {
    let map: HashMap<&str, String> = HashMap::from([
        ("CORTEX_DATABASE_URL", url.to_owned()),
        ("CORTEX_PG_SCHEMA", schema.to_owned()),
        ("CORTEX_PG_DENSE_MODE", "exact".to_owned()),
        ("CORTEX_EMBED_PROVIDER", "fake".to_owned()),
        ("CORTEX_USER_ID", "pg-tester".to_owned()),
    ]);
    ServerConfig::from_lookup(&|name| map.get(name).cloned()).unwrap()
}

fn ok(result: CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "expected success: {result:?}");
    result.structured_content.expect("structured content")
}

fn err(result: CallToolResult) -> String {
    assert_eq!(
        result.is_error,
        Some(true),
        "expected a tool error: {result:?}"
    );
    result.content[0].as_text().unwrap().text.clone()
}

async fn drop_schema(config: &ServerConfig, schema: &str) {
    let Storage::Postgres(pg) = &config.storage else {
        return;
    };
    let store = PostgresStore::connect(pg.clone()).await.unwrap();
    let client = store.pool().get().await.unwrap();
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .unwrap();
}

#[tokio::test]
async fn the_tools_work_over_postgres() {
    let Some(url) = cortex_conformance::skip::test_database_url() else {
        return;
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let schema = format!("cortex_t_mcp_{}_{nanos}", std::process::id());
    let config = settings(&url, &schema);
    assert!(matches!(config.storage, Storage::Postgres(_)));

    let engine = build_engine(&config).await.expect("connect to postgres");
    let server = CortexServer::new(Arc::new(LazyEngine::ready(engine)));
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let client = ().serve(client_io).await.unwrap();
    let call = |tool: &'static str, args: Value| {
        let Value::Object(args) = args else {
            panic!("arguments must be an object")
        };
        client.call_tool(CallToolRequestParams::new(tool).with_arguments(args))
    };

    let mut ids = Vec::new();
    for content in [
        "The user prefers Rust for systems programming",
        "The user drinks coffee black",
        "Project Atlas ships in May",
    ] {
        let out = ok(call("memorize", json!({ "content": content }))
            .await
            .unwrap());
        assert_eq!(out["status"], "stored");
        ids.push(out["id"].as_str().unwrap().to_owned());
    }

    let found = ok(call("recall", json!({ "query": "systems programming" }))
        .await
        .unwrap());
    assert_eq!(found["memories"][0]["id"], ids[0].as_str());
    assert_eq!(found["memories"][0]["lexical_rank"], 1);

    let listed = ok(call("list_memories", json!({ "limit": 0 })).await.unwrap());
    assert_eq!(listed["memories"].as_array().unwrap().len(), 1);
    assert_eq!(listed["memories"][0]["id"], ids[2].as_str());

    let gone = ok(call("forget", json!({ "memory_id": &ids[1][..8] }))
        .await
        .unwrap());
    assert_eq!(gone["forgotten"], ids[1].as_str());
    let msg = err(call("forget", json!({ "memory_id": &ids[1] }))
        .await
        .unwrap());
    assert!(msg.contains("no memory matches"), "{msg}");

    let msg = err(call("recall_about", json!({ "entity": "Atlas" }))
        .await
        .unwrap());
    assert!(msg.contains("CORTEX_GRAPH=1"), "{msg}");

    client.cancel().await.unwrap();
    drop_schema(&config, &schema).await;
}
