//! The schema: names, the pgvector extension and versioned forward migrations.

use cortex_core::error::StoreError;
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::names::{Names, quote_ident, validate_schema_name};
use crate::pg_err;
use crate::sql::get;
use crate::tables::Meta;

/// Each entry migrates from version `i` to `i + 1`: `migrations/000N_*.sql`, built in.
/// Append only: a shipped step never changes. `{s}` stands for the quoted schema name.
///
/// The embedding column is `vector` without a dimension: the dimension is only known at the
/// first memorize (the signature is recorded lazily, inside that write's transaction), and
/// that write adds a CHECK constraint fixing it (see `meta::record_signature`). An HNSW
/// index, which needs a fixed dimension, is an expression index on `embedding::vector(D)`
/// built once the dimension is known (see `dense`).
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_memories.sql"),
    include_str!("../migrations/0002_term_statistics.sql"),
    include_str!("../migrations/0003_unit_dot_loop.sql"),
    include_str!("../migrations/0004_impact_order.sql"),
    include_str!("../migrations/0005_staged_vectors.sql"),
    include_str!("../migrations/0006_api_keys.sql"),
    include_str!("../migrations/0007_filter_indexes.sql"),
    include_str!("../migrations/0008_expiry.sql"),
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Oldest pgvector with `hnsw.iterative_scan`.
const ITERATIVE_SCAN_VERSION: (u32, u32) = (0, 8);

/// What the migration learnt about the server.
#[derive(Debug, Clone)]
pub(crate) struct ServerInfo {
    /// Where the `vector` type lives; it goes on every connection's search_path.
    pub extension_schema: String,
    /// Whether pgvector knows `hnsw.iterative_scan` (0.8.0 and later).
    pub iterative_scan: bool,
}

/// A stable 64-bit key for `pg_advisory_xact_lock` (FNV-1a).
pub(crate) fn lock_key(parts: &[&str]) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain([0u8]) {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash as i64
}

/// Brings the schema to [`SCHEMA_VERSION`] under an advisory lock, so two processes
/// starting at once migrate it exactly once; makes sure pgvector is installed.
pub(crate) async fn migrate(client: &mut Client, names: &Names) -> Result<ServerInfo, StoreError> {
    let tx = client.transaction().await.map_err(pg_err)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&lock_key(&["cortex-migrate", names.schema()])],
    )
    .await
    .map_err(pg_err)?;
    let info = ensure_extension(&tx).await?;
    let exists: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&names.schema()],
        )
        .await
        .map_err(pg_err)
        .and_then(|row| get(&row, 0))?;
    if !exists {
        tx.batch_execute(&format!("CREATE SCHEMA {}", quote_ident(names.schema())))
            .await
            .map_err(|e| StoreError::Schema(format!("cannot create schema: {e}")))?;
    }
    tx.batch_execute(&format!(
        "SET LOCAL search_path = {}, {};
         CREATE TABLE IF NOT EXISTS {} (key text PRIMARY KEY, value text NOT NULL);",
        quote_ident(names.schema()),
        quote_ident(&info.extension_schema),
        names.q(Meta::Table),
    ))
    .await
    .map_err(|e| StoreError::Schema(e.to_string()))?;
    let current: Option<String> = tx
        .query_opt(
            &format!(
                "SELECT value FROM {} WHERE key = 'schema_version'",
                names.q(Meta::Table)
            ),
            &[],
        )
        .await
        .map_err(pg_err)?
        .map(|r| get(&r, 0))
        .transpose()?;
    let current = current
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
    let quoted = quote_ident(names.schema());
    for (i, step) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.batch_execute(&step.replace("{s}", &quoted))
            .await
            .map_err(|e| StoreError::Schema(format!("migration to version {}: {e}", i + 1)))?;
    }
    tx.execute(
        &format!(
            "INSERT INTO {} (key, value) VALUES ('schema_version', $1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            names.q(Meta::Table)
        ),
        &[&SCHEMA_VERSION.to_string()],
    )
    .await
    .map_err(pg_err)?;
    // Postings written by another analyser are re-derived before anyone searches them.
    crate::reanalyze::reanalyze(&tx, names).await?;
    tx.commit().await.map_err(pg_err)?;
    Ok(info)
}

async fn extension_info(
    tx: &tokio_postgres::Transaction<'_>,
) -> Result<Option<(String, String)>, StoreError> {
    tx.query_opt(
        "SELECT n.nspname::text, e.extversion FROM pg_extension e
         JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'",
        &[],
    )
    .await
    .map_err(pg_err)?
    .map(|r| Ok((get(&r, "nspname")?, get(&r, "extversion")?)))
    .transpose()
}

async fn ensure_extension(tx: &tokio_postgres::Transaction<'_>) -> Result<ServerInfo, StoreError> {
    let mut found = extension_info(tx).await?;
    if found.is_none() {
        // Stores of different schemas opening at once on a fresh database would race to
        // create the extension (one fails on pg_extension's unique name): the creation is
        // serialised database-wide, and whoever waited finds it made.
        tx.execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&lock_key(&["cortex-extension"])],
        )
        .await
        .map_err(pg_err)?;
        found = extension_info(tx).await?;
    }
    let found = match found {
        Some(found) => found,
        None => {
            let available: bool = tx
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')",
                    &[],
                )
                .await
                .map_err(pg_err)
                .and_then(|row| get(&row, 0))?;
            if !available {
                return Err(StoreError::Schema(
                    "the pgvector extension is not installed on this PostgreSQL server. Install \
                     pgvector 0.8 or later into it (on Debian or Ubuntu, as root: \
                     scripts/install-pgvector.sh from the Cortex repository builds it for the \
                     running server; elsewhere the distribution's package, such as \
                     postgresql-17-pgvector), or run PostgreSQL from an image that has it \
                     (pgvector/pgvector:pg17, or cortex-pgvector:local from \
                     scripts/build-images.sh where no registry serves images)"
                        .into(),
                ));
            }
            if let Err(e) = tx
                .batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
                .await
            {
                return Err(match e.code() {
                    Some(code) if *code == SqlState::INSUFFICIENT_PRIVILEGE => StoreError::Schema(
                        "the pgvector extension is not enabled in this database and this \
                             role may not enable it; a superuser must run \
                             `CREATE EXTENSION vector;` in it once"
                            .into(),
                    ),
                    _ => StoreError::Schema(format!(
                        "CREATE EXTENSION vector: {}",
                        crate::error::classify(&e)
                    )),
                });
            }
            extension_info(tx).await?.ok_or_else(|| {
                StoreError::Schema("CREATE EXTENSION vector left no extension".into())
            })?
        }
    };
    let (extension_schema, version) = found;
    if validate_schema_name(&extension_schema).is_err() && extension_schema != "public" {
        return Err(StoreError::Schema(format!(
            "pgvector lives in schema {extension_schema:?}, whose name Cortex cannot put on a \
             search_path; move it with ALTER EXTENSION vector SET SCHEMA public"
        )));
    }
    Ok(ServerInfo {
        extension_schema,
        iterative_scan: parse_version(&version) >= ITERATIVE_SCAN_VERSION,
    })
}

fn parse_version(v: &str) -> (u32, u32) {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_the_numbered_files_in_order() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        cortex_conformance::migrations::assert_numbered_files(&dir, MIGRATIONS);
    }

    #[test]
    fn versions_and_lock_keys() {
        assert!(parse_version("0.8.0") >= ITERATIVE_SCAN_VERSION);
        assert!(parse_version("0.7.4") < ITERATIVE_SCAN_VERSION);
        assert_ne!(lock_key(&["a", "bc"]), lock_key(&["ab", "c"]));
    }
}
