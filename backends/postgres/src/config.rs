//! How a [`PostgresStore`](crate::PostgresStore) is configured: in code or from the
//! environment.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use cortex_core::error::StoreError;
use cortex_core::setting::{SWITCH_WORDS, parse_switch};

use crate::error::Server;
pub use crate::redact::redact_url;
use crate::replicas::ReadReplicas;

/// Connections per store unless `CORTEX_DATABASE_POOL_SIZE` says otherwise.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// Below this many live memories for a user, `auto` searches exactly. An exact scan at
/// this size stays within a few tens of milliseconds on a small machine (see
/// docs/BENCHMARKS.md), and below it an approximate index buys little and costs recall.
pub const DEFAULT_HNSW_THRESHOLD: u64 = 20_000;

/// How the HNSW index is built: pgvector's `m` (links a node keeps a layer) and
/// `ef_construction` (candidates kept while linking). Larger finds more of the exact
/// neighbours at a given `ef_search`, for a longer build and a larger graph. They apply
/// when the index is built: an index built with other values is kept, with a warning,
/// until it is dropped (the next search in HNSW mode builds it again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HnswBuild {
    pub m: u32,
    pub ef_construction: u32,
}

impl Default for HnswBuild {
    /// pgvector's own defaults.
    fn default() -> Self {
        Self {
            m: 16,
            ef_construction: 64,
        }
    }
}

impl HnswBuild {
    /// pgvector's ranges: `m` 2-100, `ef_construction` 4-1000 and at least twice `m`.
    pub fn check(self) -> Result<Self, StoreError> {
        if !(2..=100).contains(&self.m) {
            return Err(StoreError::Config(format!(
                "CORTEX_PG_HNSW_M must be 2 to 100 (pgvector's range); got {}",
                self.m
            )));
        }
        if !(4..=1000).contains(&self.ef_construction) || self.ef_construction < 2 * self.m {
            return Err(StoreError::Config(format!(
                "CORTEX_PG_HNSW_EF_CONSTRUCTION must be 4 to 1000 and at least twice \
                 CORTEX_PG_HNSW_M ({}); got {}",
                self.m, self.ef_construction
            )));
        }
        Ok(self)
    }
}

/// Which approximate index `hnsw` mode (and `auto` past its threshold) searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AnnIndex {
    /// pgvector's HNSW graph: good recall on any data and no training, a slow build.
    #[default]
    Hnsw,
    /// pgvector's IVFFlat: the vectors split into k-means lists when the index is built,
    /// a search scanning the lists nearest the query (see [`IvfFlat`]). Builds many times
    /// faster than HNSW; the lists are trained on the rows there at build time, so a store
    /// that has grown far past them needs the index built again (the store logs when).
    IvfFlat,
}

impl AnnIndex {
    pub fn as_str(self) -> &'static str {
        match self {
            AnnIndex::Hnsw => "hnsw",
            AnnIndex::IvfFlat => "ivfflat",
        }
    }
}

impl FromStr for AnnIndex {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "hnsw" | "" => Ok(AnnIndex::Hnsw),
            "ivfflat" => Ok(AnnIndex::IvfFlat),
            other => Err(StoreError::Config(format!(
                "CORTEX_PG_ANN_INDEX must be hnsw or ivfflat; got {other:?}"
            ))),
        }
    }
}

/// pgvector's upper bound for an IVFFlat index's lists.
pub const MAX_IVF_LISTS: u32 = 32_768;

/// How the IVFFlat index is built and searched (with [`AnnIndex::IvfFlat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IvfFlat {
    /// Lists when the index is built; `None` takes them from the live rows then, as
    /// pgvector advises: a list per thousand rows up to a million rows, the square root of
    /// the rows beyond.
    pub lists: Option<u32>,
    /// `ivfflat.probes`, the lists a search scans; `None` is the square root of the
    /// index's lists, rounded up. More finds more of the exact neighbours, slower; as many
    /// as the lists scans every vector.
    pub probes: Option<u32>,
}

impl IvfFlat {
    /// pgvector's ranges: lists 1 to 32,768, probes at least 1.
    pub fn check(self) -> Result<Self, StoreError> {
        if let Some(lists) = self.lists
            && !(1..=MAX_IVF_LISTS).contains(&lists)
        {
            return Err(StoreError::Config(format!(
                "CORTEX_PG_IVF_LISTS must be 1 to {MAX_IVF_LISTS} (pgvector's range); got {lists}"
            )));
        }
        if self.probes == Some(0) {
            return Err(StoreError::Config(
                "CORTEX_PG_IVF_PROBES must be at least 1".into(),
            ));
        }
        Ok(self)
    }
}

/// How many postings a search's rarest query terms may have in all for the BM25 side to
/// try pruning (see `search`): what it reads before it knows whether pruning holds.
pub const DEFAULT_PRUNE_BUDGET: u64 = 8192;

/// What one key lookup of a pruned query term costs, in postings scanned: about 1.9 us
/// against 0.36 us at 100k memories (docs/BENCHMARKS.md).
pub const DEFAULT_LOOKUP_COST: u64 = 5;

/// How long opening one connection may take (TCP, TLS, startup and authentication).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's `statement_timeout` on pooled connections unless
/// `CORTEX_PG_STATEMENT_TIMEOUT_SECS` says otherwise. A search or a memorize takes
/// milliseconds; one statement still running after this is stuck.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// TCP keepalive: a connection idle this long is probed, every interval, and dropped when
/// this many probes go unanswered (about a minute in all, against the operating system's
/// usual two hours and more).
pub const DEFAULT_KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
pub const DEFAULT_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
pub const DEFAULT_KEEPALIVE_RETRIES: u32 = 3;

/// How long data sent to the server may go unacknowledged before the kernel drops the
/// connection (Linux `TCP_USER_TIMEOUT`; elsewhere the system's retransmission limit).
pub const DEFAULT_TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest `CORTEX_PG_STATEMENT_TIMEOUT_SECS` (a day): the server's own limit is
/// about 24 days, and a longer wait is no bound at all.
const MAX_STATEMENT_TIMEOUT_SECS: u64 = 86_400;

/// How long the store waits on the server and on the network path to it, so that a
/// partition that drops packets without closing anything fails calls in bounded time
/// instead of leaving them waiting for an answer that never comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening one connection, handshake included. The URL's `connect_timeout` wins.
    pub connect: Duration,
    /// The server's `statement_timeout` on every pooled connection. The server cannot
    /// report a timeout over a dead link, so each call also has a deadline of its own,
    /// [`Timeouts::call_deadline`]. `None` sets neither. Maintenance (the migration on
    /// open, an HNSW index build, the re-embedding switch) runs without both.
    pub statement: Option<Duration>,
    /// TCP keepalive (idle time before the first probe, time between probes, probes
    /// unanswered before the connection is dropped). The URL's `keepalives_idle`,
    /// `keepalives_interval` and `keepalives_retries` win; `keepalives=0` turns them off.
    pub keepalive_idle: Duration,
    pub keepalive_interval: Duration,
    pub keepalive_retries: u32,
    /// Linux `TCP_USER_TIMEOUT`; the URL's `tcp_user_timeout` (seconds) wins.
    pub tcp_user_timeout: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: DEFAULT_CONNECT_TIMEOUT,
            statement: Some(DEFAULT_STATEMENT_TIMEOUT),
            keepalive_idle: DEFAULT_KEEPALIVE_IDLE,
            keepalive_interval: DEFAULT_KEEPALIVE_INTERVAL,
            keepalive_retries: DEFAULT_KEEPALIVE_RETRIES,
            tcp_user_timeout: DEFAULT_TCP_USER_TIMEOUT,
        }
    }
}

impl Timeouts {
    /// How long one call (a memorize's writes, a recall's search) may wait in all: the
    /// statement timeout, and the connect timeout on top for the round trips around it and
    /// a connection it may have to open. Past it the call fails and the connections it
    /// held are closed, never reused. `connect` is the one in effect (the URL's, if set).
    pub fn call_deadline(&self, connect: Duration) -> Option<Duration> {
        self.statement.map(|statement| statement + connect)
    }
}

/// How the pushdown finds its dense candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DenseMode {
    /// A sequential scan of the user's live memories: the same candidates as the core
    /// index, so results equal the build_index path exactly.
    Exact,
    /// The HNSW index (cosine), with iterative scans so the per-user filter cannot starve
    /// the result. Approximate: its overlap with exact search is measured, not assumed.
    Hnsw,
    /// Exact below [`PostgresConfig::hnsw_threshold`] live memories for the user, HNSW
    /// above.
    #[default]
    Auto,
}

impl DenseMode {
    pub fn as_str(self) -> &'static str {
        match self {
            DenseMode::Exact => "exact",
            DenseMode::Hnsw => "hnsw",
            DenseMode::Auto => "auto",
        }
    }
}

impl FromStr for DenseMode {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "exact" => Ok(DenseMode::Exact),
            "hnsw" => Ok(DenseMode::Hnsw),
            "auto" | "" => Ok(DenseMode::Auto),
            other => Err(StoreError::Config(format!(
                "CORTEX_PG_DENSE_MODE must be exact, hnsw or auto; got {other:?}"
            ))),
        }
    }
}

/// Settings of a Postgres store. The URL may carry a password: `Debug` shows it redacted.
#[derive(Clone)]
pub struct PostgresConfig {
    /// `postgres://user:password@host:port/db?sslmode=...` (or libpq key=value form).
    pub url: String,
    /// Most connections the pool opens.
    pub pool_size: usize,
    /// The schema holding Cortex's tables (created if missing); `None` means `public`.
    pub schema: Option<String>,
    pub dense_mode: DenseMode,
    /// The live-memory count from which `auto` switches to HNSW.
    pub hnsw_threshold: u64,
    /// Whether the store advertises the search pushdown. Off, the engine takes the
    /// build_index path (useful to compare the two, or to spread CPU to the clients).
    pub pushdown: bool,
    /// The BM25 pruning budget of the pushdown (postings of the rarest query terms). Any
    /// value gives the same results; 0 turns pruning off.
    pub prune_budget: u64,
    /// What one key lookup costs against scanning one posting. A pruned search scores
    /// its survivors by looking up the pruned terms, and scans every posting instead when
    /// that reads less by this measure. Any value gives the same results; 0 always looks
    /// up.
    pub lookup_cost: u64,
    /// `hnsw.ef_search` for every HNSW search; `None` picks it from the candidate count
    /// (four times the count, at least 300). Higher finds more of the exact neighbours,
    /// slower.
    pub ef_search: Option<usize>,
    /// How the HNSW index is built when it is (see [`HnswBuild`]).
    pub hnsw_build: HnswBuild,
    /// Which approximate index `hnsw` and `auto` mode build and search.
    pub ann_index: AnnIndex,
    /// How the IVFFlat index is built and searched, when it is the one.
    pub ivfflat: IvfFlat,
    /// Whether a search with query terms may run its dense side on a second pooled
    /// connection, beside the BM25 side, when one is free at that moment (in the same
    /// snapshot; the results are the same either way). Off, every search uses one
    /// connection: fewer connections and less server CPU per search under heavy load.
    pub parallel_search: bool,
    /// Whether an unfiltered HNSW search walks the graph first without pgvector's
    /// iterative scan, and again with it only when that walk returns fewer candidates than
    /// it asked for (the results are the same either way; see `search::transaction`).
    /// Off, every HNSW search scans iteratively from the start.
    pub plain_walk: bool,
    /// How long calls and connections may wait on the server (see [`Timeouts`]).
    pub timeouts: Timeouts,
    /// Hot standbys that serve reads, and the bounds they are held to (none by default).
    pub replicas: ReadReplicas,
}

impl PostgresConfig {
    /// Defaults for everything but the URL.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            pool_size: DEFAULT_POOL_SIZE,
            schema: None,
            dense_mode: DenseMode::default(),
            hnsw_threshold: DEFAULT_HNSW_THRESHOLD,
            pushdown: true,
            prune_budget: DEFAULT_PRUNE_BUDGET,
            lookup_cost: DEFAULT_LOOKUP_COST,
            ef_search: None,
            hnsw_build: HnswBuild::default(),
            ann_index: AnnIndex::default(),
            ivfflat: IvfFlat::default(),
            parallel_search: true,
            plain_walk: true,
            timeouts: Timeouts::default(),
            replicas: ReadReplicas::default(),
        }
    }

    /// Reads `CORTEX_DATABASE_URL` (required), `CORTEX_DATABASE_POOL_SIZE`,
    /// `CORTEX_PG_SCHEMA`, `CORTEX_PG_DENSE_MODE` (exact|hnsw|auto),
    /// `CORTEX_PG_HNSW_THRESHOLD`, `CORTEX_PG_PUSHDOWN` (1/0), `CORTEX_PG_PRUNE_BUDGET`,
    /// `CORTEX_PG_LOOKUP_COST`, `CORTEX_PG_EF_SEARCH` (1-1000), `CORTEX_PG_HNSW_M`,
    /// `CORTEX_PG_HNSW_EF_CONSTRUCTION`, `CORTEX_PG_ANN_INDEX` (hnsw|ivfflat),
    /// `CORTEX_PG_IVF_LISTS`, `CORTEX_PG_IVF_PROBES`,
    /// `CORTEX_PG_PARALLEL_SEARCH` (1/0), `CORTEX_PG_PLAIN_WALK` (1/0),
    /// `CORTEX_PG_STATEMENT_TIMEOUT_SECS` (0 for none), and the read replicas'
    /// `CORTEX_DATABASE_READ_URL`, `CORTEX_PG_READ_WAIT_MS` and
    /// `CORTEX_PG_REPLICA_MAX_LAG_MS` (see [`ReadReplicas`]) through `get`: the app passes its one reader of the process environment
    /// (`cortex_app::env_var`), tests pass a map. The network timeouts other than the
    /// statement's are libpq's URL parameters (see [`Timeouts`]).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, StoreError> {
        let url = get("CORTEX_DATABASE_URL")
            .filter(|u| !u.trim().is_empty())
            .ok_or_else(|| {
                StoreError::Config(
                    "CORTEX_DATABASE_URL is not set; export a postgres:// URL".into(),
                )
            })?;
        let mut config = Self::new(url.trim());
        if let Some(size) = get("CORTEX_DATABASE_POOL_SIZE") {
            config.pool_size = parse_number("CORTEX_DATABASE_POOL_SIZE", &size)?;
            if config.pool_size == 0 {
                return Err(StoreError::Config(
                    "CORTEX_DATABASE_POOL_SIZE must be at least 1".into(),
                ));
            }
        }
        if let Some(schema) = get("CORTEX_PG_SCHEMA").filter(|s| !s.trim().is_empty()) {
            crate::names::validate_schema_name(schema.trim())?;
            config.schema = Some(schema.trim().to_owned());
        }
        if let Some(mode) = get("CORTEX_PG_DENSE_MODE") {
            config.dense_mode = mode.parse()?;
        }
        if let Some(n) = get("CORTEX_PG_HNSW_THRESHOLD") {
            config.hnsw_threshold = parse_number("CORTEX_PG_HNSW_THRESHOLD", &n)?;
        }
        if let Some(n) = get("CORTEX_PG_PRUNE_BUDGET") {
            config.prune_budget = parse_number("CORTEX_PG_PRUNE_BUDGET", &n)?;
        }
        if let Some(n) = get("CORTEX_PG_LOOKUP_COST") {
            config.lookup_cost = parse_number("CORTEX_PG_LOOKUP_COST", &n)?;
        }
        if let Some(ef) = get("CORTEX_PG_EF_SEARCH").filter(|v| !v.trim().is_empty()) {
            let ef: usize = parse_number("CORTEX_PG_EF_SEARCH", &ef)?;
            if !(1..=1000).contains(&ef) {
                return Err(StoreError::Config(format!(
                    "CORTEX_PG_EF_SEARCH must be 1 to 1000 (pgvector's range); got {ef}"
                )));
            }
            config.ef_search = Some(ef);
        }
        if let Some(m) = get("CORTEX_PG_HNSW_M").filter(|v| !v.trim().is_empty()) {
            config.hnsw_build.m = parse_number("CORTEX_PG_HNSW_M", &m)?;
        }
        if let Some(ef) = get("CORTEX_PG_HNSW_EF_CONSTRUCTION").filter(|v| !v.trim().is_empty()) {
            config.hnsw_build.ef_construction =
                parse_number("CORTEX_PG_HNSW_EF_CONSTRUCTION", &ef)?;
        }
        config.hnsw_build.check()?;
        if let Some(index) = get("CORTEX_PG_ANN_INDEX") {
            config.ann_index = index.parse()?;
        }
        if let Some(n) = get("CORTEX_PG_IVF_LISTS").filter(|v| !v.trim().is_empty()) {
            config.ivfflat.lists = Some(parse_number("CORTEX_PG_IVF_LISTS", &n)?);
        }
        if let Some(n) = get("CORTEX_PG_IVF_PROBES").filter(|v| !v.trim().is_empty()) {
            config.ivfflat.probes = Some(parse_number("CORTEX_PG_IVF_PROBES", &n)?);
        }
        config.ivfflat.check()?;
        if let Some(flag) = get("CORTEX_PG_PUSHDOWN") {
            config.pushdown = parse_flag("CORTEX_PG_PUSHDOWN", &flag)?;
        }
        if let Some(flag) = get("CORTEX_PG_PARALLEL_SEARCH") {
            config.parallel_search = parse_flag("CORTEX_PG_PARALLEL_SEARCH", &flag)?;
        }
        if let Some(flag) = get("CORTEX_PG_PLAIN_WALK") {
            config.plain_walk = parse_flag("CORTEX_PG_PLAIN_WALK", &flag)?;
        }
        if let Some(secs) = get("CORTEX_PG_STATEMENT_TIMEOUT_SECS") {
            let secs: u64 = parse_number("CORTEX_PG_STATEMENT_TIMEOUT_SECS", &secs)?;
            if secs > MAX_STATEMENT_TIMEOUT_SECS {
                return Err(StoreError::Config(format!(
                    "CORTEX_PG_STATEMENT_TIMEOUT_SECS must be 0 (no timeout) to \
                     {MAX_STATEMENT_TIMEOUT_SECS}; got {secs}"
                )));
            }
            config.timeouts.statement = (secs > 0).then(|| Duration::from_secs(secs));
        }
        config.replicas = ReadReplicas::from_lookup(&get)?;
        Ok(config)
    }

    /// The schema name in effect.
    pub fn schema_name(&self) -> &str {
        self.schema.as_deref().unwrap_or("public")
    }

    /// Checks the URL as connecting would, without connecting: it parses, names a host
    /// (hosts, addresses and ports pairing up) and its TLS settings are usable. Errors
    /// name the URL as `setting` (`CORTEX_DATABASE_URL`, `--to`) and never echo it.
    pub fn check_url(&self, setting: &str) -> Result<(), StoreError> {
        crate::tls::parse_named(&self.url, setting).map(drop)
    }

    /// Whether `other` names the same store as this: the same server addresses (as
    /// written: `localhost` and `127.0.0.1` differ), the same database and the same
    /// schema. The user does not matter: two roles on one schema share its tables.
    pub fn same_store(&self, other: &PostgresConfig) -> Result<bool, StoreError> {
        let (mine, theirs) = (
            crate::tls::parse(&self.url)?,
            crate::tls::parse(&other.url)?,
        );
        Ok(self.schema_name() == other.schema_name()
            && Server::of(&mine.config).same_database(&Server::of(&theirs.config)))
    }
}

fn parse_flag(variable: &str, value: &str) -> Result<bool, StoreError> {
    parse_switch(value).ok_or_else(|| {
        StoreError::Config(format!(
            "{variable}={value:?} is not a switch; use {SWITCH_WORDS}"
        ))
    })
}

fn parse_number<T: FromStr>(variable: &str, value: &str) -> Result<T, StoreError> {
    value.trim().parse().map_err(|_| {
        StoreError::Config(format!(
            "{variable} must be a non-negative integer; got {value:?}"
        ))
    })
}

impl fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("url", &redact_url(&self.url))
            .field("pool_size", &self.pool_size)
            .field("schema", &self.schema)
            .field("dense_mode", &self.dense_mode)
            .field("hnsw_threshold", &self.hnsw_threshold)
            .field("pushdown", &self.pushdown)
            .field("prune_budget", &self.prune_budget)
            .field("lookup_cost", &self.lookup_cost)
            .field("ef_search", &self.ef_search)
            .field("hnsw_build", &self.hnsw_build)
            .field("ann_index", &self.ann_index)
            .field("ivfflat", &self.ivfflat)
            .field("parallel_search", &self.parallel_search)
            .field("plain_walk", &self.plain_walk)
            .field("timeouts", &self.timeouts)
            .field("replicas", &self.replicas)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn passwords_never_reach_debug_output() {
        for url in [
            "postgres://cortex:s3cret@db:5432/cortex?sslmode=require",
            "postgres://cortex:s3cret@db/cortex?password=s3cret",
            "host=db user=cortex password=s3cret dbname=cortex",
        ] {
            let shown = format!("{:?}", PostgresConfig::new(url));
            assert!(!shown.contains("s3cret"), "{shown}");
            assert!(shown.contains("***"), "{shown}");
        }
        assert_eq!(
            redact_url("postgres://u@h/db?sslmode=disable"),
            "postgres://u@h/db?sslmode=disable"
        );
    }

    #[test]
    fn from_lookup_reads_every_variable() {
        let vars: HashMap<&str, &str> = [
            ("CORTEX_DATABASE_URL", "postgres://u@h/db"),
            ("CORTEX_DATABASE_POOL_SIZE", "3"),
            ("CORTEX_PG_SCHEMA", "cortex_x"),
            ("CORTEX_PG_DENSE_MODE", "HNSW"),
            ("CORTEX_PG_HNSW_THRESHOLD", "500"),
            ("CORTEX_PG_PUSHDOWN", "0"),
            ("CORTEX_PG_PRUNE_BUDGET", "0"),
            ("CORTEX_PG_LOOKUP_COST", "7"),
            ("CORTEX_PG_EF_SEARCH", "300"),
            ("CORTEX_PG_HNSW_M", "24"),
            ("CORTEX_PG_HNSW_EF_CONSTRUCTION", "128"),
            ("CORTEX_PG_ANN_INDEX", "IVFFlat"),
            ("CORTEX_PG_IVF_LISTS", "400"),
            ("CORTEX_PG_IVF_PROBES", "12"),
            ("CORTEX_PG_PARALLEL_SEARCH", "off"),
            ("CORTEX_PG_PLAIN_WALK", "0"),
            ("CORTEX_PG_STATEMENT_TIMEOUT_SECS", "5"),
        ]
        .into_iter()
        .collect();
        let c = PostgresConfig::from_lookup(|k| vars.get(k).map(|v| (*v).to_owned())).unwrap();
        assert_eq!(c.pool_size, 3);
        assert_eq!(c.schema.as_deref(), Some("cortex_x"));
        assert_eq!(c.dense_mode, DenseMode::Hnsw);
        assert_eq!(c.hnsw_threshold, 500);
        assert!(!c.pushdown);
        assert_eq!(c.prune_budget, 0);
        assert_eq!(c.lookup_cost, 7);
        assert_eq!(c.ef_search, Some(300));
        assert_eq!(
            c.hnsw_build,
            HnswBuild {
                m: 24,
                ef_construction: 128
            }
        );
        assert_eq!(PostgresConfig::new("x").hnsw_build, HnswBuild::default());
        assert_eq!(c.ann_index, AnnIndex::IvfFlat);
        assert_eq!(
            c.ivfflat,
            IvfFlat {
                lists: Some(400),
                probes: Some(12)
            }
        );
        assert_eq!(PostgresConfig::new("x").ann_index, AnnIndex::Hnsw);
        assert!(!c.parallel_search);
        assert!(!c.plain_walk);
        assert!(PostgresConfig::new("x").plain_walk);
        assert_eq!(c.timeouts.statement, Some(Duration::from_secs(5)));
        assert_eq!(
            c.timeouts.call_deadline(c.timeouts.connect),
            Some(Duration::from_secs(5) + DEFAULT_CONNECT_TIMEOUT)
        );
        assert!(PostgresConfig::new("x").parallel_search);
        assert_eq!(PostgresConfig::new("x").prune_budget, DEFAULT_PRUNE_BUDGET);
        assert_eq!(PostgresConfig::new("x").lookup_cost, DEFAULT_LOOKUP_COST);
    }

    #[test]
    fn the_network_timeouts_are_on_unless_turned_off() {
        let timeouts = PostgresConfig::new("x").timeouts;
        assert_eq!(timeouts.statement, Some(DEFAULT_STATEMENT_TIMEOUT));
        assert_eq!(timeouts.connect, DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(
            timeouts.call_deadline(Duration::from_secs(3)),
            Some(DEFAULT_STATEMENT_TIMEOUT + Duration::from_secs(3))
        );
        let off = PostgresConfig::from_lookup(|k| match k {
            "CORTEX_DATABASE_URL" => Some("postgres://h/db".into()),
            "CORTEX_PG_STATEMENT_TIMEOUT_SECS" => Some("0".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(off.timeouts.statement, None);
        assert_eq!(off.timeouts.call_deadline(DEFAULT_CONNECT_TIMEOUT), None);
    }

    #[test]
    fn the_same_store_is_recognised_however_its_url_is_spelled() {
        let same = |a: &str, b: &str| {
            PostgresConfig::new(a)
                .same_store(&PostgresConfig::new(b))
                .unwrap()
        };
        let url = "postgres://postgres@127.0.0.1:5432/test";
        assert!(same(url, url));
        assert!(same(
            url,
            "postgresql://other:pw@127.0.0.1/test?sslmode=disable"
        ));
        assert!(same(url, "host=127.0.0.1 dbname=test user=postgres"));
        assert!(!same(url, "postgres://postgres@127.0.0.1:5433/test"));
        assert!(!same(url, "postgres://postgres@127.0.0.1/other"));
        assert!(!same(url, "postgres://postgres@db.internal/test"));
        // Without a database the server uses the user's name.
        assert!(same("postgres://ada@h/ada", "postgres://ada@h"));
        let mut schema = PostgresConfig::new(url);
        schema.schema = Some("cortex_b".into());
        assert!(!PostgresConfig::new(url).same_store(&schema).unwrap());
        assert!(
            PostgresConfig::new("postgres://")
                .same_store(&PostgresConfig::new(url))
                .is_err()
        );
    }

    #[test]
    fn bad_settings_name_their_variable() {
        let missing = PostgresConfig::from_lookup(|_| None).unwrap_err();
        assert!(missing.to_string().contains("CORTEX_DATABASE_URL"));
        let bad = |key: &'static str, value: &'static str| {
            PostgresConfig::from_lookup(move |k| match k {
                "CORTEX_DATABASE_URL" => Some("postgres://h/db".into()),
                k if k == key => Some(value.into()),
                _ => None,
            })
            .unwrap_err()
            .to_string()
        };
        assert!(bad("CORTEX_DATABASE_POOL_SIZE", "many").contains("CORTEX_DATABASE_POOL_SIZE"));
        assert!(bad("CORTEX_DATABASE_POOL_SIZE", "0").contains("at least 1"));
        assert!(bad("CORTEX_PG_DENSE_MODE", "ivf").contains("CORTEX_PG_DENSE_MODE"));
        assert!(bad("CORTEX_PG_SCHEMA", "Robert'); DROP").contains("schema"));
        assert!(bad("CORTEX_PG_PUSHDOWN", "maybe").contains("CORTEX_PG_PUSHDOWN"));
        assert!(bad("CORTEX_PG_PARALLEL_SEARCH", "2").contains("CORTEX_PG_PARALLEL_SEARCH"));
        assert!(bad("CORTEX_PG_EF_SEARCH", "0").contains("1 to 1000"));
        assert!(bad("CORTEX_PG_EF_SEARCH", "5000").contains("1 to 1000"));
        assert!(bad("CORTEX_PG_HNSW_M", "1").contains("2 to 100"));
        assert!(bad("CORTEX_PG_ANN_INDEX", "ivf").contains("hnsw or ivfflat"));
        assert!(bad("CORTEX_PG_IVF_LISTS", "0").contains("1 to 32768"));
        assert!(bad("CORTEX_PG_IVF_LISTS", "40000").contains("1 to 32768"));
        assert!(bad("CORTEX_PG_IVF_PROBES", "0").contains("at least 1"));
        assert!(bad("CORTEX_PG_HNSW_M", "sixteen").contains("CORTEX_PG_HNSW_M"));
        // 40 links want at least 80 candidates while linking; the default 64 is too few.
        assert!(bad("CORTEX_PG_HNSW_M", "40").contains("at least twice"));
        assert!(bad("CORTEX_PG_HNSW_EF_CONSTRUCTION", "2000").contains("4 to 1000"));
        assert!(bad("CORTEX_PG_PRUNE_BUDGET", "-1").contains("CORTEX_PG_PRUNE_BUDGET"));
        assert!(
            bad("CORTEX_PG_STATEMENT_TIMEOUT_SECS", "30s")
                .contains("CORTEX_PG_STATEMENT_TIMEOUT_SECS")
        );
        assert!(bad("CORTEX_PG_STATEMENT_TIMEOUT_SECS", "100000").contains("86400"));
    }
}
