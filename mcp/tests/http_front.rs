//! The HTTP front of the binary, spoken raw (no client library can send what these send):
//! the Origin guard, answers to malformed bodies, the session cap, idle expiry and the
//! memory that expiry gives back.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

const BINARY: &str = env!("CARGO_BIN_EXE_cortex-mcp");
const TOKEN: &str = "http-front-test-token-0123456789";

/// A server on a free port, killed on drop.
struct Server {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("front.db");
        let mut command = Command::new(BINARY);
        command
            .args(["--http", "127.0.0.1:0"])
            .env_clear()
            .env("HOME", dir.path())
            .env("CORTEX_HTTP_TOKEN", TOKEN)
            .env("CORTEX_DB_PATH", &db)
            .env("CORTEX_EMBED_PROVIDER", "fake")
            .env("RUST_LOG", "warn,cortex_mcp=info")
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
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let _ = tx.send(rest.split('/').next().unwrap_or_default().to_owned());
                }
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(30)).unwrap();
        Self {
            child,
            addr,
            _dir: dir,
        }
    }

    /// Resident memory of the server process, in KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// One request on its own connection; `extra` holds additional header lines.
    fn request(&self, method: &str, body: &[u8], extra: &[String]) -> Response {
        let mut stream = std::net::TcpStream::connect(&self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        // An extra `Host:` line replaces the default one.
        let host = match extra
            .iter()
            .any(|l| l.to_ascii_lowercase().starts_with("host:"))
        {
            true => "",
            false => "Host: 127.0.0.1\r\n",
        };
        let mut head = format!(
            "{method} /mcp HTTP/1.1\r\n{host}Authorization: Bearer {TOKEN}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for line in extra {
            head.push_str(line);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body).unwrap();
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw);
        Response::parse(&raw)
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
    fn parse(raw: &[u8]) -> Self {
        let text = String::from_utf8_lossy(raw).to_string();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Self {
            status,
            head: head.to_lowercase(),
            body: body.to_owned(),
        }
    }

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
