//! The SQLite schema and its forward migrations.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use cortex_core::StoreError;

use crate::db_err;

/// Each entry migrates from version `i` to `i + 1`: `migrations/000N_*.sql`, built in.
/// Append only: a shipped step never changes.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_memories.sql"),
    include_str!("../migrations/0002_staged_vectors.sql"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_the_numbered_files_in_order() {
        // A step added as a file but not listed (or listed out of order) would never run.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".sql"))
            .collect();
        files.sort();
        assert_eq!(files.len(), MIGRATIONS.len(), "{files:?}");
        for (i, name) in files.iter().enumerate() {
            assert!(name.starts_with(&format!("{:04}_", i + 1)), "{name}");
            let text = std::fs::read_to_string(dir.join(name)).unwrap();
            assert_eq!(text, MIGRATIONS[i], "{name} is not step {}", i + 1);
        }
    }
}
