//! The prober: a task of the store handle (stopped when the handle goes) that, every
//! probe interval, reads the primary's WAL position (`pg_current_wal_lsn()`) and each
//! replica's replay position (`pg_last_wal_replay_lsn()`), on connections of its own so
//! that a busy pool never delays a probe into a false alarm. From them it measures each
//! replica's lag ([`Samples`]), marks each replica up, lagging or down, and forgets the
//! read-your-writes marks every usable replica has replayed ([`Written::settle`]). A probe
//! with no answer within the probe timeout marks its replica down; its connection is
//! dropped and opened again at the next probe.

use std::sync::{PoisonError, Weak};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;
use tokio_postgres::types::PgLsn;
use tokio_postgres::{Client, Statement};

use super::lag::{Lsn, Samples};
use super::{ReplicaState, Shared};
use crate::pg_err;
use crate::pool::{Endpoint, connect_one};

#[cfg(doc)]
use super::written::Written;

/// Where the primary's WAL stands: the end of what it has written, which (with
/// `synchronous_commit` on, PostgreSQL's default) is at or past the end of every commit
/// that has returned.
pub(crate) const CURRENT_POSITION: &str = "SELECT pg_current_wal_lsn()";
/// How far a standby has replayed; null on a server that is not in recovery.
pub(crate) const REPLAY_POSITION: &str = "SELECT pg_last_wal_replay_lsn()";

/// The prober's task, aborted when this is dropped (with the handle's replicas).
pub(crate) struct Prober(JoinHandle<()>);

impl Drop for Prober {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Prober {
    /// Probes every interval while the replicas are there (`shared` still upgrades).
    pub(crate) fn spawn(shared: Weak<Shared>, mut probes: Probes) -> Self {
        let Some(interval) = shared.upgrade().map(|s| s.settings.probe_interval) else {
            return Self(tokio::spawn(async {}));
        };
        Self(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
            // The first tick is at once, and the handle has just probed.
            ticks.tick().await;
            loop {
                ticks.tick().await;
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                probes.round(&shared).await;
            }
        }))
    }
}

/// One server's probe: its endpoint, and the connection and statement once opened.
struct Probe {
    endpoint: Endpoint,
    sql: &'static str,
    open: Option<(Client, Statement)>,
}

impl Probe {
    fn new(endpoint: Endpoint, sql: &'static str) -> Self {
        Self {
            endpoint,
            sql,
            open: None,
        }
    }

    /// The position the probe's statement reads, within `timeout`; the connection is
    /// dropped on any failure, to be opened afresh next time.
    async fn read(&mut self, timeout: Duration) -> Result<Option<Lsn>, String> {
        let attempt = async {
            let (client, statement) = match self.open.take() {
                Some(open) if !open.0.is_closed() => open,
                _ => {
                    let client = connect_one(&self.endpoint).await?;
                    let statement = client.prepare(self.sql).await.map_err(pg_err)?;
                    (client, statement)
                }
            };
            let row = client.query_one(&statement, &[]).await.map_err(pg_err)?;
            let lsn: Option<PgLsn> = row.try_get(0).map_err(pg_err)?;
            self.open = Some((client, statement));
            Ok::<_, cortex_core::error::StoreError>(lsn.map(u64::from))
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok(lsn)) => Ok(lsn),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => {
                self.open = None;
                Err(format!("no answer to the probe within {timeout:?}"))
            }
        }
    }
}

/// The primary's probe and one per replica, in the replicas' order.
pub(crate) struct Probes {
    primary: Probe,
    replicas: Vec<Probe>,
    /// Whether the primary answered the last probe (its failures are logged once).
    primary_answered: bool,
}

impl Probes {
    pub(crate) fn new(primary: Endpoint, replicas: Vec<Endpoint>) -> Self {
        Self {
            primary: Probe::new(primary, CURRENT_POSITION),
            replicas: replicas
                .into_iter()
                .map(|e| Probe::new(e, REPLAY_POSITION))
                .collect(),
            primary_answered: true,
        }
    }

    /// One round: the primary's position first (dated just before it is asked), then
    /// every replica's at once; then each replica's state, and the marks settled.
    pub(crate) async fn round(&mut self, shared: &Shared) {
        let settings = &shared.settings;
        let asked = Instant::now();
        let sample = match self.primary.read(settings.probe_timeout).await {
            Ok(Some(lsn)) => {
                self.primary_answered = true;
                Some((asked, lsn))
            }
            Ok(None) => None,
            Err(why) => {
                if std::mem::replace(&mut self.primary_answered, false) {
                    tracing::warn!(
                        why = %why,
                        "the replicas' prober cannot read the primary's WAL position; \
                         their lag is measured against its last known position"
                    );
                }
                None
            }
        };
        let replays = join_all(
            self.replicas
                .iter_mut()
                .map(|probe| probe.read(settings.probe_timeout)),
        )
        .await;
        let now = Instant::now();
        {
            let mut samples = shared
                .samples
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some((at, lsn)) = sample {
                samples.push(at, lsn);
            }
            for (replica, replay) in shared.replicas.iter().zip(replays) {
                let found = state_of(&replay, &samples, now, settings.max_lag);
                if let Ok(Some(lsn)) = replay {
                    replica
                        .replayed
                        .store(lsn, std::sync::atomic::Ordering::Release);
                }
                replica.set(found, settings.max_lag);
            }
        }
        let usable: Vec<Lsn> = shared
            .replicas
            .iter()
            .filter(|r| r.usable.load(std::sync::atomic::Ordering::Acquire))
            .map(|r| r.replayed.load(std::sync::atomic::Ordering::Acquire))
            .collect();
        shared.counters.usable(usable.len());
        shared.written.settle(sample, usable.into_iter().min());
    }
}

/// What a replica is, from its probe's answer.
fn state_of(
    replay: &Result<Option<Lsn>, String>,
    samples: &Samples,
    now: Instant,
    max_lag: Duration,
) -> ReplicaState {
    match replay {
        Err(why) => ReplicaState::Down { why: why.clone() },
        Ok(None) => ReplicaState::Down {
            why: "not a hot standby: pg_last_wal_replay_lsn() is null, the server is not in \
                  recovery"
                .into(),
        },
        Ok(Some(replayed)) => {
            let lag = samples.lag(*replayed, now);
            match lag > max_lag {
                true => ReplicaState::Lagging { lag },
                false => ReplicaState::Up { lag },
            }
        }
    }
}
