//! The official Python MCP SDK as a test client: its virtualenv (or the workspace's skip
//! policy when it is missing), and a script of `tests/e2e/` run to completion, bounded,
//! with its output kept. Shared by `external_client.rs` and `resources_sdk.rs`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// How long one script may run: the prefix check memorizes a few hundred times.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(300);

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("mcp/ sits in the workspace root")
        .to_path_buf()
}

/// The virtualenv's python, or `None` after the workspace's skip policy ran (a skip line;
/// a failure under CI, where a skipped end-to-end test would hide a gap).
pub fn python() -> Option<PathBuf> {
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

/// Runs `mcp/tests/e2e/<script>` to completion (bounded), returning its status and output.
pub fn run_script(python: &Path, script: &str, args: &[&str]) -> (ExitStatus, String) {
    let script = repo_root().join("mcp/tests/e2e").join(script);
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
pub struct Drained {
    lines: Arc<Mutex<Vec<String>>>,
    reader: thread::JoinHandle<()>,
}

impl Drained {
    /// Starts reading `pipe`; `on_line` sees each line as it arrives.
    pub fn new(
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
    pub fn text(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Every line the pipe carried: waits for its end (every writer gone).
    pub fn finish(self) -> String {
        let Self { lines, reader } = self;
        reader.join().expect("the pipe reader panicked");
        lines.lock().unwrap().join("\n")
    }
}

pub fn wait_bounded(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("poll the child") {
            return Some(status);
        }
        thread::sleep(Duration::from_millis(50));
    }
    None
}
