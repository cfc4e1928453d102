//! The `cortex-mcp` binary itself: its command line, its refusal to serve HTTP without a
//! usable token, and a clean stdout on stdio (nothing but MCP messages).

// Test helpers outside #[test] fns panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/stdio.rs"]
mod stdio;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_cortex-mcp");

/// The binary with a clean environment, so a developer's own CORTEX_* settings cannot
/// change what these tests see.
fn cortex_mcp(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(BINARY);
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    cortex_mcp(args, env).output().expect("run cortex-mcp")
}

#[test]
fn version_and_help() {
    let out = run(&["--version"], &[]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.trim(),
        format!("cortex-mcp {}", env!("CARGO_PKG_VERSION"))
    );

    let out = run(&["--help"], &[]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--http"), "{help}");
    assert!(help.contains("CORTEX_HTTP_TOKEN"), "{help}");
    assert!(help.contains("docs/CONFIGURATION.md"), "{help}");
}

#[test]
fn http_mode_refuses_to_start_without_a_usable_token() {
    let out = run(&["--http", "127.0.0.1:0"], &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("CORTEX_HTTP_TOKEN is not set"), "{stderr}");

    let out = run(&["--http", "0.0.0.0:0"], &[("CORTEX_HTTP_TOKEN", "short")]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("too short"), "{stderr}");
    assert!(
        !stderr.contains("short\""),
        "the token is not echoed: {stderr}"
    );
}

#[test]
fn a_bad_bind_address_is_reported() {
    let out = run(
        &["--http", "not an address"],
        &[("CORTEX_HTTP_TOKEN", "0123456789abcdef")],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot listen on not an address"),
        "{stderr}"
    );
}

/// On stdio, stdout carries only JSON-RPC: logs (here at debug level, with the failed
/// engine build of a call whose key is missing) all go to stderr.
#[test]
fn stdio_stdout_carries_only_mcp_messages() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("stdio.db");
    let mut child = cortex_mcp(
        &[],
        &[
            ("CORTEX_DB_PATH", db.to_str().unwrap()),
            // Valid settings, but no key: the server starts, and the call reports it.
            ("CORTEX_EMBED_PROVIDER", "openai"),
            ("RUST_LOG", "debug"),
        ],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();

    let (replies, stdin) =
        stdio::exchange(&mut child, "list_memories", json!({})).unwrap_or_else(|why| {
            let _ = child.kill();
            panic!("{why}")
        });
    let tools = replies[&2]["result"]["tools"].as_array();
    assert_eq!(tools.map(Vec::len), Some(6), "{:?}", replies[&2]);
    // The missing key makes the call a tool error naming it, not a crash.
    let call = &replies[&3]["result"];
    assert_eq!(call["isError"], true, "{call}");
    let message = call["content"][0]["text"].as_str().unwrap();
    assert!(message.contains("OPENAI_API_KEY"), "{message}");
    assert!(!db.exists(), "a failed build leaves no database behind");

    // Closing stdin ends the session and the process, cleanly.
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("serving MCP on stdio"),
        "the logs are on stderr: {stderr}"
    );
}

/// One raw HTTP/1.1 exchange; returns the status line and headers (lowercased).
fn http_exchange(addr: &str, request: &str) -> String {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).to_string();
    text.split("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .to_lowercase()
}

/// The HTTP guard without any client library: 401 without the token (and no database
/// created), 403 for an unknown Host even with it, `/healthz` open.
#[test]
fn http_guards_answer_before_mcp() {
    const TOKEN: &str = "binary-test-token-0123456789";
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("http.db");
    let (_server, addr) = serve_http(&[
        ("CORTEX_HTTP_TOKEN", TOKEN),
        ("CORTEX_DB_PATH", db.to_str().unwrap()),
        ("CORTEX_EMBED_PROVIDER", "fake"),
        ("RUST_LOG", "info"),
    ]);

    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let post = |host: &str, auth: Option<&str>| {
        let auth = auth.map_or_else(String::new, |a| format!("Authorization: {a}\r\n"));
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nAccept: application/json, text/event-stream\r\n\
             Content-Type: application/json\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };

    let head = http_exchange(&addr, &post("127.0.0.1", None));
    assert!(head.starts_with("http/1.1 401"), "{head}");
    assert!(head.contains("www-authenticate: bearer"), "{head}");
    let head = http_exchange(
        &addr,
        &post("127.0.0.1", Some("Bearer not-the-token-at-all")),
    );
    assert!(head.starts_with("http/1.1 401"), "{head}");
    assert!(!db.exists(), "refused requests touch nothing");

    let bearer = format!("Bearer {TOKEN}");
    let head = http_exchange(&addr, &post("evil.example", Some(&bearer)));
    assert!(head.starts_with("http/1.1 403"), "{head}");
    let head = http_exchange(&addr, &post("localhost", Some(&bearer)));
    assert!(head.starts_with("http/1.1 200"), "{head}");

    let head = http_exchange(
        &addr,
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert!(head.starts_with("http/1.1 200"), "{head}");
    // Ready: the engine builds and the store answers (no token needed, as for /healthz).
    let head = http_exchange(&addr, READYZ);
    assert!(head.starts_with("http/1.1 200"), "{head}");
}

const READYZ: &str = "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

/// Alive but not ready: an embedder without its key. A load balancer keeps traffic away
/// until the setting is fixed.
#[test]
fn readyz_is_503_until_the_engine_can_be_built() {
    const TOKEN: &str = "binary-test-token-0123456789";
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ready.db");
    let (_server, addr) = serve_http(&[
        ("CORTEX_HTTP_TOKEN", TOKEN),
        ("CORTEX_DB_PATH", db.to_str().unwrap()),
        ("CORTEX_EMBED_PROVIDER", "openai"),
        ("HOME", dir.path().to_str().unwrap()),
        ("RUST_LOG", "info"),
    ]);
    let head = http_exchange(
        &addr,
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert!(head.starts_with("http/1.1 200"), "alive: {head}");
    let head = http_exchange(&addr, READYZ);
    assert!(head.starts_with("http/1.1 503"), "not ready: {head}");
}

/// The binary serving HTTP on a free loopback port with `env`: the running server (killed
/// on drop) and the address it logged.
fn serve_http(env: &[(&str, &str)]) -> (KillOnDrop, String) {
    let mut child = cortex_mcp(&["--http", "127.0.0.1:0"], env)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let server = KillOnDrop(child);
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on http://").nth(1) {
                let _ = tx.send(rest.split('/').next().unwrap_or_default().to_owned());
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    (server, addr)
}

/// Stops the server however the test ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Tool calls over one stdio session, one at a time (each waits for its reply).
struct StdioSession {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: u64,
}

impl StdioSession {
    fn start(env: &[(&str, &str)]) -> Self {
        let mut child = cortex_mcp(&[], env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut session = Self {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 1,
        };
        session.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "keep-probe", "version": "0"}}),
        );
        session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session
    }

    fn send(&mut self, message: &serde_json::Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self.lines.recv_timeout(Duration::from_secs(30)).unwrap();
            let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
            if reply["id"] == id {
                return reply;
            }
        }
    }

    /// The call's text, which must not be a tool error.
    fn call(&mut self, tool: &str, arguments: serde_json::Value) -> String {
        let reply = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        let result = &reply["result"];
        assert_ne!(result["isError"], true, "{tool}: {reply}");
        result["content"][0]["text"].as_str().unwrap().to_owned()
    }

    /// Closes stdin and waits for a clean exit.
    fn end(mut self) {
        drop(self.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

/// A server stopping keeps what it wrote into its indexes (SQLite's snapshots): the next
/// server's first recall reads the whole index from the snapshot, not a row, though the
/// snapshot the first recall wrote was behind by the memory written after it.
#[test]
fn a_stopping_server_keeps_its_indexes_for_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("memory.db");
    let env = [
        ("HOME", dir.path().to_str().unwrap()),
        ("CORTEX_DB_PATH", db.to_str().unwrap()),
        ("CORTEX_EMBED_PROVIDER", "fake"),
    ];
    let mut first = StdioSession::start(&env);
    for i in 0..30 {
        first.call(
            "memorize",
            json!({"content": format!("note {i} about the garden")}),
        );
    }
    first.call("recall", json!({"query": "the garden"}));
    first.call(
        "memorize",
        json!({"content": "a heron on the weir at dawn"}),
    );
    first.end();

    // Any row read back from now on shows the rewrite.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE memories SET content = content || ' (rewritten)'",
            [],
        )
        .unwrap();
    let mut second = StdioSession::start(&env);
    let recalled = second.call("recall", json!({"query": "a heron on the weir at dawn"}));
    second.end();
    assert!(
        recalled.contains("a heron on the weir at dawn"),
        "{recalled}"
    );
    assert!(
        !recalled.contains("(rewritten)"),
        "the next start read rows back: {recalled}"
    );
}
