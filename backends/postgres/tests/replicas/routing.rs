//! Where reads go: to the standby (shown by what only the standby lacks), and to the
//! primary when the read URL names a server that is not a standby, or one lagging past
//! the bound.

use std::sync::Arc;
use std::time::Duration;

use cortex_core::engine::CortexMemory;
use cortex_core::memory::MemoryKind;
use cortex_core::store::MemoryStore;
use cortex_postgres::{PostgresStore, ReplicaState};
use cortex_providers::FakeProvider;

use super::{drop_schema, eventually, store, unique_schema};

/// The Fake embedder's dimension in these tests.
const DIM: usize = 64;

fn engine(store: &Arc<PostgresStore>) -> CortexMemory {
    CortexMemory::new(store.clone(), Arc::new(FakeProvider::new(DIM)))
}

async fn note(engine: &CortexMemory, user: &str, text: &str) -> cortex_core::memory::Memory {
    engine
        .memorize(user, text, MemoryKind::Note, &[], &Default::default())
        .await
        .expect("memorize")
        .memory
}

/// A standby whose replay is held back a while sees a write only then: a handle that did
/// not make the write (another process, as far as read-your-writes goes) reads the
/// standby's state as it is, which proves its reads are the standby's; the handle that
/// made it waits for the replay and sees it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_the_standbys() {
    let Some(cluster) = crate::gate().await else {
        return;
    };
    let delayed = cluster.delayed_standby().await;
    let schema = unique_schema("route");
    let primary = cluster.primary.url.clone();
    let tune = |c: &mut cortex_postgres::PostgresConfig| {
        c.replicas.read_wait = Duration::from_secs(3);
        c.replicas.max_lag = Duration::from_secs(30);
    };
    let writer = Arc::new(store(&primary, &schema, &[&delayed.url], tune).await);
    let other = Arc::new(store(&primary, &schema, &[&delayed.url], tune).await);
    // Once the standby has replayed the schema each handle made sure of, it serves both.
    let serving = eventually(Duration::from_secs(10), || {
        writer.diagnostics().replicas()[0].serves && other.diagnostics().replicas()[0].serves
    })
    .await;
    assert!(serving, "{:?}", other.diagnostics().replicas());
    // A first write makes the schema's signature (slow DDL on a loaded machine).
    note(&engine(&writer), "ada", "the first write").await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (mut missed_by_other, mut rounds) = (0u64, 0u64);
    while rounds < 10 && missed_by_other < 3 {
        rounds += 1;
        let written = note(&engine(&writer), "ada", &format!("written late {rounds}")).await;
        let id = written.id;
        // The other handle has no mark for ada: it reads the standby as it is, before the
        // replay (unless this round was slower than the delay).
        let seen_by_other = other.get("ada", &id).await.unwrap();
        missed_by_other += u64::from(seen_by_other.is_none());
        // The writer waits for the replay and sees it at once.
        let seen_by_writer = writer.get("ada", &id).await.unwrap();
        assert_eq!(seen_by_writer.map(|m| m.id), Some(id));
        // Replayed, the other handle sees it too, still from the standby.
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(other.get("ada", &id).await.unwrap().map(|m| m.id), Some(id));
    }
    assert!(
        missed_by_other >= 3,
        "a read without a write of its own should be the standby's, 300 ms behind: it saw \
         the write at once in {} of {rounds} rounds",
        rounds - missed_by_other
    );
    let (w, o) = (
        writer.diagnostics().replica_reads(),
        other.diagnostics().replica_reads(),
    );
    assert_eq!((o.replica, o.on_primary()), (2 * rounds, 0), "{o:?}");
    assert_eq!(w.on_primary(), 0, "{w:?}");
    // Its reads waited for the replay (at least once: on a loaded machine the replay may
    // land between the other handle's read and its own).
    assert!(w.replica_waited >= 1, "{w:?}");
    // A recall of several terms runs its two sides on two of the standby's connections,
    // in a snapshot exported there and imported beside it.
    let hits = engine(&other)
        .recall("ada", "written late", 5)
        .await
        .unwrap();
    assert!(!hits.is_empty());
    let o = other.diagnostics().replica_reads();
    assert!(o.replica > 2 * rounds && o.on_primary() == 0, "{o:?}");
    assert!(other.diagnostics().parallel_searches() >= 1);
    drop((writer, other));
    drop_schema(&primary, &schema);
}

/// A read URL naming the primary itself (not in recovery) is no replica: it is down, and
/// every read goes to the primary, counted so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_a_standby_serves_no_reads() {
    let Some(cluster) = crate::gate().await else {
        return;
    };
    let schema = unique_schema("nostandby");
    let primary = cluster.primary.url.clone();
    let store = Arc::new(store(&primary, &schema, &[&primary], |_| {}).await);
    let replicas = store.diagnostics().replicas();
    match &replicas[0].state {
        ReplicaState::Down { why } => assert!(why.contains("not a hot standby"), "{why}"),
        other => panic!("the primary is no standby: {other:?}"),
    }
    let memory = note(&engine(&store), "ada", "on the primary only").await;
    assert!(store.get("ada", &memory.id).await.unwrap().is_some());
    assert_eq!(store.count("ada").await.unwrap(), 1);
    let reads = store.diagnostics().replica_reads();
    assert_eq!(
        (reads.on_replicas(), reads.primary_no_replica),
        (0, 2),
        "{reads:?}"
    );
    assert_eq!(reads.skipped_down, 2, "{reads:?}");
    drop(store);
    drop_schema(&primary, &schema);
}

/// A standby further behind than `CORTEX_PG_REPLICA_MAX_LAG_MS` while the primary is
/// written is skipped (reads on the primary), and serves again once it has caught up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_standby_is_skipped_until_it_catches_up() {
    let Some(cluster) = crate::gate().await else {
        return;
    };
    let delayed = cluster.delayed_standby().await;
    let schema = unique_schema("lag");
    let primary = cluster.primary.url.clone();
    let store = Arc::new(
        store(&primary, &schema, &[&delayed.url], |c| {
            c.replicas.max_lag = Duration::from_millis(100);
            c.replicas.probe_interval = Duration::from_millis(100);
        })
        .await,
    );
    let engine = engine(&store);
    // Writes every 20 ms for two seconds: the standby stays 300 ms behind them.
    let mut lagging_seen = false;
    for i in 0..100 {
        note(&engine, "bob", &format!("write number {i}")).await;
        let lagging = matches!(
            store.diagnostics().replicas()[0].state,
            ReplicaState::Lagging { .. }
        );
        if lagging {
            lagging_seen = true;
            // A user with no write of their own: nothing to wait for, yet not the standby.
            assert_eq!(store.count("carol").await.unwrap(), 0);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(lagging_seen, "{:?}", store.diagnostics().replicas());
    let reads = store.diagnostics().replica_reads();
    assert!(
        reads.skipped_lagging > 0 && reads.primary_no_replica > 0,
        "{reads:?}"
    );
    // Idle, it replays everything: up again.
    let caught_up = eventually(Duration::from_secs(5), || {
        store.diagnostics().replicas()[0].serves
    })
    .await;
    assert!(caught_up, "{:?}", store.diagnostics().replicas());
    let before = store.diagnostics().replica_reads().on_replicas();
    assert_eq!(store.count("carol").await.unwrap(), 0);
    assert_eq!(
        store.diagnostics().replica_reads().on_replicas(),
        before + 1
    );
    drop(store);
    drop_schema(&primary, &schema);
}
