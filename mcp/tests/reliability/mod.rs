//! Shared harness of the reliability tests (`reliability_*.rs`): the `cortex-mcp` binary
//! driven over stdio with raw JSON-RPC lines, the way an MCP host drives it, plus direct
//! reads of the SQLite file, Postgres schemas and a seedable generator.
//!
//! Every wait is bounded: a reply that does not come within its deadline fails the test
//! with the server's stderr, instead of hanging CI.

// Each test file uses a different part of this module.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

pub const BINARY: &str = env!("CARGO_BIN_EXE_cortex-mcp");

/// Longest wait for one reply. Generous: CI machines are slow and shared; a call that
/// takes this long is a hang.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// One line of the server's stdout.
#[derive(Debug)]
enum Line {
    Json(Value),
    /// Anything else on stdout breaks the MCP channel.
    NotJson(String),
}

/// A `cortex-mcp` process on stdio, with the MCP handshake done.
#[derive(Debug)]
pub struct Server {
    pub label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    /// Replies read while waiting for another id.
    replies: HashMap<u64, Value>,
    /// Messages without a numeric id (notifications, errors with id null), in order.
    pub stray: Vec<Value>,
    stderr: Arc<Mutex<Vec<String>>>,
    next_id: u64,
}

/// A clean environment (PATH and what the test passes), so a developer's own CORTEX_*
/// settings cannot change what the tests see. Logs at warn unless the test says otherwise.
pub fn command(env: &[(&str, String)]) -> Command {
    let mut command = Command::new(BINARY);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RUST_LOG", "warn");
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

impl Server {
    /// Starts the binary and completes the MCP handshake.
    pub fn start(label: impl Into<String>, env: &[(&str, String)]) -> Server {
        let mut server = Server::spawn(label, env);
        server.handshake();
        server
    }

    /// Starts the binary without the handshake.
    pub fn spawn(label: impl Into<String>, env: &[(&str, String)]) -> Server {
        let label = label.into();
        let mut child = command(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{label}: cannot start {BINARY}: {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let parsed = match serde_json::from_str::<Value>(&line) {
                    Ok(value) => Line::Json(value),
                    Err(_) => Line::NotJson(line),
                };
                if tx.send(parsed).is_err() {
                    break;
                }
            }
        });
        let captured: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = captured.clone();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut lines = sink.lock().unwrap_or_else(|e| e.into_inner());
                // Keep the tail only: a long run must not grow without bound.
                if lines.len() >= 2000 {
                    lines.drain(..1000);
                }
                lines.push(line);
            }
        });
        Server {
            label,
            child,
            stdin,
            lines,
            replies: HashMap::new(),
            stray: Vec::new(),
            stderr: captured,
            next_id: 1,
        }
    }

    fn handshake(&mut self) {
        let id = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "cortex-reliability", "version": "0"}
            }),
        );
        let reply = self.wait(id);
        assert!(
            reply.get("result").is_some(),
            "{}: initialize failed: {reply}",
            self.label
        );
        self.notify("notifications/initialized", None);
    }

    /// Writes one line (a newline is added) to the server's stdin.
    pub fn send_line(&mut self, line: &str) {
        self.send_bytes(line.as_bytes());
    }

    /// Writes raw bytes plus a newline: for lines that are not valid UTF-8 or JSON.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let label = self.label.clone();
        let stdin = self.stdin.as_mut().expect("stdin is open");
        let written = stdin
            .write_all(bytes)
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush());
        if let Err(e) = written {
            panic!(
                "{label}: cannot write to the server (did it exit?): {e}\n{}",
                self.stderr_tail()
            );
        }
    }

    /// A fresh request id.
    pub fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Sends a request and returns its id without waiting.
    pub fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.fresh_id();
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&message.to_string());
        id
    }

    pub fn notify(&mut self, method: &str, params: Option<Value>) {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        self.send_line(&message.to_string());
    }

    /// Sends `tools/call` and returns its id without waiting.
    pub fn call_async(&mut self, tool: &str, arguments: Value) -> u64 {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
    }

    /// Calls a tool and waits for its reply.
    pub fn call(&mut self, tool: &str, arguments: Value) -> Reply {
        let id = self.call_async(tool, arguments);
        Reply::from(self.wait(id))
    }

    /// Calls a tool that must succeed and returns its structured result.
    pub fn ok(&mut self, tool: &str, arguments: Value) -> Value {
        match self.call(tool, arguments.clone()) {
            Reply::Ok(value) => value,
            other => panic!(
                "{}: {tool} {arguments} failed: {other:?}\n{}",
                self.label,
                self.stderr_tail()
            ),
        }
    }

    /// The reply to `id`, within [`REPLY_TIMEOUT`]; panics (with stderr) otherwise.
    pub fn wait(&mut self, id: u64) -> Value {
        self.wait_for(id, REPLY_TIMEOUT).unwrap_or_else(|why| {
            panic!(
                "{}: no reply to request {id}: {why}\n{}",
                self.label,
                self.stderr_tail()
            )
        })
    }

    /// The reply to `id` within `timeout`, or why there is none.
    pub fn wait_for(&mut self, id: u64, timeout: Duration) -> Result<Value, String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(reply) = self.replies.remove(&id) {
                return Ok(reply);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            self.receive_one(left)?;
        }
    }

    /// The reply to `id`, or `Err` when a message without an id (an error the server
    /// could not tie to a request) arrives first or nothing comes within `timeout`.
    pub fn wait_or_stray(&mut self, id: u64, timeout: Duration) -> Result<Value, String> {
        let strays = self.stray.len();
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(reply) = self.replies.remove(&id) {
                return Ok(reply);
            }
            if let Some(stray) = self.stray.get(strays) {
                return Err(format!("answered without the request's id: {stray}"));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            self.receive_one(left)?;
        }
    }

    /// The next reply to any request (oldest buffered first), within `timeout`.
    pub fn next_reply(&mut self, timeout: Duration) -> Result<(u64, Value), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(&id) = self.replies.keys().min() {
                let reply = self.replies.remove(&id).expect("present");
                return Ok((id, reply));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            self.receive_one(left)?;
        }
    }

    /// Reads one message into `replies` or `stray`.
    fn receive_one(&mut self, timeout: Duration) -> Result<(), String> {
        match self.lines.recv_timeout(timeout) {
            Ok(Line::Json(value)) => {
                match value.get("id").and_then(Value::as_u64) {
                    Some(id) if value.get("method").is_none() => {
                        let previous = self.replies.insert(id, value);
                        assert!(
                            previous.is_none(),
                            "{}: two replies to request {id}",
                            self.label
                        );
                    }
                    _ => self.stray.push(value),
                }
                Ok(())
            }
            Ok(Line::NotJson(line)) => panic!(
                "{}: stdout carried a line that is not JSON-RPC: {line:?}",
                self.label
            ),
            Err(RecvTimeoutError::Timeout) => Err(format!("no message within {timeout:?}")),
            Err(RecvTimeoutError::Disconnected) => {
                Err("the server closed stdout (it exited)".into())
            }
        }
    }

    /// Whether the process is still running.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL (std's `Child::kill` on Unix), then reaps the process.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Closes stdin, the clean end of a stdio session, and waits (bounded) for the exit.
    pub fn finish(mut self) -> ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                _ => panic!(
                    "{}: the server did not exit after stdin closed\n{}",
                    self.label,
                    self.stderr_tail()
                ),
            }
        }
    }

    /// The last lines the server logged, for failure messages.
    pub fn stderr_tail(&self) -> String {
        let lines = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let start = lines.len().saturating_sub(40);
        format!(
            "--- {} stderr (last {} lines) ---\n{}",
            self.label,
            lines.len() - start,
            lines[start..].join("\n")
        )
    }

    /// Every stderr line so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every live memory, newest first, through `list_memories` (the limit's maximum).
    pub fn list_all(&mut self) -> Vec<Memory> {
        let listed = self.ok("list_memories", json!({"limit": 1000}));
        let memories = memories(&listed);
        assert!(
            memories.len() < 1000,
            "{}: the store outgrew what one list_memories can show",
            self.label
        );
        memories
    }

    /// Whether recalling `query` returns the memory `id` among its `limit` results.
    pub fn recall_finds(&mut self, query: &str, id: &str, limit: u64) -> bool {
        let found = self.ok("recall", json!({"query": query, "limit": limit}));
        memories(&found).iter().any(|m| m.id == id)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What a `tools/call` came back with.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A result without `isError`: its structured content.
    Ok(Value),
    /// A result with `isError: true`: its text.
    ToolError(String),
    /// A JSON-RPC error object.
    RpcError(Value),
}

impl From<Value> for Reply {
    fn from(reply: Value) -> Reply {
        if let Some(error) = reply.get("error") {
            return Reply::RpcError(error.clone());
        }
        let result = &reply["result"];
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if result["isError"] == Value::Bool(true) {
            return Reply::ToolError(text);
        }
        match result.get("structuredContent") {
            Some(value) => Reply::Ok(value.clone()),
            None => Reply::Ok(serde_json::from_str(&text).unwrap_or(Value::String(text))),
        }
    }
}

impl Reply {
    pub fn is_error(&self) -> bool {
        !matches!(self, Reply::Ok(_))
    }

    /// The error's text, for either kind of error.
    pub fn error_text(&self) -> Option<String> {
        match self {
            Reply::Ok(_) => None,
            Reply::ToolError(text) => Some(text.clone()),
            Reply::RpcError(error) => Some(error.to_string()),
        }
    }
}

/// One memory as the tools show it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Memory {
    pub id: String,
    pub content: String,
    /// The whole object, for record-for-record comparisons.
    pub raw: String,
}

/// The `memories` array of a recall or list result.
pub fn memories(result: &Value) -> Vec<Memory> {
    result["memories"]
        .as_array()
        .unwrap_or_else(|| panic!("no memories array in {result}"))
        .iter()
        .map(|m| Memory {
            id: m["id"].as_str().expect("an id").to_owned(),
            content: m["content"].as_str().expect("a content").to_owned(),
            raw: m.to_string(),
        })
        .collect()
}

/// `PRAGMA integrity_check` on a SQLite file, opened read-write as a restarted server
/// would (so a hot WAL is recovered first).
pub fn integrity_check(path: &Path) -> String {
    let conn = rusqlite::Connection::open(path).expect("open the SQLite file");
    conn.busy_timeout(Duration::from_secs(10))
        .expect("busy timeout");
    let rows: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .expect("prepare")
        .query_map([], |r| r.get::<_, String>(0))
        .expect("integrity_check")
        .collect::<Result<_, _>>()
        .expect("integrity_check rows");
    rows.join("; ")
}

/// `id -> content` of every row of the `memories` table.
pub fn sqlite_memories(path: &Path) -> HashMap<String, String> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("open the SQLite file");
    conn.busy_timeout(Duration::from_secs(10))
        .expect("busy timeout");
    let mut stmt = conn
        .prepare("SELECT id, content FROM memories")
        .expect("prepare");
    stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .expect("select")
        .collect::<Result<_, _>>()
        .expect("rows")
}

/// Every row of every table, in rowid order, as text: two dumps are equal exactly when
/// the stored records are. Read-only, beside a running server (WAL readers do not block).
pub fn sqlite_dump(path: &Path) -> Vec<String> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open the SQLite file");
    conn.busy_timeout(Duration::from_secs(10))
        .expect("busy timeout");
    let tables: Vec<(String, bool)> = conn
        .prepare(
            "SELECT name, sql LIKE '%WITHOUT ROWID%' FROM sqlite_master \
             WHERE type = 'table' ORDER BY name",
        )
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("tables")
        .collect::<Result<_, _>>()
        .expect("table rows");
    let mut dump = Vec::new();
    for (table, without_rowid) in tables {
        let order = if without_rowid { "" } else { " ORDER BY rowid" };
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM \"{table}\"{order}"))
            .expect("prepare a table scan");
        let columns = stmt.column_count();
        let mut rows = stmt.query([]).expect("scan");
        while let Some(row) = rows.next().expect("a row") {
            let cells: Vec<String> = (0..columns)
                .map(|i| format!("{:?}", row.get_ref(i).expect("a cell")))
                .collect();
            dump.push(format!("{table}: {}", cells.join(" | ")));
        }
    }
    dump
}

/// A Postgres schema of its own for one test, dropped when this guard goes.
#[derive(Debug)]
pub struct PgSchema {
    pub url: String,
    pub name: String,
}

impl PgSchema {
    pub fn fresh(url: &str, tag: &str) -> PgSchema {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        PgSchema {
            url: url.to_owned(),
            name: format!("cortex_rel_{tag}_{}_{nanos}", std::process::id()),
        }
    }

    /// The server settings that select this schema.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("CORTEX_DATABASE_URL", self.url.clone()),
            ("CORTEX_PG_SCHEMA", self.name.clone()),
            ("CORTEX_PG_DENSE_MODE", "exact".into()),
        ]
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let (url, name) = (self.url.clone(), self.name.clone());
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async move {
            let lookup = |var: &str| match var {
                "CORTEX_DATABASE_URL" => Some(url.clone()),
                "CORTEX_PG_SCHEMA" => Some(name.clone()),
                _ => None,
            };
            let Ok(config) = cortex_postgres::PostgresConfig::from_lookup(lookup) else {
                return;
            };
            let Ok(store) = cortex_postgres::PostgresStore::connect(config).await else {
                return;
            };
            if let Ok(client) = store.pool().get().await {
                let _ = client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
                    .await;
            }
        });
    }
}

/// A small xorshift generator: the tests' "random" points, reproducible from the seed
/// they print (`CORTEX_TEST_SEED=<seed>` replays a run).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn from_env_or_clock() -> Rng {
        let seed = std::env::var("CORTEX_TEST_SEED")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0x9e37_79b9)
                    ^ u64::from(std::process::id())
            });
        Rng::new(seed)
    }

    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn seed(&self) -> u64 {
        self.0
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform-ish in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// A lowercase word no memory shares by chance: makes contents unique and recallable.
    pub fn word(&mut self) -> String {
        let mut n = self.next_u64();
        let mut word = String::from("zq");
        for _ in 0..10 {
            word.push(char::from(b'a' + (n % 26) as u8));
            n /= 26;
        }
        word
    }
}
