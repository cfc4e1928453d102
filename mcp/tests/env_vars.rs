//! The server's environment variables stay listed in one place: `ENV_VARS`. These tests
//! keep `.env.example`, `docs/CONFIGURATION.md`, the crates the server links and the root
//! `docker-compose.yml` in step with it.

// Test helpers outside #[test] fns panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use cortex_mcp::ENV_VARS;
use serde_yaml_ng::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("mcp/ sits in the workspace root")
        .to_path_buf()
}

fn listed() -> BTreeSet<&'static str> {
    ENV_VARS.iter().copied().collect()
}

#[test]
fn env_vars_has_no_duplicates() {
    assert_eq!(listed().len(), ENV_VARS.len(), "ENV_VARS repeats a name");
}

/// `.env.example` lists each variable exactly once, as `VAR=default` or `# VAR=default`.
#[test]
fn env_example_lists_exactly_the_variables_the_server_reads() {
    let text = std::fs::read_to_string(repo_root().join(".env.example")).unwrap();
    let mut seen = Vec::new();
    for line in text.lines() {
        let line = line.trim_start_matches('#').trim_start();
        let Some((name, _)) = line.split_once('=') else {
            continue;
        };
        let is_var = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if is_var {
            seen.push(name.to_owned());
        }
    }
    let unique: BTreeSet<&str> = seen.iter().map(String::as_str).collect();
    assert_eq!(unique.len(), seen.len(), ".env.example repeats a variable");
    let missing: Vec<_> = listed().difference(&unique).copied().collect();
    let extra: Vec<_> = unique.difference(&listed()).copied().collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        ".env.example is out of step with ENV_VARS: missing {missing:?}, not read by the \
         server {extra:?}"
    );
}

#[test]
fn configuration_docs_describe_every_variable() {
    let text = std::fs::read_to_string(repo_root().join("docs/CONFIGURATION.md")).unwrap();
    let missing: Vec<_> = ENV_VARS
        .iter()
        .filter(|v| !text.contains(&format!("`{v}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/CONFIGURATION.md does not describe {missing:?}"
    );
}

/// Names that look like settings (`CORTEX_*`, `*_API_KEY`) in `text`, test modules excluded.
fn variable_names(text: &str) -> BTreeSet<String> {
    // Test modules sit at the end of a file by convention and may name variables that
    // only tests read.
    let text = text.split("#[cfg(test)]").next().unwrap_or(text);
    let bytes = text.as_bytes();
    let is_name = |b: u8| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_';
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < bytes.len() {
        if !is_name(bytes[i]) || (i > 0 && is_name(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_name(bytes[i]) {
            i += 1;
        }
        // `CORTEX_FOO_` fragments (from format strings) and lowercase-continued words are
        // not names.
        let followed_by_word = i < bytes.len() && bytes[i].is_ascii_lowercase();
        let name = &text[start..i];
        let looks_like_setting = (name.starts_with("CORTEX_") && name.len() > 7)
            || (name.ends_with("_API_KEY") && name.len() > 8);
        if looks_like_setting && !name.ends_with('_') && !followed_by_word {
            names.insert(name.to_owned());
        }
    }
    names
}

fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crates the server links read some variables themselves (the providers, the
/// stores). Any setting they name must be in ENV_VARS, or `.env.example` and the docs
/// would silently miss it.
#[test]
fn every_variable_the_linked_crates_name_is_listed() {
    let root = repo_root();
    let manifest = std::fs::read_to_string(root.join("mcp/Cargo.toml")).unwrap();
    let crates = [
        ("cortex-core", "core/src"),
        ("cortex-sqlite", "backends/sqlite/src"),
        ("cortex-postgres", "backends/postgres/src"),
        ("cortex-providers", "providers/src"),
    ];
    let mut unlisted = BTreeSet::new();
    let mut scanned = 0;
    for (name, dir) in crates {
        if !manifest.contains(&format!("{name}.workspace")) {
            continue;
        }
        let mut files = Vec::new();
        rust_sources(&root.join(dir), &mut files);
        for file in files {
            scanned += 1;
            let text = std::fs::read_to_string(&file).unwrap();
            for var in variable_names(&text) {
                if !listed().contains(var.as_str()) {
                    unlisted.insert(format!("{var} ({})", file.display()));
                }
            }
        }
    }
    assert!(scanned > 10, "found too few sources to scan: {scanned}");
    assert!(
        unlisted.is_empty(),
        "variables named by crates the server links but missing from ENV_VARS \
         (add them there, to .env.example and to docs/CONFIGURATION.md): {unlisted:?}"
    );
}

#[test]
fn the_name_scanner_finds_settings_and_skips_fragments() {
    let text = r#"
        let key = var("CORTEX_EMBED_PROVIDER"); // OPENAI_API_KEY
        format!("CORTEX_{name}"); "CORTEX_" ; CORTEX_Xyz; ${GEMINI_API_KEY:-}
        #[cfg(test)] var("CORTEX_ONLY_IN_TESTS")
    "#;
    let names: Vec<String> = variable_names(text).into_iter().collect();
    assert_eq!(
        names,
        ["CORTEX_EMBED_PROVIDER", "GEMINI_API_KEY", "OPENAI_API_KEY"]
    );
}

/// The environment keys docker compose gives the server's container(s). Database
/// services (the postgres image's own POSTGRES_* settings) are not the server's.
fn compose_server_env(compose: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(services) = compose.get("services").and_then(Value::as_mapping) else {
        return out;
    };
    for (name, service) in services {
        let name = name.as_str().unwrap_or_default().to_owned();
        let text = |key: &str| serde_yaml_ng::to_string(service.get(key)?).ok();
        let image = text("image").unwrap_or_default().to_lowercase();
        if image.contains("postgres") || image.contains("pgvector") {
            continue;
        }
        let mentions_server = ["command", "entrypoint", "image", "build"]
            .iter()
            .filter_map(|k| text(k))
            .any(|t| t.contains("cortex"))
            || name.contains("cortex")
            || name.contains("mcp");
        if !mentions_server {
            continue;
        }
        match service.get("environment") {
            Some(Value::Mapping(map)) => {
                for key in map.keys() {
                    out.push((name.clone(), key.as_str().unwrap_or_default().to_owned()));
                }
            }
            Some(Value::Sequence(items)) => {
                for item in items {
                    let entry = item.as_str().unwrap_or_default();
                    let key = entry.split_once('=').map_or(entry, |(k, _)| k);
                    out.push((name.clone(), key.trim().to_owned()));
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn docker_compose_sets_only_variables_the_server_reads() {
    let path = repo_root().join("docker-compose.yml");
    let Ok(text) = std::fs::read_to_string(&path) else {
        cortex_conformance::skip_or_fail(format_args!("{} does not exist", path.display()));
        return;
    };
    let compose: Value = serde_yaml_ng::from_str(&text).unwrap();
    let env = compose_server_env(&compose);
    assert!(
        !env.is_empty(),
        "docker-compose.yml has no service running cortex-mcp with an environment"
    );
    let unknown: Vec<_> = env
        .iter()
        .filter(|(_, key)| !listed().contains(key.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "docker-compose.yml sets variables the server never reads (typos?): {unknown:?}"
    );
}

#[test]
fn compose_parsing_takes_the_server_services_and_both_environment_forms() {
    let compose: Value = serde_yaml_ng::from_str(
        r#"
services:
  db:
    image: pgvector/pgvector:pg17
    environment:
      POSTGRES_PASSWORD: secret
  cortex:
    build: .
    command: ["cortex-mcp", "--http", "0.0.0.0:8765"]
    environment:
      CORTEX_DATABASE_URL: postgres://cortex@db/cortex
      CORTEX_HTTP_TOKEN: ${CORTEX_HTTP_TOKEN:?set a token}
  sidecar:
    image: cortex-mcp:latest
    environment:
      - RUST_LOG=info
      - CORTEX_TYPO
"#,
    )
    .unwrap();
    let env = compose_server_env(&compose);
    let keys: Vec<&str> = env.iter().map(|(_, k)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "CORTEX_DATABASE_URL",
            "CORTEX_HTTP_TOKEN",
            "RUST_LOG",
            "CORTEX_TYPO"
        ]
    );
}
