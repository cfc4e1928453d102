//! What the `cortex import --from` tests share: the hand-written fixtures, running an
//! import, reading back what a user has, and cutting a file short.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use cortex_app::{ServerConfig, build_engine};
use serde_json::Value;

use crate::admin_support::{Env, command, json, ok, path, refused};

/// A fixture under `cli/tests/fixtures/import/`.
pub fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(relative)
}

/// `cortex import --from FORMAT FILE --json [extra]`, which must succeed: its counts.
pub fn import(env: &Env, format: &str, file: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["import", "--from", format, path(file), "--json"];
    args.extend_from_slice(extra);
    let out = json(&ok(env, &args));
    assert_eq!(out["from"], format, "{out}");
    out["counts"].clone()
}

/// `cortex import --from FORMAT FILE [extra]`, which must fail: its stderr.
pub fn import_refused(env: &Env, format: &str, file: &Path, extra: &[&str]) -> String {
    let mut args = vec!["import", "--from", format, path(file)];
    args.extend_from_slice(extra);
    refused(env, &args)
}

/// A count, 0 when absent.
pub fn count(counts: &Value, key: &str) -> u64 {
    counts[key].as_u64().unwrap_or(0)
}

/// Every memory of `user` (live ones, newest first), as the JSON `cortex list` prints.
pub fn memories(env: &Env, user: &str) -> Vec<Value> {
    let out = json(&ok(
        env,
        &["list", "--json", "--limit", "1000", "--user", user],
    ));
    out["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["memory"].clone())
        .collect()
}

pub fn contents(env: &Env, user: &str) -> Vec<String> {
    memories(env, user)
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

/// What `cortex search` recalls for `user`, best first: the memories.
pub fn recall(env: &Env, user: &str, query: &str) -> Vec<Value> {
    let out = json(&ok(
        env,
        &["search", query, "--json", "--user", user, "--limit", "3"],
    ));
    out.as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["memory"].clone())
        .collect()
}

/// The content of the best memory `cortex search` recalls.
pub fn best(env: &Env, user: &str, query: &str) -> String {
    let hits = recall(env, user, query);
    assert!(!hits.is_empty(), "nothing recalled for {query:?}");
    hits[0]["content"].as_str().unwrap().to_owned()
}

/// `text` cut `after` bytes past the first `marker` in it: a file whose copy stopped.
pub fn cut_after(text: &str, marker: &str, after: usize) -> Vec<u8> {
    let at = text.find(marker).unwrap_or_else(|| panic!("no {marker:?}"));
    text.as_bytes()[..at + after].to_vec()
}

/// `cortex <args>` with `stdin` on its standard input.
pub fn run_with_stdin(env: &Env, args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = command(env, &[], args);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        // The command may stop reading early (a refused file): a broken pipe is fine.
        let _ = input.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

/// The engine the server would build on `env`: what the MCP tools call.
pub async fn engine(env: &Env) -> cortex_app::Engine {
    let map: HashMap<String, String> = env.iter().cloned().collect();
    let config = ServerConfig::from_lookup(&|name| map.get(name).cloned()).unwrap();
    build_engine(&config).await.unwrap()
}
