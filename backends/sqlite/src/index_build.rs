//! How a user's index is built: read from its snapshot when that describes the rows as
//! they are, from its snapshot with the rows changed since applied when it is behind,
//! and from every row otherwise (then written as the next snapshot).

use std::collections::HashMap;
use std::sync::Arc;

use cortex_core::{
    error::StoreError, error::StoreResult, index::MemoryIndex, index::Snapshot,
    index::VectorSource, memory::MemoryId, store::BuiltIndex, store::Generation,
};
use rusqlite::{Connection, Rows, Transaction, params, params_from_iter};

use crate::codec::{LIVE, MEMORY_COLUMNS, MemoryRow, decode_id, decode_vector};
use crate::db_err;
use crate::meta::{read_index_epoch, read_stamped_generation};
use crate::snapshot::{SnapshotKey, Snapshots};

/// Row ids bound per statement when the rows written since a snapshot are read.
const BATCH: usize = 256;

/// Where an index came from (for the debug log, and whether to write a snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Built {
    FromSnapshot,
    CaughtUp { changed: usize },
    FromRows,
}

/// The user's live memories as an index over `source`, in one read transaction, so the
/// rows, the generation and the snapshot's key describe one state of the file.
pub(crate) fn build_index(
    conn: &mut Connection,
    user: &str,
    dimension: usize,
    source: Arc<dyn VectorSource>,
    snapshots: Option<&Snapshots>,
) -> StoreResult<BuiltIndex> {
    let tx = conn.transaction().map_err(db_err)?;
    let Some(snapshots) = snapshots else {
        let (generation, _) = read_stamped_generation(&tx, user)?;
        let index = from_rows(&tx, user, dimension, source)?;
        tx.commit().map_err(db_err)?;
        return Ok(BuiltIndex { index, generation });
    };
    let key = current_key(&tx, user, dimension)?;
    let generation = Generation(key.generation);
    let started = std::time::Instant::now();
    let (index, from) = match read_base(snapshots, &key, source.clone()) {
        Some((base, index)) if base.current(&key) => (index, Built::FromSnapshot),
        Some((_, mut index)) => {
            let changed = catch_up(&tx, user, &mut index)?;
            (index, Built::CaughtUp { changed })
        }
        None => (from_rows(&tx, user, dimension, source)?, Built::FromRows),
    };
    tx.commit().map_err(db_err)?;
    tracing::debug!(
        memories = index.len(),
        ?from,
        ms = started.elapsed().as_secs_f64() * 1e3,
        "index built"
    );
    // Any snapshot that was not current is replaced, so the next opening reads it as is
    // (even when no memory changed: its generation did).
    let encoded = key.encode();
    match from {
        Built::FromSnapshot => snapshots.read_as_current(user, dimension, encoded),
        _ => snapshots.write(user, dimension, &encoded, &index.to_snapshot(&encoded)),
    }
    Ok(BuiltIndex { index, generation })
}

/// What a snapshot of `user`'s index at `dimension` describing the rows as they are now
/// is keyed by.
pub(crate) fn current_key(
    conn: &Connection,
    user: &str,
    dimension: usize,
) -> StoreResult<SnapshotKey> {
    let (generation, stamp) = read_stamped_generation(conn, user)?;
    Ok(SnapshotKey {
        epoch: read_index_epoch(conn)?,
        user: user.to_owned(),
        dimension,
        generation: generation.0,
        stamp,
    })
}

/// Writes `bytes`, a snapshot keyed by `key`, if `key` still describes the rows. Called
/// with the store's connection held, so no write of this process comes between the check
/// and the file (a forget's removal of the user's snapshots comes after, as it must).
pub(crate) fn write_if_current(
    conn: &Connection,
    snapshots: &Snapshots,
    key: &SnapshotKey,
    bytes: &[u8],
) -> StoreResult<()> {
    if current_key(conn, &key.user, key.dimension)? == *key {
        snapshots.write(&key.user, key.dimension, &key.encode(), bytes);
    }
    Ok(())
}

/// The user's snapshot when it holds this file's vectors of this user's index at this
/// dimension, current or not.
fn read_base(
    snapshots: &Snapshots,
    key: &SnapshotKey,
    source: Arc<dyn VectorSource>,
) -> Option<(SnapshotKey, MemoryIndex)> {
    let bytes = snapshots.read(&key.user, key.dimension)?;
    let Snapshot {
        key: written,
        index,
    } = MemoryIndex::from_snapshot(bytes, source)
        .map_err(|e| tracing::warn!(error = %e, "an index snapshot is not read"))
        .ok()?;
    let written = SnapshotKey::decode(&written)?;
    written.same_index(key).then_some((written, index))
}

/// Every live memory of `user`, read and indexed in sequence order.
fn from_rows(
    tx: &Transaction<'_>,
    user: &str,
    dimension: usize,
    source: Arc<dyn VectorSource>,
) -> StoreResult<MemoryIndex> {
    let sql = format!(
        "SELECT {MEMORY_COLUMNS}, m.embedding FROM memories m
         WHERE m.user_id = ?1 AND {LIVE}
         ORDER BY m.seq"
    );
    let mut stmt = tx.prepare_cached(&sql).map_err(db_err)?;
    let mut index = MemoryIndex::over_source(dimension, source);
    insert_rows(stmt.query(params![user]).map_err(db_err)?, &mut index)?;
    index.shrink_to_fit();
    Ok(index)
}

/// Brings a snapshot's index to the rows as they are: memories no longer live (forgotten,
/// corrected) leave it, memories live now and not in it (written since, or live again
/// because their correction was forgotten) join it. Rows never change in place (only a
/// re-embed changes vectors, and it gives the file a new epoch), so a memory whose row id
/// and id are still live is still what the snapshot holds. How many memories changed.
fn catch_up(tx: &Transaction<'_>, user: &str, index: &mut MemoryIndex) -> StoreResult<usize> {
    let sql = format!("SELECT m.seq, m.id FROM memories m WHERE m.user_id = ?1 AND {LIVE}");
    let mut stmt = tx.prepare_cached(&sql).map_err(db_err)?;
    let mut live: HashMap<i64, MemoryId> = HashMap::new();
    let mut rows = stmt.query(params![user]).map_err(db_err)?;
    while let Some(row) = rows.next().map_err(db_err)? {
        let seq: i64 = row.get(0).map_err(db_err)?;
        let id = row.get_ref(1).map_err(db_err)?;
        let id = id
            .as_str()
            .map_err(|e| StoreError::Corrupt(format!("id of row {seq}: {e}")))?;
        live.insert(seq, decode_id(id)?);
    }
    let gone: Vec<MemoryId> = (0..index.len())
        .map(|row| index.memory(row))
        .filter(|m| live.get(&m.seq) != Some(&m.id))
        .map(|m| m.id)
        .collect();
    for id in &gone {
        index.remove(id);
    }
    let mut added: Vec<i64> = live
        .iter()
        .filter(|(_, id)| !index.contains(id))
        .map(|(&seq, _)| seq)
        .collect();
    added.sort_unstable();
    let marks = vec!["?"; BATCH].join(", ");
    let sql = format!(
        "SELECT {MEMORY_COLUMNS}, m.embedding FROM memories m
         WHERE m.user_id = ? AND m.seq IN ({marks})
         ORDER BY m.seq"
    );
    let mut stmt = tx.prepare_cached(&sql).map_err(db_err)?;
    for batch in added.chunks(BATCH) {
        // A short batch is padded with a row id no row has.
        let seqs = batch.iter().copied().chain(std::iter::repeat(-1));
        let values = std::iter::once(rusqlite::types::Value::from(user.to_owned()))
            .chain(seqs.take(BATCH).map(rusqlite::types::Value::from));
        insert_rows(stmt.query(params_from_iter(values)).map_err(db_err)?, index)?;
    }
    let changed = gone.len() + added.len();
    if changed > 0 {
        index.shrink_to_fit();
    }
    Ok(changed)
}

/// Indexes each row (memory columns and its embedding).
fn insert_rows(mut rows: Rows<'_>, index: &mut MemoryIndex) -> StoreResult<()> {
    while let Some(row) = rows.next().map_err(db_err)? {
        let memory = MemoryRow::read(row).map_err(db_err)?.decode()?;
        let blob = row.get_ref("embedding").map_err(db_err)?;
        let bytes = blob
            .as_blob()
            .map_err(|e| StoreError::Corrupt(format!("embedding of {}: {e}", memory.id)))?;
        let vector = decode_vector(bytes)?;
        let id = memory.id;
        index
            .insert(memory, &vector)
            .map_err(|e| StoreError::Corrupt(format!("embedding of {id}: {e}")))?;
    }
    Ok(())
}
