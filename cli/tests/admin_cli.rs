//! `cortex` administration end to end: the built binary over SQLite files (and Postgres
//! when CORTEX_TEST_DATABASE_URL is set; under CI it must be): export and import round
//! trips that compare every record, migrate SQLite -> Postgres -> SQLite with recall order
//! kept, the everyday commands, and a kill -9 in the middle of import and migrate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_support;

use admin_support::*;
use serde_json::Value;

#[tokio::test]
async fn export_then_import_reproduces_every_record_and_a_second_import_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let a = sqlite_env(&dir.path().join("a.db"));
    seed(&a).await;
    let original = export_lines(&a, true);
    assert!(
        kinds(&original).len() == 6,
        "the seed covers memories and the five record types: {:?}",
        kinds(&original)
    );

    // With vectors: no embedding call is needed.
    let file = dir.path().join("all.jsonl");
    ok(
        &a,
        &["export", "--all-users", "--with-vectors", "-o", path(&file)],
    );
    let b = sqlite_env(&dir.path().join("b.db"));
    let first = json(&ok(&b, &["import", path(&file), "--json"]));
    assert_eq!(first["counts"]["embedded"], 0, "{first}");
    assert_eq!(export_lines(&b, true), original);

    let again = json(&ok(&b, &["import", path(&file), "--json"]));
    let counts = again["counts"].as_object().unwrap();
    assert!(
        counts
            .iter()
            .all(|(k, v)| k.ends_with("already present") || v == 0),
        "a second import writes nothing: {again}"
    );
    assert_eq!(export_lines(&b, true), original);

    // Without vectors: every memory is embedded again, to the same vectors.
    let bare = dir.path().join("bare.jsonl");
    ok(&a, &["export", "--all-users", "-o", path(&bare)]);
    assert!(
        !std::fs::read_to_string(&bare)
            .unwrap()
            .contains("\"embedding\"")
    );
    let c = sqlite_env(&dir.path().join("c.db"));
    let imported = json(&ok(&c, &["import", path(&bare), "--json"]));
    let memories = original
        .iter()
        .filter(|l| l.contains(r#""type":"memory""#))
        .count();
    assert_eq!(
        imported["counts"]["embedded"], memories as u64,
        "{imported}"
    );
    assert_eq!(export_lines(&c, true), original);
}

#[tokio::test]
async fn a_malformed_line_names_its_number_and_writes_nothing_of_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let a = sqlite_env(&dir.path().join("a.db"));
    seed(&a).await;
    let file = dir.path().join("x.jsonl");
    ok(&a, &["export", "--all-users", "-o", path(&file)]);
    let mut text: Vec<String> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    text.insert(4, r#"{"type":"memory","id":"not-a-uuid"}"#.to_owned());
    let broken = dir.path().join("broken.jsonl");
    std::fs::write(&broken, text.join("\n") + "\n").unwrap();

    let b = sqlite_env(&dir.path().join("b.db"));
    for args in [
        vec!["import", path(&broken), "--dry-run"],
        vec!["import", path(&broken)],
    ] {
        let err = refused(&b, &args);
        assert!(err.contains("line 5"), "{args:?}: {err}");
    }
    assert_eq!(count_rows(&dir.path().join("b.db"), "memories"), Some(0));

    let valid = json(&ok(&b, &["import", path(&file), "--dry-run", "--json"]));
    assert_eq!(valid["dry_run"], true);
    assert!(valid["counts"]["memory"].as_u64().unwrap() > 0, "{valid}");
    assert_eq!(count_rows(&dir.path().join("b.db"), "memories"), Some(0));

    // A record the store refuses (an event of a memory that is nowhere) fails its batch
    // in the store: on SQLite one transaction, so none of the batch's memories either.
    let header = &text[0];
    let memory = text[1..]
        .iter()
        .find(|l| l.contains(r#""type":"memory""#))
        .unwrap();
    let orphan = format!(
        r#"{{"type":"event","user_id":"ada","memory_id":"{}","event_time":"2024-01-01T00:00:00Z","actor":null,"location":null,"event_type":null}}"#,
        uuid::Uuid::new_v4()
    );
    std::fs::write(&broken, format!("{header}\n{memory}\n{orphan}\n")).unwrap();
    let err = refused(&b, &["import", path(&broken)]);
    assert!(err.contains("lines 2-3"), "{err}");
    assert_eq!(count_rows(&dir.path().join("b.db"), "memories"), Some(0));

    // An empty content fails validation as memorize would, with its line.
    let mut bad = text.clone();
    bad.remove(4);
    bad[1] = bad[1].replacen(r#""content":""#, r#""content":"   ","was":""#, 1);
    std::fs::write(&broken, bad.join("\n") + "\n").unwrap();
    let err = refused(&b, &["import", path(&broken)]);
    assert!(err.contains("line 2"), "{err}");
}

#[tokio::test]
async fn everyday_commands_work_and_print_json_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    everyday_commands(&sqlite_env(&dir.path().join("a.db")), "sqlite").await;
}

#[tokio::test]
async fn everyday_commands_work_and_print_json_on_postgres() {
    let Some(url) = database_url() else { return };
    let schema = unique_schema("admin_everyday");
    everyday_commands(&postgres_env(&url, &schema), "postgres").await;
    drop_schema(&url, &schema).await;
}

async fn everyday_commands(a: &Env, backend: &str) {
    let a = a.clone();
    let added = json(&ok(
        &a,
        &[
            "add",
            "Ada moved to Lisbon",
            "--kind",
            "event",
            "--tag",
            "Travel",
            "--created-at",
            "2021-03-04",
            "--json",
        ],
    ));
    assert_eq!(added["status"], "stored");
    assert_eq!(added["memory"]["created_at"], "2021-03-04T00:00:00Z");
    assert_eq!(added["memory"]["tags"][0], "travel");
    let err = refused(&a, &["add", "later", "--created-at", "2999-01-01"]);
    assert!(err.contains("future"), "{err}");

    for i in 0..7 {
        ok(&a, &["add", &format!("note number {i} about gardening")]);
    }
    let found = json(&ok(&a, &["search", "Lisbon", "--json", "--limit", "3"]));
    assert_eq!(found[0]["memory"]["content"], "Ada moved to Lisbon");

    // Pages of 3 reach all 8 memories, once each.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = vec!["list", "--limit", "3", "--json"];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c]);
        }
        let page = json(&ok(&a, &args));
        for m in page["memories"].as_array().unwrap() {
            seen.push(m["memory"]["id"].as_str().unwrap().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!((seen.len(), unique.len()), (8, 8));

    let stats = json(&ok(&a, &["stats", "--json"]));
    assert_eq!(stats["live"], 8);
    assert_eq!(stats["by_kind"]["event"], 1);
    assert_eq!(stats["by_tag"]["travel"], 1);
    assert_eq!(stats["signature"], "fake-hash (dim 256)");
    assert!(stats["store_bytes"].as_u64().unwrap() > 0, "{stats}");
    if backend == "sqlite" {
        // The search above built the index, and wrote its snapshot beside the file.
        assert!(
            stats["index_snapshot_bytes"].as_u64().unwrap() > 0,
            "{stats}"
        );
        assert!(stats["shared_buffers_bytes"].is_null(), "{stats}");
    } else {
        assert!(stats["index_snapshot_bytes"].is_null(), "{stats}");
        // Postgres's smallest shared_buffers is 128 kB; no HNSW index at 8 memories.
        assert!(
            stats["shared_buffers_bytes"].as_u64().unwrap() >= 128 << 10,
            "{stats}"
        );
        assert_eq!(stats["hnsw_index_bytes"], 0, "{stats}");
    }
    assert!(
        stats["content_tokens_estimate"].as_u64().unwrap() > 20,
        "{stats}"
    );

    let id = added["id"].as_str().unwrap();
    let history = json(&ok(&a, &["history", &id[..8], "--json"]));
    assert_eq!(history.as_array().unwrap().len(), 1);
    assert!(history[0]["valid_until"].is_null());
    ok(&a, &["forget", &id[..8]]);
    assert_eq!(json(&ok(&a, &["stats", "--json"]))["live"], 7);
    refused(&a, &["forget", &id[..8]]);

    let doctor = json(&ok(&a, &["doctor", "--json"]));
    let names: Vec<&str> = doctor
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let expected: &[&str] = match backend {
        "postgres" => &[
            "configuration",
            "store",
            "pgvector",
            "signature",
            "embedder",
        ],
        _ => &["configuration", "store", "signature", "embedder"],
    };
    assert_eq!(names, expected);
    assert!(doctor.as_array().unwrap().iter().all(|c| c["ok"] == true));

    let completions = ok(&a, &["completions", "bash"]);
    assert!(completions.contains("migrate") && completions.contains("import"));
}

#[tokio::test]
async fn history_shows_the_supersession_chain_with_validity() {
    let dir = tempfile::tempdir().unwrap();
    let a = sqlite_env(&dir.path().join("a.db"));
    let ids = seed(&a).await;
    let chain = json(&ok(&a, &["history", &ids.old.to_string(), "--json"]));
    let chain = chain.as_array().unwrap();
    assert_eq!(chain.len(), 2, "{chain:?}");
    assert_eq!(chain[0]["memory"]["id"], ids.old.to_string());
    assert!(chain[0]["valid_until"].is_string(), "{chain:?}");
    assert!(chain[1]["valid_until"].is_null(), "{chain:?}");
    assert_eq!(chain[0]["reason"], "moved");
    let listed = json(&ok(&a, &["list", "--json", "--superseded"]));
    let superseded: Vec<&Value> = listed["memories"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["superseded"] == true)
        .collect();
    assert_eq!(superseded.len(), 1);
}

#[tokio::test]
async fn migrate_and_import_sqlite_to_postgres_and_back_keep_every_record_and_recall_order() {
    let Some(url) = database_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    let a = sqlite_env(&dir.path().join("a.db"));
    seed(&a).await;
    let schema = unique_schema("admin_migrate");
    let pg = postgres_env(&url, &schema);

    let to_pg = [("CORTEX_PG_SCHEMA", schema.as_str())];
    let report = json(&ok_with(&a, &to_pg, &["migrate", "--to", &url, "--json"]));
    assert_eq!(report["users"].as_array().unwrap().len(), 2, "{report}");
    // The target's schema comes from CORTEX_PG_SCHEMA, as for the server.
    let again = json(&ok_with(&a, &to_pg, &["migrate", "--to", &url, "--json"]));
    assert!(again["written"].as_object().unwrap().is_empty(), "{again}");

    let c_path = dir.path().join("c.db");
    ok(&pg, &["migrate", "--to", path(&c_path)]);
    let c = sqlite_env(&c_path);

    let (from_a, from_pg, from_c) = (
        export_lines(&a, true),
        export_lines(&pg, true),
        export_lines(&c, true),
    );
    // Memories in the same order everywhere; the other records as sets (Postgres keeps
    // entities and links in key order).
    assert_eq!(memory_lines(&from_a), memory_lines(&from_pg));
    assert_eq!(memory_lines(&from_a), memory_lines(&from_c));
    assert_eq!(sorted(&from_a), sorted(&from_pg));
    assert_eq!(sorted(&from_a), sorted(&from_c));

    for query in [
        "Ada Lisbon",
        "tea",
        "deadline for the report",
        "gardening tools",
    ] {
        for user in ["ada", "bob"] {
            let ranks = |env: &Env| {
                let hits = json(&ok(
                    env,
                    &["search", query, "--json", "--user", user, "--limit", "20"],
                ));
                hits.as_array()
                    .unwrap()
                    .iter()
                    .map(|h| (h["memory"]["id"].to_string(), h["score"].to_string()))
                    .collect::<Vec<_>>()
            };
            let want = ranks(&a);
            assert_eq!(ranks(&pg), want, "{query} for {user} on Postgres");
            assert_eq!(ranks(&c), want, "{query} for {user} back on SQLite");
        }
    }
    // `cortex import` into Postgres: the same records, and a second import writes nothing.
    let file = dir.path().join("all.jsonl");
    ok(
        &a,
        &["export", "--all-users", "--with-vectors", "-o", path(&file)],
    );
    let imported_schema = unique_schema("admin_import");
    let pg2 = postgres_env(&url, &imported_schema);
    let first = json(&ok(&pg2, &["import", path(&file), "--json"]));
    assert_eq!(first["counts"]["embedded"], 0, "{first}");
    assert_eq!(
        memory_lines(&export_lines(&pg2, true)),
        memory_lines(&from_a)
    );
    assert_eq!(sorted(&export_lines(&pg2, true)), sorted(&from_a));
    let again = json(&ok(&pg2, &["import", path(&file), "--json"]));
    let counts = again["counts"].as_object().unwrap();
    assert!(
        counts
            .iter()
            .all(|(k, v)| k.ends_with("already present") || v == 0),
        "a second import writes nothing: {again}"
    );
    drop_schema(&url, &schema).await;
    drop_schema(&url, &imported_schema).await;
}

#[tokio::test]
async fn reembed_on_postgres_estimates_first_then_switches_to_the_new_models_vectors() {
    let Some(url) = database_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    let a_path = dir.path().join("a.db");
    let a = sqlite_env(&a_path);
    seed(&a).await;
    let schema = unique_schema("admin_reembed");
    let pg = postgres_env(&url, &schema);
    ok_with(
        &a,
        &[("CORTEX_PG_SCHEMA", &schema)],
        &["migrate", "--to", &url],
    );
    let before = export_lines(&pg, true);

    let dim64 = [("CORTEX_EMBED_DIM", "64")];
    let plan = json(&ok_with(&pg, &dim64, &["reembed", "--json"]));
    assert_eq!(plan["started"], false, "{plan}");
    assert_eq!(plan["estimate"]["memories"], 8, "{plan}");
    assert_eq!(plan["estimate"]["calls"], 1, "{plan}");
    assert!(plan["estimate"]["tokens"].as_u64().unwrap() > 20, "{plan}");
    assert_eq!(
        export_lines(&pg, true),
        before,
        "the estimate changes nothing"
    );

    let done = json(&ok_with(
        &pg,
        &dim64,
        &["reembed", "--yes", "--json", "--batch", "3"],
    ));
    assert_eq!(done["outcome"]["switched"], 8, "{done}");
    assert_eq!(done["outcome"]["calls"], 3, "{done}");

    // The same records re-embedded on SQLite give the same lines, vectors included.
    ok_with(&a, &dim64, &["reembed", "--yes"]);
    let with64 = |env: &Env| {
        let mut env = env.clone();
        env.push(("CORTEX_EMBED_DIM".into(), "64".into()));
        export_lines(&env, true)
    };
    assert_eq!(sorted(&with64(&pg)), sorted(&with64(&a)));
    assert!(with64(&pg)[0].contains(r#""embedding":["#));

    // Recall works on the new vectors, through the exact path and the HNSW index (built
    // again for the new dimension), and agrees with SQLite.
    for mode in ["exact", "hnsw"] {
        let hits = json(&ok_with(
            &pg,
            &[("CORTEX_EMBED_DIM", "64"), ("CORTEX_PG_DENSE_MODE", mode)],
            &["search", "green tea", "--json", "--limit", "3"],
        ));
        assert_eq!(
            hits[0]["memory"]["content"], "Ada prefers green tea to coffee",
            "{mode}: {hits}"
        );
    }
    refused(&pg, &["search", "tea"]);
    drop_schema(&url, &schema).await;
}

#[tokio::test]
async fn a_store_written_by_the_local_model_keeps_it_when_a_gemini_key_appears() {
    let Some(model) = cortex_conformance::skip::test_model_dir() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The model where the server looks by default: ~/.cortex/models/all-MiniLM-L6-v2.
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".cortex/models")).unwrap();
    std::os::unix::fs::symlink(&model, home.join(".cortex/models/all-MiniLM-L6-v2")).unwrap();
    let db = dir.path().join("m.db");
    let env: Env = vec![
        ("HOME".into(), home.display().to_string()),
        ("CORTEX_DB_PATH".into(), db.display().to_string()),
    ];
    ok(&env, &["add", "Ada prefers green tea to coffee"]);
    let stats = json(&ok(&env, &["stats", "--json"]));
    let local_signature = stats["signature"].as_str().unwrap().to_owned();
    assert!(local_signature.contains("MiniLM"), "{stats}");

    // A Gemini key for the optional layers, pointing nowhere: any embedding call to it
    // would fail, so success means the local model answered.
    let keyed: Env = env
        .iter()
        .cloned()
        .chain([
            ("GEMINI_API_KEY".into(), "test-key".into()),
            ("CORTEX_GEMINI_BASE_URL".into(), "http://127.0.0.1:9".into()),
        ])
        .collect();
    ok(&keyed, &["add", "Bob prefers coffee, black"]);
    let hits = json(&ok(&keyed, &["search", "what does Ada drink", "--json"]));
    assert_eq!(
        hits[0]["memory"]["content"],
        "Ada prefers green tea to coffee"
    );
    let doctor = json(&ok(&keyed, &["doctor", "--json"]));
    let signature = doctor
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "signature")
        .unwrap();
    assert_eq!(signature["ok"], true, "{doctor}");

    // Choosing Gemini explicitly is a change of model: refused with both ways out.
    let explicit: Env = keyed
        .iter()
        .cloned()
        .chain([("CORTEX_EMBED_PROVIDER".into(), "gemini".into())])
        .collect();
    let err = refused(&explicit, &["add", "Carol likes rooibos"]);
    assert!(err.contains("cortex reembed"), "{err}");
}
