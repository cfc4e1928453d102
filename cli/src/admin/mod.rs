//! The administration commands: the store the server uses, from the shell.

pub mod commands;
pub mod doctor;
pub mod error;
pub mod export;
pub mod format;
pub mod import;
pub mod migrate;
pub mod pager;
pub mod progress;
pub mod reembed;
pub mod summary;

use std::sync::Arc;

use cortex_core::TransferStore;
use cortex_mcp::engine::{honour_store, open_store};
use cortex_mcp::{Engine, ServerConfig, Storage, build_engine};
use cortex_postgres::PostgresConfig;
use cortex_sqlite::SqliteConfig;

pub use error::AdminError;

/// The configuration and the store it names, opened.
#[derive(Debug)]
pub struct Context {
    pub config: ServerConfig,
    pub store: Arc<dyn TransferStore>,
}

impl Context {
    /// Reads the environment as the server does and opens its store.
    pub async fn open() -> Result<Self, AdminError> {
        let mut config = ServerConfig::from_env()?;
        let store = open_store(&config.storage).await?;
        config.providers = honour_store(&config.providers, &*store).await?;
        Ok(Self { config, store })
    }

    /// The user a command runs as: `--user`, else the server's.
    pub fn user(&self, flag: Option<&str>) -> Result<String, AdminError> {
        let user = flag.unwrap_or(&self.config.user_id).to_owned();
        cortex_core::memory::validate_user(&user)?;
        Ok(user)
    }

    /// The engine the server would build (embedder, layers), over the same store.
    pub async fn engine(&self) -> Result<Engine, AdminError> {
        Ok(build_engine(&self.config).await?)
    }

    /// For the commands that go through the engine: it, and the user (`--user`, else the
    /// server's).
    pub async fn engine_for(flag: Option<&str>) -> Result<(Engine, String), AdminError> {
        let ctx = Self::open().await?;
        let user = ctx.user(flag)?;
        Ok((ctx.engine().await?, user))
    }
}

/// The storage `--to` names: a postgres URL (the other `CORTEX_PG_*` settings from the
/// environment) or a SQLite file path.
pub fn storage_of(target: &str) -> Result<Storage, AdminError> {
    let target = target.trim();
    if target.starts_with("postgres://") || target.starts_with("postgresql://") {
        let config = PostgresConfig::from_lookup(|name| match name {
            "CORTEX_DATABASE_URL" => Some(target.to_owned()),
            other => std::env::var(other).ok(),
        })?;
        return Ok(Storage::Postgres(config));
    }
    if target.is_empty() {
        return Err(AdminError::Usage(
            "--to needs a postgres:// URL or a SQLite file path".into(),
        ));
    }
    Ok(Storage::Sqlite(SqliteConfig::new(target)))
}
