//! [`SqliteStore`]: the MemoryStore over one SQLite file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use cortex_core::memory::Supersession;
use cortex_core::{
    error::StoreError, error::StoreResult, memory::Memory, memory::MemoryId, new_memory::NewMemory,
    signature::EmbeddingSignature, store::Added, store::BuiltIndex, store::Capabilities,
    store::Deleted, store::Generation, store::ListQuery, store::MemoryStore,
};
use rusqlite::{Connection, Transaction, TransactionBehavior, params};

use crate::codec::{
    LIVE, MEMORY_COLUMNS, SUPERSESSION_COLUMNS, decode_id, encode_id, query_memories, query_rows,
    supersession_of,
};
use crate::db_err;
use crate::index_build;
use crate::listing::list_statement;
use crate::meta::{bump_generation, read_generation, read_signature};
use crate::schema::migrate;
use crate::snapshot::Snapshots;
use crate::vectors::{Reader, StoredVectors};
use crate::writes::{add_memory, insert_supersession};

/// How long a statement waits for another connection's lock before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Switches a connection to WAL. Entering WAL needs a moment of exclusive access, and
/// SQLite answers "database is locked" at once, without its busy handler, when another
/// process is opening the same new file: so it is retried for as long as the busy
/// timeout would have waited.
fn enter_wal(conn: &Connection) -> rusqlite::Result<()> {
    let started = std::time::Instant::now();
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |row| {
            row.get::<_, String>(0)
        }) {
            Ok(_) => return Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && started.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(e),
        }
    }
}

/// A failure to open the file that calling again cannot mend (the path is a directory,
/// holds something that is not a SQLite database, or may not be read or written) is a
/// setting to fix, so `Config`; anything else (busy, locked) stays a passing fault.
fn opening_fault(path: &Path, e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::{CannotOpen, NotADatabase, PermissionDenied, ReadOnly};
    match &e {
        rusqlite::Error::SqliteFailure(failure, _)
            if matches!(
                failure.code,
                CannotOpen | NotADatabase | PermissionDenied | ReadOnly
            ) =>
        {
            StoreError::Config(format!(
                "cannot open the SQLite store {}: {e}; set CORTEX_DB_PATH to a file this \
                 process may write, or to a new file",
                path.display()
            ))
        }
        _ => db_err(e),
    }
}

/// `~/.cortex/memory.db`.
pub fn default_path() -> Result<PathBuf, StoreError> {
    dirs::home_dir()
        .map(|home| home.join(".cortex").join("memory.db"))
        .ok_or_else(|| StoreError::Config("no home directory; set CORTEX_DB_PATH".into()))
}

/// A MemoryStore over one SQLite file. One connection serialises this process's access;
/// other processes may share the file (WAL, busy timeout), and their commits reach this
/// process's cached index through the per-user change counter.
pub struct SqliteStore {
    path: PathBuf,
    conn: Arc<Mutex<Connection>>,
    /// Where the cached indexes read full vectors (they keep only 8-bit codes).
    reader: Arc<Reader>,
    /// Where the cached indexes are kept between openings; `None` when they are not.
    snapshots: Option<Snapshots>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// How hard a commit waits for the disk (SQLite's `PRAGMA synchronous`, in WAL mode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// Each commit is fsynced before it is acknowledged: a power cut or OS crash loses
    /// nothing acknowledged. Memories arrive at conversation pace, so the default.
    #[default]
    Full,
    /// Commits are fsynced at checkpoints only: a process crash loses nothing, a power
    /// cut or OS crash can lose the last commits (the file stays consistent).
    Normal,
}

impl Synchronous {
    /// `full` or `normal`, in any case.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "full" => Some(Self::Full),
            "normal" => Some(Self::Normal),
            _ => None,
        }
    }

    fn pragma(self) -> &'static str {
        match self {
            Self::Full => "FULL",
            Self::Normal => "NORMAL",
        }
    }
}

/// Where the file is, how it commits, and whether its indexes are kept beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteConfig {
    pub path: PathBuf,
    pub synchronous: Synchronous,
    /// Keep each user's cached index as a snapshot in `<path>.index/`, so opening the
    /// store again reads one file instead of every row (on by default).
    pub index_snapshots: bool,
}

impl SqliteConfig {
    /// The file at `path`, with the default (durable) commits and index snapshots.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            synchronous: Synchronous::default(),
            index_snapshots: true,
        }
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` with the default settings.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(&SqliteConfig::new(path.as_ref()))
    }

    /// Opens (creating if needed) the database `config` names: parent directory created,
    /// file mode 0600, WAL, `config.synchronous`, a 5 s busy timeout, foreign keys on,
    /// schema migrated forward.
    pub fn open_with(config: &SqliteConfig) -> Result<Self, StoreError> {
        let path = config.path.clone();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                StoreError::Config(format!("cannot create {}: {e}", parent.display()))
            })?;
        }
        let opening = |e| opening_fault(&path, e);
        let mut conn = Connection::open(&path).map_err(opening)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(db_err)?;
        // Reading the header first: a path that is no database fails here, before its
        // mode is touched. The mode is set before WAL, whose files copy it.
        conn.query_row("PRAGMA schema_version", [], |r| r.get::<_, i64>(0))
            .map_err(opening)?;
        restrict_permissions(&path)?;
        enter_wal(&conn).map_err(opening)?;
        conn.execute_batch(&format!(
            "PRAGMA synchronous = {};
             PRAGMA foreign_keys = ON;",
            config.synchronous.pragma()
        ))
        .map_err(opening)?;
        migrate(&mut conn)?;
        Ok(Self {
            reader: Arc::new(Reader::new(path.clone(), BUSY_TIMEOUT)),
            snapshots: config.index_snapshots.then(|| Snapshots::beside(&path)),
            path,
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Opens the default file, `~/.cortex/memory.db`.
    pub fn open_default() -> Result<Self, StoreError> {
        Self::open(default_path()?)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The commit durability in force on this store's connection, read back from SQLite
    /// (for diagnostics; it takes the connection's lock briefly).
    pub fn synchronous(&self) -> Result<Synchronous, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let level: i64 = conn
            .query_row("PRAGMA synchronous", [], |row| row.get(0))
            .map_err(db_err)?;
        // SQLite's numbering: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA.
        match level {
            1 => Ok(Synchronous::Normal),
            2 => Ok(Synchronous::Full),
            other => Err(StoreError::Config(format!(
                "PRAGMA synchronous is {other}, neither NORMAL nor FULL"
            ))),
        }
    }

    /// Runs `f` on the connection on the blocking pool, so SQLite never stalls the runtime.
    pub(crate) async fn run<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> StoreResult<T> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().unwrap_or_else(PoisonError::into_inner);
            f(&mut guard)
        })
        .await
        .map_err(|e| StoreError::backend("sqlite", e))?
    }

    /// Runs `f` in an IMMEDIATE transaction (the write lock is taken up front, so a busy
    /// database waits at BEGIN instead of failing at COMMIT).
    pub(crate) async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> StoreResult<T> + Send + 'static,
    {
        self.run(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db_err)?;
            let out = f(&tx)?;
            tx.commit().map_err(db_err)?;
            Ok(out)
        })
        .await
    }

    /// Deletes the memory's row in one transaction (what [`MemoryStore::delete`] does
    /// before it drops the user's snapshots).
    async fn delete_row(&self, user: &str, id: &MemoryId) -> StoreResult<Option<Deleted>> {
        let (user, id) = (user.to_owned(), encode_id(id));
        self.write(move |tx| {
            if !memory_exists(tx, &user, &id)? {
                return Ok(None);
            }
            let superseded: Vec<String> = tx
                .prepare_cached("SELECT old_id FROM supersessions WHERE new_id = ?1")
                .and_then(|mut s| {
                    s.query_map(params![id], |r| r.get(0))?
                        .collect::<Result<Vec<String>, _>>()
                })
                .map_err(db_err)?;
            // Events, links, edges read from it and supersessions go by ON DELETE CASCADE.
            tx.execute("DELETE FROM memories WHERE id = ?1", params![id])
                .map_err(db_err)?;
            let mut restored = Vec::new();
            for old in superseded {
                let still_stale: bool = tx
                    .query_row(
                        "SELECT EXISTS (SELECT 1 FROM supersessions WHERE old_id = ?1)",
                        params![old],
                        |r| r.get(0),
                    )
                    .map_err(db_err)?;
                if !still_stale {
                    restored.push(decode_id(&old)?);
                }
            }
            Ok(Some(Deleted {
                generation: bump_generation(tx, &user)?,
                restored,
            }))
        })
        .await
    }
}

#[cfg(unix)]
fn restrict_permissions(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| StoreError::Config(format!("cannot restrict {}: {e}", path.display())))
}

#[cfg(not(unix))]
fn restrict_permissions(_path: &Path) -> Result<(), StoreError> {
    Ok(())
}

fn memory_exists(conn: &Connection, user: &str, id: &str) -> StoreResult<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM memories WHERE id = ?1 AND user_id = ?2)",
        params![id, user],
        |r| r.get(0),
    )
    .map_err(db_err)
}

#[async_trait]
impl MemoryStore for SqliteStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            search: false,
            records: true,
            persistent: true,
            shared: true,
        }
    }

    async fn signature(&self) -> StoreResult<Option<EmbeddingSignature>> {
        self.run(|conn| read_signature(conn)).await
    }

    async fn add(
        &self,
        memory: &NewMemory,
        embedding: &[f32],
        signature: &EmbeddingSignature,
    ) -> StoreResult<Added> {
        let (memory, embedding) = (memory.clone(), embedding.to_vec());
        let signature = signature.clone();
        memory.check_records()?;
        self.write(move |tx| {
            let (seq, generation) = add_memory(tx, &memory, &embedding, &signature)?;
            Ok(Added {
                memory: memory.into_memory(seq),
                generation,
            })
        })
        .await
    }

    async fn get(&self, user: &str, id: &MemoryId) -> StoreResult<Option<Memory>> {
        let (user, id) = (user.to_owned(), encode_id(id));
        self.run(move |conn| {
            let sql = format!(
                "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = ?1 AND m.user_id = ?2"
            );
            Ok(query_memories(conn, &sql, params![id, user])?.pop())
        })
        .await
    }

    async fn find_by_prefix(&self, user: &str, prefix: &str) -> StoreResult<Vec<MemoryId>> {
        // Ids are lowercase hex and '-', all below '~', so [prefix, prefix + "~") is
        // exactly the ids starting with prefix, and the unique index on id serves it.
        let (user, low, high) = (user.to_owned(), prefix.to_owned(), format!("{prefix}~"));
        self.run(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id FROM memories WHERE id >= ?1 AND id < ?2 AND user_id = ?3",
                )
                .map_err(db_err)?;
            let ids = stmt
                .query_map(params![low, high, user], |r| r.get::<_, String>(0))
                .map_err(db_err)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(db_err)?;
            ids.iter().map(|id| decode_id(id)).collect()
        })
        .await
    }

    async fn delete(&self, user: &str, id: &MemoryId) -> StoreResult<Option<Deleted>> {
        let deleted = self.delete_row(user, id).await?;
        // A forgotten memory's text must not outlive the forget in a plain file: the
        // user's snapshots go with it (the next build reads the rows, and writes them anew).
        if let (Some(_), Some(snapshots)) = (&deleted, &self.snapshots) {
            snapshots.remove_user(user);
        }
        Ok(deleted)
    }

    async fn list(&self, user: &str, query: &ListQuery) -> StoreResult<Vec<Memory>> {
        let (sql, values) = list_statement(user, query);
        self.run(move |conn| query_memories(conn, &sql, rusqlite::params_from_iter(values)))
            .await
    }

    async fn count(&self, user: &str) -> StoreResult<u64> {
        let user = user.to_owned();
        self.run(move |conn| {
            let sql = format!("SELECT COUNT(*) FROM memories m WHERE m.user_id = ?1 AND {LIVE}");
            let n: i64 = conn
                .query_row(&sql, params![user], |r| r.get(0))
                .map_err(db_err)?;
            Ok(n as u64)
        })
        .await
    }

    async fn generation(&self, user: &str) -> StoreResult<Generation> {
        let user = user.to_owned();
        self.run(move |conn| read_generation(conn, &user)).await
    }

    async fn build_index(&self, user: &str, dimension: usize) -> StoreResult<BuiltIndex> {
        let source = Arc::new(StoredVectors {
            reader: Arc::clone(&self.reader),
            user: user.to_owned(),
        });
        let (user, snapshots) = (user.to_owned(), self.snapshots.clone());
        self.run(move |conn| {
            index_build::build_index(conn, &user, dimension, source, snapshots.as_ref())
        })
        .await
    }

    /// Writes the engine's index as the user's snapshot when it describes the rows as they
    /// are and the snapshot on disk does not already (an index this process caught up
    /// with its own writes since it was built or read).
    async fn keep_index(&self, user: &str, built: &BuiltIndex) -> StoreResult<()> {
        let Some(snapshots) = self.snapshots.clone() else {
            return Ok(());
        };
        let dimension = built.index.dimension();
        let owned = user.to_owned();
        let key = self
            .run(move |conn| index_build::current_key(conn, &owned, dimension))
            .await?;
        let encoded = key.encode();
        // Behind the rows (another process wrote), or already on disk.
        if key.generation != built.generation.0 || snapshots.holds(user, dimension, &encoded) {
            return Ok(());
        }
        let bytes = built.index.to_snapshot(&encoded);
        self.run(move |conn| index_build::write_if_current(conn, &snapshots, &key, &bytes))
            .await
    }

    async fn supersede(&self, user: &str, supersession: &Supersession) -> StoreResult<Generation> {
        let (user, s) = (user.to_owned(), supersession.clone());
        self.write(move |tx| {
            insert_supersession(tx, &user, &s)?;
            bump_generation(tx, &user)
        })
        .await
    }

    async fn supersessions(
        &self,
        user: &str,
        memory_id: &MemoryId,
    ) -> StoreResult<Vec<Supersession>> {
        let (user, id) = (user.to_owned(), encode_id(memory_id));
        self.run(move |conn| {
            let sql = format!(
                "SELECT {SUPERSESSION_COLUMNS} FROM supersessions
                 WHERE user_id = ?1 AND (old_id = ?2 OR new_id = ?2)
                 ORDER BY created_at, rowid"
            );
            query_rows(conn, &sql, params![user, id], supersession_of)
        })
        .await
    }
}
