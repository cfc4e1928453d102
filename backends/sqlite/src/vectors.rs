//! The full vectors an index over this store reads back for its exact re-score.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cortex_core::{Memory, StoreError, VectorSource};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

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

/// One user's vectors, by memory id.
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
            // One read transaction: every vector from the same snapshot.
            conn.execute_batch("BEGIN").map_err(db_err)?;
            let read = read_vectors(conn, &self.user, memories);
            conn.execute_batch("COMMIT").map_err(db_err)?;
            read
        })
    }
}

fn read_vectors(
    conn: &Connection,
    user: &str,
    memories: &[&Memory],
) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
    // Found by `seq`, the row id (one B-tree descent); the id and the user must match
    // too, so an index never reads another memory's or another user's row.
    let mut stmt = conn
        .prepare_cached(
            "SELECT embedding FROM memories WHERE seq = ?1 AND id = ?2 AND user_id = ?3",
        )
        .map_err(db_err)?;
    memories
        .iter()
        .map(|m| {
            let blob: Option<Vec<u8>> = stmt
                .query_row(params![m.seq, encode_id(&m.id), user], |row| row.get(0))
                .optional()
                .map_err(db_err)?;
            blob.map(|bytes| decode_vector(&bytes)).transpose()
        })
        .collect()
}
