//! One server for many users: with `CORTEX_HTTP_AUTH=keys` every request is served as its
//! API key's user, on SQLite and on Postgres. Neither user can recall, list, forget, read
//! the timeline or dossier of, or guess by id prefix the other's memories; a read key
//! cannot write; a revoked key fails on its next request; a request without a valid key
//! reaches nothing. The layers run on a mock model (`mcp_http::mock_llm`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

#[path = "support/mcp_http.rs"]
mod mcp_http;

use std::sync::Arc;

use chrono::Utc;
use cortex_core::keys::KeyStore;
use cortex_core::keys::{self, Scope};
use mcp_http::{Client, Server, TestStore, contents, mock_llm};
use serde_json::json;

/// Makes the keys, starts the server on the store `env` names and checks isolation.
async fn isolation(store: Arc<dyn KeyStore>, env: &[(&str, &str)]) {
    let now = Utc::now();
    let mut tokens = Vec::new();
    for (user, scope) in [
        ("ada", Scope::Write),
        ("bea", Scope::Write),
        ("ada", Scope::Read),
    ] {
        let issued = keys::issue(user, scope, None, None, now).unwrap();
        store.insert_key(&issued.stored).await.unwrap();
        tokens.push((issued.token, issued.stored.id));
    }
    let llm = mock_llm().await;
    let layers = [
        ("CORTEX_HTTP_AUTH", "keys"),
        ("CORTEX_LLM_PROVIDER", "openai"),
        ("OPENAI_API_KEY", "sk-mock"),
        ("CORTEX_OPENAI_BASE_URL", llm.as_str()),
        ("CORTEX_EPISODIC", "1"),
        ("CORTEX_GRAPH", "1"),
    ];
    let server = Server::start(&[&layers[..], env].concat());
    let ada = Client::open(&server, &tokens[0].0);
    let bea = Client::open(&server, &tokens[1].0);
    let ada_read = Client::open(&server, &tokens[2].0);

    let ada_id = ada.ok("memorize", json!({"content": "Ada prefers green tea"}))["id"]
        .as_str()
        .unwrap()
        .to_owned();
    bea.ok("memorize", json!({"content": "Bea prefers black coffee"}));

    // Each sees only their own, by recall and by list.
    let recalled = contents(&bea.ok("recall", json!({"query": "green tea"})), "memories");
    assert!(!recalled.iter().any(|c| c.contains("Ada")), "{recalled:?}");
    let listed = contents(&bea.ok("list_memories", json!({})), "memories");
    assert_eq!(listed, vec!["Bea prefers black coffee"]);
    let listed = contents(&ada.ok("list_memories", json!({})), "memories");
    assert_eq!(listed, vec!["Ada prefers green tea"]);

    // Timelines and dossiers: each user's own events and entities only.
    let timeline = contents(&ada.ok("recall_timeline", json!({})), "events");
    assert_eq!(timeline, vec!["Ada prefers green tea"]);
    let timeline = contents(&bea.ok("recall_timeline", json!({})), "events");
    assert_eq!(timeline, vec!["Bea prefers black coffee"]);
    let dossier = contents(
        &ada.ok("recall_about", json!({"entity": "Ada"})),
        "memories",
    );
    assert_eq!(dossier, vec!["Ada prefers green tea"]);
    let (failed, text) = bea.call("recall_about", json!({"entity": "Ada"}));
    assert!(failed, "Bea reads no dossier of Ada's: {text}");

    // Bea cannot forget Ada's memory, by its id or a prefix of it.
    for id in [ada_id.as_str(), &ada_id[..8]] {
        let (failed, text) = bea.call("forget", json!({"memory_id": id}));
        assert!(failed, "{text}");
    }
    // Ada's read key reads Ada's memories and cannot write or forget.
    let listed = contents(&ada_read.ok("recall", json!({"query": "tea"})), "memories");
    assert_eq!(listed, vec!["Ada prefers green tea"]);
    for (tool, arguments) in [
        ("memorize", json!({"content": "written with a read key"})),
        ("forget", json!({"memory_id": ada_id})),
    ] {
        let (failed, text) = ada_read.call(tool, arguments);
        assert!(
            failed && text.as_str().unwrap().contains("scope read"),
            "{text}"
        );
    }
    let listed = contents(&ada.ok("list_memories", json!({})), "memories");
    assert_eq!(listed, vec!["Ada prefers green tea"], "nothing changed");

    // A wrong, malformed or missing key reaches nothing.
    let mut wrong = tokens[0].0.clone();
    let last = wrong.pop().unwrap();
    wrong.push(if last == '0' { '1' } else { '0' });
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "keys-test", "version": "0"}}});
    for key in [wrong.as_str(), "not-a-key-at-all", ""] {
        let (status, head, _) = server.post(key, None, &init);
        assert_eq!(status, 401, "{key:?}: {head}");
        assert!(head.contains("www-authenticate: bearer"), "{head}");
    }
    // A session is its opener's: Ada's key on Bea's session reaches nothing. On the
    // session of Ada's read key it is Ada's, as each request is served as its own key.
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "list_memories", "arguments": {}}});
    let (status, head, _) = server.post(&tokens[0].0, Some(&bea.session), &list);
    assert_eq!(status, 404, "{head}");
    let as_ada = Client {
        server: &server,
        key: tokens[0].0.clone(),
        session: ada_read.session.clone(),
    };
    let listed = contents(&as_ada.ok("list_memories", json!({})), "memories");
    assert_eq!(listed, vec!["Ada prefers green tea"]);

    // Revoked: the next request fails.
    assert!(store.revoke_key(&tokens[1].1, Utc::now()).await.unwrap());
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "list_memories", "arguments": {}}});
    let (status, _, body) = server.post(&tokens[1].0, Some(&bea.session), &call);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("revoked"), "{body}");

    // A tool name that is none of ours is counted, under one fixed label.
    let unknown = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "no_such_tool_x7", "arguments": {}}});
    let (status, _, body) = server.post(&as_ada.key, Some(&as_ada.session), &unknown);
    assert_eq!(status, 200, "{body}");

    // The metrics count calls per tool and outcome, and refusals, naming no user.
    let (status, _, metrics) = server.get("/metrics");
    assert_eq!(status, 200);
    for series in [
        r#"cortex_tool_calls_total{tool="memorize",outcome="ok"} 2"#,
        r#"cortex_tool_calls_total{tool="memorize",outcome="error"} 1"#,
        r#"cortex_http_refused_total{reason="credentials"} 4"#,
        r#"cortex_tool_calls_total{tool="unknown",outcome="#,
        "cortex_tool_call_seconds_bucket",
        r#"cortex_provider_calls_total{provider="fake","#,
        "cortex_cache_misses_total",
    ] {
        assert!(metrics.contains(series), "no {series} in:\n{metrics}");
    }
    assert!(
        !metrics.contains("ada") && !metrics.contains("bea") && !metrics.contains("x7"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_isolate_users_on_sqlite() {
    let store = TestStore::sqlite();
    isolation(store.keys.clone(), &store.env()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_isolate_users_on_postgres() {
    let Some(store) = TestStore::postgres("keys_http").await else {
        return;
    };
    isolation(store.keys.clone(), &store.env()).await;
    store.remove().await;
}

/// A write key for each of `users`, stored; their tokens.
async fn write_keys(store: &dyn KeyStore, users: &[&str]) -> Vec<String> {
    let mut tokens = Vec::new();
    for user in users {
        let issued = keys::issue(user, Scope::Write, None, None, Utc::now()).unwrap();
        store.insert_key(&issued.stored).await.unwrap();
        tokens.push(issued.token);
    }
    tokens
}

/// One user past their rate gets 429 with Retry-After; another user is not slowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_has_a_rate_of_their_own() {
    let store = TestStore::sqlite();
    let tokens = write_keys(store.keys.as_ref(), &["ada", "bea"]).await;
    let rate = [
        ("CORTEX_HTTP_AUTH", "keys"),
        ("CORTEX_HTTP_USER_RPS", "1"),
        ("CORTEX_HTTP_USER_BURST", "3"),
    ];
    let server = Server::start(&[&rate[..], &store.env()].concat());
    // Three requests fit the burst (initialize, initialized, one call); the fourth does not.
    let ada = Client::open(&server, &tokens[0]);
    ada.ok("list_memories", json!({}));
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "list_memories", "arguments": {}}});
    let (status, head, body) = server.post(&tokens[0], Some(&ada.session), &call);
    assert_eq!(status, 429, "{head}{body}");
    assert!(head.contains("retry-after: 1"), "{head}");
    assert!(body.contains("per user"), "{body}");
    let bea = Client::open(&server, &tokens[1]);
    bea.ok("list_memories", json!({}));
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    ada.ok("list_memories", json!({}));
}

/// One user holds at most CORTEX_HTTP_USER_MAX_SESSIONS sessions (429 past it, others
/// unaffected), and a session answers only the user who opened it: another user's key on
/// its id, to call a tool or to close it, finds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_holds_a_bounded_share_of_sessions_and_only_their_own() {
    let store = TestStore::sqlite();
    let tokens = write_keys(store.keys.as_ref(), &["ada", "bea"]).await;
    let (ada, bea) = (&tokens[0], &tokens[1]);
    let limits = [
        ("CORTEX_HTTP_AUTH", "keys"),
        ("CORTEX_HTTP_USER_MAX_SESSIONS", "2"),
    ];
    let server = Server::start(&[&limits[..], &store.env()].concat());
    let first = Client::open(&server, ada);
    let _second = Client::open(&server, ada);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "keys-test", "version": "0"}}});
    let (status, head, body) = server.post(ada, None, &init);
    assert_eq!(status, 429, "{head}{body}");
    assert!(head.contains("retry-after"), "{head}");
    assert!(body.contains("CORTEX_HTTP_USER_MAX_SESSIONS"), "{body}");
    let theirs = Client::open(&server, bea);
    theirs.ok("list_memories", json!({}));

    first.ok(
        "memorize",
        json!({"content": "ada keeps her notes in a blue folder"}),
    );
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "list_memories", "arguments": {}}});
    let (status, head, _) = server.post(bea, Some(&first.session), &call);
    assert_eq!(status, 404, "another user's session: {head}");
    let header = [format!("Mcp-Session-Id: {}", first.session)];
    let (status, ..) = server.raw("DELETE", Some(bea), b"", &header);
    assert_eq!(status, 404, "another user cannot close it");
    let listed = first.ok("list_memories", json!({}));
    assert_eq!(
        contents(&listed, "memories"),
        ["ada keeps her notes in a blue folder"]
    );

    let (status, ..) = server.raw("DELETE", Some(ada), b"", &header);
    assert!(status < 300, "{status}");
    Client::open(&server, ada).ok("list_memories", json!({}));
    let log = server
        .log_once_it_has(&[
            "refused a new session",
            "refused: a session another user opened",
        ])
        .join("\n");
    assert!(log.contains("refused a new session"), "{log}");
    assert!(
        log.contains("refused: a session another user opened"),
        "{log}"
    );
}
