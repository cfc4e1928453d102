//! More of MCP than tools, through the official Python SDK against the `cortex-mcp` binary
//! cargo built: resources (the list, the templates, a read of each), the prompt, every
//! tool's annotations and output schema (each result validated against it), over stdio,
//! over HTTP, and over HTTP in key mode with two users, neither of whom can read anything
//! of the other's. Each runs on the protocol version the SDK negotiates by default today
//! (2026-07-28, `server/discover`) and on the one before (2025-11-25, `initialize`). The
//! checks live in `tests/e2e/resources_client.py`; the virtualenv comes from
//! `scripts/setup-python-client.sh`. The server runs on SQLite and the fake embedder.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

#[path = "support/mcp_http.rs"]
mod mcp_http;
#[path = "support/python.rs"]
mod python;

use chrono::Utc;
use cortex_core::keys::{self, Scope};
use mcp_http::{Server, TestStore};
use python::{python, run_script};

const BINARY: &str = env!("CARGO_BIN_EXE_cortex-mcp");
const TOKEN: &str = "resources-token-5d1e7a9c3b2f8046";
const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";
/// The client makes a few dozen requests in a second; the per-user rate is not under test.
const RATE: [(&str, &str); 2] = [
    ("CORTEX_HTTP_USER_RPS", "100000"),
    ("CORTEX_HTTP_USER_BURST", "1000000"),
];

/// Runs the client with `args`, failing with its output (and the server's log) if any
/// check did.
fn client(args: &[&str], server: Option<&Server>) {
    let Some(python) = python() else { return };
    let (status, output) = run_script(&python, "resources_client.py", args);
    let log = server.map(|s| s.log().join("\n")).unwrap_or_default();
    assert!(
        status.success(),
        "the Python client failed:\n{output}\nserver log:\n{log}"
    );
}

fn over_stdio(version: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("stdio.db");
    let db = db.to_str().unwrap();
    client(
        &[
            "stdio",
            "--version",
            version,
            "--binary",
            BINARY,
            "--db",
            db,
        ],
        None,
    );
}

fn over_http(version: &str) {
    let store = TestStore::sqlite();
    let token = [("CORTEX_HTTP_TOKEN", TOKEN)];
    let server = Server::start(&[&token[..], &RATE[..], &store.env()].concat());
    let url = format!("{}/mcp", server.base_url());
    client(
        &[
            "http",
            "--version",
            version,
            "--url",
            &url,
            "--token",
            TOKEN,
        ],
        Some(&server),
    );
}

async fn two_users(version: &str) {
    let store = TestStore::sqlite();
    let mut tokens = Vec::new();
    for user in ["ada", "bea"] {
        let issued = keys::issue(user, Scope::Write, None, None, Utc::now()).unwrap();
        store.keys.insert_key(&issued.stored).await.unwrap();
        tokens.push(issued.token);
    }
    let keyed = [("CORTEX_HTTP_AUTH", "keys")];
    let server = Server::start(&[&keyed[..], &RATE[..], &store.env()].concat());
    let url = format!("{}/mcp", server.base_url());
    let args = [
        "isolation",
        "--version",
        version,
        "--url",
        &url,
        "--key-a",
        &tokens[0],
        "--key-b",
        &tokens[1],
    ];
    client(&args, Some(&server));
}

#[test]
fn resources_and_prompt_over_stdio_on_2026_07_28() {
    over_stdio(MODERN);
}

#[test]
fn resources_and_prompt_over_stdio_on_2025_11_25() {
    over_stdio(LEGACY);
}

#[test]
fn resources_and_prompt_over_http_on_2026_07_28() {
    over_http(MODERN);
}

#[test]
fn resources_and_prompt_over_http_on_2025_11_25() {
    over_http(LEGACY);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_resource_of_one_user_is_readable_by_another_on_2026_07_28() {
    two_users(MODERN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_resource_of_one_user_is_readable_by_another_on_2025_11_25() {
    two_users(LEGACY).await;
}
