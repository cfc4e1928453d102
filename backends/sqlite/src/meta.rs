//! The store's own rows beside the memories: the embedding signature (in `meta`) and each
//! user's change counter (`user_generations`). A leaf, so the writers and the store both
//! read it without importing each other.

use cortex_core::{EmbeddingSignature, Generation, StoreError, StoreResult};
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use crate::db_err;

pub(crate) const SIGNATURE_KEY: &str = "embedding_signature";

pub(crate) fn bump_generation(tx: &Transaction<'_>, user: &str) -> StoreResult<Generation> {
    let generation: i64 = tx
        .query_row(
            "INSERT INTO user_generations (user_id, generation) VALUES (?1, 1)
             ON CONFLICT (user_id) DO UPDATE SET generation = generation + 1
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
