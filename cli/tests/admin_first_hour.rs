//! What a new user meets in the first hour, held to what it should be: `cortex migrate
//! --to` refuses a destination that is not what it claims (and a store onto itself)
//! before creating anything; `cortex doctor` never calls an embedder "ok" that cannot
//! embed and never creates the store it checks; `cortex stats` needs no embedder;
//! `cortex list` is newest first by the date it shows, as the server and the web page are.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_support;

use std::collections::BTreeSet;
use std::path::Path;

use admin_support::*;
use serde_json::Value;

/// Every path under `dir`, relative to it.
fn tree(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            out.insert(path.strip_prefix(dir).unwrap().display().to_string());
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            }
        }
    }
    out
}

/// `cortex migrate --to <to>` run in `cwd`: it must fail, and its stderr.
fn migrate_refused(env: &Env, cwd: &Path, to: &str) -> String {
    let mut cmd = command(env, &[], &["migrate", "--to", to]);
    cmd.current_dir(cwd);
    let (stdout, stderr) = fails(cmd);
    assert!(!stdout.contains("verified"), "--to {to:?}: {stdout}");
    stderr
}

#[test]
fn migrate_refuses_a_destination_that_is_not_what_it_claims_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let a = sqlite_env(&db);
    ok(&a, &["add", "Ada prefers green tea"]);
    let before = tree(dir.path());

    for (to, says) in [
        ("mysql://x@y/z", "mysql"),
        ("MySQL://x@y/z", "mysql"),
        ("sqlite:///tmp/cortex-first-hour.db", "sqlite"),
        ("file:cortex.db", "file"),
        ("postgresql:/bad", "postgresql://"),
        ("postgres:bad", "postgres://"),
        ("postgres//host/db", "postgres://"),
        ("postgresql//host/db", "postgres://"),
        ("postgres://", "host"),
        ("postgres:///db", "host"),
        ("postgres://u@h:notaport/db", "PostgreSQL URL"),
        ("postgres://u:hunter2@h/db?sslmode=sometimes", "sslmode"),
    ] {
        let stderr = migrate_refused(&a, dir.path(), to);
        assert!(
            stderr.to_lowercase().contains(&says.to_lowercase()),
            "--to {to:?} says why (naming {says:?}): {stderr}"
        );
        assert!(!stderr.contains("hunter2"), "no password echoed: {stderr}");
        assert_eq!(tree(dir.path()), before, "--to {to:?} created nothing");
    }
    assert!(!Path::new("/tmp/cortex-first-hour.db").exists());

    // The source itself, however it is spelled.
    let same = [
        path(&db).to_owned(),
        "a.db".to_owned(),
        "./a.db".to_owned(),
        format!(
            "{}/../{}/a.db",
            path(dir.path()),
            dir.path().file_name().unwrap().to_str().unwrap()
        ),
    ];
    for to in &same {
        let stderr = migrate_refused(&a, dir.path(), to);
        assert!(stderr.contains("itself"), "--to {to:?}: {stderr}");
        assert_eq!(tree(dir.path()), before, "--to {to:?} created nothing");
    }
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let stderr = migrate_refused(&a, dir.path(), path(&link));
    assert!(
        stderr.contains("itself"),
        "a symlink to the source: {stderr}"
    );

    // A plain path (even one with a colon after its first component) is still a file.
    let copy = dir.path().join("sub").join("copy:1.db");
    let done = ok(&a, &["migrate", "--to", path(&copy)]);
    assert!(done.contains("verified"), "{done}");
    assert!(copy.exists());
}

#[tokio::test]
async fn migrate_refuses_the_same_postgres_store_as_its_destination() {
    let Some(url) = database_url() else { return };
    let schema = unique_schema("admin_self");
    let pg = postgres_env(&url, &schema);
    ok(&pg, &["add", "Ada prefers green tea"]);
    let dir = tempfile::tempdir().unwrap();
    // The same URL, and the same server and database spelled another way.
    let respelled = url.replacen("postgres://", "postgresql://", 1);
    for to in [url.as_str(), respelled.as_str()] {
        let stderr = migrate_refused(&pg, dir.path(), to);
        assert!(stderr.contains("itself"), "--to {to}: {stderr}");
    }
    drop_schema(&url, &schema).await;
}

fn checks_of(out: &std::process::Output) -> Vec<Value> {
    json(&String::from_utf8_lossy(&out.stdout))
        .as_array()
        .unwrap()
        .clone()
}

fn named<'a>(checks: &'a [Value], name: &str) -> &'a Value {
    checks
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {checks:?}"))
}

#[test]
fn doctor_without_any_embedder_says_so_and_creates_no_store() {
    let home = tempfile::tempdir().unwrap();
    let env: Env = vec![("HOME".into(), path(home.path()).into())];
    let out = run(&env, &["doctor", "--json"]);
    assert!(!out.status.success());
    let checks = checks_of(&out);
    let embedder = named(&checks, "embedder");
    assert_eq!(embedder["ok"], false, "{checks:?}");
    assert!(
        embedder["detail"]
            .as_str()
            .unwrap()
            .contains("no embedding provider is configured"),
        "{embedder}"
    );
    for check in checks.iter().filter(|c| c["ok"] == true) {
        let detail = check["detail"].as_str().unwrap();
        assert!(
            !detail.contains("gemini"),
            "an ok line names an embedder that cannot embed: {check}"
        );
    }
    let store = named(&checks, "store");
    assert!(
        store["detail"].as_str().unwrap().contains("no store yet"),
        "{store}"
    );
    assert!(
        tree(home.path()).is_empty(),
        "doctor created {:?}",
        tree(home.path())
    );

    // The text form says the same.
    let out = run(&env, &["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("ok") && l.contains("gemini")),
        "{text}"
    );
    assert!(tree(home.path()).is_empty());

    // A named file that does not exist is not created either.
    let db = home.path().join("deep").join("memory.db");
    let env: Env = vec![
        ("HOME".into(), path(home.path()).into()),
        ("CORTEX_DB_PATH".into(), path(&db).into()),
        ("CORTEX_EMBED_PROVIDER".into(), "fake".into()),
    ];
    let out = run(&env, &["doctor", "--json"]);
    let checks = checks_of(&out);
    assert!(out.status.success(), "{checks:?}");
    assert!(
        named(&checks, "store")["detail"]
            .as_str()
            .unwrap()
            .contains("no store yet"),
        "{checks:?}"
    );
    assert!(tree(home.path()).is_empty(), "{:?}", tree(home.path()));
}

#[test]
fn doctor_names_one_embedder_the_one_in_effect() {
    let Some(model) = cortex_conformance::skip::test_model_dir() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".cortex/models")).unwrap();
    std::os::unix::fs::symlink(&model, home.join(".cortex/models/all-MiniLM-L6-v2")).unwrap();
    let db = dir.path().join("m.db");
    let env: Env = vec![
        ("HOME".into(), path(&home).into()),
        ("CORTEX_DB_PATH".into(), path(&db).into()),
    ];
    ok(&env, &["add", "Ada prefers green tea to coffee"]);
    // A dummy key: the store keeps the local model, and doctor names only it.
    let keyed: Env = env
        .iter()
        .cloned()
        .chain([("GEMINI_API_KEY".into(), "dummy".into())])
        .collect();
    let out = run(&keyed, &["doctor", "--json"]);
    let checks = checks_of(&out);
    assert!(out.status.success(), "{checks:?}");
    for check in &checks {
        assert!(
            !check["detail"].as_str().unwrap().contains("gemini"),
            "{check}"
        );
    }
    assert!(
        named(&checks, "embedder")["detail"]
            .as_str()
            .unwrap()
            .contains("MiniLM"),
        "{checks:?}"
    );
}

/// On Postgres as on SQLite, a check creates nothing: opening the store would create its
/// schema (and install pgvector), so doctor looks first and reports "no store yet".
#[tokio::test]
async fn doctor_on_postgres_creates_no_schema() {
    let Some(url) = database_url() else { return };
    let schema = unique_schema("doctor");
    let pg = postgres_env(&url, &schema);
    let out = run(&pg, &["doctor", "--json"]);
    let checks = checks_of(&out);
    assert!(out.status.success(), "{checks:?}");
    let store = named(&checks, "store")["detail"].as_str().unwrap();
    assert!(store.contains("no store yet"), "{checks:?}");
    assert_eq!(named(&checks, "pgvector")["ok"], true, "{checks:?}");
    assert!(
        !schema_exists(&url, &schema).await,
        "doctor created schema {schema}"
    );

    ok(&pg, &["add", "Ada prefers green tea"]);
    let out = run(&pg, &["doctor", "--json"]);
    let checks = checks_of(&out);
    assert!(out.status.success(), "{checks:?}");
    let store = named(&checks, "store")["detail"].as_str().unwrap();
    assert!(store.contains("reachable"), "{checks:?}");
    let signature = named(&checks, "signature")["detail"].as_str().unwrap();
    assert!(signature.contains("matches"), "{checks:?}");
    drop_schema(&url, &schema).await;
}

#[test]
fn stats_list_and_export_need_no_embedder() {
    let dir = tempfile::tempdir().unwrap();
    let a = sqlite_env(&dir.path().join("a.db"));
    ok(&a, &["add", "Ada prefers green tea"]);
    for broken in [
        [("CORTEX_EMBED_PROVIDER", "bogus")].as_slice(),
        &[("CORTEX_EMBED_DIM", "zero")],
        &[("CORTEX_GRAPH", "1")],
    ] {
        let stats = json(&ok_with(&a, broken, &["stats", "--json"]));
        assert_eq!(stats["live"], 1, "{broken:?}: {stats}");
        let listed = json(&ok_with(&a, broken, &["list", "--json"]));
        assert_eq!(
            listed["memories"].as_array().unwrap().len(),
            1,
            "{broken:?}"
        );
        let export = ok_with(&a, broken, &["export"]);
        assert_eq!(export.lines().count(), 2, "{broken:?}: {export}");
    }
    // A bad storage or user setting is still refused.
    let (_, err) = fails(command(&a, &[("CORTEX_USER_ID", "a\u{7}b")], &["stats"]));
    assert!(err.contains("CORTEX_USER_ID"), "{err}");
}

/// `cortex add --replaces` says what replaced what: it printed `superseded <id>` with the
/// new, live memory's id, as if that one had been superseded.
#[test]
fn a_correction_says_which_memory_replaced_which() {
    let dir = tempfile::tempdir().unwrap();
    let a = sqlite_env(&dir.path().join("a.db"));
    let old = json(&ok(&a, &["add", "Ada prefers green tea", "--json"]))["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let said = ok(
        &a,
        &["add", "Ada prefers oolong now", "--replaces", &old[..8]],
    );
    let live = json(&ok(&a, &["list", "--json"]));
    let new = live["memories"][0]["memory"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(new, old);
    assert_eq!(said.trim(), format!("stored {new}, replacing {old}"));
    let said = ok(&a, &["add", "Ada likes jazz"]);
    assert!(said.trim().starts_with("stored "), "{said}");
    assert!(!said.contains("replacing"), "{said}");
}

/// The contents `cortex list` shows, page by page with `--limit` and the printed cursor.
fn listed_contents(env: &Env, limit: &str) -> Vec<String> {
    let mut contents = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = vec!["list", "--json", "--limit", limit];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let page = json(&ok(env, &args));
        for m in page["memories"].as_array().unwrap() {
            contents.push(m["memory"]["content"].as_str().unwrap().to_owned());
        }
        match &page["next_cursor"] {
            Value::Null => return contents,
            next => cursor = Some(next.as_str().map_or(next.to_string(), str::to_owned)),
        }
        assert!(contents.len() <= 10, "the walk does not end: {contents:?}");
    }
}

/// `cortex list` was oldest first while `list_memories` and the web page are newest
/// first; newest means the `created_at` it shows, so a memory dated in the past goes
/// below a newer one even when it was stored after it.
#[test]
fn list_is_newest_first_by_the_date_it_shows() {
    let dir = tempfile::tempdir().unwrap();
    let a = sqlite_env(&dir.path().join("a.db"));
    ok(
        &a,
        &["add", "Ada started at Acme", "--created-at", "2024-03-01"],
    );
    ok(&a, &["add", "Ada moved to Lisbon"]);
    ok(
        &a,
        &["add", "Ada was born in Porto", "--created-at", "1990-05-17"],
    );
    ok(
        &a,
        &[
            "add",
            "Ada studied in Coimbra",
            "--created-at",
            "2010-09-01",
        ],
    );
    let newest_first = [
        "Ada moved to Lisbon",
        "Ada started at Acme",
        "Ada studied in Coimbra",
        "Ada was born in Porto",
    ];
    assert_eq!(listed_contents(&a, "50"), newest_first);
    assert_eq!(listed_contents(&a, "1"), newest_first, "a page at a time");
    let text = ok(&a, &["list"]);
    let at = |content: &str| text.find(content).unwrap_or_else(|| panic!("{text}"));
    let positions: Vec<usize> = newest_first.iter().map(|c| at(c)).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
}
