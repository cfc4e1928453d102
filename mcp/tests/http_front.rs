//! The HTTP front of the binary, spoken raw (no client library can send what these send):
//! the Origin guard, answers to malformed bodies, the session cap, idle expiry and the
//! memory that expiry gives back.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

#[path = "support/mcp_http.rs"]
mod mcp_http;

use std::thread;
use std::time::{Duration, Instant};

use mcp_http::TestStore;

const TOKEN: &str = "http-front-test-token-0123456789";

/// A server on a free port with the one shared token and a SQLite store of its own.
struct Server {
    server: mcp_http::Server,
    _store: TestStore,
}

impl Server {
    fn start(env: &[(&str, &str)]) -> Self {
        let store = TestStore::sqlite();
        let front = [
            ("CORTEX_HTTP_TOKEN", TOKEN),
            ("RUST_LOG", "warn,cortex_mcp=info"),
        ];
        let server = mcp_http::Server::start(&[&store.env(), &front[..], env].concat());
        Self {
            server,
            _store: store,
        }
    }

    fn rss_kib(&self) -> u64 {
        self.server.rss_kib()
    }

    /// One request on its own connection; `extra` holds additional header lines.
    fn request(&self, method: &str, body: &[u8], extra: &[String]) -> Response {
        let (status, head, body) = self.server.raw(method, Some(TOKEN), body, extra);
        Response { status, head, body }
    }

    fn post(&self, body: &str, extra: &[String]) -> Response {
        self.request("POST", body.as_bytes(), extra)
    }

    /// Opens a session; its id.
    fn initialize(&self) -> Response {
        self.post(INITIALIZE, &[])
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

struct Response {
    status: u16,
    head: String,
    body: String,
}

impl Response {
    fn session(&self) -> String {
        self.head
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id:"))
            .map(|v| v.trim().to_owned())
            .unwrap_or_else(|| panic!("no session id in {}", self.head))
    }

    /// The JSON-RPC message in the body (plain JSON or one SSE `data:` line).
    fn json(&self) -> serde_json::Value {
        let text = self
            .body
            .lines()
            .find_map(|l| l.strip_prefix("data:").filter(|d| !d.trim().is_empty()))
            .unwrap_or(&self.body);
        // A chunked body wraps the JSON in size lines.
        let start = text.find('{').unwrap_or(0);
        let end = text.rfind('}').map_or(text.len(), |e| e + 1);
        serde_json::from_str(&text[start..end]).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// rmcp's own answers, reworded: a closed session is `204` (the Python SDK logs every
/// `202` as a failed termination), and a foreign `Host` is told which setting admits it.
#[test]
fn a_closed_session_is_204_and_a_foreign_host_is_told_the_setting() {
    let server = Server::start(&[]);
    let session = server.initialize().session();
    let closed = server.request("DELETE", b"", &[format!("Mcp-Session-Id: {session}")]);
    assert_eq!(closed.status, 204, "{}{}", closed.head, closed.body);
    assert!(closed.body.is_empty(), "{}", closed.body);
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let after = server.post(list, &[format!("Mcp-Session-Id: {session}")]);
    assert_eq!(after.status, 404, "the session is gone: {}", after.head);

    let foreign = server.request(
        "POST",
        INITIALIZE.as_bytes(),
        &["Host: evil.example".into()],
    );
    assert_eq!(foreign.status, 403, "{}", foreign.head);
    assert!(
        foreign.body.contains("CORTEX_HTTP_ALLOWED_HOSTS") && foreign.body.contains("evil.example"),
        "{}",
        foreign.body
    );
}

#[test]
fn foreign_origins_are_refused_even_with_the_token() {
    let server = Server::start(&[]);
    let evil = server.post(INITIALIZE, &["Origin: http://evil.example".into()]);
    assert_eq!(evil.status, 403, "{}", evil.head);
    let rebound = server.post(
        INITIALIZE,
        &["Origin: http://localhost.evil.example:8765".into()],
    );
    assert_eq!(rebound.status, 403);
    let local = server.post(INITIALIZE, &["Origin: http://localhost:5173".into()]);
    assert_eq!(local.status, 200, "{}", local.head);
    let none = server.initialize();
    assert_eq!(none.status, 200, "no Origin: not a browser");

    let configured = Server::start(&[("CORTEX_HTTP_ALLOWED_ORIGINS", "https://app.example.com")]);
    let app = configured.post(INITIALIZE, &["Origin: https://app.example.com".into()]);
    assert_eq!(app.status, 200);
    let local = configured.post(INITIALIZE, &["Origin: http://localhost:5173".into()]);
    assert_eq!(
        local.status, 403,
        "the configured list replaces the default"
    );
}

#[test]
fn malformed_bodies_get_json_rpc_answers() {
    let server = Server::start(&[]);
    let not_json = server.post("memorize: hello", &[]);
    assert_eq!(not_json.status, 400, "{}", not_json.head);
    assert_eq!(not_json.json()["error"]["code"], -32700);

    let bad_utf8 = server.request(
        "POST",
        b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"x\":\"\xff\"}",
        &[],
    );
    assert_eq!(bad_utf8.status, 400);
    assert_eq!(bad_utf8.json()["id"], 5);

    let batch = server.post("[1,2]", &[]);
    assert_eq!(batch.status, 400);
    assert_eq!(batch.json()["error"]["code"], -32600);

    let session = server.initialize().session();
    let header = format!("Mcp-Session-Id: {session}");
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(
        server
            .post(initialized, std::slice::from_ref(&header))
            .status,
        202
    );
    for params in ["null", r#"{"name":"recall","arguments":"x"}"#, "[]"] {
        let call = format!(r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{params}}}"#);
        let answer = server.post(&call, std::slice::from_ref(&header));
        let json = answer.json();
        assert_eq!(json["id"], 9, "{params}: {}", answer.body);
        assert_eq!(json["error"]["code"], -32602, "{params}: {}", answer.body);
    }
    // The session still works.
    let list = r#"{"jsonrpc":"2.0","id":10,"method":"tools/list"}"#;
    let answer = server.post(list, &[header]);
    assert!(
        answer.json()["result"]["tools"].is_array(),
        "{}",
        answer.body
    );
}

#[test]
fn sessions_are_capped_and_idle_ones_end() {
    let server = Server::start(&[
        ("CORTEX_HTTP_MAX_SESSIONS", "3"),
        ("CORTEX_HTTP_SESSION_IDLE_SECS", "2"),
    ]);
    let sessions: Vec<String> = (0..3).map(|_| server.initialize().session()).collect();
    let full = server.initialize();
    assert_eq!(full.status, 503, "{}", full.head);
    assert!(full.head.contains("retry-after"), "{}", full.head);

    // Closing one makes room.
    let close = server.request("DELETE", b"", &[format!("Mcp-Session-Id: {}", sessions[0])]);
    assert!(close.status < 300, "{}", close.head);
    let replacement = server.initialize().session();
    assert_eq!(server.initialize().status, 503);

    // Left idle (any request would count as activity), every session ends and the cap
    // frees up.
    thread::sleep(Duration::from_secs(5));
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let stale = server.post(ping, &[format!("Mcp-Session-Id: {replacement}")]);
    assert_eq!(
        stale.status, 404,
        "an idle session never ended: {}",
        stale.head
    );
    let fresh: Vec<u16> = (0..3).map(|_| server.initialize().status).collect();
    assert_eq!(fresh, [200, 200, 200]);
}

/// 3,000 sessions opened and abandoned; once they expire the server is back near the
/// size it had before them.
#[test]
fn memory_returns_after_abandoned_sessions_expire() {
    const SESSIONS: usize = 3_000;
    let server = Server::start(&[
        ("CORTEX_HTTP_MAX_SESSIONS", "100000"),
        ("CORTEX_HTTP_SESSION_IDLE_SECS", "3"),
        // One client opening sessions as fast as it can: past any per-user rate.
        ("CORTEX_HTTP_USER_RPS", "100000"),
        ("CORTEX_HTTP_USER_BURST", "1000000"),
    ]);
    // Warm the allocator and the runtime with a few sessions that expire too.
    for _ in 0..20 {
        assert_eq!(server.initialize().status, 200);
    }
    thread::sleep(Duration::from_secs(5));
    let baseline = server.rss_kib();
    for _ in 0..SESSIONS {
        let answer = server.initialize();
        assert_eq!(answer.status, 200, "{}", answer.head);
    }
    let peak = server.rss_kib();
    let grown = peak.saturating_sub(baseline);
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut now = server.rss_kib();
    // Back within a quarter of what the sessions took, or 8 MiB, whichever is more.
    let allowed = baseline + (grown / 4).max(8 * 1024);
    while now > allowed && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(500));
        now = server.rss_kib();
    }
    eprintln!(
        "sessions: {SESSIONS}; rss baseline {baseline} KiB, peak {peak} KiB, after expiry {now} KiB"
    );
    assert!(
        grown > 4 * 1024,
        "{SESSIONS} sessions should take memory while open (grew {grown} KiB)"
    );
    assert!(
        now <= allowed,
        "memory did not come back: baseline {baseline} KiB, peak {peak} KiB, now {now} KiB"
    );
}

/// With `CORTEX_LOG_FORMAT=json` every log line is a JSON object, each answer names its
/// request id (the client's `x-request-id`, else a fresh UUID), and the lines written while
/// serving a request carry that id: a refusal in the `request` span, a tool's own lines in
/// the `tool` span that rmcp's session task runs it in.
#[test]
fn requests_carry_their_id_into_json_logs() {
    let server = Server::start(&[
        ("CORTEX_LOG_FORMAT", "json"),
        ("RUST_LOG", "info,cortex_mcp=debug,rmcp=warn"),
    ]);
    let (status, head, _) = server.server.raw(
        "POST",
        Some("not-the-token"),
        INITIALIZE.as_bytes(),
        &["X-Request-Id: refused-req-1".into()],
    );
    assert_eq!(status, 401);
    assert!(head.contains("x-request-id: refused-req-1"), "{head}");
    let fresh = server.initialize();
    let id = fresh
        .head
        .lines()
        .find_map(|l| l.strip_prefix("x-request-id:"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no request id: {}", fresh.head));
    assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");

    let session = format!("Mcp-Session-Id: {}", fresh.session());
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(
        server
            .post(initialized, std::slice::from_ref(&session))
            .status,
        202
    );
    let memorize = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memorize","arguments":{"content":"the build server is in rack 4"}}}"#;
    let answer = server.post(memorize, &[session, "X-Request-Id: tool-req-2".into()]);
    assert_eq!(answer.json()["result"]["isError"], false, "{}", answer.body);

    let lines: Vec<serde_json::Value> = server
        .server
        .log_once_it_has(&[r#""message":"memorized""#])
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let refusal = lines
        .iter()
        .find(|l| l["fields"]["message"] == "refused: missing or wrong bearer token")
        .expect("the refusal is logged");
    assert_eq!(refusal["span"]["id"], "refused-req-1", "{refusal}");
    let memorized = lines
        .iter()
        .find(|l| l["fields"]["message"] == "memorized")
        .expect("the tool's line is logged");
    assert_eq!(memorized["span"]["name"], "tool", "{memorized}");
    assert_eq!(memorized["span"]["request"], "tool-req-2", "{memorized}");
    let all = server.server.log().join("\n");
    assert!(!all.contains(TOKEN), "the token reached the log");
}

/// An OpenAI-compatible `/embeddings` on loopback that answers each request after `delay`,
/// with one 8-dimensional vector per input: a tool call stays in flight that long.
fn slow_embedder(delay: Duration) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            thread::spawn(move || answer_slowly(stream, delay));
        }
    });
    base
}

fn answer_slowly(mut stream: std::net::TcpStream, delay: Duration) {
    use std::io::{BufRead, Read, Write};
    let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end().to_ascii_lowercase();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("content-length:") {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let inputs = request["input"].as_array().map_or(1, Vec::len);
    thread::sleep(delay);
    let data: Vec<serde_json::Value> = (0..inputs)
        .map(|i| {
            serde_json::json!({"object": "embedding", "index": i,
                "embedding": [0.5, 0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8]})
        })
        .collect();
    let answer = serde_json::json!({"object": "list", "data": data, "model": "mock",
        "usage": {"prompt_tokens": 1, "total_tokens": 1}})
    .to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{answer}",
        answer.len()
    );
}

/// SIGTERM while a memorize waits on its embedder: the call still answers, the memory is
/// in the file, and the process then exits cleanly, open sessions or not.
#[test]
fn sigterm_finishes_the_calls_in_flight() {
    let store = TestStore::sqlite();
    let embedder = slow_embedder(Duration::from_millis(1500));
    let settings = [
        ("CORTEX_HTTP_TOKEN", TOKEN),
        ("CORTEX_EMBED_PROVIDER", "openai"),
        ("CORTEX_OPENAI_BASE_URL", embedder.as_str()),
        ("CORTEX_EMBED_MODEL", "mock"),
        ("CORTEX_EMBED_DIM", "8"),
    ];
    let mut server = mcp_http::Server::start(&[&store.env(), &settings[..]].concat());
    let content = "the staging database is rebuilt every Sunday night";
    let (failed, result) = {
        let client = mcp_http::Client::open(&server, TOKEN);
        // A second session with nothing in flight must not hold the stop.
        let _idle = mcp_http::Client::open(&server, TOKEN);
        thread::scope(|scope| {
            let call =
                scope.spawn(|| client.call("memorize", serde_json::json!({"content": content})));
            thread::sleep(Duration::from_millis(500));
            server.terminate();
            call.join().unwrap()
        })
    };
    assert!(!failed, "the call in flight was cut: {result}");
    let status = server
        .exited_within(Duration::from_secs(20))
        .expect("still running 20 s after SIGTERM");
    assert!(status.success(), "{status}");
    let log = server
        .log_once_it_has(&["finishing the calls in flight"])
        .join("\n");
    assert!(log.contains("finishing the calls in flight"), "{log}");

    let (_, db) = store
        .env()
        .into_iter()
        .find(|(k, _)| *k == "CORTEX_DB_PATH")
        .unwrap();
    let file = rusqlite::Connection::open(db).unwrap();
    let stored: i64 = file
        .query_row(
            "SELECT COUNT(*) FROM memories WHERE content = ?1",
            [content],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(stored, 1, "the memory of the finished call is stored");
}

/// SIGTERM keeps the server's indexes, with the memories it wrote since it built them, as
/// SQLite's snapshots: the next start's first recall reads the index whole, no row.
#[test]
fn sigterm_keeps_the_indexes_for_the_next_start() {
    let store = TestStore::sqlite();
    let token = [("CORTEX_HTTP_TOKEN", TOKEN)];
    let env = [&store.env(), &token[..]].concat();
    let heron = "a heron on the weir at dawn";
    let mut server = mcp_http::Server::start(&env);
    {
        let client = mcp_http::Client::open(&server, TOKEN);
        for i in 0..30 {
            client.ok(
                "memorize",
                serde_json::json!({"content": format!("note {i} about the garden")}),
            );
        }
        client.ok("recall", serde_json::json!({"query": "the garden"}));
        // Applied to the cached index; the snapshot the recall wrote lacks it.
        client.ok("memorize", serde_json::json!({"content": heron}));
    }
    server.terminate();
    let status = server
        .exited_within(Duration::from_secs(20))
        .expect("still running 20 s after SIGTERM");
    assert!(status.success(), "{status}");

    let (_, db) = env.iter().find(|(k, _)| *k == "CORTEX_DB_PATH").unwrap();
    // Any row read back from now on shows the rewrite.
    rusqlite::Connection::open(db)
        .unwrap()
        .execute(
            "UPDATE memories SET content = content || ' (rewritten)'",
            [],
        )
        .unwrap();
    let server = mcp_http::Server::start(&env);
    let client = mcp_http::Client::open(&server, TOKEN);
    let recalled = client
        .ok("recall", serde_json::json!({"query": heron}))
        .to_string();
    assert!(recalled.contains(heron), "{recalled}");
    assert!(
        !recalled.contains("(rewritten)"),
        "the next start read rows back: {recalled}"
    );
}
