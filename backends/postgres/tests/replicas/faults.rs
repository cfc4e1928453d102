//! The standby lost under load: stopped (`docker stop`: the server shuts down and ends its
//! sessions), cut off the network (`docker network disconnect`: the primary and this host
//! lose it, its connections closed by Docker's proxy), or frozen (`docker pause`: its
//! connections stay open and nothing answers, as over a link that drops packets). Users
//! read and write all along, each write followed at once by reads of it; the standby goes
//! mid-load. Counted over the whole run:
//!
//! - reads that failed: 0 (a read on the lost standby runs again on the primary, which is up);
//! - stale reads (a user's read missing their own last write): 0;
//! - cross-user answers (a memory of another user in a user's read): 0;
//! - the slowest read: within the fallback, the probe interval plus the probe timeout and
//!   the read wait (a read in flight on a frozen standby waits until the prober finds it
//!   down, then runs on the primary), far below the call deadline (40 s) it would
//!   otherwise wait out;
//!
//! and reads went to the standby before the loss and to the primary after it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cortex_core::engine::CortexMemory;
use cortex_core::memory::{Memory, MemoryKind};
use cortex_core::store::{ListQuery, MemoryStore};
use cortex_postgres::{PostgresStore, ReplicaState};
use cortex_providers::FakeProvider;

use super::cluster::{Cluster, Server};
use super::{drop_schema, eventually, store, unique_schema};

/// Users reading and writing at once.
const USERS: usize = 6;
/// Load before the standby goes, and after.
const BEFORE: Duration = Duration::from_secs(2);
const AFTER: Duration = Duration::from_secs(5);

/// What the users' reads saw.
#[derive(Debug, Default)]
struct Tally {
    writes: AtomicUsize,
    reads: AtomicUsize,
    failed_reads: AtomicUsize,
    failed_writes: AtomicUsize,
    stale: AtomicUsize,
    cross_user: AtomicUsize,
    slowest_read_ms: AtomicU64,
}

impl Tally {
    fn read<T, E: std::fmt::Debug>(&self, started: Instant, out: Result<T, E>) -> Option<T> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.slowest_read_ms.fetch_max(ms, Ordering::Relaxed);
        match out {
            Ok(value) => Some(value),
            Err(e) => {
                eprintln!("a read failed: {e:?}");
                self.failed_reads.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// One of `user`'s reads returned `found`; it should hold `wrote`, and only `user`'s.
    fn check<'m>(&self, user: &str, wrote: &Memory, found: impl IntoIterator<Item = &'m Memory>) {
        let mut has = false;
        for memory in found {
            has |= memory.id == wrote.id;
            if memory.user_id != user || !memory.content.contains(&format!("of {user} ")) {
                self.cross_user.fetch_add(1, Ordering::Relaxed);
            }
        }
        if !has {
            self.stale.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One user's loop until `until`: a write, then at once a get, a list and a recall of it.
async fn user_load(
    engine: Arc<CortexMemory>,
    store: Arc<PostgresStore>,
    user: String,
    until: Instant,
    tally: Arc<Tally>,
) {
    let mut n = 0;
    while Instant::now() < until {
        let token = format!("q{n}x{}", user.len() * 7 + n);
        let content = format!("note {n} of {user} says {token}");
        let wrote = match engine
            .memorize(&user, &content, MemoryKind::Note, &[], &Default::default())
            .await
        {
            Ok(done) => done.memory,
            Err(e) => {
                eprintln!("a write failed: {e:?}");
                tally.failed_writes.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        tally.writes.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        if let Some(got) = tally.read(started, store.get(&user, &wrote.id).await) {
            tally.check(&user, &wrote, got.as_ref());
        }
        let started = Instant::now();
        if let Some(listed) = tally.read(started, store.list(&user, &ListQuery::newest(3)).await) {
            tally.check(&user, &wrote, listed.first());
            tally.check(&user, &wrote, &listed);
        }
        let started = Instant::now();
        if let Some(hits) = tally.read(started, engine.recall(&user, &token, 5).await) {
            tally.check(&user, &wrote, hits.iter().map(|h| &h.memory));
        }
        n += 1;
    }
}

/// Runs the load on a store reading from `standby`, loses it with `lose` after
/// [`BEFORE`], and checks the tally.
async fn lose_the_standby_under_load(
    cluster: &Cluster,
    standby: &Server,
    lose: impl FnOnce() -> Result<(), String>,
    how: &str,
) {
    let schema = unique_schema("fault");
    let primary = cluster.primary.url.clone();
    let store = Arc::new(store(&primary, &schema, &[&standby.url], |_| {}).await);
    let serving = eventually(Duration::from_secs(10), || {
        store.diagnostics().replicas()[0].serves
    })
    .await;
    assert!(serving, "{:?}", store.diagnostics().replicas());
    let engine = Arc::new(CortexMemory::new(
        store.clone(),
        Arc::new(FakeProvider::new(64)),
    ));
    let tally = Arc::new(Tally::default());
    let until = Instant::now() + BEFORE + AFTER;
    let users: Vec<_> = (0..USERS)
        .map(|i| {
            tokio::spawn(user_load(
                engine.clone(),
                store.clone(),
                format!("user{i}"),
                until,
                tally.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(BEFORE).await;
    let before = store.diagnostics().replica_reads();
    let lost_at = Instant::now();
    lose().expect("lose the standby");
    let down = eventually(AFTER, || {
        matches!(
            store.diagnostics().replicas()[0].state,
            ReplicaState::Down { .. }
        )
    })
    .await;
    let noticed = lost_at.elapsed();
    for user in users {
        user.await.expect("a user's load");
    }
    let after = store.diagnostics().replica_reads();
    eprintln!(
        "{how}: {tally:?}; down noticed after {noticed:?}; reads before {before:?}, \
         after {after:?}; {:?}",
        store.diagnostics().replicas()
    );
    assert!(down, "the standby should be found down");
    let count = |n: &AtomicUsize| n.load(Ordering::Relaxed);
    assert_eq!(
        count(&tally.failed_reads),
        0,
        "{how}: reads failed: {tally:?}"
    );
    assert_eq!(
        count(&tally.failed_writes),
        0,
        "{how}: writes failed: {tally:?}"
    );
    assert_eq!(count(&tally.stale), 0, "{how}: stale reads: {tally:?}");
    assert_eq!(
        count(&tally.cross_user),
        0,
        "{how}: cross-user answers: {tally:?}"
    );
    assert!(count(&tally.reads) > 100, "{how}: too few reads: {tally:?}");
    // The probe interval (500 ms) plus its timeout (1 s) plus the read wait (200 ms), and
    // room for a loaded two-core machine.
    let slowest = tally.slowest_read_ms.load(Ordering::Relaxed);
    assert!(
        slowest < 4_000,
        "{how}: a read took {slowest} ms: {tally:?}"
    );
    assert!(
        before.on_replicas() > 0,
        "{how}: the standby served nothing: {before:?}"
    );
    assert!(
        after.on_primary() > before.on_primary(),
        "{how}: the primary served nothing after: {after:?}"
    );
    drop(engine);
    drop(store);
    drop_schema(&primary, &schema);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_stopped_under_load() {
    let Some(cluster) = crate::gate().await else {
        return;
    };
    let standby = cluster.standby("stopped", &[]).await.expect("a standby");
    let lose = || cluster.stop(&standby);
    lose_the_standby_under_load(&cluster, &standby, lose, "stopped").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_cut_off_under_load() {
    let Some(cluster) = crate::gate().await else {
        return;
    };
    let standby = cluster
        .standby("disconnected", &[])
        .await
        .expect("a standby");
    let lose = || cluster.disconnect(&standby);
    lose_the_standby_under_load(&cluster, &standby, lose, "disconnected").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_standby_frozen_under_load() {
    let Some(cluster) = crate::gate().await else {
        return;
    };
    let standby = cluster.standby("frozen", &[]).await.expect("a standby");
    let lose = || cluster.pause(&standby);
    lose_the_standby_under_load(&cluster, &standby, lose, "frozen").await;
    // Thawed, so that it can be removed with the others.
    cluster.unpause(&standby).expect("unpause the standby");
}
