//! Read-your-writes under a replay delay: the standby applies each commit 300 ms after it
//! (`recovery_min_apply_delay`), so a read made right after a write that went to the
//! standby as it is would miss the write. Each round memorizes, then at once gets the
//! memory by id, lists, counts and recalls it: every read must see the write. With a
//! read wait longer than the delay the reads wait and are the standby's; with a shorter
//! one they go to the primary. Each case runs with the pushdown (recall is one search on
//! the standby) and with the in-process index (the engine's cache reads `generation`,
//! then `build_index`, on the standby).
//!
//! The standby really is behind each write when it is read: each round also reads the
//! memory straight from the standby, without the store, and finds it missing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cortex_core::engine::CortexMemory;
use cortex_core::memory::MemoryKind;
use cortex_core::store::{ListQuery, MemoryStore};
use cortex_postgres::ReplicaReads;
use cortex_providers::FakeProvider;

use super::cluster::Server;
use super::{drop_schema, eventually, store, unique_schema};

/// Write-then-read rounds per case.
const ROUNDS: usize = 20;
/// The same, as the counters count.
const ROUNDS_U64: u64 = ROUNDS as u64;

/// What the rounds saw.
#[derive(Debug, Default)]
struct Seen {
    /// Reads that missed the round's write (must stay 0).
    stale: usize,
    /// Rounds whose write the standby had not applied when read directly.
    standby_behind: usize,
    /// The slowest round's reads.
    slowest: Duration,
}

async fn rounds(wait: Duration, pushdown: bool) -> Option<(Seen, ReplicaReads)> {
    let cluster = crate::gate().await?;
    let delayed: Server = cluster.delayed_standby().await;
    let schema = unique_schema("ryw");
    let primary = cluster.primary.url.clone();
    let store = Arc::new(
        store(&primary, &schema, &[&delayed.url], |c| {
            c.pushdown = pushdown;
            c.replicas.read_wait = wait;
            // 300 ms behind while written: within the bound, so the standby serves.
            c.replicas.max_lag = Duration::from_secs(10);
        })
        .await,
    );
    let serving = eventually(Duration::from_secs(10), || {
        store.diagnostics().replicas()[0].serves
    })
    .await;
    assert!(serving, "{:?}", store.diagnostics().replicas());
    let engine = CortexMemory::new(store.clone(), Arc::new(FakeProvider::new(64)));
    let (standby, connection) = tokio_postgres::connect(&delayed.url, tokio_postgres::NoTls)
        .await
        .expect("the standby");
    tokio::spawn(connection);
    let on_standby = format!("SELECT count(*) FROM \"{schema}\".memories WHERE id = $1");
    let mut seen = Seen::default();
    for round in 0..ROUNDS {
        let user = format!("user{}", round % 3);
        let token = format!("zqx{round}w");
        let content = format!("round {round} wrote {token}");
        let memory = engine
            .memorize(&user, &content, MemoryKind::Note, &[], &Default::default())
            .await
            .expect("memorize")
            .memory;
        // Straight from the standby, before any read of the store's.
        let direct: i64 = standby
            .query_one(&on_standby, &[&memory.id])
            .await
            .map_or(1, |row| row.get(0));
        seen.standby_behind += usize::from(direct == 0);
        let started = Instant::now();
        let got = store.get(&user, &memory.id).await.expect("get");
        let listed = store
            .list(&user, &ListQuery::newest(1))
            .await
            .expect("list");
        let count = engine.count(&user).await.expect("count");
        let recalled = engine.recall(&user, &token, 3).await.expect("recall");
        seen.slowest = seen.slowest.max(started.elapsed());
        seen.stale += usize::from(got.is_none_or(|m| m.id != memory.id));
        seen.stale += usize::from(listed.first().is_none_or(|m| m.id != memory.id));
        seen.stale += usize::from(count != u64::try_from(round / 3 + 1).unwrap());
        seen.stale += usize::from(!recalled.iter().any(|hit| hit.memory.id == memory.id));
    }
    let reads = store.diagnostics().replica_reads();
    drop(engine);
    drop(store);
    drop_schema(&primary, &schema);
    Some((seen, reads))
}

/// A wait longer than the delay: every read waits for the standby and is its.
async fn waits_for_the_standby(pushdown: bool) {
    let Some((seen, reads)) = rounds(Duration::from_secs(2), pushdown).await else {
        return;
    };
    eprintln!("waited, pushdown {pushdown}: {seen:?} {reads:?}");
    assert_eq!(
        seen.stale, 0,
        "reads missed their user's write: {seen:?} {reads:?}"
    );
    assert!(
        seen.standby_behind >= ROUNDS * 3 / 4,
        "the standby should be behind each write when read: {seen:?}"
    );
    // A round whose write the standby had already applied when read (a slow memorize on
    // a loaded machine) reads it at once.
    assert!(reads.replica_waited >= ROUNDS_U64 * 3 / 4, "{reads:?}");
    assert_eq!(reads.on_primary(), 0, "{reads:?}");
}

/// A wait shorter than the delay: the reads after a write go to the primary.
async fn falls_back_to_the_primary(pushdown: bool) {
    let Some((seen, reads)) = rounds(Duration::from_millis(50), pushdown).await else {
        return;
    };
    eprintln!("fell back, pushdown {pushdown}: {seen:?} {reads:?}");
    assert_eq!(
        seen.stale, 0,
        "reads missed their user's write: {seen:?} {reads:?}"
    );
    assert!(seen.standby_behind >= ROUNDS * 3 / 4, "{seen:?}");
    assert!(
        reads.primary_wait_expired >= ROUNDS_U64 * 3 / 4,
        "{reads:?}"
    );
    assert_eq!(
        reads.primary_no_replica + reads.primary_failover,
        0,
        "{reads:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_waits_for_its_users_write_with_the_pushdown() {
    waits_for_the_standby(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_waits_for_its_users_write_with_the_in_process_index() {
    waits_for_the_standby(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_wait_reads_from_the_primary_with_the_pushdown() {
    falls_back_to_the_primary(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_wait_reads_from_the_primary_with_the_in_process_index() {
    falls_back_to_the_primary(false).await;
}
