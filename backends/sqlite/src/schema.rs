//! The SQLite schema and its forward migrations.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use cortex_core::StoreError;

use crate::db_err;

/// Each entry migrates from version `i` to `i + 1`. Append only: a shipped step never
/// changes.
const MIGRATIONS: &[&str] = &[
    // 1: memories, meta, per-user change counters and the enrichment tables.
    r#"
    CREATE TABLE memories (
        seq        INTEGER PRIMARY KEY AUTOINCREMENT,
        id         TEXT    NOT NULL UNIQUE,
        user_id    TEXT    NOT NULL,
        content    TEXT    NOT NULL,
        kind       TEXT    NOT NULL,
        tags       TEXT    NOT NULL,
        created_at TEXT    NOT NULL,
        embedding  BLOB    NOT NULL
    );
    CREATE INDEX memories_user_seq ON memories (user_id, seq);

    CREATE TABLE user_generations (
        user_id    TEXT    PRIMARY KEY,
        generation INTEGER NOT NULL
    );

    CREATE TABLE events (
        memory_id  TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
        user_id    TEXT NOT NULL,
        event_time TEXT NOT NULL,
        actor      TEXT,
        location   TEXT,
        event_type TEXT
    );
    CREATE INDEX events_user_time ON events (user_id, event_time);
    CREATE INDEX events_memory ON events (memory_id);

    CREATE TABLE supersessions (
        old_id     TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
        new_id     TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
        user_id    TEXT NOT NULL,
        reason     TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (old_id, new_id)
    );
    CREATE INDEX supersessions_new ON supersessions (new_id);

    CREATE TABLE entities (
        id              TEXT PRIMARY KEY,
        user_id         TEXT NOT NULL,
        name            TEXT NOT NULL,
        normalized_name TEXT NOT NULL,
        entity_type     TEXT,
        aliases         TEXT NOT NULL,
        created_at      TEXT NOT NULL,
        UNIQUE (user_id, normalized_name)
    );

    CREATE TABLE entity_edges (
        seq        INTEGER PRIMARY KEY AUTOINCREMENT,
        user_id    TEXT NOT NULL,
        source     TEXT NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
        target     TEXT NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
        label      TEXT NOT NULL,
        memory_id  TEXT REFERENCES memories (id) ON DELETE CASCADE,
        created_at TEXT NOT NULL,
        UNIQUE (source, target, label)
    );
    CREATE INDEX entity_edges_target ON entity_edges (target);
    CREATE INDEX entity_edges_memory ON entity_edges (memory_id);

    CREATE TABLE memory_entities (
        memory_id TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
        entity_id TEXT NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
        user_id   TEXT NOT NULL,
        role      TEXT NOT NULL,
        PRIMARY KEY (memory_id, entity_id, role)
    );
    CREATE INDEX memory_entities_entity ON memory_entities (entity_id);
    "#,
    // 2: vectors of a re-embedding in progress, kept apart until the switch.
    r#"
    CREATE TABLE staged_embeddings (
        id        TEXT NOT NULL PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
        signature TEXT NOT NULL,
        embedding BLOB NOT NULL
    );
    "#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the file to [`SCHEMA_VERSION`]. The write lock is taken first, so two processes
/// opening a new file at once migrate it exactly once.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_err)?;
    tx.execute(
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        [],
    )
    .map_err(db_err)?;
    let current: i64 = tx
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get::<_, String>(0),
        )
        .optional()
        .map_err(db_err)?
        .map(|v| v.parse::<i64>())
        .transpose()
        .map_err(|e| StoreError::Corrupt(format!("schema_version: {e}")))?
        .unwrap_or(0);
    if current > SCHEMA_VERSION {
        return Err(StoreError::Schema(format!(
            "the database is at schema version {current}, newer than this build's \
             {SCHEMA_VERSION}; upgrade Cortex"
        )));
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.execute_batch(step)
            .map_err(|e| StoreError::Schema(format!("migration to version {}: {e}", i + 1)))?;
    }
    tx.execute(
        "INSERT INTO meta (key, value) VALUES ('schema_version', ?1)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![SCHEMA_VERSION.to_string()],
    )
    .map_err(db_err)?;
    tx.commit().map_err(db_err)
}
