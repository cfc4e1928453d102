//! The SQLite schema and its forward migrations.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use cortex_core::error::StoreError;

use crate::db_err;

/// Each entry migrates from version `i` to `i + 1`: `migrations/000N_*.sql`, built in.
/// Append only: a shipped step never changes.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_memories.sql"),
    include_str!("../migrations/0002_staged_vectors.sql"),
    include_str!("../migrations/0003_api_keys.sql"),
    include_str!("../migrations/0004_expiry.sql"),
    include_str!("../migrations/0005_index_snapshots.sql"),
    include_str!("../migrations/0006_list_order.sql"),
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
    if current == SCHEMA_VERSION {
        // Nothing to write, so no commit (with FULL, a commit is an fsync on every open).
        return Ok(());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_the_numbered_files_in_order() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        cortex_conformance::migrations::assert_numbered_files(&dir, MIGRATIONS);
    }
}
