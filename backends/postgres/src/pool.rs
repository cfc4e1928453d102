//! Connections: one direct connection for the migration, then the pool, whose errors
//! name the server and the cause (see [`crate::error`]).

use std::time::Duration;

use cortex_core::StoreError;
use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, QueueMode, RecyclingMethod, Runtime,
};
use tokio_postgres::Client;

use crate::error::{PostgresError, Server};
use crate::pg_err;
use crate::tls::{Connection, Connector};

/// How long opening one connection may take before the store gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a caller waits for a free pooled connection.
const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Opens one connection outside the pool, its driver task spawned on the runtime.
pub(crate) async fn connect_one(conn: &Connection) -> Result<Client, StoreError> {
    let server = Server::of(&conn.config);
    let connect_err = |e| StoreError::backend("postgres", PostgresError::connect(&server, e));
    let mut config = conn.config.clone();
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    match &conn.connector {
        Connector::Plain => {
            let (client, connection) = config
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(connect_err)?;
            tokio::spawn(drive(connection));
            Ok(client)
        }
        Connector::Tls(tls) => {
            let (client, connection) = config.connect(tls.clone()).await.map_err(connect_err)?;
            tokio::spawn(drive(connection));
            Ok(client)
        }
    }
}

async fn drive<F>(connection: F)
where
    F: std::future::Future<Output = Result<(), tokio_postgres::Error>>,
{
    if let Err(e) = connection.await {
        tracing::warn!(error = %e, "postgres connection ended with an error");
    }
}

/// The pool, and the server its errors name.
#[derive(Clone)]
pub(crate) struct Connections {
    pool: Pool,
    server: Server,
}

impl Connections {
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A pooled connection: an idle one that is still open, or a new one.
    pub(crate) async fn get(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(|e| {
            let size = self.pool.status().max_size;
            StoreError::backend(
                "postgres",
                PostgresError::pool(&self.server, size, WAIT_TIMEOUT, e),
            )
        })
    }

    /// A pooled connection if one is idle, or can be opened, right now; never waits for
    /// one to come free.
    pub(crate) async fn spare(&self) -> Option<Object> {
        let mut timeouts = self.pool.timeouts();
        timeouts.wait = Some(Duration::ZERO);
        self.pool.timeout_get(&timeouts).await.ok()
    }
}

/// The pool; every connection starts with `search_path` set so the `vector` type and its
/// operators resolve from the extension's schema, and with JIT off (session settings ride
/// on the startup packet, so this costs no round trip).
pub(crate) fn build_pool(
    conn: Connection,
    search_path: &[&str],
    size: usize,
) -> Result<Connections, StoreError> {
    let Connection {
        mut config,
        connector,
    } = conn;
    let server = Server::of(&config);
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    // The names were validated as plain lowercase identifiers, so they need no quoting
    // inside the options string.
    let mut options = config.get_options().unwrap_or_default().to_owned();
    if !options.is_empty() {
        options.push(' ');
    }
    options.push_str("-c search_path=");
    options.push_str(&search_path.join(","));
    // JIT compiles a plan in hundreds of milliseconds: the search statement (and the SQL
    // function it calls per candidate) crosses jit_above_cost on large users or under the
    // HNSW planner settings, yet runs in milliseconds interpreted.
    options.push_str(" -c jit=off");
    config.options(&options);
    // Verified: each checkout first sends an empty statement. A connection whose server
    // restarted or terminated it may not look closed yet (its driver task has not read
    // the socket), and handing it out would fail the caller's statement; one round trip
    // per checkout (about 0.4 ms, docs/BENCHMARKS.md, "PostgreSQL pushdown: latency and
    // overlap") buys that no call fails for it.
    let manager_config = ManagerConfig {
        recycling_method: RecyclingMethod::Verified,
    };
    let manager = match connector {
        Connector::Plain => Manager::from_config(config, tokio_postgres::NoTls, manager_config),
        Connector::Tls(tls) => Manager::from_config(config, tls, manager_config),
    };
    // The most recently used connection first: one client's searches, one after another,
    // keep landing on the same backend, whose caches (catalog, prepared statements, the
    // BM25 statement's generic plan) are warm, instead of cycling through every
    // connection the pool ever opened.
    let pool = Pool::builder(manager)
        .max_size(size)
        .queue_mode(QueueMode::Lifo)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(WAIT_TIMEOUT))
        .create_timeout(Some(CONNECT_TIMEOUT))
        .build()
        .map_err(pg_err)?;
    Ok(Connections { pool, server })
}
