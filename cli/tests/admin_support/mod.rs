//! What the admin tests share: running the binary with a clean environment, seeding a
//! store with every record type, reading exports back, and the Postgres test database.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use cortex_app::{ServerConfig, build_engine};
use cortex_core::memory::Supersession;
use cortex_core::records::{EntityEdge, EntityRole, EntityUpsert, Event};
use cortex_core::{enrichment_store::EnrichmentStore, memory::MemoryId, memory::MemoryKind};
use serde_json::Value;

/// A command's environment: nothing else reaches the binary.
pub type Env = Vec<(String, String)>;

pub fn sqlite_env(db: &Path) -> Env {
    vec![
        ("CORTEX_DB_PATH".into(), db.display().to_string()),
        ("CORTEX_EMBED_PROVIDER".into(), "fake".into()),
        ("CORTEX_USER_ID".into(), "ada".into()),
    ]
}

pub fn postgres_env(url: &str, schema: &str) -> Env {
    vec![
        ("CORTEX_DATABASE_URL".into(), url.into()),
        ("CORTEX_PG_SCHEMA".into(), schema.into()),
        ("CORTEX_PG_DENSE_MODE".into(), "exact".into()),
        ("CORTEX_EMBED_PROVIDER".into(), "fake".into()),
        ("CORTEX_USER_ID".into(), "ada".into()),
    ]
}

pub fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub fn command(env: &Env, extra: &[(&str, &str)], args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cortex"));
    cmd.env_clear().args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd
}

pub fn run(env: &Env, args: &[&str]) -> Output {
    command(env, &[], args).output().unwrap()
}

/// `cortex <args>` with `stdin` on its standard input, run in `cwd` when given.
pub fn run_in(env: &Env, cwd: Option<&Path>, args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = command(env, &[], args);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
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

pub fn ok_with(env: &Env, extra: &[(&str, &str)], args: &[&str]) -> String {
    let out = command(env, extra, args).output().unwrap();
    assert!(
        out.status.success(),
        "cortex {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn ok(env: &Env, args: &[&str]) -> String {
    ok_with(env, &[], args)
}

/// Runs `cmd`, which must fail; returns its stdout and its stderr, which says why.
pub fn fails(mut cmd: Command) -> (String, String) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{cmd:?} succeeded: {stdout}{stderr}");
    (stdout, stderr)
}

/// `cortex <args>`, which must fail; its stderr.
pub fn refused(env: &Env, args: &[&str]) -> String {
    fails(command(env, &[], args)).1
}

pub fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Every line of an export of every user, without the header (its time differs).
pub fn export_lines(env: &Env, vectors: bool) -> Vec<String> {
    let mut args = vec!["export", "--all-users"];
    if vectors {
        args.push("--with-vectors");
    }
    let text = ok(env, &args);
    let mut lines = text.lines();
    let header = json(lines.next().unwrap());
    assert_eq!(header["format"], "cortex-export");
    lines.map(str::to_owned).collect()
}

pub fn memory_lines(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.starts_with(r#"{"type":"memory""#))
        .cloned()
        .collect()
}

pub fn sorted(lines: &[String]) -> Vec<String> {
    let mut out = lines.to_vec();
    out.sort();
    out
}

/// The distinct line types present.
pub fn kinds(lines: &[String]) -> Vec<String> {
    let mut kinds: Vec<String> = lines
        .iter()
        .map(|l| json(l)["type"].as_str().unwrap().to_owned())
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

/// Rows of `table` in a SQLite file, `None` while the file or table does not exist yet.
pub fn count_rows(db: &Path, table: &str) -> Option<i64> {
    let conn = rusqlite::Connection::open_with_flags(
        db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .ok()?;
    conn.busy_timeout(std::time::Duration::from_secs(5)).ok()?;
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
        .ok()
}

/// The ids a seeded store is asked about.
#[derive(Debug, Clone, Copy)]
pub struct Seeded {
    /// Superseded by `new`.
    pub old: MemoryId,
    pub new: MemoryId,
}

/// Two users; memories of several kinds, tags and dates; a supersession; events; entities
/// with an alias, an edge and links: every record type an export carries.
pub async fn seed(env: &Env) -> Seeded {
    let map: HashMap<String, String> = env.iter().cloned().collect();
    let config = ServerConfig::from_lookup(&|name| map.get(name).cloned()).unwrap();
    let engine = build_engine(&config).await.unwrap();
    let memory = &engine.memory;
    let mut ids = Vec::new();
    for (user, text, kind, tags, at) in [
        (
            "ada",
            "Ada lives in Porto",
            MemoryKind::Fact,
            vec!["home"],
            Some("2020-01-05T10:00:00Z"),
        ),
        (
            "ada",
            "Ada moved to Lisbon in 2023",
            MemoryKind::Event,
            vec!["home", "travel"],
            None,
        ),
        (
            "ada",
            "Ada prefers green tea to coffee",
            MemoryKind::Preference,
            vec![],
            None,
        ),
        (
            "ada",
            "The report deadline is Friday",
            MemoryKind::Instruction,
            vec!["work"],
            None,
        ),
        (
            "ada",
            "Decided to buy new gardening tools",
            MemoryKind::Decision,
            vec![],
            None,
        ),
        (
            "ada",
            "Ada's sister Bea visits in June",
            MemoryKind::Note,
            vec![],
            None,
        ),
        (
            "bob",
            "Bob prefers coffee, black",
            MemoryKind::Preference,
            vec![],
            None,
        ),
        (
            "bob",
            "Bob's gardening tools are in the shed",
            MemoryKind::Fact,
            vec!["home"],
            None,
        ),
    ] {
        let tags: Vec<String> = tags.into_iter().map(str::to_owned).collect();
        let at = at.map(|t| t.parse().unwrap());
        let done = memory
            .memorize(
                user,
                text,
                kind,
                &tags,
                &cortex_core::engine::MemorizeOptions {
                    created_at: at,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        ids.push(done.memory.id);
    }
    // The layers' records are written straight to the store, as an extraction would.
    let store = cortex_app::engine::open_store(&config.storage)
        .await
        .unwrap();
    let now = cortex_core::memory::now();
    store
        .supersede(
            "ada",
            &Supersession {
                old_id: ids[0],
                new_id: ids[1],
                reason: "moved".into(),
                created_at: now,
            },
        )
        .await
        .unwrap();
    for (id, at, actor) in [
        (ids[1], "2023-06-01T00:00:00Z", Some("Ada")),
        (ids[5], "2024-06-10T12:00:00Z", Some("Bea")),
        (ids[5], "2024-06-10T12:00:00Z", None),
    ] {
        store
            .add_event(
                "ada",
                &Event {
                    memory_id: id,
                    event_time: at.parse().unwrap(),
                    actor: actor.map(str::to_owned),
                    location: Some("Lisbon".into()),
                    event_type: Some("visit".into()),
                },
            )
            .await
            .unwrap();
    }
    let ada = store
        .upsert_entity(
            "ada",
            &EntityUpsert {
                name: "Ada".into(),
                entity_type: Some("person".into()),
                aliases: vec!["Ada L.".into()],
            },
        )
        .await
        .unwrap();
    let bea = store
        .upsert_entity(
            "ada",
            &EntityUpsert {
                name: "Bea".into(),
                entity_type: None,
                aliases: vec![],
            },
        )
        .await
        .unwrap();
    store
        .add_edge(
            "ada",
            &EntityEdge {
                source: ada.id,
                target: bea.id,
                label: "sister of".into(),
                memory_id: Some(ids[5]),
                created_at: now,
            },
        )
        .await
        .unwrap();
    for (id, entity, role) in [
        (ids[5], ada.id, EntityRole::Subject),
        (ids[5], bea.id, EntityRole::Mention),
        (ids[1], ada.id, EntityRole::Subject),
    ] {
        store.link_entity("ada", &id, &entity, role).await.unwrap();
    }
    Seeded {
        old: ids[0],
        new: ids[1],
    }
}

/// The test database, or `None` after the workspace's skip policy ran (fails under CI).
pub fn database_url() -> Option<String> {
    cortex_conformance::skip::test_database_url()
}

pub fn unique_schema(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

/// Whether the test database has a schema of that name.
pub async fn schema_exists(url: &str, schema: &str) -> bool {
    default_store(url)
        .await
        .pool()
        .get()
        .await
        .unwrap()
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&schema],
        )
        .await
        .unwrap()
        .get(0)
}

/// A store on the test database's default schema, which the tests share, for plain SQL.
async fn default_store(url: &str) -> cortex_postgres::PostgresStore {
    let config = cortex_postgres::PostgresConfig::new(url);
    cortex_postgres::PostgresStore::connect(config)
        .await
        .unwrap()
}

pub async fn drop_schema(url: &str, schema: &str) {
    default_store(url)
        .await
        .pool()
        .get()
        .await
        .unwrap()
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .unwrap();
}
