//! Expiry through the `cortex` command: `add --expires-at`, the field carried by export and
//! import (an expiry already past arrives expired), `search` and `list` leaving expired
//! memories out (`list --expired` showing them), and `prune` deleting them for good
//! (`--dry-run` deleting nothing).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_support;

use admin_support::*;

#[tokio::test]
async fn expired_memories_are_not_recalled_and_prune_deletes_them() {
    let dir = tempfile::tempdir().unwrap();
    let env = sqlite_env(&dir.path().join("memory.db"));
    let kept = json(&ok(
        &env,
        &["add", "The office wifi is called Cortex-5G", "--json"],
    ));
    let later = json(&ok(
        &env,
        &[
            "add",
            "The office canteen is closed for repairs",
            "--expires-at",
            "2999-01-01",
            "--json",
        ],
    ));
    assert_eq!(later["memory"]["expires_at"], "2999-01-01T00:00:00Z");
    let past = refused(&env, &["add", "Born expired", "--expires-at", "2001-01-01"]);
    assert!(past.contains("expires_at"), "{past}");

    // A memory that expired in 2020 arrives by import, expired as it left.
    let gone = uuid::Uuid::new_v4();
    let file = dir.path().join("in.jsonl");
    std::fs::write(
        &file,
        format!(
            "{}\n{}\n",
            r#"{"type":"header","format":"cortex-export","version":1,"exported_at":"2024-01-01T00:00:00Z","vectors":false,"users":["ada"]}"#,
            format_args!(
                r#"{{"type":"memory","id":"{gone}","user_id":"ada","content":"The office is closed until Friday","kind":"fact","tags":[],"created_at":"2019-12-01T00:00:00Z","expires_at":"2020-01-01T00:00:00Z","superseded":false}}"#
            )
        ),
    )
    .unwrap();
    ok(&env, &["import", path(&file)]);
    let exported = export_lines(&env, false);
    let line = memory_lines(&exported)
        .into_iter()
        .find(|l| l.contains(&gone.to_string()))
        .unwrap();
    assert_eq!(json(&line)["expires_at"], "2020-01-01T00:00:00Z");

    // `list` leaves it out, as `list_memories` and the web page do; `--expired` shows it.
    let listed = |extra: &[&str]| {
        let args = [&["list", "--json"][..], extra].concat();
        json(&ok(&env, &args))["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["memory"]["id"].as_str().unwrap().to_owned(),
                    m["expired"] == true,
                )
            })
            .collect::<Vec<_>>()
    };
    assert!(!listed(&[]).iter().any(|(id, _)| *id == gone.to_string()));
    let with_expired = listed(&["--expired"]);
    assert!(
        with_expired.contains(&(gone.to_string(), true)),
        "{with_expired:?}"
    );
    assert_eq!(with_expired.len(), 3);

    let found = json(&ok(&env, &["search", "is the office closed", "--json"]));
    let ids: Vec<&str> = found
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["memory"]["id"].as_str().unwrap())
        .collect();
    assert!(!ids.contains(&gone.to_string().as_str()), "{found}");
    assert!(ids.contains(&kept["id"].as_str().unwrap()));

    let dry = json(&ok(&env, &["prune", "--dry-run", "--json"]));
    assert_eq!(dry["deleted"], 0);
    assert_eq!(dry["expired"][0]["id"], gone.to_string());
    assert_eq!(dry["expired"].as_array().unwrap().len(), 1);
    let done = json(&ok(&env, &["prune", "--json"]));
    assert_eq!(done["deleted"], 1);
    let exported = export_lines(&env, false);
    assert!(!exported.iter().any(|l| l.contains(&gone.to_string())));
    assert_eq!(memory_lines(&exported).len(), 2, "the others stay");
    let again = json(&ok(&env, &["prune", "--json"]));
    assert_eq!(again["deleted"], 0);
}
