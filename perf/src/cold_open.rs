//! Opening a SQLite file cold, up to its first recall: with the index built from every row
//! (no snapshot), writing the snapshot, from the snapshot, from a snapshot 1% behind the
//! file, and after a stop that kept the server's own writes; and the cold table.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cortex_core::{
    engine::CortexMemory, memory::MemoryKind, new_memory::NewMemory, signature::EmbeddingSignature,
    store::MemoryStore,
};
use cortex_providers::FakeProvider;
use cortex_sqlite::{SqliteConfig, SqliteStore};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde_json::Value;

use crate::stats::{Samples, rss_bytes};
use crate::{BoxError, USER, corpus};

/// An engine with its store, open on the file.
pub(crate) type Opened = (CortexMemory, Arc<dyn MemoryStore>);

/// The first openings of a file, in milliseconds to the first recall.
pub(crate) struct FirstOpenings {
    /// Without snapshots: the index built from every row.
    pub(crate) from_rows_ms: f64,
    /// The first with snapshots: built from the rows, and the snapshot written.
    pub(crate) writing_ms: f64,
    /// From the snapshot, the median of three.
    pub(crate) from_snapshot_ms: f64,
    pub(crate) snapshot_bytes: u64,
    /// How much the process grew with its first index (the one built from the rows).
    pub(crate) rss_growth: u64,
}

impl FirstOpenings {
    /// Opens the file at `path` cold, each time answering `query`: the openings, and the
    /// last one's engine, its index cached, to go on with.
    pub(crate) async fn measure(
        path: &Path,
        fake: &Arc<FakeProvider>,
        query: &str,
    ) -> Result<(FirstOpenings, Opened), BoxError> {
        let rss_before = rss_bytes();
        let (from_rows_ms, first) = open_and_recall(path, false, fake, query).await?;
        let rss_after = rss_bytes();
        drop(first);
        let (writing_ms, first) = open_and_recall(path, true, fake, query).await?;
        drop(first);
        let snapshot_bytes = snapshot_bytes(path)?;
        // One opening is noisy at this scale (tens of ms): the median of three.
        let mut opens = Samples::default();
        for _ in 0..2 {
            let (ms, _) = open_and_recall(path, true, fake, query).await?;
            opens.push(Duration::from_secs_f64(ms / 1e3));
        }
        let (ms, opened) = open_and_recall(path, true, fake, query).await?;
        opens.push(Duration::from_secs_f64(ms / 1e3));
        let openings = FirstOpenings {
            from_rows_ms,
            writing_ms,
            from_snapshot_ms: opens.p50(),
            snapshot_bytes,
            rss_growth: rss_after.saturating_sub(rss_before),
        };
        Ok((openings, opened))
    }
}

/// A snapshot behind the file by 1% of its `n` memories, written by a process that keeps
/// none: the opening reads it, applies the rows written since, and writes it again. The
/// opening's milliseconds, and its engine.
pub(crate) async fn behind(
    path: &Path,
    n: usize,
    fake: &Arc<FakeProvider>,
    signature: &EmbeddingSignature,
    query: &str,
) -> Result<(f64, Opened), BoxError> {
    {
        let writer = SqliteStore::open_with(&SqliteConfig {
            index_snapshots: false,
            ..SqliteConfig::new(path)
        })?;
        let mut rng = SmallRng::seed_from_u64(11);
        for _ in 0..(n / 100).max(1) {
            let text = corpus::text(&mut rng);
            let m = NewMemory::new(USER, &text, MemoryKind::Note, &[], 1 << 20)?;
            writer.add(&m, &fake.vector(&text), signature).await?;
        }
    }
    open_and_recall(path, true, fake, query).await
}

/// A server's own writes, 1% of its `n` memories, kept at its stop (`keep_indexes`, as
/// cortex-mcp does on its way out): what the stop costs, and the next opening, in
/// milliseconds. The store stays open through that opening.
pub(crate) async fn kept_stop(
    (engine, store): Opened,
    path: &Path,
    n: usize,
    fake: &Arc<FakeProvider>,
    query: &str,
) -> Result<(f64, f64), BoxError> {
    let mut rng = SmallRng::seed_from_u64(13);
    for _ in 0..(n / 100).max(1) {
        let text = corpus::text(&mut rng);
        engine
            .memorize(USER, &text, MemoryKind::Note, &[], &Default::default())
            .await?;
    }
    let started = Instant::now();
    engine.keep_indexes().await;
    let keep_ms = started.elapsed().as_secs_f64() * 1e3;
    drop(engine);
    let (cold_kept_ms, _) = open_and_recall(path, true, fake, query).await?;
    drop(store);
    Ok((keep_ms, cold_kept_ms))
}

/// Opens the file (with or without index snapshots) and answers one recall: the time
/// taken, and the engine holding the index with its store.
async fn open_and_recall(
    path: &Path,
    snapshots: bool,
    fake: &Arc<FakeProvider>,
    query: &str,
) -> Result<(f64, Opened), BoxError> {
    let started = Instant::now();
    let config = SqliteConfig {
        index_snapshots: snapshots,
        ..SqliteConfig::new(path)
    };
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open_with(&config)?);
    let engine = CortexMemory::new(store.clone(), fake.clone());
    engine.recall(USER, query, 10).await?;
    Ok((started.elapsed().as_secs_f64() * 1e3, (engine, store)))
}

/// The bytes of the snapshots beside the file.
fn snapshot_bytes(path: &Path) -> Result<u64, BoxError> {
    let mut dir = path.as_os_str().to_owned();
    dir.push(".index");
    let mut total = 0;
    for entry in std::fs::read_dir(std::path::PathBuf::from(dir))? {
        total += entry?.metadata()?.len();
    }
    Ok(total)
}

/// The cold table, a row for each of the SQLite path's rows in `report`.
pub(crate) fn print_table(report: &[Value]) {
    println!(
        "\n| N | d | cold from rows (no snapshot) | cold, writing the snapshot | cold from the snapshot | rows / snapshot | cold, snapshot 1% behind | stop keeping 1% own writes | cold after that stop | snapshot bytes/memory |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in report {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "| {} | {} | {:.0} ms | {:.0} ms | {:.1} ms | {:.1}x | {:.0} ms | {:.0} ms | {:.1} ms | {:.0} |",
            r["n"],
            r["d"],
            f("cold_from_rows_ms"),
            f("cold_writing_snapshot_ms"),
            f("cold_open_and_first_recall_ms"),
            f("cold_from_rows_ms") / f("cold_open_and_first_recall_ms"),
            f("cold_snapshot_behind_1pct_ms"),
            f("keep_at_stop_ms"),
            f("cold_after_kept_stop_ms"),
            f("snapshot_bytes_per_memory"),
        );
    }
}
