//! A kill -9 in the middle of `cortex import`, `migrate` and `reembed`, then the same
//! command again: the counts come out exact, nothing doubled, and until the re-embedding's
//! switch the store keeps answering with its old vectors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_support;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use admin_support::*;

const MEMORIES: usize = 2_000;
const EVENTS: usize = 200;

/// An export file of `MEMORIES` memories without vectors and `EVENTS` events.
fn write_export(path: &Path) -> Vec<String> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(
        file,
        r#"{{"type":"header","format":"cortex-export","version":1,"exported_at":"2024-01-01T00:00:00Z","vectors":false,"users":["ada"]}}"#
    )
    .unwrap();
    let mut ids = Vec::new();
    for i in 0..MEMORIES {
        let id = uuid::Uuid::new_v4().to_string();
        writeln!(
            file,
            r#"{{"type":"memory","id":"{id}","user_id":"ada","content":"memory {i}: the garden needs water on day {}","kind":"note","tags":["t{}"],"created_at":"2024-01-01T00:00:00Z"}}"#,
            i % 31,
            i % 7
        )
        .unwrap();
        ids.push(id);
    }
    for (i, id) in ids.iter().take(EVENTS).enumerate() {
        writeln!(
            file,
            r#"{{"type":"event","user_id":"ada","memory_id":"{id}","event_time":"2024-02-{:02}T00:00:00Z","actor":null,"location":null,"event_type":"visit"}}"#,
            i % 28 + 1
        )
        .unwrap();
    }
    file.flush().unwrap();
    ids
}

/// Starts `args`, waits until `progress()` reaches `at`, kills it with SIGKILL, and
/// returns what `progress()` read after the kill. Fails if the command ended first.
fn kill_midway(
    env: &Env,
    extra: &[(&str, &str)],
    args: &[&str],
    at: i64,
    progress: impl Fn() -> i64,
) -> i64 {
    let mut child = command(env, extra, args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while progress() < at {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{args:?} ended ({status}) before it could be killed");
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{args:?} made no progress"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    progress()
}

fn scalar(db: &Path, sql: &str) -> String {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(sql, [], |r| r.get::<_, rusqlite::types::Value>(0))
        .map(|v| match v {
            rusqlite::types::Value::Integer(n) => n.to_string(),
            rusqlite::types::Value::Text(t) => t,
            other => format!("{other:?}"),
        })
        .unwrap()
}

fn assert_exact(db: &Path) {
    assert_eq!(count_rows(db, "memories"), Some(MEMORIES as i64));
    assert_eq!(
        scalar(db, "SELECT count(DISTINCT id) FROM memories"),
        MEMORIES.to_string()
    );
    assert_eq!(count_rows(db, "events"), Some(EVENTS as i64));
    assert_eq!(scalar(db, "PRAGMA integrity_check"), "ok");
}

#[test]
fn kill_9_in_import_migrate_and_reembed_then_again_ends_exact() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.jsonl");
    write_export(&file);

    // Import, killed part-way, then again.
    let b_path = dir.path().join("b.db");
    let b = sqlite_env(&b_path);
    let at_kill = kill_midway(&b, &[], &["import", path(&file)], 200, || {
        count_rows(&b_path, "memories").unwrap_or(0)
    });
    assert!(at_kill < MEMORIES as i64, "killed mid-way: {at_kill}");
    ok(&b, &["import", path(&file)]);
    assert_exact(&b_path);
    let imported = export_lines(&b, true);

    // Migrate into a new file, killed part-way, then again (it verifies itself).
    let c_path = dir.path().join("c.db");
    let at_kill = kill_midway(&b, &[], &["migrate", "--to", path(&c_path)], 200, || {
        count_rows(&c_path, "memories").unwrap_or(0)
    });
    assert!(at_kill < MEMORIES as i64, "killed mid-way: {at_kill}");
    ok(&b, &["migrate", "--to", path(&c_path)]);
    assert_exact(&c_path);
    let c = sqlite_env(&c_path);
    assert_eq!(export_lines(&c, true), imported);

    // Re-embed to 64 dimensions, one memory a batch so the kill lands mid-way.
    let new_model = [("CORTEX_EMBED_DIM", "64")];
    let staged = || count_rows(&c_path, "staged_embeddings").unwrap_or(0);
    let at_kill = kill_midway(
        &c,
        &new_model,
        &["reembed", "--yes", "--batch", "1"],
        100,
        staged,
    );
    assert!(at_kill < MEMORIES as i64, "killed mid-way: {at_kill}");
    // Before the switch: the old signature, the old vectors, recall as before.
    let signature = "SELECT value FROM meta WHERE key = 'embedding_signature'";
    assert_eq!(scalar(&c_path, signature), "fake-hash@256");
    assert_eq!(export_lines(&c, true), imported);
    let hits = json(&ok(&c, &["search", "garden water day 3", "--json"]));
    assert!(!hits.as_array().unwrap().is_empty());

    let done = json(&ok_with(&c, &new_model, &["reembed", "--yes", "--json"]));
    assert_eq!(done["outcome"]["switched"], MEMORIES as u64, "{done}");
    let embedded = done["outcome"]["embedded"].as_u64().unwrap();
    assert_eq!(
        embedded,
        MEMORIES as u64 - at_kill as u64,
        "resumed, not restarted: {done}"
    );
    assert_eq!(scalar(&c_path, signature), "fake-hash@64");
    assert_eq!(count_rows(&c_path, "staged_embeddings"), Some(0));
    assert_eq!(
        scalar(
            &c_path,
            "SELECT count(*) FROM memories WHERE length(embedding) <> 256"
        ),
        "0"
    );
    assert_exact(&c_path);

    // The vectors are the new model's own: the same as importing the records afresh.
    let d_path = dir.path().join("d.db");
    let mut d = sqlite_env(&d_path);
    d.push(("CORTEX_EMBED_DIM".into(), "64".into()));
    let mut c64 = c.clone();
    c64.push(("CORTEX_EMBED_DIM".into(), "64".into()));
    ok(&d, &["import", path(&file)]);
    assert_eq!(export_lines(&d, true), export_lines(&c64, true));
    // The old model is now refused with both ways out.
    let old = run(&c, &["search", "garden"]);
    let err = String::from_utf8_lossy(&old.stderr);
    assert!(
        !old.status.success() && err.contains("cortex reembed"),
        "{err}"
    );
}
