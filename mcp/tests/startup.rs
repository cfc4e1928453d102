//! What the `cortex-mcp` binary does before it serves: it always starts, so an MCP host
//! can list the tools and show the reason instead of "Connection closed". A bad or
//! contradictory setting is logged at startup and reported by every tool call; a valid
//! configuration without any key or model starts too (the engine is built on the first
//! tool call, which reports the missing key). Also its default log: no rmcp INFO lines,
//! no colour codes when stderr is not a terminal.

// Test helpers outside #[test] fns panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/stdio.rs"]
mod stdio;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_cortex-mcp");

/// The binary with nothing but `env` in its environment (no HOME either, unless given:
/// no model or key of the developer's can reach it), every stream piped.
fn spawn(args: &[&str], env: &[(&str, &Path)]) -> Child {
    let mut command = Command::new(BINARY);
    command
        .args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    command.spawn().expect("start cortex-mcp")
}

/// Waits up to `limit` for the process to exit; kills it and fails otherwise. Stdin stays
/// open meanwhile, so a server that started serving stdio would not exit by itself.
fn exit_within(mut child: Child, limit: Duration) -> (std::process::ExitStatus, String, String) {
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cortex-mcp was still running after {limit:?}");
        }
        thread::sleep(Duration::from_millis(20));
    };
    // A stream a test took to read as it went comes back empty.
    let mut stdout = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        pipe.read_to_string(&mut stdout).unwrap();
    }
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        pipe.read_to_string(&mut stderr).unwrap();
    }
    (status, stdout, stderr)
}

/// Starts the server on stdio with `env`, sends `initialize`, `tools/list` and one call
/// of `tool`, closes stdin, and returns the three replies by id (1, 2, 3), the exit status
/// and stderr.
fn one_call(
    env: &[(&str, &Path)],
    tool: &str,
    arguments: Value,
) -> (
    std::collections::HashMap<u64, Value>,
    std::process::ExitStatus,
    String,
) {
    let mut child = spawn(&[], env);
    let (replies, stdin) = match stdio::exchange(&mut child, tool, arguments) {
        Ok(done) => done,
        Err(why) => {
            let _ = child.kill();
            let (_, _, stderr) = exit_within(child, Duration::from_secs(10));
            panic!("{why}; stderr: {stderr}");
        }
    };
    drop(stdin);
    let (status, _, stderr) = exit_within(child, Duration::from_secs(10));
    (replies, status, stderr)
}

/// A layer that needs a generation model, turned on without one: the server still starts
/// (an MCP host would otherwise show only "Connection closed"), lists its tools, and
/// answers every call with the setting to fix, as it does for a missing embedder. The
/// log says it at startup too.
#[test]
fn a_layer_without_a_model_serves_and_reports_the_setting_per_call() {
    for layer in ["CORTEX_GRAPH", "CORTEX_EPISODIC", "CORTEX_SOFT_UPDATE"] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("memory.db");
        let fake = Path::new("fake");
        let on = Path::new("1");
        let (replies, status, stderr) = one_call(
            &[
                ("HOME", dir.path()),
                ("CORTEX_DB_PATH", &db),
                ("CORTEX_EMBED_PROVIDER", fake),
                (layer, on),
            ],
            "memorize",
            json!({"content": "Ada prefers green tea"}),
        );
        assert!(status.success(), "{layer}: {status:?}: {stderr}");
        assert_eq!(
            replies[&1]["result"]["serverInfo"]["name"], "cortex-mcp",
            "{layer}: {:?}",
            replies[&1]
        );
        let tools = replies[&2]["result"]["tools"].as_array();
        assert_eq!(tools.map(Vec::len), Some(6), "{layer}: {:?}", replies[&2]);
        let call = &replies[&3]["result"];
        assert_eq!(call["isError"], true, "{layer}: {call}");
        let message = call["content"][0]["text"].as_str().unwrap();
        assert!(
            message.contains(layer) && message.contains("CORTEX_LLM_PROVIDER"),
            "the call names the layer and what it needs: {message}"
        );
        assert!(
            message.contains("restart"),
            "a setting is fixed by a restart, not by calling again: {message}"
        );
        assert!(stderr.contains("serving MCP on stdio"), "{stderr}");
        assert!(
            stderr.contains(layer) && stderr.contains("CORTEX_LLM_PROVIDER"),
            "the log says it at startup: {stderr}"
        );
        assert!(!db.exists(), "{layer}: nothing was created");
    }
}

/// Over HTTP the same: the server binds and serves; the setting is logged.
#[test]
fn http_mode_serves_with_a_layer_without_a_model_and_logs_it() {
    let dir = tempfile::tempdir().unwrap();
    let token = Path::new("startup-test-token-0123456789");
    let on = Path::new("yes");
    let mut child = spawn(
        &["--http", "127.0.0.1:0"],
        &[
            ("CORTEX_HTTP_TOKEN", token),
            ("CORTEX_SOFT_UPDATE", on),
            ("CORTEX_DB_PATH", &dir.path().join("memory.db")),
        ],
    );
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log.contains("listening on") && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            log.push_str(&line);
            log.push('\n');
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("cortex-mcp exited ({status:?}): {log}");
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(log.contains("listening on"), "{log}");
    assert!(
        log.contains("CORTEX_SOFT_UPDATE") && log.contains("CORTEX_LLM_PROVIDER"),
        "{log}"
    );
}

/// No key, no model, no provider chosen: the settings are valid, so the server starts and
/// answers `initialize` and `tools/list`; a tool call says how to get an embedder.
#[test]
fn a_valid_configuration_without_any_key_serves_and_reports_the_key_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("memory.db");
    // An empty home: no local model in its default directory.
    let mut child = spawn(&[], &[("HOME", dir.path()), ("CORTEX_DB_PATH", &db)]);
    let arguments = json!({"query": "what do I like?"});
    let (replies, stdin) = match stdio::exchange(&mut child, "recall", arguments) {
        Ok(done) => done,
        Err(why) => {
            let _ = child.kill();
            panic!("{why}");
        }
    };
    assert_eq!(
        replies[&1]["result"]["serverInfo"]["name"], "cortex-mcp",
        "{:?}",
        replies[&1]
    );
    let tools = replies[&2]["result"]["tools"].as_array();
    assert_eq!(tools.map(Vec::len), Some(6), "{:?}", replies[&2]);
    let call = &replies[&3]["result"];
    assert_eq!(call["isError"], true, "{call}");
    let message = call["content"][0]["text"].as_str().unwrap();
    assert!(
        message.contains("no embedding provider is configured")
            && message.contains("GEMINI_API_KEY"),
        "{message}"
    );

    drop(stdin);
    let (status, _, stderr) = exit_within(child, Duration::from_secs(10));
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(!db.exists(), "a failed build leaves no database behind");

    // The default log filter (RUST_LOG unset): the server's own INFO lines, none of
    // rmcp's (it logs every initialize), and no colour codes on a pipe.
    assert!(stderr.contains("serving MCP on stdio"), "{stderr}");
    assert!(
        !stderr
            .lines()
            .any(|l| l.contains("rmcp") && l.contains("INFO")),
        "rmcp logs at warn by default: {stderr}"
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "no ANSI colours when stderr is not a terminal: {stderr:?}"
    );
}
