//! Reads from hot standbys (`CORTEX_DATABASE_READ_URL`): PostgreSQL's own streaming
//! replication, one pool per standby beside the primary's, and a choice per read.
//!
//! - A user's reads go to one replica ([`choice`]) while it is usable: up, within the lag
//!   bound, and past the floor ([`written`]); otherwise to the next usable one, or to the
//!   primary. Writes, key lookups and migrations always go to the primary.
//! - Read-your-writes: a write records where the primary's WAL stood after its commit
//!   ([`written`]); a read for that user waits, bounded, for its replica to replay that
//!   far, or reads from the primary ([`route`]). This holds for writes made through this
//!   process (an MCP session lives in one); another process's writes are seen within the
//!   lag bound.
//! - A prober task ([`prober`]) reads the primary's WAL position and each replica's replay
//!   position every interval, dates the first ([`lag`]) to measure each replica's lag,
//!   and marks replicas down, lagging or up, with one log line per change. A read that
//!   fails on a replica is retried once on the primary and marks the replica down at once;
//!   one in flight on a replica the prober finds down is given up and retried the same way.
//! - What happened is counted per handle and as metrics ([`counters`]).

mod choice;
mod counters;
mod lag;
mod prober;
mod route;
mod settings;
mod written;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use cortex_core::error::StoreError;
use tokio::sync::watch;

pub use counters::{
    READS_SERIES, ROUTES, ReplicaReads, SERIES, SKIP_REASONS, SKIPS_SERIES, USABLE_SERIES,
};
pub use settings::{
    DEFAULT_MAX_LAG, DEFAULT_PROBE_INTERVAL, DEFAULT_PROBE_TIMEOUT, DEFAULT_READ_WAIT,
    ReadReplicas, split_urls,
};

use crate::config::PostgresConfig;
use crate::pool::{self, Connections, Endpoint};
use crate::tls;
use counters::{Counters, Skip};
use lag::{Lsn, Samples};
use prober::{Prober, Probes};
use written::Written;

/// The setting the replicas' URLs come from, as their errors name it.
const SETTING: &str = "CORTEX_DATABASE_READ_URL";

/// How a replica was last found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaState {
    /// Up and within the lag bound: it serves reads. `lag` as last measured.
    Up { lag: Duration },
    /// Up but further behind the primary than the lag bound: skipped.
    Lagging { lag: Duration },
    /// Unreachable, failing, or not a hot standby: skipped. `why` says which.
    Down { why: String },
}

impl ReplicaState {
    fn same_kind(&self, other: &ReplicaState) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

/// One replica as [`Diagnostics::replicas`](crate::Diagnostics::replicas) shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    /// Where it is (`host:port`, database and user; never a password).
    pub server: String,
    pub state: ReplicaState,
    /// How far it had replayed the primary's WAL when last probed (a byte offset).
    pub replayed: u64,
    /// Whether it serves reads now: up, and past every write it may have missed while
    /// it was not (see `CORTEX_PG_READ_WAIT_MS` for the user's own last write).
    pub serves: bool,
}

/// The replicas of one store handle, and the prober that watches them (stopped when the
/// handle goes).
pub(crate) struct Replicas {
    shared: Arc<Shared>,
    _prober: Prober,
}

/// What the reads and the prober share.
pub(crate) struct Shared {
    replicas: Vec<Replica>,
    written: Written,
    counters: Counters,
    samples: Mutex<Samples>,
    settings: ReadReplicas,
}

/// One hot standby: its pool and what the prober and the reads last found.
pub(crate) struct Replica {
    connections: Connections,
    /// Up and within the lag bound, as a read checks it (the state, behind a lock, is for
    /// the log and diagnostics).
    usable: AtomicBool,
    state: Mutex<ReplicaState>,
    /// Its replay position as the prober last read it.
    replayed: AtomicU64,
    /// Bumped each time it is marked down: reads in flight on it give up.
    down: watch::Sender<u64>,
}

impl Replicas {
    /// Opens a pool per replica of `config` (no migration: a standby is read-only, and
    /// holds the primary's schema once it has replayed the migration), probes them once,
    /// and starts the prober. Called once the primary is migrated; a replica that is down
    /// now is skipped until it answers.
    pub(crate) async fn open(
        config: &PostgresConfig,
        search_path: &[&str],
    ) -> Result<Self, StoreError> {
        let settings = config.replicas.clone();
        let mut replicas = Vec::with_capacity(settings.urls.len());
        let mut endpoints = Vec::with_capacity(settings.urls.len());
        for url in &settings.urls {
            let endpoint =
                || tls::parse_named(url, SETTING).map(|c| Endpoint::new(c, &config.timeouts));
            let connections = pool::build_pool(endpoint()?, search_path, config.pool_size)?;
            replicas.push(Replica {
                connections,
                usable: AtomicBool::new(false),
                state: Mutex::new(ReplicaState::Down {
                    why: "not probed yet".into(),
                }),
                replayed: AtomicU64::new(0),
                down: watch::Sender::new(0),
            });
            endpoints.push(endpoint()?);
        }
        let primary = Endpoint::new(tls::parse(&config.url)?, &config.timeouts);
        // Kept past the lag bound by a few intervals, so a replica stuck short of the oldest
        // sample kept is past the bound.
        let keep = settings.max_lag + settings.probe_interval * 2;
        let shared = Arc::new(Shared {
            replicas,
            written: Written::new(0),
            counters: Counters::default(),
            samples: Mutex::new(Samples::new(keep)),
            settings,
        });
        let mut probes = Probes::new(primary, endpoints);
        probes.round(&shared).await;
        // The primary as first probed stands after the migration: a replica serves once
        // it has replayed that far, so it has the schema this build reads.
        let migrated = shared
            .samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .latest();
        if let Some((_, lsn)) = migrated {
            shared.written.raise_floor(lsn);
        }
        // A replica up but not yet past the migration would serve no read until the next
        // probe: probe again for up to the read wait while one is replaying it.
        let until = Instant::now() + shared.settings.read_wait;
        while Instant::now() < until && shared.replaying_the_floor() {
            tokio::time::sleep(Duration::from_millis(2)).await;
            probes.round(&shared).await;
        }
        let prober = Prober::spawn(Arc::downgrade(&shared), probes);
        Ok(Self {
            shared,
            _prober: prober,
        })
    }

    /// How the handle's reads went (see [`ReplicaReads`]).
    pub(crate) fn reads(&self) -> ReplicaReads {
        self.shared.counters.snapshot()
    }

    /// Each replica as last found.
    pub(crate) fn status(&self) -> Vec<ReplicaStatus> {
        let floor = self.shared.written.floor();
        self.shared
            .replicas
            .iter()
            .map(|r| {
                let replayed = r.replayed.load(Ordering::Acquire);
                ReplicaStatus {
                    server: r.connections.server().to_string(),
                    state: r.state().clone(),
                    replayed,
                    serves: r.usable.load(Ordering::Acquire) && replayed >= floor,
                }
            })
            .collect()
    }

    /// Users whose last write some usable replica has not replayed yet (as the prober
    /// last found).
    pub(crate) fn pending_writes(&self) -> usize {
        self.shared.written.marks()
    }
}

impl Shared {
    /// Whether a replica is up but has not yet replayed the floor.
    fn replaying_the_floor(&self) -> bool {
        let floor = self.written.floor();
        self.replicas
            .iter()
            .any(|r| r.usable.load(Ordering::Acquire) && r.replayed.load(Ordering::Acquire) < floor)
    }

    /// Whether `replica` may serve a read now; counts why not.
    fn admits(&self, replica: &Replica, floor: Lsn) -> bool {
        if !replica.usable.load(Ordering::Acquire) {
            let skip = match *replica.state() {
                ReplicaState::Lagging { .. } => Skip::Lagging,
                _ => Skip::Down,
            };
            self.counters.skipped(skip);
            return false;
        }
        if replica.replayed.load(Ordering::Acquire) < floor {
            self.counters.skipped(Skip::Behind);
            return false;
        }
        true
    }
}

impl Replica {
    fn state(&self) -> MutexGuard<'_, ReplicaState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records what the replica was found to be, with one log line when that changes: a
    /// warning when it stops serving, a note when it serves again. Marked down, its reads
    /// in flight give up and its idle connections close.
    fn set(&self, found: ReplicaState, max_lag: Duration) {
        let mut state = self.state();
        self.usable
            .store(matches!(found, ReplicaState::Up { .. }), Ordering::Release);
        if !state.same_kind(&found) {
            let server = self.connections.server();
            match &found {
                ReplicaState::Up { lag } => tracing::info!(
                    replica = %server,
                    lag_ms = lag.as_millis(),
                    "a read replica serves reads"
                ),
                ReplicaState::Lagging { lag } => tracing::warn!(
                    replica = %server,
                    lag_ms = lag.as_millis(),
                    bound_ms = max_lag.as_millis(),
                    "a read replica lags past CORTEX_PG_REPLICA_MAX_LAG_MS; its users' \
                     reads go to the next replica or the primary until it catches up"
                ),
                ReplicaState::Down { why } => tracing::warn!(
                    replica = %server,
                    why = %why,
                    "a read replica is down; its users' reads go to the next replica or \
                     the primary until it answers again"
                ),
            }
            if let ReplicaState::Down { .. } = found {
                self.down.send_modify(|n| *n = n.wrapping_add(1));
                self.connections.close_idle();
            }
        }
        *state = found;
    }

    /// Completes when the replica is next marked down (never, if that cannot happen).
    fn went_down(&self) -> impl std::future::Future<Output = ()> + use<> {
        let mut marked = self.down.subscribe();
        async move {
            if marked.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}
