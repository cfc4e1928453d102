//! The IVFFlat index, the other approximate index `ann_index` can name.
//!
//! IVFFlat splits the vectors into k-means lists when it is built and a search scans the
//! `ivfflat.probes` lists whose centres are nearest the query, every vector in them. Its
//! build is many times faster than HNSW's (a million 384-d memories: 92 s against 54 min
//! on one core, docs/BENCHMARKS.md), and on round clusters like the bench corpus it finds
//! more of the exact neighbours in less time than the graph; on real sentence embeddings
//! the graph is far better (docs/BENCHMARKS.md), so HNSW stays the default. Its other
//! weakness is that the lists are trained on
//! the rows there at build time: rows added later join the nearest list, and once the
//! store has grown far past what the lists were sized for, each list holds more rows and a
//! search reads more. The store keeps the index (rebuilding a large one unasked would take
//! the server's CPU for minutes) and logs when it has outgrown its lists, with what to do.
//!
//! The search shape is HNSW's (`ORDER BY <indexed expression> <=> $q LIMIT n` over the
//! same `halfvec` expression, the candidates ranked by the full-precision distance), so
//! only the build and the settings differ: `ivfflat.probes` for `hnsw.ef_search`, and
//! `ivfflat.iterative_scan = relaxed_order` (its only iterative mode) for a walk that must
//! go past the probed lists to fill the LIMIT with the user's rows.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use cortex_core::error::StoreError;
use deadpool_postgres::Object;
use tokio_postgres::error::SqlState;

use super::dense_plan::{check_hnsw_dimension, index_valid, indexed_expression};
use crate::config::{IvfFlat, MAX_IVF_LISTS};
use crate::names::Names;
use crate::pg_err;
use crate::pool::Connections;
use crate::sql::get;
use crate::tables::Memories;

pub(crate) const IVFFLAT_INDEX: &str = "memories_embedding_ivfflat_half";

/// Rows per list up to [`SQUARE_ROOT_FROM`] rows, as pgvector advises.
const ROWS_PER_LIST: u64 = 1000;
/// From this many rows pgvector advises the square root of the rows for lists.
const SQUARE_ROOT_FROM: u64 = 1_000_000;
/// How far past its design size a store may grow before the log says to rebuild: each
/// search then reads about this many times the rows it was sized to.
const OUTGROWN_FACTOR: u64 = 4;

/// Lists for an index over `rows` rows: one per thousand rows up to a million, the square
/// root of the rows beyond; 1 to pgvector's 32,768.
pub(crate) fn design_lists(rows: u64) -> u32 {
    let lists = match rows <= SQUARE_ROOT_FROM {
        true => rows / ROWS_PER_LIST,
        false => rows.isqrt(),
    };
    u32::try_from(lists.clamp(1, u64::from(MAX_IVF_LISTS))).unwrap_or(MAX_IVF_LISTS)
}

/// The rows `lists` lists are sized for: the inverse of [`design_lists`].
pub(crate) fn design_rows(lists: u32) -> u64 {
    let lists = u64::from(lists);
    match lists * ROWS_PER_LIST <= SQUARE_ROOT_FROM {
        true => lists * ROWS_PER_LIST,
        false => lists * lists,
    }
}

/// `ivfflat.probes` for an index of `lists` lists: the configured value, or the square
/// root of the lists rounded up (pgvector's starting point); never more than the lists.
pub(crate) fn probes(config: IvfFlat, lists: u32) -> u32 {
    let lists = lists.max(1);
    let default = (lists - 1).isqrt() + 1;
    config.probes.unwrap_or(default).clamp(1, lists)
}

/// What the k-means of a build of `lists` lists over `dimension`-d `halfvec`s holds in
/// `maintenance_work_mem`, with room to spare: pgvector samples 50 rows a list (at least
/// 10,000) and refuses to build when they do not fit.
fn build_memory_kb(lists: u32, dimension: usize) -> u64 {
    let samples = (u64::from(lists) * 50).max(10_000);
    let item = 8 + 2 * dimension as u64;
    let centres = u64::from(lists) * 4 * dimension as u64 * 2;
    (samples * item + centres) * 5 / 4 / 1024 + 16 * 1024
}

/// Builds the IVFFlat index once the dimension is known, as [`super::dense_plan`] builds
/// HNSW's (concurrently, idempotent, safe against another process doing the same), with
/// `config.lists` or lists from the live rows at that moment; stores the index's lists in
/// `lists` for the searches' probes. `done` makes later calls free.
pub(crate) async fn ensure_ivfflat_index(
    pool: &Connections,
    names: &Names,
    dimension: usize,
    config: IvfFlat,
    done: &AtomicBool,
    lists: &AtomicU32,
) -> Result<(), StoreError> {
    if done.load(Ordering::Acquire) {
        return Ok(());
    }
    check_hnsw_dimension(dimension)?;
    let client = Object::take(pool.get().await?);
    client
        .batch_execute("SET statement_timeout = 0")
        .await
        .map_err(pg_err)?;
    let mut built = built_lists(&client, names).await?;
    // Counted exactly for a build; for an index already there (every later handle), the
    // planner's estimate is enough to say whether it has been outgrown.
    let live = live_rows(&client, names, built.is_none()).await?;
    if built.is_none() {
        let want = config.lists.unwrap_or_else(|| design_lists(live));
        // The taken connection is this build's alone, so the session setting ends with it.
        let have: i64 = get(
            &client
                .query_one(
                    "SELECT pg_size_bytes(current_setting('maintenance_work_mem')) / 1024",
                    &[],
                )
                .await
                .map_err(pg_err)?,
            0,
        )?;
        let need = build_memory_kb(want, dimension);
        if u64::try_from(have).unwrap_or(0) < need {
            client
                .batch_execute(&format!("SET maintenance_work_mem = '{need}kB'"))
                .await
                .map_err(pg_err)?;
        }
        let sql = format!(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS {IVFFLAT_INDEX} ON {} USING ivfflat \
             ({} halfvec_cosine_ops) WITH (lists = {want}) WHERE NOT superseded",
            names.q(Memories::Table),
            indexed_expression("", dimension),
        );
        match client.batch_execute(&sql).await {
            Ok(()) => {}
            Err(e)
                if e.code() == Some(&SqlState::DUPLICATE_TABLE)
                    || e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {}
            Err(e) => return Err(pg_err(e)),
        }
        built = built_lists(&client, names).await?;
    }
    let Some(built) = built else {
        return Err(StoreError::Corrupt(format!(
            "the {IVFFLAT_INDEX} index is missing after its build"
        )));
    };
    match index_valid(&client, names, IVFFLAT_INDEX).await? {
        Some(false) => tracing::warn!(
            index = IVFFLAT_INDEX,
            "the IVFFlat index is invalid (an interrupted build?); run REINDEX INDEX CONCURRENTLY"
        ),
        _ => {
            if live > design_rows(built).saturating_mul(OUTGROWN_FACTOR) {
                tracing::warn!(
                    index = IVFFLAT_INDEX,
                    lists = built,
                    live_memories = live,
                    "the IVFFlat index's lists were sized for far fewer memories than the \
                     store holds now, so each search reads more of them; drop it (DROP INDEX \
                     CONCURRENTLY) for the next search to build it with lists for these"
                );
            }
        }
    }
    lists.store(built, Ordering::Release);
    done.store(true, Ordering::Release);
    Ok(())
}

/// Every user's live memories: counted, or the planner's estimate of the table's rows
/// (0 before the table was first analysed).
async fn live_rows(
    client: &tokio_postgres::Client,
    names: &Names,
    exact: bool,
) -> Result<u64, StoreError> {
    let sql = match exact {
        true => format!(
            "SELECT count(*) FROM {} WHERE NOT superseded",
            names.q(Memories::Table)
        ),
        false => format!(
            "SELECT greatest(reltuples, 0)::int8 FROM pg_class WHERE oid = '{}'::regclass",
            names.q(Memories::Table)
        ),
    };
    let row = client.query_one(&sql, &[]).await.map_err(pg_err)?;
    Ok(u64::try_from(get::<i64>(&row, 0)?).unwrap_or(0))
}

/// The lists the IVFFlat index was built with, `None` without the index.
pub(crate) async fn built_lists(
    client: &tokio_postgres::Client,
    names: &Names,
) -> Result<Option<u32>, StoreError> {
    let row = client
        .query_opt(
            "SELECT coalesce(c.reloptions, '{}') FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relname = $2",
            &[&names.schema(), &IVFFLAT_INDEX],
        )
        .await
        .map_err(pg_err)?;
    let Some(row) = row else {
        return Ok(None);
    };
    let options: Vec<String> = get(&row, 0)?;
    Ok(Some(parse_lists(&options)))
}

/// `lists=1000` as pgvector stores it; pgvector's default (100) when it is missing.
fn parse_lists(options: &[String]) -> u32 {
    options
        .iter()
        .find_map(|o| o.strip_prefix("lists=")?.parse().ok())
        .unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_follow_pgvectors_advice_and_invert() {
        assert_eq!(design_lists(0), 1);
        assert_eq!(design_lists(20_000), 20);
        assert_eq!(design_lists(1_000_000), 1000);
        assert_eq!(design_lists(4_000_000), 2000);
        assert_eq!(design_lists(u64::MAX), MAX_IVF_LISTS);
        for rows in [20_000, 1_000_000, 4_000_000] {
            assert_eq!(design_rows(design_lists(rows)), rows);
        }
    }

    #[test]
    fn probes_default_to_the_root_of_the_lists_and_never_exceed_them() {
        let auto = IvfFlat::default();
        assert_eq!(probes(auto, 1000), 32);
        assert_eq!(probes(auto, 1024), 32);
        assert_eq!(probes(auto, 1), 1);
        assert_eq!(probes(auto, 0), 1);
        let fixed = IvfFlat {
            lists: None,
            probes: Some(15),
        };
        assert_eq!(probes(fixed, 1000), 15);
        assert_eq!(probes(fixed, 10), 10);
    }

    #[test]
    fn build_memory_covers_pgvectors_samples() {
        // 50,000 samples of 776 bytes at 1,000 lists x 384: 37 MB, so more than 64 MB
        // (the server default) only with the margin and the centres.
        let kb = build_memory_kb(1000, 384);
        assert!(kb * 1024 > 50_000 * 776, "{kb}");
        assert!(kb < 128 * 1024, "{kb}");
        assert!(build_memory_kb(1, 8) >= 10_000 * 24 / 1024);
    }

    #[test]
    fn lists_read_back_with_pgvectors_default_for_the_missing() {
        let read = |o: &[&str]| parse_lists(&o.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        assert_eq!(read(&["lists=1000"]), 1000);
        assert_eq!(read(&["fillfactor=90", "lists=7"]), 7);
        assert_eq!(read(&[]), 100);
    }
}
