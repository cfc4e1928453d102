//! The writes of memories and supersessions, each inside a caller's transaction: the
//! store methods run one per transaction, an import batch runs many in one. The other
//! records' writes are the core's, over [`SqliteRecords`].

use cortex_core::memory::Supersession;
use cortex_core::record_tx::{self, RecordTx, existing_id, require_memory, run_ready};
use cortex_core::{
    error::StoreError, error::StoreResult, new_memory::NewMemory, signature::EmbeddingSignature,
    store::Generation, transfer::Imported,
};
use rusqlite::{Transaction, params};

use crate::codec::{encode_id, encode_list, encode_time, encode_vector};
use crate::db_err;
use crate::meta::{SIGNATURE_KEY, bump_generation, read_signature};
use crate::records::{BACKEND, SqliteRecords};

/// Refuses a signature other than the store's; the first write records its own.
pub(crate) fn check_signature(
    tx: &Transaction<'_>,
    signature: &EmbeddingSignature,
) -> StoreResult<()> {
    match read_signature(tx)? {
        Some(stored) if &stored != signature => Err(StoreError::SignatureMismatch {
            stored,
            got: signature.clone(),
        }),
        Some(_) => Ok(()),
        None => {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)",
                params![SIGNATURE_KEY, signature.encode()],
            )
            .map_err(db_err)?;
            Ok(())
        }
    }
}

/// Inserts a memory (signature already checked) and returns its sequence.
pub(crate) fn insert_memory(
    tx: &Transaction<'_>,
    memory: &NewMemory,
    embedding: &[f32],
) -> StoreResult<i64> {
    tx.query_row(
        "INSERT INTO memories (id, user_id, content, kind, tags, created_at, embedding, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         RETURNING seq",
        params![
            encode_id(&memory.id),
            memory.user_id,
            memory.content,
            memory.kind.as_str(),
            encode_list(&memory.tags),
            encode_time(&memory.created_at),
            encode_vector(embedding),
            memory.expires_at.as_ref().map(encode_time),
        ],
        |r| r.get(0),
    )
    .map_err(db_err)
}

/// A memory with its caller's records and supersessions, as `MemoryStore::add` writes it
/// (its records checked by the caller, before the transaction): its sequence and the
/// user's new generation.
pub(crate) fn add_memory(
    tx: &Transaction<'_>,
    memory: &NewMemory,
    embedding: &[f32],
    signature: &EmbeddingSignature,
) -> StoreResult<(i64, Generation)> {
    check_signature(tx, signature)?;
    let seq = insert_memory(tx, memory, embedding)?;
    // Before the supersessions: a correction refused below takes its records back.
    if let Some(records) = &memory.records {
        let mut records_tx = SqliteRecords(tx);
        run_ready(
            BACKEND,
            record_tx::record_extraction(&mut records_tx, &memory.user_id, records),
        )?;
    }
    for s in &memory.supersedes {
        // Inside the write: two corrections of one memory cannot both commit.
        let superseded: bool = tx
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM supersessions
                                WHERE old_id = ?1 AND user_id = ?2)",
                params![encode_id(&s.old_id), memory.user_id],
                |r| r.get(0),
            )
            .map_err(db_err)?;
        if superseded {
            return Err(StoreError::AlreadySuperseded(s.old_id));
        }
        insert_supersession(tx, &memory.user_id, s)?;
    }
    let generation = bump_generation(tx, &memory.user_id)?;
    Ok((seq, generation))
}

/// A memory with its own id, unless that id is already the user's (or another user's:
/// refused), written as [`add_memory`] writes it.
pub(crate) fn import_memory(
    tx: &Transaction<'_>,
    memory: &NewMemory,
    embedding: &[f32],
    signature: &EmbeddingSignature,
) -> StoreResult<Imported> {
    let owner = run_ready(BACKEND, SqliteRecords(tx).memory_owner(&memory.id))?;
    if let Some(done) = existing_id("memory", &memory.id, owner.as_deref(), &memory.user_id)? {
        return Ok(done);
    }
    memory.check_records()?;
    add_memory(tx, memory, embedding, signature)?;
    Ok(Imported::Written)
}

/// Records a supersession; `false` when the pair was there already.
pub(crate) fn insert_supersession(
    tx: &Transaction<'_>,
    user: &str,
    s: &Supersession,
) -> StoreResult<bool> {
    run_ready(BACKEND, async {
        let mut records = SqliteRecords(tx);
        require_memory(&mut records, user, &s.old_id).await?;
        require_memory(&mut records, user, &s.new_id).await
    })?;
    let inserted = tx
        .execute(
            "INSERT INTO supersessions (old_id, new_id, user_id, reason, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (old_id, new_id) DO NOTHING",
            params![
                encode_id(&s.old_id),
                encode_id(&s.new_id),
                user,
                s.reason,
                encode_time(&s.created_at),
            ],
        )
        .map_err(db_err)?;
    Ok(inserted > 0)
}

pub(crate) fn import_supersession(
    tx: &Transaction<'_>,
    user: &str,
    s: &Supersession,
) -> StoreResult<Imported> {
    match insert_supersession(tx, user, s)? {
        true => {
            bump_generation(tx, user)?;
            Ok(Imported::Written)
        }
        false => Ok(Imported::Present),
    }
}
