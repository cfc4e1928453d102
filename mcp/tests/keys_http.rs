//! One server for many users: with `CORTEX_HTTP_AUTH=keys` every request is served as its
//! API key's user, on SQLite and on Postgres. Neither user can recall, list, forget or
//! guess by id prefix the other's memories; a read key cannot write; a revoked key fails
//! on its next request; a request without a valid key reaches nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use chrono::Utc;
use cortex_core::KeyStore;
use cortex_core::keys::{self, Scope};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_cortex-mcp");

/// The binary in key mode with `env` (the store's settings), killed on drop.
struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(BINARY);
        command
            .args(["--http", "127.0.0.1:0"])
            .env_clear()
            .env("CORTEX_HTTP_AUTH", "keys")
            .env("CORTEX_EMBED_PROVIDER", "fake")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                assert!(!line.contains("cx_"), "a key reached the log: {line}");
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let _ = tx.send(rest.split('/').next().unwrap_or_default().to_owned());
                }
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        Self { child, addr }
    }

    /// One POST to /mcp on its own connection: status, lower-cased head, body.
    fn post(&self, key: &str, session: Option<&str>, body: &Value) -> (u16, String, String) {
        let body = body.to_string();
        let mut stream = std::net::TcpStream::connect(&self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let session = session.map_or(String::new(), |s| format!("Mcp-Session-Id: {s}\r\n"));
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
             MCP-Protocol-Version: 2025-11-25\r\n{session}Content-Length: {}\r\n\
             Connection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw);
        let text = String::from_utf8_lossy(&raw).to_string();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, head.to_lowercase(), body.to_owned())
    }
}

/// The JSON-RPC message of a body: plain JSON or an SSE `data:` line, maybe chunked.
fn message(body: &str) -> Value {
    let text = body
        .lines()
        .find_map(|l| l.strip_prefix("data:").filter(|d| d.contains("jsonrpc")))
        .unwrap_or(body);
    let start = text.find('{').unwrap_or(0);
    let end = text.rfind('}').map_or(text.len(), |e| e + 1);
    serde_json::from_str(&text[start..end]).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// A client session opened with one key.
struct Client<'a> {
    server: &'a Server,
    key: String,
    session: String,
}

impl<'a> Client<'a> {
    fn open(server: &'a Server, key: &str) -> Self {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "keys-test", "version": "0"}}});
        let (status, head, body) = server.post(key, None, &init);
        assert_eq!(status, 200, "{head}{body}");
        let session = head
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id:"))
            .map(|v| v.trim().to_owned())
            .unwrap();
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, ..) = server.post(key, Some(&session), &done);
        assert_eq!(status, 202);
        Self {
            server,
            key: key.to_owned(),
            session,
        }
    }

    /// A tool call's result: (isError, the structured content or the error text).
    fn call(&self, tool: &str, arguments: Value) -> (bool, Value) {
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        let (status, head, body) = self.server.post(&self.key, Some(&self.session), &call);
        assert_eq!(status, 200, "{head}{body}");
        let result = message(&body)["result"].clone();
        let failed = result["isError"] == true;
        match failed {
            true => (true, result["content"][0]["text"].clone()),
            false => (false, result["structuredContent"].clone()),
        }
    }

    fn ok(&self, tool: &str, arguments: Value) -> Value {
        let (failed, value) = self.call(tool, arguments.clone());
        assert!(!failed, "{tool} {arguments}: {value}");
        value
    }
}

fn contents(listed: &Value, field: &str) -> Vec<String> {
    listed[field]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m.get("memory").unwrap_or(m)["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

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
    let server = Server::start(env);
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
    // Bea's session with Ada's key is Ada's: the key decides, not the session.
    let as_ada = Client {
        server: &server,
        key: tokens[0].0.clone(),
        session: bea.session.clone(),
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_isolate_users_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("keys.db");
    let store = Arc::new(cortex_sqlite::SqliteStore::open(&db).unwrap());
    let home = dir.path().to_str().unwrap();
    isolation(
        store,
        &[("CORTEX_DB_PATH", db.to_str().unwrap()), ("HOME", home)],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_isolate_users_on_postgres() {
    let Some(url) = cortex_conformance::skip::test_database_url() else {
        return;
    };
    let schema = format!("keys_http_{}", uuid::Uuid::new_v4().simple());
    let mut config = cortex_postgres::PostgresConfig::new(&url);
    config.schema = Some(schema.clone());
    let store = Arc::new(
        cortex_postgres::PostgresStore::connect(config)
            .await
            .unwrap(),
    );
    isolation(
        store.clone(),
        &[
            ("CORTEX_DATABASE_URL", url.as_str()),
            ("CORTEX_PG_SCHEMA", schema.as_str()),
            ("CORTEX_PG_DENSE_MODE", "exact"),
        ],
    )
    .await;
    let client = store.pool().get().await.unwrap();
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .unwrap();
}
