//! Connections: one direct connection for the migration, then the pool, whose errors
//! name the server and the cause (see [`crate::error`]). Every connection is opened with
//! the network timeouts of [`Timeouts`] (TCP keepalives, `TCP_USER_TIMEOUT`, a bounded
//! handshake), and every pooled one with the server's `statement_timeout`; the pool runs
//! each call under its deadline (see [`crate::deadline`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use cortex_core::error::StoreError;
use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, QueueMode, RecyclingMethod, Runtime,
};
use tokio_postgres::Client;

use crate::config::Timeouts;
use crate::deadline::{self, Abandoned, Deadline};
use crate::error::{PostgresError, Server};
use crate::pg_err;
use crate::tls::{Connection, Connector};

/// How long a caller waits for a free pooled connection.
const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how connections are opened: the parsed URL with the network timeouts
/// applied where the URL does not set its own.
pub(crate) struct Endpoint {
    connection: Connection,
    server: Server,
    /// The connect timeout in effect, per address tried (the driver's `connect_timeout`).
    connect: Duration,
    /// How long opening one connection may take in all, handshake included: the connect
    /// timeout for each host, as libpq allows each host its own.
    opening: Duration,
    statement: Option<Duration>,
    deadline: Option<Deadline>,
}

impl Endpoint {
    /// The settings of `connection` with `timeouts` applied where its URL is silent. The
    /// URL's libpq parameters (`connect_timeout`, `keepalives`, `keepalives_idle`,
    /// `keepalives_interval`, `keepalives_retries`, `tcp_user_timeout`) win.
    pub(crate) fn new(connection: Connection, timeouts: &Timeouts) -> Self {
        let Connection {
            mut config,
            connector,
        } = connection;
        let connect = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(timeouts.connect);
        config.connect_timeout(connect);
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(timeouts.tcp_user_timeout);
        }
        if config.get_keepalives() {
            // The driver reports its own default (two hours) as the idle time whether or not
            // the URL set one: only a value other than that default is the URL's.
            if config.get_keepalives_idle() == tokio_postgres::Config::new().get_keepalives_idle() {
                config.keepalives_idle(timeouts.keepalive_idle);
            }
            if config.get_keepalives_interval().is_none() {
                config.keepalives_interval(timeouts.keepalive_interval);
            }
            if config.get_keepalives_retries().is_none() {
                config.keepalives_retries(timeouts.keepalive_retries);
            }
        }
        let hosts = u32::try_from(config.get_hosts().len().max(1)).unwrap_or(u32::MAX);
        Self {
            server: Server::of(&config),
            connection: Connection { config, connector },
            connect,
            opening: connect.saturating_mul(hosts),
            statement: timeouts.statement,
            deadline: Deadline::of(timeouts, connect),
        }
    }

    /// The deadline of each call over these connections, if any.
    pub(crate) fn deadline(&self) -> Option<&Deadline> {
        self.deadline.as_ref()
    }

    pub(crate) fn server(&self) -> &Server {
        &self.server
    }
}

/// Opens one connection outside the pool, its driver task spawned on the runtime. It has
/// no `statement_timeout`: it runs the migration, which may rightly take long (a first
/// re-analysis of every memory, a wait for another process migrating); the keepalives and
/// `TCP_USER_TIMEOUT` still end it on a dead link.
pub(crate) async fn connect_one(endpoint: &Endpoint) -> Result<Client, StoreError> {
    let config = &endpoint.connection.config;
    match &endpoint.connection.connector {
        Connector::Plain => {
            let (client, connection) =
                opened(endpoint, config.connect(tokio_postgres::NoTls)).await?;
            tokio::spawn(drive(connection));
            Ok(client)
        }
        Connector::Tls(tls) => {
            let (client, connection) = opened(endpoint, config.connect(tls.clone())).await?;
            tokio::spawn(drive(connection));
            Ok(client)
        }
    }
}

/// `connect` within the endpoint's opening time: the driver's own `connect_timeout` covers
/// the TCP connect only, and a server that accepted the connection may never answer the
/// startup message.
async fn opened<T>(
    endpoint: &Endpoint,
    connect: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, StoreError> {
    let failed = StoreError::from;
    match tokio::time::timeout(endpoint.opening, connect).await {
        Ok(opened) => opened.map_err(|e| failed(PostgresError::connect(&endpoint.server, e))),
        Err(_) => Err(failed(PostgresError::connect_timeout(
            &endpoint.server,
            endpoint.opening,
        ))),
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

/// The pool, the server its errors name and the deadline of each call.
#[derive(Clone)]
pub(crate) struct Connections {
    pool: Pool,
    server: Server,
    /// How long opening a connection may take (named by a timed-out checkout).
    opening: Duration,
    deadline: Option<Deadline>,
    abandoned: Arc<Abandoned>,
}

impl Connections {
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A pooled connection: an idle one that is still open, or a new one.
    pub(crate) async fn get(&self) -> Result<Object, StoreError> {
        let client = self.pool.get().await.map_err(|e| {
            let size = self.pool.status().max_size;
            StoreError::from(PostgresError::pool(
                &self.server,
                size,
                WAIT_TIMEOUT,
                self.opening,
                e,
            ))
        })?;
        deadline::note(&client);
        Ok(client)
    }

    /// A pooled connection if one is idle, or can be opened, right now; never waits for
    /// one to come free.
    pub(crate) async fn spare(&self) -> Option<Object> {
        let mut timeouts = self.pool.timeouts();
        timeouts.wait = Some(Duration::ZERO);
        let client = self.pool.timeout_get(&timeouts).await.ok()?;
        deadline::note(&client);
        Some(client)
    }

    /// The server these connections go to, as errors and logs name it.
    pub(crate) fn server(&self) -> &Server {
        &self.server
    }

    /// Closes every idle connection: its server went down, so each would cost the next
    /// caller a recycle timeout to find out.
    pub(crate) fn close_idle(&self) {
        self.pool.retain(|_, _| false);
    }

    /// [`bounded`](Self::bounded), and given up as soon as `cut` completes (see
    /// [`deadline::within_unless`]): `None` then, its connections closed.
    pub(crate) async fn bounded_unless<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
        cut: impl Future<Output = ()>,
    ) -> Option<Result<T, StoreError>> {
        let limit = self.deadline.as_ref().map(Deadline::limit);
        match deadline::within_unless(limit, &self.pool, &self.abandoned, call, cut).await {
            deadline::Ended::Done(out) => Some(out),
            deadline::Ended::TimedOut => self.deadline.as_ref().map(|d| Err(d.error(&self.server))),
            deadline::Ended::Cut => None,
        }
    }

    /// Runs one call of the store under its deadline (see [`crate::deadline`]).
    pub(crate) async fn bounded<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let Some(deadline) = &self.deadline else {
            return call.await;
        };
        deadline::within(deadline.limit(), &self.pool, &self.abandoned, call)
            .await
            .unwrap_or_else(|| Err(deadline.error(&self.server)))
    }
}

/// The pool; every connection starts with `search_path` set so the `vector` type and its
/// operators resolve from the extension's schema, with JIT off, and with the statement
/// timeout (session settings ride on the startup packet, so this costs no round trip).
pub(crate) fn build_pool(
    endpoint: Endpoint,
    search_path: &[&str],
    size: usize,
) -> Result<Connections, StoreError> {
    let Endpoint {
        connection: Connection {
            mut config,
            connector,
        },
        server,
        connect,
        opening,
        statement,
        deadline,
    } = endpoint;
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
    if let (Some(statement), Some(deadline)) = (statement, &deadline) {
        // A transaction is idle between a call's round trips only: one idle longer than a
        // whole call belongs to a call abandoned past its deadline, whose client will never
        // end it, and would hold its locks until the server's own keepalive noticed.
        options.push_str(&format!(
            " -c statement_timeout={} -c idle_in_transaction_session_timeout={}",
            statement.as_millis(),
            deadline.limit().as_millis()
        ));
    }
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
    let abandoned = Arc::new(Abandoned::default());
    // The most recently used connection first: one client's searches, one after another,
    // keep landing on the same backend, whose caches (catalog, prepared statements, the
    // BM25 statement's generic plan) are warm, instead of cycling through every
    // connection the pool ever opened. A connection whose empty statement gets no answer
    // within the connect timeout is dropped and the next one tried: over a dead link it
    // would wait forever.
    let pool = Pool::builder(manager)
        .max_size(size)
        .queue_mode(QueueMode::Lifo)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(WAIT_TIMEOUT))
        .create_timeout(Some(opening))
        .recycle_timeout(Some(connect))
        .pre_recycle(abandoned.hook())
        .build()
        .map_err(pg_err)?;
    Ok(Connections {
        pool,
        server,
        opening,
        deadline,
        abandoned,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{
        DEFAULT_CONNECT_TIMEOUT, DEFAULT_KEEPALIVE_IDLE, DEFAULT_KEEPALIVE_INTERVAL,
        DEFAULT_KEEPALIVE_RETRIES, DEFAULT_STATEMENT_TIMEOUT, DEFAULT_TCP_USER_TIMEOUT,
    };

    fn endpoint(url: &str) -> Endpoint {
        Endpoint::new(crate::tls::parse(url).unwrap(), &Timeouts::default())
    }

    #[test]
    fn every_connection_gets_the_network_timeouts() {
        let e = endpoint("postgres://u@h/db");
        let c = &e.connection.config;
        assert_eq!(c.get_connect_timeout(), Some(&DEFAULT_CONNECT_TIMEOUT));
        assert_eq!(c.get_tcp_user_timeout(), Some(&DEFAULT_TCP_USER_TIMEOUT));
        assert!(c.get_keepalives());
        assert_eq!(c.get_keepalives_idle(), DEFAULT_KEEPALIVE_IDLE);
        assert_eq!(
            c.get_keepalives_interval(),
            Some(DEFAULT_KEEPALIVE_INTERVAL)
        );
        assert_eq!(c.get_keepalives_retries(), Some(DEFAULT_KEEPALIVE_RETRIES));
        assert_eq!(e.opening, DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(
            e.deadline().map(Deadline::limit),
            Some(DEFAULT_STATEMENT_TIMEOUT + DEFAULT_CONNECT_TIMEOUT)
        );
    }

    #[test]
    fn the_urls_own_network_settings_win() {
        let e = endpoint(
            "postgres://u@h/db?connect_timeout=3&keepalives_idle=60&keepalives_interval=5\
             &keepalives_retries=9&tcp_user_timeout=7",
        );
        let c = &e.connection.config;
        let secs = Duration::from_secs;
        assert_eq!(c.get_connect_timeout(), Some(&secs(3)));
        assert_eq!(c.get_keepalives_idle(), secs(60));
        assert_eq!(c.get_keepalives_interval(), Some(secs(5)));
        assert_eq!(c.get_keepalives_retries(), Some(9));
        assert_eq!(c.get_tcp_user_timeout(), Some(&secs(7)));
        assert_eq!(
            e.deadline().map(Deadline::limit),
            Some(DEFAULT_STATEMENT_TIMEOUT + secs(3))
        );
        let off = endpoint("postgres://u@h/db?keepalives=0");
        assert!(!off.connection.config.get_keepalives());
        assert_eq!(off.connection.config.get_keepalives_interval(), None);
        // libpq gives each host of a multi-host URL its own connect timeout.
        assert_eq!(
            endpoint("host=a,b user=u").opening,
            DEFAULT_CONNECT_TIMEOUT * 2
        );
    }
}
