//! What a failed call says: which server it tried (never the password) and why it
//! failed, in words an operator can act on.
//!
//! The driver's own messages hide both: its `Display` is only the kind ("db error",
//! "error connecting to server"), the server's message and the socket error sit in the
//! source chain, and a pool error adds "Error occurred while creating a new object" in
//! front. Every driver and pool error is therefore classified into a [`Cause`] here, and
//! carried as a [`PostgresError`] (the source of `StoreError::Backend`, so callers can
//! downcast to it), with the driver's error kept as its source.

use std::fmt;
use std::time::Duration;

use cortex_core::error::BoxError;
use cortex_core::{error::BackendFault, error::StoreError};
use deadpool_postgres::{PoolError, TimeoutType};
use tokio_postgres::config::Host;
use tokio_postgres::error::{DbError, SqlState};

/// The server a store connects to, as errors name it: host(s) and port(s), database and
/// user. Never the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    addresses: Vec<String>,
    dbname: Option<String>,
    user: Option<String>,
}

impl Server {
    pub(crate) fn of(config: &tokio_postgres::Config) -> Self {
        let ports = config.get_ports();
        let addresses = config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, host)| {
                // As the driver pairs them: one port for every host, or the i-th.
                let port = match ports {
                    [] => 5432,
                    [one] => *one,
                    many => many.get(i).copied().unwrap_or(5432),
                };
                match host {
                    Host::Tcp(name) if name.contains(':') => format!("[{name}]:{port}"),
                    Host::Tcp(name) => format!("{name}:{port}"),
                    #[cfg(unix)]
                    Host::Unix(dir) => format!("{}/.s.PGSQL.{port}", dir.display()),
                }
            })
            .collect();
        Self {
            addresses,
            dbname: config.get_dbname().map(str::to_owned),
            user: config.get_user().map(str::to_owned),
        }
    }

    /// Where it listens (`host:port`, comma-separated when there are several).
    pub fn addresses(&self) -> &[String] {
        &self.addresses
    }

    /// Whether `other` is the same database on the same server (whichever user connects):
    /// the same addresses and database, a missing database name meaning the user's, as
    /// the server reads it.
    pub(crate) fn same_database(&self, other: &Server) -> bool {
        let database = |s: &Server| s.dbname.clone().or_else(|| s.user.clone());
        self.addresses == other.addresses && database(self) == database(other)
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addresses.is_empty() {
            true => f.write_str("the default server")?,
            false => f.write_str(&self.addresses.join(","))?,
        }
        match (&self.dbname, &self.user) {
            (Some(db), Some(user)) => write!(f, " (database \"{db}\", user \"{user}\")"),
            (Some(db), None) => write!(f, " (database \"{db}\")"),
            (None, Some(user)) => write!(f, " (user \"{user}\")"),
            (None, None) => Ok(()),
        }
    }
}

/// What a missing answer most likely means, in every message that reports one.
const NO_ANSWER_WHY: &str = "the server, or the network path to it, is down or drops \
     packets without closing the connection";

/// Why a call to the server failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// Nothing accepted the TCP connection: the server is down or restarting, or listens
    /// elsewhere.
    Refused,
    /// The connection attempt got no answer in time.
    TimedOut,
    /// Nothing came back within a deadline of the store's own (`setting` names it): on a
    /// network path that drops packets without closing the connection, nothing else would
    /// end the wait.
    NoAnswer { waited: Duration, setting: String },
    /// The server is shutting down, or terminated the session (SQLSTATE 57P01 admin
    /// shutdown or `pg_terminate_backend`, 57P02 crash shutdown).
    ShuttingDown { code: String, message: String },
    /// The server is up but not accepting connections yet, or any more (57P03: starting
    /// up, shutting down, in recovery).
    NotAccepting { code: String, message: String },
    /// The server refused the credentials or the role (28P01, 28000), or the client had
    /// none to give.
    Authentication {
        code: Option<String>,
        message: String,
    },
    /// The TLS handshake failed, or the server does not offer TLS where it is required.
    Tls(String),
    /// The connection closed under a call: the server went away or the network dropped
    /// it.
    Closed,
    /// The host name does not resolve: no such name (a temporary failure of the resolver
    /// is a [`Network`](Cause::Network) error).
    UnknownHost(String),
    /// Another socket-level failure (the network is unreachable, the resolver did not
    /// answer).
    Network(String),
    /// The server refused the statement (`detail` is left out of the message: it can quote
    /// a whole failing row).
    Server {
        code: String,
        message: String,
        detail: Option<String>,
        hint: Option<String>,
    },
    /// The settings cannot work as given, found by the driver itself: above all, the
    /// server asks for a password and the URL has none.
    Settings(String),
    /// Anything else the driver reported.
    Other(String),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Refused => f.write_str(
                "connection refused: nothing is listening there (is the server running, \
                 restarting, or on another host or port?)",
            ),
            Cause::TimedOut => f.write_str("timed out: the server did not answer in time"),
            Cause::NoAnswer { waited, setting } => write!(
                f,
                "no answer within {waited:?} ({setting}): {NO_ANSWER_WHY}"
            ),
            Cause::ShuttingDown { code, message } => write!(
                f,
                "the server is shutting down or terminated the connection (SQLSTATE {code}: \
                 {message})"
            ),
            Cause::NotAccepting { code, message } => write!(
                f,
                "the server is not accepting connections (SQLSTATE {code}: {message})"
            ),
            Cause::Authentication {
                code: Some(code),
                message,
            } => write!(f, "authentication failed (SQLSTATE {code}: {message})"),
            Cause::Authentication {
                code: None,
                message,
            } => write!(f, "authentication failed: {message}"),
            Cause::Tls(message) => write!(f, "TLS failed: {message}"),
            Cause::Closed => f.write_str(
                "the connection closed (the server restarted or terminated the session, or \
                 the network dropped it)",
            ),
            Cause::UnknownHost(message) => write!(
                f,
                "the host name does not resolve ({message}): is the host in the URL spelled \
                 right?"
            ),
            Cause::Network(message) => write!(f, "network error: {message}"),
            // Not the detail: it can quote a whole failing row (content, embedding).
            Cause::Server {
                code,
                message,
                hint,
                ..
            } => {
                write!(f, "{message} (SQLSTATE {code})")?;
                match hint {
                    Some(hint) => write!(f, "; hint: {hint}"),
                    None => Ok(()),
                }
            }
            Cause::Settings(message) if message == "password missing" => f.write_str(
                "the server asks for a password and the URL gives none \
                 (postgres://user:password@host/database)",
            ),
            Cause::Settings(message) => write!(f, "the connection settings are wrong: {message}"),
            Cause::Other(message) => f.write_str(message),
        }
    }
}

impl Cause {
    /// Whether the settings are at fault, so that trying again with them cannot succeed:
    /// the host name does not resolve, the server refused the credentials or the role
    /// (28P01, 28000), or the database does not exist (3D000). A refused or dropped
    /// connection, a timeout or a server starting up or shutting down is not: those pass.
    /// (A refused connection when a store is first opened may well be a wrong port; the
    /// caller, which knows whether the store was ever reached, decides.)
    pub fn is_configuration(&self) -> bool {
        match self {
            Cause::UnknownHost(_) | Cause::Authentication { .. } | Cause::Settings(_) => true,
            Cause::Server { code, .. } => code == SqlState::INVALID_CATALOG_NAME.code(),
            _ => false,
        }
    }
}

/// A Postgres failure, classified (the source of `StoreError::Backend`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PostgresError {
    /// A new connection could not be opened.
    #[error("cannot connect to {server}: {cause}")]
    Connect {
        server: Server,
        cause: Cause,
        #[source]
        source: Option<tokio_postgres::Error>,
    },
    /// Every pooled connection stayed in use for the whole wait.
    #[error("no connection to {server} came free within {waited:?}: all {size} are in use")]
    PoolExhausted {
        server: Server,
        waited: Duration,
        size: usize,
    },
    /// A call got no answer within its deadline (see
    /// [`Timeouts::call_deadline`](crate::config::Timeouts::call_deadline)); the
    /// connections it held were closed, never handed out again.
    #[error(
        "the database at {server} did not answer within {waited:?} ({setting}): \
         {NO_ANSWER_WHY}; the call was abandoned and its connections closed"
    )]
    NoAnswer {
        server: Server,
        waited: Duration,
        setting: String,
    },
    /// A call on an open connection failed.
    #[error("{cause}")]
    Call {
        cause: Cause,
        #[source]
        source: Option<BoxError>,
    },
}

/// Classified for callers that do not know Postgres: the settings' faults of a failed
/// connection, everything else [`BackendFault::Other`].
impl From<PostgresError> for StoreError {
    fn from(e: PostgresError) -> Self {
        let fault = match &e {
            PostgresError::Connect { cause, .. } => match cause {
                Cause::Refused => BackendFault::Refused,
                Cause::UnknownHost(_) => BackendFault::UnknownHost,
                Cause::Authentication { .. } => BackendFault::Authentication,
                Cause::Settings(_) => BackendFault::InvalidSettings,
                other if other.is_configuration() => BackendFault::MissingDatabase,
                _ => BackendFault::Other,
            },
            _ => BackendFault::Other,
        };
        StoreError::backend_fault("postgres", fault, e)
    }
}

impl PostgresError {
    /// Why it failed.
    pub fn cause(&self) -> Option<&Cause> {
        match self {
            PostgresError::Connect { cause, .. } | PostgresError::Call { cause, .. } => Some(cause),
            PostgresError::PoolExhausted { .. } | PostgresError::NoAnswer { .. } => None,
        }
    }

    /// The server's SQLSTATE, when the server reported the failure.
    pub fn code(&self) -> Option<&SqlState> {
        let source = match self {
            PostgresError::Connect { source, .. } => source.as_ref(),
            PostgresError::Call { source, .. } => source
                .as_ref()
                .and_then(|s| s.downcast_ref::<tokio_postgres::Error>()),
            PostgresError::PoolExhausted { .. } | PostgresError::NoAnswer { .. } => None,
        };
        source.and_then(tokio_postgres::Error::code)
    }

    /// Whether the server could not be reached or went away: no connection could be
    /// opened, none came back within a deadline, or the one in use closed or was
    /// terminated (a read replica that fails so is skipped until it answers again). A
    /// statement the server refused is not, nor a pool whose connections are all busy.
    pub(crate) fn is_unreachable(&self) -> bool {
        match self {
            PostgresError::Connect { .. } | PostgresError::NoAnswer { .. } => true,
            PostgresError::PoolExhausted { .. } => false,
            PostgresError::Call { cause, .. } => matches!(
                cause,
                Cause::Refused
                    | Cause::TimedOut
                    | Cause::NoAnswer { .. }
                    | Cause::ShuttingDown { .. }
                    | Cause::NotAccepting { .. }
                    | Cause::Closed
                    | Cause::Network(_)
            ),
        }
    }

    /// Opening a connection to `server` failed.
    pub(crate) fn connect(server: &Server, e: tokio_postgres::Error) -> Self {
        PostgresError::Connect {
            server: server.clone(),
            cause: classify(&e),
            source: Some(e),
        }
    }

    /// Opening a connection to `server` got no answer within `connect`, the connect
    /// timeout in effect.
    pub(crate) fn connect_timeout(server: &Server, connect: Duration) -> Self {
        PostgresError::Connect {
            server: server.clone(),
            cause: Cause::NoAnswer {
                waited: connect,
                setting: "connect_timeout".into(),
            },
            source: None,
        }
    }

    /// Taking a connection from the pool (`size` at most) failed: opening one (within
    /// `connect_within`), or waiting for one (`waited`).
    pub(crate) fn pool(
        server: &Server,
        size: usize,
        waited: Duration,
        connect_within: Duration,
        e: PoolError,
    ) -> Self {
        let connect = |cause| PostgresError::Connect {
            server: server.clone(),
            cause,
            source: None,
        };
        match e {
            PoolError::Backend(e) => Self::connect(server, e),
            PoolError::Timeout(TimeoutType::Wait) => PostgresError::PoolExhausted {
                server: server.clone(),
                waited,
                size,
            },
            PoolError::Timeout(TimeoutType::Create) => {
                Self::connect_timeout(server, connect_within)
            }
            // Not returned by the pool (a connection slow to recycle is dropped and the
            // next one tried), but it means the same.
            PoolError::Timeout(TimeoutType::Recycle) => connect(Cause::TimedOut),
            PoolError::Closed => connect(Cause::Other("the store's pool is closed".into())),
            other => connect(Cause::Other(other.to_string())),
        }
    }

    /// A call failed with `e`: a driver error is classified, anything else kept as it is.
    pub(crate) fn call(e: BoxError) -> BoxError {
        match e.downcast::<tokio_postgres::Error>() {
            Ok(e) => Box::new(PostgresError::Call {
                cause: classify(&e),
                source: Some(e),
            }),
            Err(e) => match e.downcast::<PoolError>() {
                // A pool used without the store's server at hand (a tool's, a test's).
                Ok(e) => Box::new(PostgresError::Call {
                    cause: match *e {
                        PoolError::Backend(e) => classify(&e),
                        other => Cause::Other(other.to_string()),
                    },
                    source: None,
                }),
                Err(e) => e,
            },
        }
    }
}

/// What a driver error means.
pub(crate) fn classify(e: &tokio_postgres::Error) -> Cause {
    if let Some(db) = e.as_db_error() {
        return from_server(db);
    }
    let mut io_error = None;
    let mut innermost = None;
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if io_error.is_none() {
            io_error = s.downcast_ref::<std::io::Error>();
        }
        innermost = Some(s);
        source = s.source();
    }
    let detail = innermost.map_or_else(String::new, ToString::to_string);
    // The driver's kinds are private; its display names them.
    match e.to_string().as_str() {
        "error performing TLS handshake" => return Cause::Tls(detail),
        "authentication error" => {
            return Cause::Authentication {
                code: None,
                message: detail,
            };
        }
        "timeout waiting for server" => return Cause::TimedOut,
        "invalid configuration" => return Cause::Settings(detail),
        _ => {}
    }
    if let Some(io) = io_error {
        use std::io::ErrorKind;
        return match io.kind() {
            ErrorKind::ConnectionRefused => Cause::Refused,
            ErrorKind::TimedOut => Cause::TimedOut,
            ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe
            | ErrorKind::UnexpectedEof => Cause::Closed,
            _ if is_unknown_host(io) => Cause::UnknownHost(io.to_string()),
            _ => Cause::Network(io.to_string()),
        };
    }
    if e.is_closed() {
        return Cause::Closed;
    }
    match detail.is_empty() {
        true => Cause::Other(e.to_string()),
        false => Cause::Other(format!("{e}: {detail}")),
    }
}

/// Whether the resolver answered that the name does not exist. The standard library
/// gives a failed `getaddrinfo` no error kind of its own (only the unstable
/// `Uncategorized`) and no OS code, so the text it writes is all there is: "failed to
/// lookup address information: " and the resolver's message. Its temporary failure
/// (`EAI_AGAIN`, "Temporary failure in name resolution") stays a network error.
fn is_unknown_host(io: &std::io::Error) -> bool {
    let text = io.to_string();
    io.raw_os_error().is_none()
        && text.starts_with("failed to lookup address information")
        && !text.to_ascii_lowercase().contains("temporary")
}

fn from_server(db: &DbError) -> Cause {
    let code = db.code().code().to_owned();
    let message = db.message().to_owned();
    let state = db.code();
    if *state == SqlState::ADMIN_SHUTDOWN || *state == SqlState::CRASH_SHUTDOWN {
        Cause::ShuttingDown { code, message }
    } else if *state == SqlState::CANNOT_CONNECT_NOW {
        Cause::NotAccepting { code, message }
    } else if *state == SqlState::INVALID_PASSWORD
        || *state == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
    {
        Cause::Authentication {
            code: Some(code),
            message,
        }
    } else {
        Cause::Server {
            code,
            message,
            detail: db.detail().map(str::to_owned),
            hint: db.hint().map(str::to_owned),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(url: &str) -> String {
        let config: tokio_postgres::Config = url.parse().unwrap_or_else(|e| panic!("{e}"));
        Server::of(&config).to_string()
    }

    #[test]
    fn a_server_is_named_without_its_password() {
        assert_eq!(
            server("postgres://cortex:s3cret@db.internal:6543/memories"),
            "db.internal:6543 (database \"memories\", user \"cortex\")"
        );
        assert_eq!(
            server("host=a,b port=1,2 user=u password=s3cret"),
            "a:1,b:2 (user \"u\")"
        );
        assert_eq!(server("postgres://[::1]/x"), "[::1]:5432 (database \"x\")");
        assert!(!server("postgres://u:s3cret@h/d").contains("s3cret"));
    }

    #[test]
    fn only_the_settings_faults_are_configuration_errors() {
        let auth = Cause::Authentication {
            code: Some("28P01".into()),
            message: "password authentication failed for user \"ada\"".into(),
        };
        let no_database = Cause::Server {
            code: "3D000".into(),
            message: "database \"nope\" does not exist".into(),
            detail: None,
            hint: None,
        };
        let unknown = Cause::UnknownHost(
            "failed to lookup address information: Name or service not known".into(),
        );
        let no_password = Cause::Settings("password missing".into());
        assert!(no_password.to_string().contains("asks for a password"));
        for cause in [&auth, &no_database, &unknown, &no_password] {
            assert!(cause.is_configuration(), "{cause}");
        }
        let busy = Cause::Server {
            code: "40001".into(),
            message: "could not serialize access".into(),
            detail: None,
            hint: None,
        };
        for cause in [
            Cause::Refused,
            Cause::TimedOut,
            Cause::Closed,
            Cause::Network("network is unreachable".into()),
            busy,
            Cause::NotAccepting {
                code: "57P03".into(),
                message: "the database system is starting up".into(),
            },
        ] {
            assert!(!cause.is_configuration(), "{cause}");
        }
    }

    #[test]
    fn a_name_the_resolver_does_not_know_is_an_unknown_host() {
        use std::io::{Error, ErrorKind};
        let nxdomain =
            Error::other("failed to lookup address information: Name or service not known");
        assert!(is_unknown_host(&nxdomain));
        let again = Error::other(
            "failed to lookup address information: Temporary failure in name resolution",
        );
        assert!(
            !is_unknown_host(&again),
            "the resolver may answer next time"
        );
        assert!(!is_unknown_host(&Error::from(
            ErrorKind::NetworkUnreachable
        )));
    }

    #[test]
    fn causes_say_what_to_check() {
        assert!(Cause::Refused.to_string().contains("refused"));
        let shutdown = Cause::ShuttingDown {
            code: "57P01".into(),
            message: "terminating connection due to administrator command".into(),
        };
        assert!(shutdown.to_string().contains("shutting down"), "{shutdown}");
        assert!(shutdown.to_string().contains("57P01"), "{shutdown}");
        let refused_row = Cause::Server {
            code: "23514".into(),
            message: "new row violates check constraint".into(),
            detail: Some("Failing row contains (private words, [0.1,0.2])".into()),
            hint: None,
        };
        assert_eq!(
            refused_row.to_string(),
            "new row violates check constraint (SQLSTATE 23514)"
        );
        let e = PostgresError::PoolExhausted {
            server: Server {
                addresses: vec!["h:5432".into()],
                dbname: None,
                user: None,
            },
            waited: Duration::from_secs(30),
            size: 8,
        };
        assert_eq!(
            e.to_string(),
            "no connection to h:5432 came free within 30s: all 8 are in use"
        );
    }
}
