//! A raw MCP-over-HTTP client for the binary's multi-user tests: a server started with
//! given settings, sessions opened with one credential each, tool calls and their results.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_cortex-mcp");

/// The binary serving HTTP with `env` (its credentials and store), killed on drop. Its
/// log lines are kept for the tests that read them.
pub struct Server {
    child: Child,
    addr: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn start(env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(BINARY);
        command
            .args(["--http", "127.0.0.1:0"])
            .env_clear()
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
        let log = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&log);
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                assert!(!line.contains("cx_"), "a key reached the log: {line}");
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let addr = rest.split(['/', '"']).next().unwrap_or_default();
                    let _ = tx.send(addr.to_owned());
                }
                kept.lock().unwrap().push(line);
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        Self { child, addr, log }
    }

    /// `http://host:port`, for clients of its own (the web page's tests).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The log lines written so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// The log lines once each of `needles` is in one, waiting up to 10 s for them: the
    /// server writes a line before it answers, but the thread that reads its stderr can
    /// still be behind when the answer reaches the test.
    pub fn log_once_it_has(&self, needles: &[&str]) -> Vec<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let lines = self.log();
            let all_in = needles.iter().all(|n| lines.iter().any(|l| l.contains(n)));
            if all_in || std::time::Instant::now() > deadline {
                return lines;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM, as docker and systemd stop a server.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits up to `limit` for the process to exit; its exit status, if it did.
    pub fn exited_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Resident memory of the server process, in KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// One POST to /mcp on its own connection: status, lower-cased head, body.
    pub fn post(&self, key: &str, session: Option<&str>, body: &Value) -> (u16, String, String) {
        let session = session.map(|s| format!("Mcp-Session-Id: {s}"));
        self.raw(
            "POST",
            Some(key),
            body.to_string().as_bytes(),
            session.as_slice(),
        )
    }

    /// One request to /mcp on its own connection with the bearer `key` (if any) and `extra`
    /// header lines (an extra `Host:` replaces the default one): status, lower-cased head,
    /// body.
    pub fn raw(
        &self,
        method: &str,
        key: Option<&str>,
        body: &[u8],
        extra: &[String],
    ) -> (u16, String, String) {
        let mut head = format!("{method} /mcp HTTP/1.1\r\n");
        if !extra
            .iter()
            .any(|l| l.to_ascii_lowercase().starts_with("host:"))
        {
            head.push_str("Host: 127.0.0.1\r\n");
        }
        if let Some(key) = key {
            head.push_str(&format!("Authorization: Bearer {key}\r\n"));
        }
        head.push_str(&format!(
            "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
             MCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        ));
        for line in extra {
            head.push_str(line);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let mut request = head.into_bytes();
        request.extend_from_slice(body);
        self.exchange(&request)
    }

    /// One GET on its own connection, without credentials: status, lower-cased head, body.
    pub fn get(&self, path: &str) -> (u16, String, String) {
        self.exchange(
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
    }

    /// Sends `request` on a connection of its own: status, lower-cased head, body.
    fn exchange(&self, request: &[u8]) -> (u16, String, String) {
        let mut stream = std::net::TcpStream::connect(&self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream.write_all(request).unwrap();
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
pub fn message(body: &str) -> Value {
    let text = body
        .lines()
        .find_map(|l| l.strip_prefix("data:").filter(|d| d.contains("jsonrpc")))
        .unwrap_or(body);
    let start = text.find('{').unwrap_or(0);
    let end = text.rfind('}').map_or(text.len(), |e| e + 1);
    serde_json::from_str(&text[start..end]).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// A client session opened with one key.
pub struct Client<'a> {
    pub server: &'a Server,
    pub key: String,
    pub session: String,
}

impl<'a> Client<'a> {
    pub fn open(server: &'a Server, key: &str) -> Self {
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
    pub fn call(&self, tool: &str, arguments: Value) -> (bool, Value) {
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

    pub fn ok(&self, tool: &str, arguments: Value) -> Value {
        let (failed, value) = self.call(tool, arguments.clone());
        assert!(!failed, "{tool} {arguments}: {value}");
        value
    }
}

pub fn contents(listed: &Value, field: &str) -> Vec<String> {
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

/// An OpenAI-compatible model on loopback for the enrichment layers: every chat
/// completion is an extraction naming the memory's first word as its subject, the actor
/// of a meeting on 2024-05-01 in Lisbon. Returns the base URL (`.../v1`).
pub async fn mock_llm() -> String {
    use axum::routing::post;
    async fn complete(body: String) -> String {
        let request: Value = serde_json::from_str(&body).unwrap_or_default();
        let prompt = request["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        let memory = prompt
            .split("\"\"\"\n")
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let name = memory.split_whitespace().next().unwrap_or("someone");
        let extraction = json!({
            "event": {"event_time": "2024-05-01", "actor": name, "location": "Lisbon",
                      "event_type": "meeting"},
            "subject": name,
            "entities": [{"name": name, "type": "person", "aliases": []}],
            "relationships": [],
        });
        json!({
            "id": "mock", "object": "chat.completion", "created": 0, "model": "mock",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": extraction.to_string()}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })
        .to_string()
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let app = axum::Router::new().route("/v1/chat/completions", post(complete));
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// A store of its own for one test, and the settings that point the server at it.
pub struct TestStore {
    pub keys: std::sync::Arc<dyn cortex_core::keys::KeyStore>,
    env: Vec<(String, String)>,
    _dir: Option<tempfile::TempDir>,
    postgres: Option<(std::sync::Arc<cortex_postgres::PostgresStore>, String)>,
}

impl TestStore {
    /// A SQLite file in a temporary directory (also the server's HOME).
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("memory.db");
        let keys = std::sync::Arc::new(cortex_sqlite::SqliteStore::open(&db).unwrap());
        let env = vec![
            ("CORTEX_DB_PATH".into(), db.to_str().unwrap().to_owned()),
            ("HOME".into(), dir.path().to_str().unwrap().to_owned()),
        ];
        Self {
            keys,
            env,
            _dir: Some(dir),
            postgres: None,
        }
    }

    /// A schema of its own in the test database, or `None` after the workspace's skip
    /// policy ran (it fails under CI).
    pub async fn postgres(tag: &str) -> Option<Self> {
        let url = cortex_conformance::skip::test_database_url()?;
        let schema = format!("{tag}_{}", uuid::Uuid::new_v4().simple());
        let mut config = cortex_postgres::PostgresConfig::new(&url);
        config.schema = Some(schema.clone());
        let store = std::sync::Arc::new(
            cortex_postgres::PostgresStore::connect(config)
                .await
                .unwrap(),
        );
        let env = vec![
            ("CORTEX_DATABASE_URL".into(), url),
            ("CORTEX_PG_SCHEMA".into(), schema.clone()),
            ("CORTEX_PG_DENSE_MODE".into(), "exact".into()),
        ];
        Some(Self {
            keys: store.clone(),
            env,
            _dir: None,
            postgres: Some((store, schema)),
        })
    }

    pub fn env(&self) -> Vec<(&str, &str)> {
        self.env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// Drops a Postgres schema (a SQLite directory goes with the value).
    pub async fn remove(self) {
        if let Some((store, schema)) = self.postgres {
            let client = store.pool().get().await.unwrap();
            client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .await
                .unwrap();
        }
    }
}
