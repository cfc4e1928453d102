//! Where the dense candidates come from: a sequential scan (exact) or an approximate
//! index, HNSW's graph (here) or IVFFlat's lists (`super::ivfflat`), as `ann_index` says
//! (`super::ann_index`).
//!
//! pgvector sums in f32 (in whatever order its vectorised loop picks), the core sums exact
//! f32 products in f64 and rounds to f32, so the two can order near-ties differently, and
//! the core breaks exact ties by insertion. In exact mode `<=>` selects and orders the
//! candidates, and wherever two consecutive candidates' distances lie within
//! [`candidate_margin`] of each other the run they belong to is re-ordered with the core's
//! own arithmetic (`cortex_unit_dot`, see the migration), once per distinct embedding (see
//! `tie_break`). Across a gap wider than the margin both agree, so only the runs need the
//! (slower) exact score. The candidates are every live memory within the margin of the
//! pool-th smallest distance: a superset of the core's pool whatever the rounding, so the
//! ranks equal the core's exactly.
//!
//! HNSW mode is approximate by configuration (its overlap with exact search is measured,
//! not assumed): the candidates are what the index returns, ranked by pgvector's
//! full-precision distance, ties by insertion, without the exact re-scoring. That
//! re-scoring was half of a dense search at 100k memories and only reorders memories whose
//! distances agree to float rounding, far finer than the index's own error.
//!
//! **Filters.** Exact mode adds the filter's conditions to its scan and is exact as ever.
//! An HNSW search walks one graph of every user's live memories and keeps the candidates
//! that pass its conditions (the user's, and the filter's); without more, a selective
//! filter leaves fewer candidates than the pool, or none, however many memories pass. So
//! a filtered search in HNSW mode (or `auto` past the threshold) is planned twice over:
//!
//! - HNSW searches always run with `hnsw.iterative_scan = strict_order` (pgvector 0.8 and
//!   later; see `super::transaction`): the index scan goes on past `ef_search` until the
//!   LIMIT's worth of rows pass, up to `hnsw.max_scan_tuples`, in distance order;
//! - and a filter that few memories pass is searched exactly instead ([`passing_count`]):
//!   the user's live memories that pass are counted, the count stopping at
//!   [`FILTERED_EXACT_BELOW`] (2,000, or `hnsw_threshold` when that is lower), and a filter
//!   fewer pass is searched exactly, where the graph walk would have to pass over many
//!   memories that fail the filter for each one that passes (at most `max_scan_tuples`
//!   visited, 20,000 by default, across every user). A broader filter keeps the index,
//!   with the iterative scan. The count is one extra statement before the search; the
//!   indexes of migration 0007 (tags, `(user_id, created_at)`, `(user_id, kind)`) let it
//!   and the exact search read only the rows the filter names. A threshold of 0 turns the
//!   fallback off. Without the iterative scan (pgvector before 0.8) every filtered search
//!   is exact: the index alone returns at most `ef_search` rows before the filter.

use std::sync::atomic::{AtomicBool, Ordering};

use cortex_core::{error::StoreError, filter::MemoryFilter};
use deadpool_postgres::Object;
use sea_query::{Expr, ExprTrait, IdenStatic, Query};
use tokio_postgres::error::SqlState;

use super::aliases::As;
use crate::config::HnswBuild;
use crate::filter::and_filter;
use crate::names::Names;
use crate::pg_err;
use crate::pool::Connections;
use crate::sql::{Built, build, get};
use crate::tables::Memories;

/// pgvector's HNSW limit for `halfvec`, the type the index is built over.
pub(crate) const HALFVEC_MAX_DIM: usize = 4000;
/// pgvector's upper bound for `hnsw.ef_search`.
const MAX_EF_SEARCH: usize = 1000;
const MIN_EF_SEARCH: usize = 300;

/// How one search picks its dense candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DensePlan {
    Exact,
    /// The approximate index `ann_index` names (HNSW or IVFFlat): one SQL shape for both.
    Index {
        dimension: usize,
    },
}

impl DensePlan {
    pub(crate) fn is_index(self) -> bool {
        matches!(self, DensePlan::Index { .. })
    }
}

/// How far apart pgvector's and the core's cosine distances can be, twice over (once for
/// each of two rows compared): f32 accumulation of `dimension` products
/// and of both norms is off by at most about `dimension` units in the last place of f32
/// (2^-24) relative to |a||b|, the core's by a few. The bound is generous on purpose: a
/// wider margin only re-scores a few more rows.
pub(crate) fn candidate_margin(dimension: usize) -> f64 {
    (8.0 * dimension as f64 + 64.0) * f64::powi(2.0, -24)
}

/// How many HNSW candidates to fetch for a pool: a little more than the pool, so ranking
/// by the full-precision distance can repair a `halfvec` index's order near the cut.
pub(crate) fn hnsw_candidates(pool: usize) -> usize {
    pool.saturating_add((pool / 4).max(8))
}

/// `hnsw.ef_search` for a candidate count: four times the count, at least 300 (pgvector
/// caps it at 1000; iterative scanning goes on past it when the user filter drops rows).
/// On tightly clustered data at 100k memories (docs/BENCHMARKS.md) the vector side's
/// overlap@10 with exact search over the `halfvec` index was 0.925 at 100, 0.951 at 200,
/// 0.973 at 300 and 0.984 at 400, still faster at 300 than the `vector` index at 200
/// (0.976).
pub(crate) fn ef_search(candidates: usize) -> usize {
    candidates
        .saturating_mul(4)
        .clamp(MIN_EF_SEARCH, MAX_EF_SEARCH)
}

/// The indexed expression for `dimension`, as the index and the query must both write it.
/// Half precision: the index is about half the size of a `vector` one (112 against 195 MB
/// at 100k x 384), so more of it stays in memory, and its scan is faster; the candidates
/// are then ranked by the full-precision distance.
pub(crate) fn indexed_expression(alias: &str, dimension: usize) -> String {
    format!("({alias}embedding::halfvec({dimension}))")
}

/// The query side of `<=>` against [`indexed_expression`] (`$1` is the query vector).
pub(crate) fn query_expression(dimension: usize) -> String {
    format!("($1::vector::halfvec({dimension}))")
}

pub(crate) fn check_hnsw_dimension(dimension: usize) -> Result<(), StoreError> {
    match dimension <= HALFVEC_MAX_DIM {
        true => Ok(()),
        false => Err(StoreError::Config(format!(
            "pgvector's HNSW index supports at most {HALFVEC_MAX_DIM} dimensions (as halfvec); \
             this store's embeddings have {dimension}: set CORTEX_PG_DENSE_MODE=exact"
        ))),
    }
}

/// The core's own cosine in SQL (`migrations/0003_unit_dot_loop.sql`).
pub(crate) const UNIT_DOT: &str = "cortex_unit_dot";

pub(crate) const HNSW_INDEX: &str = "memories_embedding_hnsw_half";
/// The index's name before it was `halfvec` for every dimension (it was `vector` up to
/// 2,000 dimensions): replaced, or renamed where it already was `halfvec`.
pub(crate) const LEGACY_HNSW_INDEX: &str = "memories_embedding_hnsw";

/// Builds the HNSW index once the dimension is known, without blocking writers
/// (`CREATE INDEX CONCURRENTLY`, which must run outside a transaction). Idempotent and
/// safe against another process doing the same; `done` makes later calls free.
pub(crate) async fn ensure_hnsw_index(
    pool: &Connections,
    names: &Names,
    dimension: usize,
    build: HnswBuild,
    done: &AtomicBool,
) -> Result<(), StoreError> {
    if done.load(Ordering::Acquire) {
        return Ok(());
    }
    check_hnsw_dimension(dimension)?;
    let sql = format!(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {HNSW_INDEX} ON {} USING hnsw \
         ({} halfvec_cosine_ops) WITH (m = {}, ef_construction = {}) WHERE NOT superseded",
        names.q(Memories::Table),
        indexed_expression("", dimension),
        build.m,
        build.ef_construction,
    );
    // Out of the pool for good, without the pool's statement timeout: a build over many
    // memories rightly takes minutes, and the session setting must not reach another call.
    let client = Object::take(pool.get().await?);
    client
        .batch_execute("SET statement_timeout = 0")
        .await
        .map_err(pg_err)?;
    let legacy: Option<String> = client
        .query_opt(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = $2",
            &[&names.schema(), &LEGACY_HNSW_INDEX],
        )
        .await
        .map_err(pg_err)?
        .map(|r| get(&r, 0))
        .transpose()?;
    if legacy.as_deref().is_some_and(|def| def.contains("halfvec")) {
        // Already the same index under the old name: no rebuild.
        let rename = format!(
            "ALTER INDEX IF EXISTS {} RENAME TO {HNSW_INDEX}",
            names.q_object(LEGACY_HNSW_INDEX)
        );
        match client.batch_execute(&rename).await {
            Ok(()) => {}
            // Another process renamed it first.
            Err(e) if e.code() == Some(&SqlState::DUPLICATE_TABLE) => {}
            Err(e) => return Err(pg_err(e)),
        }
    }
    match client.batch_execute(&sql).await {
        Ok(()) => {}
        // Another process created it between our check and our create.
        Err(e)
            if e.code() == Some(&SqlState::DUPLICATE_TABLE)
                || e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {}
        Err(e) => return Err(pg_err(e)),
    }
    let valid = index_valid(&client, names, HNSW_INDEX).await?;
    if valid == Some(false) {
        // A concurrent build that failed leaves an invalid index the planner ignores:
        // searches stay correct (a scan), only slower, until someone rebuilds it.
        tracing::warn!(
            index = HNSW_INDEX,
            "the HNSW index is invalid (an interrupted build?); run REINDEX INDEX CONCURRENTLY"
        );
    } else if valid == Some(true) {
        warn_if_built_otherwise(&client, names, build).await?;
        crate::hnsw_memory::warn_if_outgrown(&client, names, HNSW_INDEX).await?;
    }
    if valid == Some(true) && legacy.is_some() {
        // The `vector` index no search uses any more, once its replacement is there.
        client
            .batch_execute(&format!(
                "DROP INDEX CONCURRENTLY IF EXISTS {}",
                names.q_object(LEGACY_HNSW_INDEX)
            ))
            .await
            .map_err(pg_err)?;
    }
    done.store(true, Ordering::Release);
    Ok(())
}

/// Whether the index `index` is valid (a failed concurrent build leaves it invalid),
/// `None` when there is no such index.
pub(crate) async fn index_valid(
    client: &tokio_postgres::Client,
    names: &Names,
    index: &str,
) -> Result<Option<bool>, StoreError> {
    client
        .query_opt(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relname = $2",
            &[&names.schema(), &index],
        )
        .await
        .map_err(pg_err)?
        .map(|r| get(&r, 0))
        .transpose()
}

/// Logs when the index was built with other settings than `build`: it is kept, since
/// rebuilding a large index unasked could take the server's CPU for many minutes.
async fn warn_if_built_otherwise(
    client: &tokio_postgres::Client,
    names: &Names,
    build: HnswBuild,
) -> Result<(), StoreError> {
    if let Some(built) = hnsw_built_with(client, names).await?
        && built != build
    {
        tracing::warn!(
            index = HNSW_INDEX,
            built_m = built.m,
            built_ef_construction = built.ef_construction,
            m = build.m,
            ef_construction = build.ef_construction,
            "the HNSW index was built with other settings than CORTEX_PG_HNSW_M and \
             CORTEX_PG_HNSW_EF_CONSTRUCTION, and is kept; drop it \
             (DROP INDEX CONCURRENTLY) for the next search to build it with these"
        );
    }
    Ok(())
}

/// The settings the HNSW index was built with, `None` without the index. pgvector keeps
/// them as the index's storage options, leaving out those at their defaults.
pub(crate) async fn hnsw_built_with(
    client: &tokio_postgres::Client,
    names: &Names,
) -> Result<Option<HnswBuild>, StoreError> {
    let row = client
        .query_opt(
            "SELECT coalesce(c.reloptions, '{}') FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relname = $2",
            &[&names.schema(), &HNSW_INDEX],
        )
        .await
        .map_err(pg_err)?;
    let Some(row) = row else {
        return Ok(None);
    };
    let options: Vec<String> = get(&row, 0)?;
    Ok(Some(parse_build_options(&options)))
}

/// `m=24`, `ef_construction=128` as pgvector stores them; a missing one is at its default.
fn parse_build_options(options: &[String]) -> HnswBuild {
    let mut build = HnswBuild::default();
    for option in options {
        match option.split_once('=') {
            Some(("m", v)) => build.m = v.parse().unwrap_or(build.m),
            Some(("ef_construction", v)) => {
                build.ef_construction = v.parse().unwrap_or(build.ef_construction)
            }
            _ => {}
        }
    }
    build
}

/// A filter that fewer than this many of the user's live memories pass is searched
/// exactly in HNSW mode (at most `hnsw_threshold`). Measured at 100k memories
/// (docs/BENCHMARKS.md): an exact search of about 1,000 passing memories took 20-35 ms
/// against 19-122 ms for the iterative scan, which must walk past many memories that fail
/// the filter for each that passes; from 10,000 passing the iterative scan is faster (21-23
/// ms against 31-48 ms). Counting stops at this bound, so a broad filter costs a few ms.
pub(crate) const FILTERED_EXACT_BELOW: u64 = 2_000;

/// `count(*)` of the `user`'s live memories that pass `filter`, stopping at `limit` (see
/// the module docs): reads at most `limit` of them.
pub(crate) fn passing_count(names: &Names, user: &str, filter: &MemoryFilter, limit: u64) -> Built {
    let mut passing = Query::select();
    passing
        .expr(Expr::cust("1"))
        .from_as(names.table(Memories::Table), As::M)
        .and_where(Expr::col((As::M, Memories::UserId)).eq(user))
        .and_where(Expr::cust("NOT m.superseded"));
    and_filter(&mut passing, As::M.as_str(), filter).limit(limit);
    build(
        Query::select()
            .expr(Expr::cust("count(*)"))
            .from_subquery(passing.to_owned(), As::Z),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margins_and_ef() {
        assert!(candidate_margin(384) < 2e-4);
        assert!(candidate_margin(384) > 384.0 * 2.0 * f64::powi(2.0, -24));
        assert_eq!(hnsw_candidates(40), 50);
        assert_eq!(hnsw_candidates(4), 12);
        assert_eq!(ef_search(12), 300);
        assert_eq!(ef_search(100), 400);
        assert_eq!(ef_search(5000), 1000);
        assert_eq!(indexed_expression("m.", 384), "(m.embedding::halfvec(384))");
        assert_eq!(query_expression(384), "($1::vector::halfvec(384))");
        assert_eq!(indexed_expression("", 3072), "(embedding::halfvec(3072))");
        assert!(check_hnsw_dimension(4096).is_err());
    }

    #[test]
    fn build_options_read_back_with_pgvectors_defaults_for_the_missing() {
        let read = |o: &[&str]| {
            parse_build_options(&o.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
        };
        assert_eq!(read(&[]), HnswBuild::default());
        assert_eq!(
            read(&["m=24", "ef_construction=128"]),
            HnswBuild {
                m: 24,
                ef_construction: 128
            }
        );
        assert_eq!(read(&["fillfactor=90", "m=32"]).ef_construction, 64);
        assert_eq!(read(&["fillfactor=90", "m=32"]).m, 32);
    }
}
