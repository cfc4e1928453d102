//! End-to-end: the official Python MCP SDK, an external and unmodified client, against the
//! `cortex-mcp` binary cargo built, over stdio and over HTTP. The checks live in
//! `tests/e2e/client.py`; its virtualenv comes from `scripts/setup-python-client.sh`.

// Test helpers outside #[test] fns panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const BINARY: &str = env!("CARGO_BIN_EXE_cortex-mcp");
const TOKEN: &str = "e2e-token-3f9a1c7d5b2e8046";
const CLIENT_TIMEOUT: Duration = Duration::from_secs(300);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("mcp/ sits in the workspace root")
        .to_path_buf()
}

/// The virtualenv's python, or `None` after the workspace's skip policy ran (a skip line;
/// a failure under CI, where a skipped end-to-end test would hide a gap).
fn python() -> Option<PathBuf> {
    let python = repo_root().join(".cache/mcp-venv/bin/python");
    if python.exists() {
        return Some(python);
    }
    cortex_conformance::skip_or_fail(format_args!(
        "the Python MCP client is not installed ({} is missing); run scripts/setup-python-client.sh",
        python.display()
    ));
    None
}

/// Runs the Python client to completion (bounded), returning its status and output.
fn run_client(python: &Path, args: &[&str]) -> (ExitStatus, String) {
    let script = repo_root().join("mcp/tests/e2e/client.py");
    let mut child = Command::new(python)
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the Python client");
    let stdout = Drained::new(child.stdout.take().expect("piped stdout"), |_| {});
    let stderr = Drained::new(child.stderr.take().expect("piped stderr"), |_| {});
    let status = wait_bounded(&mut child, CLIENT_TIMEOUT).unwrap_or_else(|| {
        let _ = child.kill();
        panic!(
            "the Python client did not finish within {CLIENT_TIMEOUT:?}:\n{}\n{}",
            stdout.text(),
            stderr.text()
        )
    });
    // The client has exited (and stopped the server it started over stdio, which shared
    // its stderr), so both pipes are at their end: the readers finish with every line.
    (status, format!("{}\n{}", stdout.finish(), stderr.finish()))
}

/// A pipe's lines, collected on a thread so the child never blocks on a full pipe.
struct Drained {
    lines: Arc<Mutex<Vec<String>>>,
    reader: thread::JoinHandle<()>,
}

impl Drained {
    /// Starts reading `pipe`; `on_line` sees each line as it arrives.
    fn new(
        pipe: impl std::io::Read + Send + 'static,
        on_line: impl Fn(&str) + Send + 'static,
    ) -> Self {
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = lines.clone();
        let reader = thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                on_line(&line);
                sink.lock().unwrap().push(line);
            }
        });
        Self { lines, reader }
    }

    /// The lines read so far.
    fn text(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Every line the pipe carried: waits for its end (every writer gone).
    fn finish(self) -> String {
        let Self { lines, reader } = self;
        reader.join().expect("the pipe reader panicked");
        lines.lock().unwrap().join("\n")
    }
}

fn wait_bounded(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("poll the child") {
            return Some(status);
        }
        thread::sleep(Duration::from_millis(50));
    }
    None
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
