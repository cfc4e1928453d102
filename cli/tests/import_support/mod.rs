//! What the `cortex import --from` tests share: the hand-written fixtures, running an
//! import, reading back what a user has, and cutting a file short.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use cortex_app::{ServerConfig, build_engine};
use serde_json::Value;

use crate::admin_support::{Env, json, ok, path, refused};

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

/// The fixture `relative` cut `after` bytes past the first `marker` in it, written to
/// `dir/name`: a file whose copy stopped.
pub fn cut_fixture(dir: &Path, relative: &str, marker: &str, after: usize, name: &str) -> PathBuf {
    let whole = std::fs::read_to_string(fixture(relative)).unwrap();
    let file = dir.join(name);
    std::fs::write(&file, cut_after(&whole, marker, after)).unwrap();
    file
}

/// A memory's tags, as `cortex list` and `cortex search` print them.
pub fn tags(memory: &Value) -> Vec<&str> {
    memory["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect()
}

/// The engine the server would build on `env`: what the MCP tools call.
pub async fn engine(env: &Env) -> cortex_app::Engine {
    let map: HashMap<String, String> = env.iter().cloned().collect();
    let config = ServerConfig::from_lookup(&|name| map.get(name).cloned()).unwrap();
    build_engine(&config).await.unwrap()
}
