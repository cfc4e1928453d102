//! Re-embedding on SQLite: new vectors staged beside the current ones, then switched in
//! one transaction, so recall reads the old vectors until the very commit that replaces
//! them all.

use cortex_core::{
    error::StoreError, error::StoreResult, memory::Memory, memory::MemoryId,
    signature::EmbeddingSignature, transfer::Switch,
};
use rusqlite::{Connection, Transaction, params};

use crate::codec::{MEMORY_COLUMNS, MemoryRow, encode_id, encode_vector};
use crate::db_err;
use crate::meta::{INDEX_EPOCH_KEY, SIGNATURE_KEY};

pub(crate) fn unstaged(
    conn: &Connection,
    signature: &str,
    after: i64,
    limit: i64,
) -> StoreResult<Vec<Memory>> {
    let sql = format!(
        "SELECT {MEMORY_COLUMNS} FROM memories m
         WHERE m.seq > ?1
           AND NOT EXISTS (SELECT 1 FROM staged_embeddings s
                           WHERE s.id = m.id AND s.signature = ?2)
         ORDER BY m.seq LIMIT ?3"
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(db_err)?;
    let rows = stmt
        .query_map(params![after, signature, limit], MemoryRow::read)
        .map_err(db_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(db_err)?;
    rows.into_iter().map(MemoryRow::decode).collect()
}

pub(crate) fn stage(
    tx: &Transaction<'_>,
    signature: &EmbeddingSignature,
    vectors: &[(MemoryId, Vec<f32>)],
) -> StoreResult<()> {
    let encoded = signature.encode();
    tx.execute(
        "DELETE FROM staged_embeddings WHERE signature <> ?1",
        params![encoded],
    )
    .map_err(db_err)?;
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO staged_embeddings (id, signature, embedding) VALUES (?1, ?2, ?3)
             ON CONFLICT (id) DO UPDATE SET signature = excluded.signature,
                                            embedding = excluded.embedding",
        )
        .map_err(db_err)?;
    for (id, vector) in vectors {
        if vector.len() != signature.dimension {
            return Err(StoreError::Config(format!(
                "a staged vector of {id} has {} dimensions; {signature} has {}",
                vector.len(),
                signature.dimension
            )));
        }
        // A memory forgotten since it was read needs no vector: skipped (the write lock is
        // held, so none can go between this check and the insert).
        if memory_exists_anywhere(tx, id)? {
            insert
                .execute(params![encode_id(id), encoded, encode_vector(vector)])
                .map_err(db_err)?;
        }
    }
    Ok(())
}

pub(crate) fn switch(tx: &Transaction<'_>, signature: &EmbeddingSignature) -> StoreResult<Switch> {
    let encoded = signature.encode();
    let missing: i64 = tx
        .query_row(
            "SELECT count(*) FROM memories m
             WHERE NOT EXISTS (SELECT 1 FROM staged_embeddings s
                               WHERE s.id = m.id AND s.signature = ?1)",
            params![encoded],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    if missing > 0 {
        return Ok(Switch::Missing {
            memories: missing as u64,
        });
    }
    let memories = tx
        .execute(
            "UPDATE memories SET embedding =
                 (SELECT s.embedding FROM staged_embeddings s WHERE s.id = memories.id)",
            [],
        )
        .map_err(db_err)?;
    tx.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![SIGNATURE_KEY, encoded],
    )
    .map_err(db_err)?;
    // Every cached index and every index snapshot was built from the old vectors.
    tx.execute(
        "UPDATE user_generations SET generation = generation + 1, stamp = random()",
        [],
    )
    .map_err(db_err)?;
    tx.execute(
        "UPDATE meta SET value = lower(hex(randomblob(16))) WHERE key = ?1",
        params![INDEX_EPOCH_KEY],
    )
    .map_err(db_err)?;
    tx.execute("DELETE FROM staged_embeddings", [])
        .map_err(db_err)?;
    Ok(Switch::Switched {
        memories: memories as u64,
    })
}

fn memory_exists_anywhere(tx: &Transaction<'_>, id: &MemoryId) -> StoreResult<bool> {
    tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM memories WHERE id = ?1)",
        params![encode_id(id)],
        |r| r.get(0),
    )
    .map_err(db_err)
}
