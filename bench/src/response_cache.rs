//! Storage behind [`CachingProvider`](crate::caching_provider::CachingProvider): a map in memory, and
//! optionally a SQLite file that outlives the process (a benchmark harness reuses it
//! across runs so repeated runs cost nothing).
//!
//! The cache is an optimisation: once the file is open, a failing read counts as a miss
//! and a failing write is logged, so a disk problem never fails a provider call. The file
//! is read and written on the runtime's blocking threads, never on an async worker.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cortex_core::{error::ProviderError, provider::EmbedTask, provider::TokenUsage};
use rusqlite::{Connection, OptionalExtension, params};
use thiserror::Error;

/// Why a read or write of the cache file failed; logged, never returned to a caller.
#[derive(Debug, Error)]
enum CacheError {
    #[error("response cache SQLite error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("the response cache's blocking thread did not finish: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// What identifies one cached embedding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct EmbedKey {
    pub provider: String,
    pub model: String,
    pub dimension: usize,
    pub task: EmbedTask,
    pub text: String,
}

/// What identifies one cached generation. The temperature is kept as its bit pattern
/// so the key has exact equality and hashing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct GenKey {
    pub provider: String,
    pub model: String,
    pub temperature_bits: u32,
    pub max_output_tokens: u32,
    pub prompt: String,
}

#[derive(Default)]
struct Memory {
    embeddings: HashMap<EmbedKey, Vec<f32>>,
    generations: HashMap<GenKey, String>,
}

/// Memoized embeddings and generations, shared by any number of
/// [`CachingProvider`](crate::CachingProvider)s. The in-memory part is unbounded: it is
/// meant for a process's working set or a benchmark run.
pub struct ResponseCache {
    memory: Mutex<Memory>,
    disk: Option<Arc<Mutex<Connection>>>,
    path: Option<PathBuf>,
}

impl fmt::Debug for ResponseCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let memory = self.memory();
        f.debug_struct("ResponseCache")
            .field("embeddings_in_memory", &memory.embeddings.len())
            .field("generations_in_memory", &memory.generations.len())
            .field("path", &self.path)
            .finish()
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS embeddings (
    provider  TEXT    NOT NULL,
    model     TEXT    NOT NULL,
    dimension INTEGER NOT NULL,
    task      TEXT    NOT NULL,
    text      TEXT    NOT NULL,
    vector    BLOB    NOT NULL,
    PRIMARY KEY (provider, model, dimension, task, text)
);
CREATE TABLE IF NOT EXISTS generations (
    provider          TEXT    NOT NULL,
    model             TEXT    NOT NULL,
    temperature_bits  INTEGER NOT NULL,
    max_output_tokens INTEGER NOT NULL,
    prompt            TEXT    NOT NULL,
    answer            TEXT    NOT NULL,
    input_tokens      INTEGER NOT NULL,
    output_tokens     INTEGER NOT NULL,
    PRIMARY KEY (provider, model, temperature_bits, max_output_tokens, prompt)
);
";

impl ResponseCache {
    /// A cache that lives as long as the process.
    pub fn in_memory() -> Self {
        Self {
            memory: Mutex::new(Memory::default()),
            disk: None,
            path: None,
        }
    }

    /// A cache backed by the SQLite file at `path`, created if missing.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ProviderError> {
        let path = path.as_ref();
        let fail = |e: rusqlite::Error| {
            ProviderError::Config(format!(
                "cannot open the response cache {}: {e}",
                path.display()
            ))
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                ProviderError::Config(format!(
                    "cannot create {} for the response cache: {e}",
                    dir.display()
                ))
            })?;
        }
        let conn = Connection::open(path).map_err(fail)?;
        // Several benchmark processes may share one file: wait for a lock rather than
        // fail, and let readers run alongside the writer.
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(fail)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(fail)?;
        conn.execute_batch(SCHEMA).map_err(fail)?;
        Ok(Self {
            memory: Mutex::new(Memory::default()),
            disk: Some(Arc::new(Mutex::new(conn))),
            path: Some(path.to_owned()),
        })
    }

    /// [`open`](Self::open) on a blocking thread, for async callers.
    pub async fn open_async(path: impl Into<PathBuf>) -> Result<Self, ProviderError> {
        let path = path.into();
        tokio::task::spawn_blocking(move || Self::open(path))
            .await
            .map_err(|e| ProviderError::Config(format!("opening the response cache: {e}")))?
    }

    /// The file behind the cache, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn memory(&self) -> MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `work` on the cache file's connection on a blocking thread; `None` for a
    /// cache without a file.
    async fn with_disk<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, rusqlite::Error> + Send + 'static,
    ) -> Option<Result<T, CacheError>> {
        let disk = self.disk.clone()?;
        let done = tokio::task::spawn_blocking(move || {
            let mut conn = disk.lock().unwrap_or_else(PoisonError::into_inner);
            work(&mut conn)
        })
        .await;
        Some(match done {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(e.into()),
            Err(e) => Err(e.into()),
        })
    }

    /// The cached vector of each key, `None` where there is none: the memory first, then
    /// the file (in one trip for every key the memory lacks).
    pub(crate) async fn get_embeddings(&self, keys: &[EmbedKey]) -> Vec<Option<Vec<f32>>> {
        let mut found: Vec<Option<Vec<f32>>> = {
            let memory = self.memory();
            keys.iter()
                .map(|key| memory.embeddings.get(key).cloned())
                .collect()
        };
        let wanted: Vec<(usize, EmbedKey)> = found
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_none())
            .map(|(slot, _)| (slot, keys[slot].clone()))
            .collect();
        if wanted.is_empty() {
            return found;
        }
        let read = self
            .with_disk(move |conn| {
                // Each key's own result: one unreadable row is one miss, not a batch's.
                let rows = wanted
                    .into_iter()
                    .map(|(slot, key)| {
                        let blob = read_embedding(conn, &key);
                        (slot, key, blob)
                    })
                    .collect::<Vec<_>>();
                Ok(rows)
            })
            .await;
        let rows = match read {
            None => return found,
            Some(Ok(rows)) => rows,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "response cache read failed; treating as a miss");
                return found;
            }
        };
        let mut memory = self.memory();
        for (slot, key, blob) in rows {
            let blob = match blob {
                Ok(Some(blob)) => blob,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "response cache read failed; treating as a miss");
                    continue;
                }
            };
            // A blob of the wrong size is a damaged row: ignore it and let it be replaced.
            let Some(vector) = decode_vector(&blob).filter(|v| v.len() == key.dimension) else {
                continue;
            };
            memory.embeddings.insert(key, vector.clone());
            found[slot] = Some(vector);
        }
        found
    }

    pub(crate) async fn put_embeddings(&self, entries: Vec<(EmbedKey, Vec<f32>)>) {
        if self.disk.is_some() {
            let rows = entries.clone();
            if let Some(Err(e)) = self
                .with_disk(move |conn| write_embeddings(conn, &rows))
                .await
            {
                tracing::warn!(error = %e, "response cache write failed");
            }
        }
        self.memory().embeddings.extend(entries);
    }

    pub(crate) async fn get_generation(&self, key: &GenKey) -> Option<String> {
        if let Some(text) = self.memory().generations.get(key) {
            return Some(text.clone());
        }
        let wanted = key.clone();
        let found = self
            .with_disk(move |conn| read_generation(conn, &wanted))
            .await?;
        let text = match found {
            Ok(text) => text?,
            Err(e) => {
                tracing::warn!(error = %e, "response cache read failed; treating as a miss");
                return None;
            }
        };
        self.memory().generations.insert(key.clone(), text.clone());
        Some(text)
    }

    /// Stores an answer; `usage` (what it cost the first time) is kept on disk for
    /// reports about the cache file.
    pub(crate) async fn put_generation(&self, key: GenKey, text: String, usage: TokenUsage) {
        if self.disk.is_some() {
            let (row, answer) = (key.clone(), text.clone());
            if let Some(Err(e)) = self
                .with_disk(move |conn| write_generation(conn, &row, &answer, usage))
                .await
            {
                tracing::warn!(error = %e, "response cache write failed");
            }
        }
        self.memory().generations.insert(key, text);
    }
}

fn read_embedding(conn: &Connection, key: &EmbedKey) -> Result<Option<Vec<u8>>, rusqlite::Error> {
    conn.query_row(
        "SELECT vector FROM embeddings
         WHERE provider = ?1 AND model = ?2 AND dimension = ?3 AND task = ?4 AND text = ?5",
        params![
            key.provider,
            key.model,
            key.dimension as i64,
            task_name(key.task),
            key.text
        ],
        |row| row.get::<_, Vec<u8>>(0),
    )
    .optional()
}

fn read_generation(conn: &Connection, key: &GenKey) -> Result<Option<String>, rusqlite::Error> {
    conn.query_row(
        "SELECT answer FROM generations
         WHERE provider = ?1 AND model = ?2 AND temperature_bits = ?3
           AND max_output_tokens = ?4 AND prompt = ?5",
        params![
            key.provider,
            key.model,
            i64::from(key.temperature_bits),
            i64::from(key.max_output_tokens),
            key.prompt
        ],
        |row| row.get::<_, String>(0),
    )
    .optional()
}

fn write_generation(
    conn: &Connection,
    key: &GenKey,
    text: &str,
    usage: TokenUsage,
) -> Result<usize, rusqlite::Error> {
    conn.execute(
        "INSERT OR REPLACE INTO generations
         (provider, model, temperature_bits, max_output_tokens, prompt, answer,
          input_tokens, output_tokens)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            key.provider,
            key.model,
            i64::from(key.temperature_bits),
            i64::from(key.max_output_tokens),
            key.prompt,
            text,
            i64::try_from(usage.input_tokens).unwrap_or(i64::MAX),
            i64::try_from(usage.output_tokens).unwrap_or(i64::MAX),
        ],
    )
}

fn write_embeddings(
    conn: &mut Connection,
    entries: &[(EmbedKey, Vec<f32>)],
) -> Result<(), rusqlite::Error> {
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare_cached(
            "INSERT OR REPLACE INTO embeddings (provider, model, dimension, task, text, vector)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        for (key, vector) in entries {
            insert.execute(params![
                key.provider,
                key.model,
                key.dimension as i64,
                task_name(key.task),
                key.text,
                encode_vector(vector)
            ])?;
        }
    }
    tx.commit()
}

fn task_name(task: EmbedTask) -> &'static str {
    match task {
        EmbedTask::Document => "document",
        EmbedTask::Query => "query",
    }
}

/// Little-endian f32s: exact, compact, and independent of the machine that wrote them.
fn encode_vector(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn decode_vector(blob: &[u8]) -> Option<Vec<f32>> {
    if !blob.len().is_multiple_of(4) {
        return None;
    }
    Some(
        blob.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_exactly() {
        let v = vec![0.1f32, -2.5, f32::MIN_POSITIVE, 1e30];
        assert_eq!(decode_vector(&encode_vector(&v)), Some(v));
        assert_eq!(decode_vector(&[1, 2, 3]), None);
    }
}
