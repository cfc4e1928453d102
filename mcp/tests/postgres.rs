//! The tools over PostgreSQL, with the engine built from environment settings exactly as
//! the server builds it (`CORTEX_DATABASE_URL` selects Postgres). Needs
//! `CORTEX_TEST_DATABASE_URL`; without it the test prints one skip line, or fails under CI.

// Test helpers outside #[test] fns panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use cortex_app::backend::PostgresBackend;
use cortex_mcp::{CortexServer, LazyEngine, ServerConfig, build_engine};
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
    let Some(pg) = config.storage.as_any().downcast_ref::<PostgresBackend>() else {
        return;
    };
    let store = PostgresStore::connect(pg.config.clone()).await.unwrap();
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
    assert_eq!(config.storage.name(), "postgres");

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
    assert!(msg.contains("no entity named \"Atlas\""), "{msg}");

    // The caller's structure is written with the memory, with no layer flag and no model:
    // the engine the settings build reads it back.
    let out = ok(call(
        "memorize",
        json!({
            "content": "Ana from Project Atlas demoed it in Lisbon in May 2026",
            "subject": "Project Atlas",
            "entities": [{ "name": "Ana Silva", "type": "person", "aliases": ["Ana"] }],
            "relations": [{ "from": "Ana Silva", "label": "works on", "to": "Project Atlas" }],
            "event": { "time": "2026-05", "place": "Lisbon", "type": "demo" }
        }),
    )
    .await
    .unwrap());
    let id = out["id"].as_str().unwrap().to_owned();
    let atlas = ok(call("recall_about", json!({ "entity": "project atlas" }))
        .await
        .unwrap());
    assert_eq!(atlas["relationships"][0]["direction"], "in", "{atlas}");
    assert_eq!(
        atlas["memories"][0]["id"],
        id.as_str(),
        "the subject links it"
    );
    let about = ok(call("recall_about", json!({ "entity": "ana" }))
        .await
        .unwrap());
    assert_eq!(about["entity"]["name"], "Ana Silva", "{about}");
    assert_eq!(about["relationships"][0]["label"], "works_on", "{about}");
    assert_eq!(about["relationships"][0]["other"]["name"], "Project Atlas");
    assert_eq!(about["memories"][0]["id"], id.as_str());
    let timeline = ok(call("recall_timeline", json!({ "since": "2026-01-01" }))
        .await
        .unwrap());
    assert_eq!(timeline["events"][0]["event_time"], "2026-05-01T00:00:00Z");
    assert_eq!(timeline["events"][0]["location"], "Lisbon");
    assert_eq!(timeline["events"][0]["memory"]["id"], id.as_str());

    client.cancel().await.unwrap();
    drop_schema(&config, &schema).await;
}

/// `url` with its database, or its user (and no password), replaced.
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let start = base.find("://").unwrap() + 3;
    let authority_end = base[start..].find('/').map_or(base.len(), |i| start + i);
    let mut out = format!("{}/{database}", &base[..authority_end]);
    if let Some(query) = query {
        out = format!("{out}?{query}");
    }
    out
}

fn with_user(url: &str, user: &str) -> String {
    let start = url.find("://").unwrap() + 3;
    let authority_end = url[start..]
        .find(['/', '?'])
        .map_or(url.len(), |i| start + i);
    let host = match url[start..authority_end].rsplit_once('@') {
        Some((_, host)) => host,
        None => &url[start..authority_end],
    };
    format!("{}{user}@{host}{}", &url[..start], &url[authority_end..])
}

/// What the first tool call says when the engine cannot be built with `url`.
async fn first_call_with(url: &str) -> String {
    let config = settings(url, "cortex_t_never_created");
    let engine = LazyEngine::new(move || {
        let config = config.clone();
        async move { build_engine(&config).await }
    });
    let server = CortexServer::new(Arc::new(engine));
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let client = ().serve(client_io).await.unwrap();
    let Value::Object(args) = json!({ "query": "tea" }) else {
        unreachable!()
    };
    let msg = err(client
        .call_tool(CallToolRequestParams::new("recall").with_arguments(args))
        .await
        .unwrap());
    client.cancel().await.unwrap();
    msg
}

/// A wrong database setting is a configuration error: the agent is told which setting to
/// fix, never that it is "usually temporary" or that the next call tries again. A
/// connection that drops is still temporary.
#[tokio::test]
async fn a_wrong_database_setting_is_a_configuration_error_not_a_temporary_one() {
    let configuration = |msg: &str, says: &str| {
        assert!(
            msg.contains("CORTEX_DATABASE_URL") && msg.contains(says),
            "names the setting and what is wrong ({says}): {msg}"
        );
        assert!(!msg.contains("temporary"), "{msg}");
        assert!(!msg.contains("tries again"), "{msg}");
    };
    // Nothing listens on port 1: the port (or the host) is wrong, or the server is down.
    let msg = first_call_with("postgres://postgres@127.0.0.1:1/test").await;
    configuration(&msg, "connection refused");
    // A malformed URL is refused before any connection.
    let msg = first_call_with("postgres://postgres@/test").await;
    configuration(&msg, "names no host");

    // A server that drops the connection: that may pass.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
        }
    });
    let msg = first_call_with(&format!(
        "postgres://postgres@127.0.0.1:{port}/test?sslmode=disable"
    ))
    .await;
    assert!(
        msg.contains("usually temporary") && msg.contains("the next call tries again"),
        "{msg}"
    );

    let Some(url) = cortex_conformance::skip::test_database_url() else {
        return;
    };
    let msg = first_call_with(&with_database(&url, "cortex_no_such_database")).await;
    configuration(&msg, "does not exist");
    assert!(msg.contains("3D000"), "{msg}");
    let msg = first_call_with(&with_user(&url, "cortex_no_such_role")).await;
    configuration(&msg, "authentication failed");
}
