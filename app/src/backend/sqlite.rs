//! The embedded default: one SQLite file (`CORTEX_DB_PATH`, else the default path).

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use cortex_core::{error::StoreError, keys::KeyStore, transfer::TransferStore};
use cortex_sqlite::{SqliteConfig, SqliteStore, Synchronous};

use super::{Backend, BackendKind, Footprint, Inspection, Presence, Storage};
use crate::env::{ConfigError, expand_home, parse_bool};

pub(super) struct Kind;
pub(super) const KIND: Kind = Kind;

impl BackendKind for Kind {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn variable(&self) -> &'static str {
        "CORTEX_DB_PATH"
    }

    fn is_default(&self) -> bool {
        true
    }

    fn schemes(&self) -> &'static [&'static str] {
        &[]
    }

    fn configure(&self, var: &dyn Fn(&str) -> Option<String>) -> Result<Storage, ConfigError> {
        let path = match var("CORTEX_DB_PATH") {
            Some(path) => expand_home(&path)?,
            None => cortex_sqlite::default_path()?,
        };
        let synchronous = match var("CORTEX_SQLITE_SYNCHRONOUS") {
            None => Synchronous::default(),
            Some(text) => Synchronous::parse(&text).ok_or_else(|| ConfigError::Invalid {
                variable: "CORTEX_SQLITE_SYNCHRONOUS",
                value: text.clone(),
                expected: "use full (the default: nothing acknowledged is lost on power \
                           loss) or normal (faster; a power cut can lose the last commits)"
                    .into(),
            })?,
        };
        let index_snapshots = var("CORTEX_INDEX_SNAPSHOTS")
            .map_or(Ok(true), |text| parse_bool("CORTEX_INDEX_SNAPSHOTS", &text))?;
        Ok(Arc::new(SqliteBackend {
            config: SqliteConfig {
                path,
                synchronous,
                index_snapshots,
            },
        }))
    }

    fn for_target(&self, target: &str, _setting: &str) -> Result<Storage, StoreError> {
        Ok(Arc::new(SqliteBackend {
            config: SqliteConfig::new(target),
        }))
    }
}

/// A SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteBackend {
    pub config: SqliteConfig,
}

impl SqliteBackend {
    async fn store(&self) -> Result<SqliteStore, StoreError> {
        let config = self.config.clone();
        // Opening creates the file and migrates the schema: blocking work.
        let store = tokio::task::spawn_blocking(move || SqliteStore::open_with(&config))
            .await
            .map_err(|e| StoreError::backend("sqlite", e))??;
        tracing::info!(path = %store.path().display(), "using SQLite");
        Ok(store)
    }

    /// The path beside the database file with `suffix` appended (`-wal`, `.index`).
    fn beside(&self, suffix: &str) -> PathBuf {
        let mut path = self.config.path.clone().into_os_string();
        path.push(suffix);
        PathBuf::from(path)
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    fn name(&self) -> &'static str {
        KIND.name()
    }

    fn describe(&self) -> String {
        format!("SQLite {}", self.config.path.display())
    }

    async fn open(&self) -> Result<Arc<dyn TransferStore>, StoreError> {
        Ok(Arc::new(self.store().await?))
    }

    async fn open_keys(&self) -> Result<Arc<dyn KeyStore>, StoreError> {
        Ok(Arc::new(self.store().await?))
    }

    fn same_store(&self, other: &dyn Backend) -> Result<bool, StoreError> {
        Ok(other
            .as_any()
            .downcast_ref::<SqliteBackend>()
            .is_some_and(|other| {
                file_identity(&self.config.path) == file_identity(&other.config.path)
            }))
    }

    async fn inspect(&self) -> Inspection {
        // Opening creates the file: a look must not.
        let presence = match self.config.path.try_exists() {
            Ok(false) => Presence::Absent(format!(
                "no store yet: SQLite {} does not exist; the first memory creates it",
                self.config.path.display()
            )),
            _ => Presence::Present,
        };
        Inspection {
            presence,
            checks: Vec::new(),
        }
    }

    async fn footprint(&self) -> Footprint {
        let size = |suffix: &str| std::fs::metadata(self.beside(suffix)).map_or(0, |m| m.len());
        Footprint {
            place: format!("sqlite {}", self.config.path.display()),
            bytes: Some(size("") + size("-wal")),
            index_snapshot_bytes: Some(dir_bytes(&self.beside(".index"))),
            ..Footprint::default()
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The bytes of the files in `dir` (0 when there is none).
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// The path a file is known by: its real path when it exists, else its directory's real
/// path and its name (else the path made absolute), so that one file however spelled
/// (symlinks, `..`, relative) is one store.
fn file_identity(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match (absolute.parent(), absolute.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(dir)
            .map(|dir| dir.join(name))
            .unwrap_or(absolute.clone()),
        _ => absolute,
    }
}
