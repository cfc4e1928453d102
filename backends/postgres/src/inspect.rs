//! A look at a PostgreSQL store that changes nothing, for `cortex doctor`: opening the
//! store ([`crate::PostgresStore::connect`]) installs pgvector and creates the schema,
//! which a check must not do.

use cortex_core::error::StoreError;
use tokio_postgres::Client;

use crate::config::PostgresConfig;
use crate::names::Names;
use crate::sql::get;
use crate::tables::Meta;
use crate::{pg_err, pool, tls};

/// What the database holds for the configured schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// pgvector as installed in the database, if it is.
    pub pgvector: Option<String>,
    /// pgvector as the server could install it (the first store opening does), if it can.
    pub pgvector_available: Option<String>,
    /// The store's schema version, or `None` when the schema holds no Cortex store yet.
    pub schema_version: Option<i64>,
}

/// Connects once (read-only work on one connection, no pool) and reads what is there.
pub async fn inspect(config: &PostgresConfig) -> Result<Inspection, StoreError> {
    let names = Names::new(config.schema_name())?;
    // A look is one call: under the store's deadline, so that `cortex doctor` cannot hang
    // on a dead link either.
    let endpoint = pool::Endpoint::new(tls::parse(&config.url)?, &config.timeouts);
    let client = pool::connect_one(&endpoint).await?;
    let look = read(&client, &names);
    match endpoint.deadline() {
        None => look.await,
        Some(deadline) => tokio::time::timeout(deadline.limit(), look)
            .await
            .unwrap_or_else(|_| Err(deadline.error(endpoint.server()))),
    }
}

async fn read(client: &Client, names: &Names) -> Result<Inspection, StoreError> {
    let text = |sql: &'static str| async move {
        client
            .query_opt(sql, &[])
            .await
            .map_err(pg_err)?
            .map(|row| get::<String>(&row, 0))
            .transpose()
    };
    let pgvector = text("SELECT extversion FROM pg_extension WHERE extname = 'vector'").await?;
    let pgvector_available =
        text("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").await?;
    let meta = names.q(Meta::Table);
    let has_meta: bool = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&meta])
        .await
        .map_err(pg_err)
        .and_then(|row| get(&row, 0))?;
    let schema_version = match has_meta {
        false => None,
        true => client
            .query_opt(
                &format!("SELECT value FROM {meta} WHERE key = 'schema_version'"),
                &[],
            )
            .await
            .map_err(pg_err)?
            .map(|row| {
                let value: String = get(&row, 0)?;
                value
                    .parse::<i64>()
                    .map_err(|_| StoreError::Corrupt(format!("schema_version {value:?}")))
            })
            .transpose()?,
    };
    Ok(Inspection {
        pgvector,
        pgvector_available,
        schema_version,
    })
}
