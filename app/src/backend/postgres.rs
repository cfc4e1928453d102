//! PostgreSQL + pgvector, selected by `CORTEX_DATABASE_URL`.

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use cortex_core::{error::StoreError, keys::KeyStore, transfer::TransferStore};
use cortex_postgres::{PostgresConfig, PostgresStore};

use super::{Backend, BackendKind, Footprint, Inspection, Presence, Storage};
use crate::env::{ConfigError, env_var};

pub(super) struct Kind;
pub(super) const KIND: Kind = Kind;

impl BackendKind for Kind {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn variable(&self) -> &'static str {
        "CORTEX_DATABASE_URL"
    }

    fn schemes(&self) -> &'static [&'static str] {
        &["postgres", "postgresql"]
    }

    fn configure(&self, var: &dyn Fn(&str) -> Option<String>) -> Result<Storage, ConfigError> {
        Ok(Arc::new(PostgresBackend {
            config: PostgresConfig::from_lookup(var)?,
        }))
    }

    fn for_target(&self, target: &str, setting: &str) -> Result<Storage, StoreError> {
        // The target's URL, every other Postgres setting from the environment but the read
        // replicas: those are the configured primary's standbys, not the target's, and a
        // migration reads back what it wrote to verify it.
        let mut config = PostgresConfig::from_lookup(|name| match name {
            "CORTEX_DATABASE_URL" => Some(target.to_owned()),
            other => env_var(other),
        })?;
        config.replicas.urls.clear();
        config.check_url(setting)?;
        Ok(Arc::new(PostgresBackend { config }))
    }
}

/// A schema of a PostgreSQL database. Its `Debug` redacts the URL's password.
#[derive(Debug, Clone)]
pub struct PostgresBackend {
    pub config: PostgresConfig,
}

impl PostgresBackend {
    async fn store(&self) -> Result<PostgresStore, StoreError> {
        let store = PostgresStore::connect(self.config.clone()).await?;
        tracing::info!(
            schema = self.config.schema_name(),
            dense_mode = self.config.dense_mode.as_str(),
            pushdown = self.config.pushdown,
            read_replicas = self.config.replicas.urls.len(),
            "using PostgreSQL"
        );
        Ok(store)
    }

    /// A handle on the primary alone: API keys are read there on every request (a
    /// revocation holds from the next one), and the footprint is the primary's; neither
    /// needs the read replicas' pools and prober.
    async fn primary_only(&self) -> Result<PostgresStore, StoreError> {
        let mut config = self.config.clone();
        config.replicas.urls.clear();
        PostgresStore::connect(config).await
    }

    /// The schema's size on disk and the HNSW index beside `shared_buffers`.
    async fn sizes(&self) -> Result<(Option<u64>, cortex_postgres::HnswMemory), StoreError> {
        let store = self.primary_only().await?;
        let bytes = TransferStore::size_bytes(&store).await?;
        let memory = store.diagnostics().hnsw_memory().await?;
        Ok((bytes, memory))
    }
}

#[async_trait]
impl Backend for PostgresBackend {
    fn name(&self) -> &'static str {
        KIND.name()
    }

    fn describe(&self) -> String {
        let schema = format!("PostgreSQL, schema {}", self.config.schema_name());
        match self.config.replicas.urls.len() {
            0 => schema,
            1 => format!("{schema}, reads from 1 standby"),
            n => format!("{schema}, reads from {n} standbys"),
        }
    }

    async fn open(&self) -> Result<Arc<dyn TransferStore>, StoreError> {
        Ok(Arc::new(self.store().await?))
    }

    async fn open_keys(&self) -> Result<Arc<dyn KeyStore>, StoreError> {
        Ok(Arc::new(self.primary_only().await?))
    }

    fn same_store(&self, other: &dyn Backend) -> Result<bool, StoreError> {
        match other.as_any().downcast_ref::<PostgresBackend>() {
            Some(other) => self.config.same_store(&other.config),
            None => Ok(false),
        }
    }

    async fn inspect(&self) -> Inspection {
        // Opening installs pgvector and creates the schema: look first, without a pool.
        let found = match cortex_postgres::inspect(&self.config).await {
            Ok(found) => found,
            Err(e) => {
                return Inspection {
                    presence: Presence::Unreachable(e.to_string()),
                    checks: Vec::new(),
                };
            }
        };
        let presence = match found.schema_version {
            None => Presence::Absent(format!(
                "no store yet: PostgreSQL schema {} holds no Cortex store; the first memory \
                 creates it",
                self.config.schema_name()
            )),
            Some(_) => Presence::Present,
        };
        Inspection {
            presence,
            checks: vec![("pgvector", pgvector_check(&found))],
        }
    }

    async fn footprint(&self) -> Footprint {
        let place = format!("postgres schema {}", self.config.schema_name());
        match self.sizes().await {
            Ok((bytes, memory)) => Footprint {
                place,
                bytes,
                hnsw_index_bytes: Some(memory.index_bytes),
                shared_buffers_bytes: Some(memory.shared_buffers_bytes),
                hnsw_fits: Some(memory.fits()),
                ..Footprint::default()
            },
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the schema's size");
                Footprint {
                    place,
                    ..Footprint::default()
                }
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn pgvector_check(found: &cortex_postgres::Inspection) -> Result<String, String> {
    match (&found.pgvector, &found.pgvector_available) {
        (Some(installed), _) => Ok(format!("version {installed}")),
        (None, Some(available)) => Ok(format!(
            "version {available} available, not yet installed in this database; the first \
             memory installs it (which needs the right to CREATE EXTENSION)"
        )),
        (None, None) => Err(
            "the vector extension is not installed and the server has no \
                             pgvector to install; see scripts/install-pgvector.sh"
                .into(),
        ),
    }
}
