//! A fresh, isolated store for every question, on the backend asked for.

use std::path::PathBuf;
use std::sync::Arc;

use clap::ValueEnum;
use cortex_core::{in_memory::InMemoryStore, store::MemoryStore};
use cortex_sqlite::SqliteStore;
use serde::Serialize;

use crate::error::BenchError;

/// Where the memories of a run live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// A fresh in-process store per haystack (a question's, or a LoCoMo conversation's).
    Memory,
    /// A fresh SQLite file per haystack, in a temporary directory removed afterwards.
    Sqlite,
    /// One database (`CORTEX_DATABASE_URL`), a unique user id per haystack.
    Postgres,
}

/// One question's store and the user its memories belong to.
#[derive(Debug)]
pub struct QuestionStore {
    pub store: Arc<dyn MemoryStore>,
    pub user: String,
    /// The SQLite file to remove once the question is done.
    file: Option<PathBuf>,
}

impl QuestionStore {
    /// Releases the question's resources (the SQLite file; Postgres rows stay, see
    /// docs/BENCHMARKS.md).
    pub fn finish(self) {
        let Self { store, file, .. } = self;
        drop(store);
        if let Some(path) = file {
            for suffix in ["", "-wal", "-shm"] {
                let mut name = path.clone().into_os_string();
                name.push(suffix);
                // Best effort: the directory itself goes when the run ends.
                let _ = std::fs::remove_file(PathBuf::from(name));
            }
        }
    }
}

/// Hands out per-question stores for a run.
#[derive(Debug)]
pub struct Backend {
    kind: BackendKind,
    run_id: String,
    dir: Option<tempfile::TempDir>,
    shared: Option<Arc<dyn MemoryStore>>,
}

impl Backend {
    /// Prepares the backend: a temporary directory for SQLite, a connection pool for
    /// Postgres.
    pub async fn open(kind: BackendKind) -> Result<Self, BenchError> {
        let run_id = uuid::Uuid::new_v4().simple().to_string();
        let mut backend = Self {
            kind,
            run_id,
            dir: None,
            shared: None,
        };
        match kind {
            BackendKind::Memory => {}
            BackendKind::Sqlite => {
                let dir = tempfile::Builder::new()
                    .prefix("cortex-bench-")
                    .tempdir()
                    .map_err(|source| BenchError::Io {
                        path: std::env::temp_dir(),
                        source,
                    })?;
                backend.dir = Some(dir);
            }
            BackendKind::Postgres => backend.shared = Some(postgres().await?),
        }
        Ok(backend)
    }

    pub fn kind(&self) -> BackendKind {
        self.kind
    }

    /// A store nothing else has written to (for this user), for question number `index`.
    pub fn question(&self, index: usize) -> Result<QuestionStore, BenchError> {
        let user = format!("bench-{}-{index}", self.run_id);
        match (self.kind, &self.dir, &self.shared) {
            (BackendKind::Sqlite, Some(dir), _) => {
                let path = dir.path().join(format!("q{index}.db"));
                let store = SqliteStore::open(&path)?;
                Ok(QuestionStore {
                    store: Arc::new(store),
                    user,
                    file: Some(path),
                })
            }
            (BackendKind::Postgres, _, Some(shared)) => Ok(QuestionStore {
                store: shared.clone(),
                user,
                file: None,
            }),
            _ => Ok(QuestionStore {
                store: Arc::new(InMemoryStore::new()),
                user,
                file: None,
            }),
        }
    }
}

async fn postgres() -> Result<Arc<dyn MemoryStore>, BenchError> {
    let config = cortex_postgres::PostgresConfig::from_lookup(cortex_app::env_var)?;
    let store = cortex_postgres::PostgresStore::connect(config).await?;
    Ok(Arc::new(store))
}
