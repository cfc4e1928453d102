//! End-to-end: the official Python MCP SDK, an external and unmodified client, against the
//! `cortex-mcp` binary cargo built, over stdio and over HTTP. The checks live in
//! `tests/e2e/client.py`; its virtualenv comes from `scripts/setup-python-client.sh`.

// Test helpers outside #[test] fns panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/python.rs"]
mod python;

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use python::{Drained, python, run_script, wait_bounded};

const BINARY: &str = env!("CARGO_BIN_EXE_cortex-mcp");
const TOKEN: &str = "e2e-token-3f9a1c7d5b2e8046";

/// Runs `client.py` to completion (bounded), returning its status and output.
fn run_client(python: &Path, args: &[&str]) -> (ExitStatus, String) {
    run_script(python, "client.py", args)
}

/// Kills the server if a check panics before it was stopped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn python_sdk_over_stdio() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("stdio.db");
    let (status, output) = run_client(
        &python,
        &["stdio", "--binary", BINARY, "--db", db.to_str().unwrap()],
    );
    assert!(
        status.success(),
        "the Python client failed over stdio:\n{output}"
    );
    assert!(db.exists(), "the server wrote its temporary database");
}

#[test]
fn python_sdk_over_http() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("http.db");

    // Port 0: the server binds a free port on 127.0.0.1 and logs the address it got, so no
    // other process can take the port between choosing and binding it.
    let mut child = Command::new(BINARY)
        .args(["--http", "127.0.0.1:0"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("CORTEX_HTTP_TOKEN", TOKEN)
        .env("CORTEX_DB_PATH", &db)
        .env("CORTEX_EMBED_PROVIDER", "fake")
        // The client memorizes back to back until two ids share a prefix (a few hundred
        // calls in a second): past the default per-user rate, which is not under test here.
        .env("CORTEX_HTTP_USER_RPS", "100000")
        .env("CORTEX_HTTP_USER_BURST", "1000000")
        // Verbose, so the check below covers every log line the server can write.
        .env("RUST_LOG", "trace")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start cortex-mcp --http");
    let stderr = child.stderr.take().expect("piped stderr");
    let mut server = Server(child);

    let (found_url, url_rx) = mpsc::channel();
    let logs = Drained::new(stderr, move |line| {
        if let Some(rest) = line.split("listening on ").nth(1) {
            let url = rest.split_whitespace().next().unwrap_or_default();
            let _ = found_url.send(url.to_owned());
        }
    });
    let url = url_rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("the server did not start listening:\n{}", logs.text()));
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );

    let (status, output) = run_client(
        &python,
        &[
            "http",
            "--url",
            &url,
            "--token",
            TOKEN,
            "--db",
            db.to_str().unwrap(),
        ],
    );
    assert!(
        status.success(),
        "the Python client failed over HTTP:\n{output}\nserver log:\n{}",
        logs.text()
    );

    // SIGTERM (what docker sends) stops the server gracefully and promptly, even with
    // the client's streams just closed.
    let pid = server.0.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    let exit = wait_bounded(&mut server.0, Duration::from_secs(15))
        .unwrap_or_else(|| panic!("no graceful shutdown:\n{}", logs.text()));
    assert!(exit.success(), "exit status {exit:?}:\n{}", logs.text());

    // The server has exited, so its stderr is at its end: every line it wrote is here. The
    // token check means something only over the lines of the session: the authenticated
    // calls and the refused requests (the client sends wrong tokens too) were logged, and
    // the shutdown, the last line.
    let logs = logs.finish();
    for expected in [
        "memorized",
        "refused: missing or wrong bearer token",
        "shutting down",
    ] {
        assert!(
            logs.contains(expected),
            "no {expected:?} in the log:\n{logs}"
        );
    }
    assert!(!logs.contains(TOKEN), "the token reached the log:\n{logs}");
}
