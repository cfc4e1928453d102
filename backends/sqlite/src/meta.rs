//! The store's own rows beside the memories: the embedding signature (in `meta`) and each
//! user's change counter (`user_generations`). A leaf, so the writers and the store both
//! read it without importing each other.

use cortex_core::{
    error::StoreError, error::StoreResult, signature::EmbeddingSignature, store::Generation,
};
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::db_err;

pub(crate) const SIGNATURE_KEY: &str = "embedding_signature";
/// Names the file's vectors for index snapshots (migration 0005).
pub(crate) const INDEX_EPOCH_KEY: &str = "index_epoch";

pub(crate) fn bump_generation(tx: &Transaction<'_>, user: &str) -> StoreResult<Generation> {
    let generation: i64 = tx
        .query_row(
            "INSERT INTO user_generations (user_id, generation, stamp) VALUES (?1, 1, random())
             ON CONFLICT (user_id) DO UPDATE SET generation = generation + 1, stamp = random()
             RETURNING generation",
            params![user],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    Ok(Generation(generation as u64))
}

pub(crate) fn read_generation(conn: &Connection, user: &str) -> StoreResult<Generation> {
    let generation: Option<i64> = conn
        .query_row(
            "SELECT generation FROM user_generations WHERE user_id = ?1",
            params![user],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err)?;
    Ok(Generation(generation.unwrap_or(0) as u64))
}

/// The user's generation with its stamp (both 0 for a user never written).
pub(crate) fn read_stamped_generation(
    conn: &Connection,
    user: &str,
) -> StoreResult<(Generation, i64)> {
    let row: Option<(i64, i64)> = conn
        .query_row(
            "SELECT generation, stamp FROM user_generations WHERE user_id = ?1",
            params![user],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(db_err)?;
    let (generation, stamp) = row.unwrap_or((0, 0));
    Ok((Generation(generation as u64), stamp))
}

pub(crate) fn read_index_epoch(conn: &Connection) -> StoreResult<String> {
    conn.query_row(
        "SELECT value FROM meta WHERE key = ?1",
        params![INDEX_EPOCH_KEY],
        |r| r.get(0),
    )
    .map_err(db_err)
}

pub(crate) fn read_signature(conn: &Connection) -> StoreResult<Option<EmbeddingSignature>> {
    let text: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = ?1",
            params![SIGNATURE_KEY],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err)?;
    text.map(|t| {
        EmbeddingSignature::decode(&t)
            .ok_or_else(|| StoreError::Corrupt(format!("embedding signature {t:?}")))
    })
    .transpose()
}
