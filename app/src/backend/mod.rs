//! The storage backends, registered once. A backend is a [`BackendKind`] (how settings
//! select and build it) and, once configured, a [`Backend`] (open the store and its keys,
//! say whether two settings name one store, look without writing, describe). Nothing
//! outside this module names a backend: a third one is a crate, a file here and one line
//! in [`REGISTERED`].

mod postgres;
mod sqlite;

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use cortex_core::{error::StoreError, keys::KeyStore, transfer::TransferStore};

pub use postgres::PostgresBackend;
pub use sqlite::SqliteBackend;

use crate::env::ConfigError;

/// Every backend this build opens. The first whose variable is set is chosen; with none
/// set, the one that [`is_default`](BackendKind::is_default).
pub(crate) const REGISTERED: &[&dyn BackendKind] = &[&sqlite::KIND, &postgres::KIND];

/// A configured store: where it is and how to reach it.
pub type Storage = Arc<dyn Backend>;

/// How settings select and build one backend.
pub trait BackendKind: Sync {
    /// The backend's name (`sqlite`, `postgres`).
    fn name(&self) -> &'static str;
    /// The environment variable that selects it (`CORTEX_DB_PATH`, ...).
    fn variable(&self) -> &'static str;
    /// Chosen when no backend's variable is set.
    fn is_default(&self) -> bool {
        false
    }
    /// The URL schemes a migration target (`cortex migrate --to`) names it by; a backend
    /// without any takes plain file paths.
    fn schemes(&self) -> &'static [&'static str];
    /// The backend the environment configures (`var` reads a trimmed, non-empty value).
    fn configure(&self, var: &dyn Fn(&str) -> Option<String>) -> Result<Storage, ConfigError>;
    /// The backend a migration target names: a URL with one of [`schemes`](Self::schemes)
    /// (lower-cased), or a path. `setting` names the target in errors.
    fn for_target(&self, target: &str, setting: &str) -> Result<Storage, StoreError>;
}

/// A look at a store that writes nothing, for `cortex doctor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// The store is there: opening it changes nothing.
    Present,
    /// No store yet; the message says where the first memory will create it.
    Absent(String),
    /// The place could not be looked at; the message says why.
    Unreachable(String),
}

/// What `cortex doctor` reports of a backend, beside the store itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    pub presence: Presence,
    /// Checks of the backend's own (Postgres: pgvector), each named, with what was found
    /// or what to fix.
    pub checks: Vec<(&'static str, Result<String, String>)>,
}

/// The store's size, for `cortex stats`: what each backend can tell, `None` where it
/// cannot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Footprint {
    /// The store, as `cortex stats` names it (`sqlite <path>`, `postgres schema <name>`).
    pub place: String,
    /// Bytes on disk: the SQLite file with its WAL, or every table of the Postgres schema.
    pub bytes: Option<u64>,
    /// SQLite: the index snapshots beside the file.
    pub index_snapshot_bytes: Option<u64>,
    /// Postgres: the HNSW index (0 while there is none) ...
    pub hnsw_index_bytes: Option<u64>,
    /// ... and the server's `shared_buffers`, and whether the index fits in them.
    pub shared_buffers_bytes: Option<u64>,
    pub hnsw_fits: Option<bool>,
}

/// One configured store.
#[async_trait]
pub trait Backend: fmt::Debug + Send + Sync + Any {
    /// The backend's name (`sqlite`, `postgres`).
    fn name(&self) -> &'static str;
    /// Where the store is, for people (`SQLite <path>`, `PostgreSQL, schema <name>`);
    /// never a password.
    fn describe(&self) -> String;
    /// Opens the store, creating or migrating it.
    async fn open(&self) -> Result<Arc<dyn TransferStore>, StoreError>;
    /// The API keys of the store: a handle of its own on the same store.
    async fn open_keys(&self) -> Result<Arc<dyn KeyStore>, StoreError>;
    /// Whether `other` names this very store (a migration into it would copy it onto
    /// itself); stores of different backends never are.
    fn same_store(&self, other: &dyn Backend) -> Result<bool, StoreError>;
    /// Looks at the store without creating or changing anything.
    async fn inspect(&self) -> Inspection;
    /// Its size; a part that cannot be read is `None` (logged).
    async fn footprint(&self) -> Footprint;
    /// For [`same_store`](Self::same_store) and tests: the concrete backend.
    fn as_any(&self) -> &dyn Any;
}

/// The backend the settings read through `var` select: the one whose variable is set,
/// else the default. Two set is refused: silently preferring one would write memories
/// somewhere the user did not expect.
pub(crate) fn from_env(var: &dyn Fn(&str) -> Option<String>) -> Result<Storage, ConfigError> {
    let chosen: Vec<&dyn BackendKind> = REGISTERED
        .iter()
        .copied()
        .filter(|kind| var(kind.variable()).is_some())
        .collect();
    match chosen.as_slice() {
        [kind] => kind.configure(var),
        [] => match REGISTERED.iter().find(|kind| kind.is_default()) {
            Some(kind) => kind.configure(var),
            None => Err(ConfigError::Conflict(format!(
                "no store is configured: set one of {}",
                variables(REGISTERED)
            ))),
        },
        [_, _] => Err(ConfigError::Conflict(format!(
            "{} are both set; set one of them to choose the store, not both",
            variables(&chosen)
        ))),
        several => Err(ConfigError::Conflict(format!(
            "{} are all set; set exactly one of them to choose the store",
            variables(several)
        ))),
    }
}

fn variables(kinds: &[&dyn BackendKind]) -> String {
    let names: Vec<&str> = kinds.iter().map(|kind| kind.variable()).collect();
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The backend a migration target names by `scheme` (lower-cased), or, with no scheme,
/// the one that takes file paths; `None` when no backend takes it.
pub fn kind_for_target(scheme: Option<&str>) -> Option<&'static dyn BackendKind> {
    REGISTERED.iter().copied().find(|kind| match scheme {
        Some(scheme) => kind.schemes().contains(&scheme),
        None => kind.schemes().is_empty(),
    })
}

/// Every URL scheme a migration target may use, in registration order.
pub fn target_schemes() -> Vec<&'static str> {
    REGISTERED
        .iter()
        .flat_map(|kind| kind.schemes().iter().copied())
        .collect()
}

/// The names of the registered backends, in registration order.
pub fn registered_names() -> Vec<&'static str> {
    REGISTERED.iter().map(|kind| kind.name()).collect()
}
