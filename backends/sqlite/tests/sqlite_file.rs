//! What is particular to the SQLite file: where it goes, who may read it, its journal mode,
//! and its schema version.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use cortex_core::{
    engine::CortexMemory, error::StoreError, memory::MemoryId, memory::MemoryKind,
    new_memory::NewMemory, provider::LLMProvider, store::MemoryStore,
};
use cortex_providers::FakeProvider;
use cortex_sqlite::{SCHEMA_VERSION, SqliteConfig, SqliteStore, Synchronous};
use rusqlite::Connection;

#[test]
fn creates_parent_directories_and_restricts_the_file_to_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a").join("b").join("memory.db");
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.path(), path);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn uses_wal_foreign_keys_and_records_the_schema_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    drop(SqliteStore::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: String = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION.to_string());
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for table in [
        "entities",
        "entity_edges",
        "events",
        "memories",
        "memory_entities",
        "meta",
        "supersessions",
    ] {
        assert!(
            tables.iter().any(|t| t == table),
            "missing table {table}: {tables:?}"
        );
    }
}

#[test]
fn commits_are_durable_by_default_and_normal_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.synchronous().unwrap(), Synchronous::Full);
    drop(store);
    let normal = SqliteConfig {
        synchronous: Synchronous::Normal,
        ..SqliteConfig::new(&path)
    };
    let store = SqliteStore::open_with(&normal).unwrap();
    assert_eq!(store.synchronous().unwrap(), Synchronous::Normal);
    assert_eq!(Synchronous::parse(" NORMAL "), Some(Synchronous::Normal));
    assert_eq!(Synchronous::parse("full"), Some(Synchronous::Full));
    assert_eq!(Synchronous::parse("off"), None);
}

#[test]
fn reopening_does_not_migrate_twice_and_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    drop(SqliteStore::open(&path).unwrap());
    drop(SqliteStore::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
        [(SCHEMA_VERSION + 1).to_string()],
    )
    .unwrap();
    drop(conn);
    match SqliteStore::open(&path) {
        Err(StoreError::Schema(message)) => assert!(message.contains("newer"), "{message}"),
        other => panic!("expected a schema error, got {other:?}"),
    }
}

#[test]
fn an_unwritable_location_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(
        SqliteStore::open(file.join("memory.db")),
        Err(StoreError::Config(_))
    ));
}

/// A path that can never be opened is a setting to fix, not a passing fault: the agent is
/// told to fix CORTEX_DB_PATH, not that the next call tries again. Nothing is written.
#[test]
fn a_path_that_is_no_database_is_a_config_error_and_stays_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let directory = dir.path().join("a-directory");
    std::fs::create_dir(&directory).unwrap();
    let not_sqlite = dir.path().join("notes.txt");
    let text = "these are notes, not a database; ".repeat(40);
    std::fs::write(&not_sqlite, &text).unwrap();
    for path in [&directory, &not_sqlite] {
        match SqliteStore::open(path) {
            Err(StoreError::Config(message)) => {
                assert!(message.contains("CORTEX_DB_PATH"), "{message}")
            }
            other => panic!("{}: {other:?}", path.display()),
        }
    }
    assert_eq!(std::fs::read_to_string(&not_sqlite).unwrap(), text);
    assert_eq!(std::fs::read_dir(&directory).unwrap().count(), 0);
    for path in [&directory, &not_sqlite] {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_ne!(mode, 0o600, "{} was restricted", path.display());
    }
}

#[test]
fn default_path_is_under_the_home_directory() {
    let path = cortex_sqlite::default_path().unwrap();
    assert!(path.ends_with(".cortex/memory.db"), "{}", path.display());
}

#[tokio::test]
async fn vectors_are_stored_as_little_endian_f32_blobs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open(&path).unwrap());
    let fake = Arc::new(FakeProvider::new(16));
    let engine = CortexMemory::new(store, fake.clone());
    engine
        .memorize(
            "u",
            "blob layout check",
            MemoryKind::Note,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    let conn = Connection::open(&path).unwrap();
    let blob: Vec<u8> = conn
        .query_row("SELECT embedding FROM memories", [], |r| r.get(0))
        .unwrap();
    let expected: Vec<u8> = fake
        .vector("blob layout check")
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert_eq!(blob, expected);
}

/// The cached index keeps 8-bit codes, not the f32 rows: it reads back just the vectors
/// its exact re-score needs, from the file as it is now.
#[tokio::test]
async fn the_index_reads_its_candidates_vectors_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let store = SqliteStore::open(&path).unwrap();
    let d = 256;
    let fake = FakeProvider::new(d);
    let signature = fake.embedding_signature();
    let mut ids = Vec::new();
    for i in 0..50 {
        let text = format!("note number {i} about topic {}", i % 7);
        let m = NewMemory::new("u", &text, MemoryKind::Note, &[], 1 << 20).unwrap();
        ids.push(
            store
                .add(&m, &fake.vector(&text), &signature)
                .await
                .unwrap()
                .memory
                .id,
        );
    }
    let other = SqliteStore::open(&path).unwrap();
    other
        .add(
            &NewMemory::new(
                "v",
                "note number 3 about topic 3",
                MemoryKind::Note,
                &[],
                1 << 20,
            )
            .unwrap(),
            &fake.vector("note number 3 about topic 3"),
            &signature,
        )
        .await
        .unwrap();
    let index = store.build_index("u", d).await.unwrap().index;
    assert!(
        index.approx_bytes() < index.len() * d * 4,
        "{} bytes hold more than the codes",
        index.approx_bytes()
    );
    let query = fake.vector("note number 3 about topic 3");
    let top = |hits: Vec<cortex_core::index::Hit>| -> Vec<MemoryId> {
        hits.iter().map(|h| index.memory(h.row).id).collect()
    };
    let before = top(index.dense_search(&query, 3).unwrap());
    assert_eq!(before[0], ids[3]);
    // Forgotten through another handle after the index was built: read as gone, not
    // scored from a vector the index no longer has.
    other.delete("u", &ids[3]).await.unwrap().unwrap();
    let after = top(index.dense_search(&query, 3).unwrap());
    assert!(!after.contains(&ids[3]), "{after:?}");
    assert_eq!(after[..2], before[1..]);
}
