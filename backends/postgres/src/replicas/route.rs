//! Where one read goes, in one place: [`PostgresStore::read`] runs a read on the user's
//! replica, or on the primary, and fails over once; the store's writes record their WAL
//! position for read-your-writes ([`PostgresStore::note_write`]).
//!
//! A read for a user with a recorded write first checks, on its replica, that
//! `pg_last_wal_replay_lsn()` has reached the write's position, polling for at most
//! `CORTEX_PG_READ_WAIT_MS`; if it has not, the read goes to the primary. Replay is a
//! property of the server, so the connection the check used and the ones the read then
//! takes from the replica's pool see the same or later.

use std::future::Future;
use std::time::{Duration, Instant};

use cortex_core::error::{StoreError, StoreResult};
use deadpool_postgres::Object;
use tokio_postgres::types::PgLsn;

use super::choice;
use super::counters::Served;
use super::lag::Lsn;
use super::prober::{CURRENT_POSITION, REPLAY_POSITION};
use super::written::Need;
use super::{ReplicaState, Shared};
use crate::error::PostgresError;
use crate::pg_err;
use crate::pool::Connections;
use crate::store::PostgresStore;

/// The longest pause between two checks of a replica's replay position while a read
/// waits: the first checks come quickly, as a healthy replica is a millisecond or two
/// behind.
const MAX_POLL: Duration = Duration::from_millis(5);

/// Where a read goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// To this replica (`waited`: after waiting for it to replay the user's last write).
    Replica { index: usize, waited: bool },
    /// To the primary, counted as this.
    Primary(Served),
}

impl PostgresStore {
    /// Runs the read `op` for `user` on the connections it should read from: the user's
    /// replica when one is usable and has replayed the user's last write (within the read
    /// wait), else the primary; without replicas, the primary as ever. A read that fails
    /// on a replica, or is still running when the prober finds its replica down, runs
    /// again once on the primary (and a failure that means the replica is unreachable
    /// marks it down at once): no error reaches the caller while the primary answers. The
    /// retry goes to the primary rather than to the next replica, which would mean
    /// another wait; the next reads of the replica's users go to the next replica.
    ///
    /// Each attempt runs under its connections' call deadline, as `bounded` does.
    pub(crate) async fn read<'s, T, F>(
        &'s self,
        user: &str,
        op: impl Fn(&'s Connections) -> F,
    ) -> StoreResult<T>
    where
        F: Future<Output = StoreResult<T>>,
    {
        let Some(replicas) = self.replicas() else {
            return self.bounded(op(self.connections())).await;
        };
        let shared = &replicas.shared;
        let served = match shared.route(user).await {
            Route::Primary(served) => served,
            Route::Replica { index, waited } => {
                let replica = &shared.replicas[index];
                let connections = &replica.connections;
                let attempt = connections.bounded_unless(op(connections), replica.went_down());
                match attempt.await {
                    Some(Ok(out)) => {
                        shared.counters.served(match waited {
                            true => Served::ReplicaWaited,
                            false => Served::Replica,
                        });
                        return Ok(out);
                    }
                    Some(Err(e)) => shared.failed(index, &e),
                    // Cut: the prober marked it down meanwhile.
                    None => {}
                }
                Served::PrimaryFailover
            }
        };
        let out = self.bounded(op(self.connections())).await;
        if out.is_ok() {
            shared.counters.served(served);
        }
        out
    }

    /// After a write for `user` committed on `client`: where the primary's WAL stands now,
    /// at or past the write's commit, for the user's next reads to wait for (nothing, and
    /// no round trip, without replicas). The write stands whatever happens here: if the
    /// position cannot be read, the user's reads go to the primary until the prober has
    /// read one since.
    pub(crate) async fn note_write(&self, client: &Object, user: &str) {
        let Some(replicas) = self.replicas() else {
            return;
        };
        let written = &replicas.shared.written;
        let committed = Instant::now();
        match current_position(client).await {
            Ok(lsn) => written.note(user, lsn),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the WAL position after a write");
                written.note_unknown(user, committed);
            }
        }
    }

    /// After a write for every user (a re-embedding's switch) committed on `client`: no
    /// replica serves a read until it has replayed it (its position unknown: until the
    /// prober finds one past where the primary stands next).
    pub(crate) async fn note_write_for_everyone(&self, client: &Object) {
        let Some(replicas) = self.replicas() else {
            return;
        };
        let shared = &replicas.shared;
        match current_position(client).await {
            Ok(lsn) => shared.written.raise_floor(lsn),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the WAL position after a write");
                // Conservative: nothing a replica has replayed is known to be past it.
                shared.written.raise_floor(Lsn::MAX);
            }
        }
    }
}

impl Shared {
    /// Where `user`'s read goes (see [`PostgresStore::read`]), after the wait if any.
    async fn route(&self, user: &str) -> Route {
        let need = self.written.need(user);
        if need == Need::Primary {
            return Route::Primary(Served::PrimaryWaitExpired);
        }
        let floor = self.written.floor();
        let chosen = choice::choose(user, self.replicas.len(), |i| {
            self.admits(&self.replicas[i], floor)
        });
        let Some(index) = chosen else {
            return Route::Primary(Served::PrimaryNoReplica);
        };
        let Need::Replayed(lsn) = need else {
            return Route::Replica {
                index,
                waited: false,
            };
        };
        let connections = &self.replicas[index].connections;
        let settings = &self.settings;
        let wait = replayed(connections, lsn, settings.read_wait);
        // A replica that does not answer the check at all is no better than one that has
        // not replayed: the check is bounded by the probe timeout beyond the wait.
        match tokio::time::timeout(settings.read_wait + settings.probe_timeout, wait).await {
            Ok(Ok(Some(waited))) => Route::Replica { index, waited },
            Ok(Ok(None)) | Err(_) => Route::Primary(Served::PrimaryWaitExpired),
            Ok(Err(e)) => {
                self.failed(index, &e);
                Route::Primary(Served::PrimaryFailover)
            }
        }
    }

    /// A read (or its check) failed on replica `index` with `e`: the replica is marked
    /// down when `e` means it cannot be reached; any other failure (a query cancelled by a
    /// replay conflict, say) costs that read only.
    fn failed(&self, index: usize, e: &StoreError) {
        let replica = &self.replicas[index];
        if unreachable(e) {
            let found = ReplicaState::Down { why: e.to_string() };
            replica.set(found, self.settings.max_lag);
        } else {
            tracing::debug!(
                replica = %replica.connections.server(),
                error = %e,
                "a read failed on a replica; it runs again on the primary"
            );
        }
    }
}

/// Whether the replica has replayed up to `lsn`, checked at once and then every few
/// milliseconds until `wait` has passed: `Some(waited)` when it has (`waited` when not at
/// the first check), `None` when the wait ran out.
async fn replayed(
    connections: &Connections,
    lsn: Lsn,
    wait: Duration,
) -> Result<Option<bool>, StoreError> {
    let until = Instant::now() + wait;
    let client = connections.get().await?;
    let statement = client
        .prepare_cached(REPLAY_POSITION)
        .await
        .map_err(pg_err)?;
    let mut pause = Duration::from_millis(1);
    for checks in 0u32.. {
        let row = client.query_one(&statement, &[]).await.map_err(pg_err)?;
        let at: Option<PgLsn> = row.try_get(0).map_err(pg_err)?;
        if at.is_some_and(|at| u64::from(at) >= lsn) {
            return Ok(Some(checks > 0));
        }
        let now = Instant::now();
        if now >= until {
            break;
        }
        tokio::time::sleep(Ord::min(pause, until - now)).await;
        pause = Ord::min(pause * 2, MAX_POLL);
    }
    Ok(None)
}

/// Where the primary's WAL stands, read on `client`.
async fn current_position(client: &Object) -> Result<Lsn, StoreError> {
    let statement = client
        .prepare_cached(CURRENT_POSITION)
        .await
        .map_err(pg_err)?;
    let row = client.query_one(&statement, &[]).await.map_err(pg_err)?;
    let at: Option<PgLsn> = row.try_get(0).map_err(pg_err)?;
    at.map(u64::from)
        .ok_or_else(|| StoreError::Corrupt("pg_current_wal_lsn() returned null".into()))
}

/// Whether `e` means the server could not be reached or went away (as against a query
/// it refused).
fn unreachable(e: &StoreError) -> bool {
    let StoreError::Backend { source, .. } = e else {
        return false;
    };
    source
        .downcast_ref::<PostgresError>()
        .is_some_and(PostgresError::is_unreachable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Cause;

    #[test]
    fn only_a_lost_server_marks_a_replica_down() {
        let call = |cause| {
            StoreError::backend(
                "postgres",
                PostgresError::Call {
                    cause,
                    source: None,
                },
            )
        };
        assert!(unreachable(&call(Cause::Closed)));
        assert!(unreachable(&call(Cause::Refused)));
        assert!(unreachable(&call(Cause::ShuttingDown {
            code: "57P01".into(),
            message: "terminating connection due to administrator command".into(),
        })));
        let conflict = call(Cause::Server {
            code: "40001".into(),
            message: "canceling statement due to conflict with recovery".into(),
            detail: None,
            hint: None,
        });
        assert!(!unreachable(&conflict));
        assert!(!unreachable(&StoreError::Corrupt("x".into())));
    }
}
