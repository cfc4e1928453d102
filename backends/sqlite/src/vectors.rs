//! The full vectors an index over this store reads back for its exact re-score.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cortex_core::{error::StoreError, index::VectorSource, memory::Memory};
use rusqlite::{Connection, OpenFlags};

use crate::codec::{decode_vector, encode_id};
use crate::db_err;

/// A read-only connection of its own, shared by every user's index: in WAL mode it reads
/// beside the writer instead of queueing behind a commit on the store's connection.
/// Opened on the first read, so a store that never recalls never opens it.
pub(crate) struct Reader {
    path: PathBuf,
    busy_timeout: Duration,
    conn: Mutex<Option<Connection>>,
}

impl Reader {
    pub(crate) fn new(path: PathBuf, busy_timeout: Duration) -> Self {
        Self {
            path,
            busy_timeout,
            conn: Mutex::new(None),
        }
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut slot = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let conn = match slot.take() {
            Some(conn) => conn,
            None => {
                let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let conn = Connection::open_with_flags(&self.path, flags).map_err(db_err)?;
                conn.busy_timeout(self.busy_timeout).map_err(db_err)?;
                conn
            }
        };
        let out = f(&conn);
        *slot = Some(conn);
        out
    }
}

/// One user's vectors, by row id (`seq`), with the memory id and the user checked.
pub(crate) struct StoredVectors {
    pub(crate) reader: Arc<Reader>,
    pub(crate) user: String,
}

impl fmt::Debug for StoredVectors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredVectors")
            .field("path", &self.reader.path)
            .field("user", &self.user)
            .finish()
    }
}

impl VectorSource for StoredVectors {
    fn vectors(&self, memories: &[&Memory]) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
        self.reader.with(|conn| {
            // One read transaction: every vector from the same snapshot. Dropped
            // unfinished (a failed read), it rolls back, so the connection is left clean.
            let tx = conn.unchecked_transaction().map_err(db_err)?;
            let read = read_vectors(&tx, &self.user, memories)?;
            tx.commit().map_err(db_err)?;
            Ok(read)
        })
    }
}

/// Row ids bound per statement; a short batch is padded with a row id no row has.
const BATCH: usize = 64;

fn read_vectors(
    conn: &Connection,
    user: &str,
    memories: &[&Memory],
) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
    // Found by `seq`, the row id, in ascending order (neighbouring rows share pages), a
    // batch a statement; the id and the user must match too, so an index never reads
    // another memory's or another user's row.
    let marks = vec!["?"; BATCH].join(", ");
    let sql =
        format!("SELECT seq, id, embedding FROM memories WHERE user_id = ? AND seq IN ({marks})");
    let mut stmt = conn.prepare_cached(&sql).map_err(db_err)?;
    let mut order: Vec<usize> = (0..memories.len()).collect();
    order.sort_unstable_by_key(|&i| memories[i].seq);
    let mut out: Vec<Option<Vec<f32>>> = vec![None; memories.len()];
    for batch in order.chunks(BATCH) {
        let mut seqs = [-1i64; BATCH];
        for (slot, &i) in seqs.iter_mut().zip(batch) {
            *slot = memories[i].seq;
        }
        stmt.raw_bind_parameter(1, user).map_err(db_err)?;
        for (k, seq) in seqs.iter().enumerate() {
            stmt.raw_bind_parameter(k + 2, seq).map_err(db_err)?;
        }
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next().map_err(db_err)? {
            let seq: i64 = row.get(0).map_err(db_err)?;
            let Ok(at) = batch.binary_search_by_key(&seq, |&i| memories[i].seq) else {
                continue;
            };
            let i = batch[at];
            let id = row.get_ref(1).map_err(db_err)?;
            if id.as_str().ok() != Some(encode_id(&memories[i].id).as_str()) {
                continue;
            }
            let blob = row.get_ref(2).map_err(db_err)?;
            let bytes = blob.as_blob().map_err(|e| {
                StoreError::Corrupt(format!("embedding of {}: {e}", memories[i].id))
            })?;
            out[i] = Some(decode_vector(bytes)?);
        }
    }
    Ok(out)
}
