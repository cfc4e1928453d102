//! What the replica path counts: where each read was served and why, and the replicas
//! passed over. Each count is kept on the handle (read through
//! [`Diagnostics::replica_reads`](crate::Diagnostics::replica_reads)) and emitted through
//! the `metrics` crate, which does nothing unless the process installed a recorder (the
//! MCP server's `/metrics` does, and describes these series there).

use std::sync::atomic::{AtomicU64, Ordering};

/// Reads by where they were served (label `route`, values [`ROUTES`]).
pub const READS_SERIES: &str = "cortex_pg_reads_total";
/// Replicas passed over when a read chose one (label `reason`, values [`SKIP_REASONS`]).
pub const SKIPS_SERIES: &str = "cortex_pg_replica_skips_total";
/// Replicas up and within the lag bound, as the prober last found them.
pub const USABLE_SERIES: &str = "cortex_pg_replicas_usable";

/// Every series this crate emits.
pub const SERIES: [&str; 3] = [READS_SERIES, SKIPS_SERIES, USABLE_SERIES];

/// The values of [`READS_SERIES`]'s `route` label.
pub const ROUTES: [&str; 5] = [
    "replica",
    "replica_waited",
    "primary_wait_expired",
    "primary_no_replica",
    "primary_failover",
];

/// The values of [`SKIPS_SERIES`]'s `reason` label.
pub const SKIP_REASONS: [&str; 3] = ["down", "lagging", "behind"];

/// Where one read was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Served {
    /// On a replica, at once: nothing of the user's to wait for, or already replayed.
    Replica,
    /// On a replica, after waiting for it to replay the user's last write.
    ReplicaWaited,
    /// On the primary: the replica had not replayed the user's last write within the wait.
    PrimaryWaitExpired,
    /// On the primary: no replica was usable (down, lagging, or behind the floor).
    PrimaryNoReplica,
    /// On the primary, after the read failed on its replica.
    PrimaryFailover,
}

impl Served {
    fn index(self) -> usize {
        self as usize
    }
}

/// Why a replica was passed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    /// Unreachable, failing, or not a hot standby.
    Down,
    /// Further behind the primary than the lag bound.
    Lagging,
    /// Not yet past the floor every replica must have replayed (it was down or lagging
    /// when writes it may have missed were forgotten).
    Behind,
}

impl Skip {
    fn index(self) -> usize {
        self as usize
    }
}

/// How a handle's reads went since it opened (see [`READS_SERIES`] and [`SKIPS_SERIES`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicaReads {
    /// Served by a replica at once.
    pub replica: u64,
    /// Served by a replica after waiting for it to replay the user's last write.
    pub replica_waited: u64,
    /// Served by the primary because the replica had not replayed the user's last write
    /// within `CORTEX_PG_READ_WAIT_MS`.
    pub primary_wait_expired: u64,
    /// Served by the primary because no replica was usable.
    pub primary_no_replica: u64,
    /// Served by the primary after failing on a replica.
    pub primary_failover: u64,
    /// Replicas passed over because they were down.
    pub skipped_down: u64,
    /// Replicas passed over because they lagged past `CORTEX_PG_REPLICA_MAX_LAG_MS`.
    pub skipped_lagging: u64,
    /// Replicas passed over because they were not yet past the floor.
    pub skipped_behind: u64,
}

impl ReplicaReads {
    /// Reads served by a replica.
    pub fn on_replicas(&self) -> u64 {
        self.replica + self.replica_waited
    }

    /// Reads served by the primary.
    pub fn on_primary(&self) -> u64 {
        self.primary_wait_expired + self.primary_no_replica + self.primary_failover
    }
}

/// The handle's counts.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    served: [AtomicU64; 5],
    skipped: [AtomicU64; 3],
}

impl Counters {
    pub(crate) fn served(&self, served: Served) {
        let i = served.index();
        self.served[i].fetch_add(1, Ordering::Relaxed);
        metrics::counter!(READS_SERIES, "route" => ROUTES[i]).increment(1);
    }

    pub(crate) fn skipped(&self, skip: Skip) {
        let i = skip.index();
        self.skipped[i].fetch_add(1, Ordering::Relaxed);
        metrics::counter!(SKIPS_SERIES, "reason" => SKIP_REASONS[i]).increment(1);
    }

    pub(crate) fn usable(&self, replicas: usize) {
        metrics::gauge!(USABLE_SERIES).set(replicas as f64);
    }

    pub(crate) fn snapshot(&self) -> ReplicaReads {
        let served = |s: Served| self.served[s.index()].load(Ordering::Relaxed);
        let skipped = |s: Skip| self.skipped[s.index()].load(Ordering::Relaxed);
        ReplicaReads {
            replica: served(Served::Replica),
            replica_waited: served(Served::ReplicaWaited),
            primary_wait_expired: served(Served::PrimaryWaitExpired),
            primary_no_replica: served(Served::PrimaryNoReplica),
            primary_failover: served(Served::PrimaryFailover),
            skipped_down: skipped(Skip::Down),
            skipped_lagging: skipped(Skip::Lagging),
            skipped_behind: skipped(Skip::Behind),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_and_reason_has_its_label_and_count() {
        let counters = Counters::default();
        for (i, served) in [
            Served::Replica,
            Served::ReplicaWaited,
            Served::PrimaryWaitExpired,
            Served::PrimaryNoReplica,
            Served::PrimaryFailover,
        ]
        .into_iter()
        .enumerate()
        {
            assert_eq!(served.index(), i);
            for _ in 0..=i {
                counters.served(served);
            }
        }
        for (i, skip) in [Skip::Down, Skip::Lagging, Skip::Behind]
            .into_iter()
            .enumerate()
        {
            assert_eq!(skip.index(), i);
            counters.skipped(skip);
        }
        let reads = counters.snapshot();
        assert_eq!(
            (
                reads.replica,
                reads.replica_waited,
                reads.primary_wait_expired
            ),
            (1, 2, 3)
        );
        assert_eq!((reads.primary_no_replica, reads.primary_failover), (4, 5));
        assert_eq!(
            (
                reads.skipped_down,
                reads.skipped_lagging,
                reads.skipped_behind
            ),
            (1, 1, 1)
        );
        assert_eq!((reads.on_replicas(), reads.on_primary()), (3, 12));
    }

    #[test]
    fn every_series_name_in_this_file_is_listed() {
        let source = include_str!("counters.rs");
        let code = &source[..source.find("#[cfg(test)]").unwrap_or(source.len())];
        for name in code.split('"').skip(1).step_by(2) {
            if name.starts_with("cortex_") {
                assert!(SERIES.contains(&name), "{name} is not in SERIES");
            }
        }
    }
}
