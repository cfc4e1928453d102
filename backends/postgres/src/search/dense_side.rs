//! The dense side: exact candidates (every live memory's distance, near-ties re-ordered
//! by the core's own cosine) or HNSW candidates (approximate by configuration), ranked.
//!
//! A filter is one more set of conditions on the memories read (see `crate::filter`):
//! exact mode ranks the memories that pass as the core's `dense_search_filtered` does
//! (the pool-th distance, the margin and the runs all among them); HNSW mode asks the
//! index for its candidates among them, which pgvector's iterative scan keeps walking the
//! graph for (see `super::dense_plan` for when a filtered search is exact instead).

use cortex_core::hybrid::candidate_pool;
use cortex_core::index::unit_score;
use cortex_core::{error::StoreError, filter::MemoryFilter};
use pgvector::Vector;
use sea_query::{Expr, ExprTrait, IdenStatic, Order, Query, SelectStatement};
use tokio_postgres::Row;

use super::Ranked;
use super::aliases::{As, Col, CteName};
use super::cte::{Cte, Ctes};
use super::dense_plan::{
    DensePlan, candidate_margin, hnsw_candidates, indexed_expression, query_expression,
};
use super::sql_count;
use crate::filter::and_filter;
use crate::names::Names;
use crate::sql::{Built, build, get_named};
use crate::tables::Memories;

/// The dense side of one query, as one statement returning one row: the ranked memories
/// as two arrays (see [`Ranked`]), the embeddings of the first two (for the fusion's
/// weights, see [`DenseRanks`]) and, in HNSW mode, how many candidates the index scan
/// returned (see [`Walked`]). `unit_query` is the query embedding scaled to unit length by
/// the core (`normalized`). Planned per search: its best plan depends on the user's size
/// and on the query vector (see [`super::transaction`]).
pub(crate) fn dense(
    names: &Names,
    plan: DensePlan,
    user: &str,
    unit_query: &[f32],
    top_k: usize,
    filter: &MemoryFilter,
) -> Built {
    let mut ctes = Ctes::new();
    let dense = dense_ranks(&mut ctes, names, plan, user, unit_query, top_k, filter);
    let mut select = Query::select();
    select
        .expr_as(
            Expr::cust("COALESCE(array_agg(seq ORDER BY rnk), '{}'::int8[])"),
            Col::Seqs,
        )
        .expr_as(
            Expr::cust("COALESCE(array_agg(rnk ORDER BY rnk), '{}'::int8[])"),
            Col::Ranks,
        )
        .expr_as(
            Expr::cust(ranked_embedding(names, dense.ranks, 1)),
            Col::First,
        )
        .expr_as(
            Expr::cust(ranked_embedding(names, dense.ranks, 2)),
            Col::Second,
        )
        .from(dense.ranks.name());
    if let Some(found) = dense.found() {
        select.expr_as(Expr::cust(found), Col::Found);
    }
    select.with_cte(ctes.finish());
    build(&select)
}

/// The embedding of the memory the `ranks` CTE ranks `rank`-th, as a scalar subquery
/// (NULL past its last).
fn ranked_embedding(names: &Names, ranks: Cte, rank: u8) -> String {
    format!(
        "(SELECT m.embedding FROM {ranks} d JOIN {} m ON m.seq = d.seq WHERE d.rnk = {rank})",
        names.q(Memories::Table)
    )
}

/// The dense side's result, which the fused statement reads: its ranks, and its
/// confidence for the fusion's weights (`ListWeights::new`): the first memory's score
/// minus the second's (0 with fewer than two), each computed by the core from the stored
/// embedding (`unit_score`), so the weights are bit-equal to the in-memory path's.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DenseRanks {
    pub ranked: Ranked,
    pub confidence: f64,
}

/// The [`dense`] statement's ranks and confidence against `unit_query` (its `found`, in
/// HNSW mode, is read by [`Walked::of`]).
pub(crate) fn decode_dense(row: &Row, unit_query: &[f32]) -> Result<DenseRanks, StoreError> {
    let first = get_named::<Option<Vector>>(row, Col::First)?;
    let second = get_named::<Option<Vector>>(row, Col::Second)?;
    let score = |v: &Vector| f64::from(unit_score(v.as_slice(), unit_query));
    let confidence = match (first, second) {
        (Some(first), Some(second)) => score(&first) - score(&second),
        _ => 0.0,
    };
    Ok(DenseRanks {
        ranked: Ranked::decode(row)?,
        confidence,
    })
}

/// How many candidates an HNSW index scan returned, read from the [`dense`] statement's
/// row; `None` without the column (exact mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Walked(Option<usize>);

impl Walked {
    pub(crate) fn of(row: &Row) -> Result<Self, StoreError> {
        let has = row
            .columns()
            .iter()
            .any(|c| c.name() == Col::Found.as_str());
        match has {
            true => {
                let n = get_named::<i64>(row, Col::Found)?;
                Ok(Self(Some(usize::try_from(n).unwrap_or(0))))
            }
            false => Ok(Self(None)),
        }
    }

    /// Whether the scan returned fewer candidates than an HNSW search for `top_k` asks
    /// for: without the iterative scan, it stopped after `ef_search` of every user's
    /// memories before the LIMIT's worth of this user's passed.
    pub(crate) fn short(self, top_k: usize) -> bool {
        self.0
            .is_some_and(|n| n < hnsw_candidates(candidate_pool(top_k)))
    }
}

/// The dense side's CTEs: its ranks and, in HNSW mode, the index scan's candidates.
pub(super) struct DenseCtes {
    pub ranks: Cte,
    candidates: Option<Cte>,
}

impl DenseCtes {
    /// In HNSW mode, how many candidates the index scan returned, as a scalar subquery.
    pub(super) fn found(&self) -> Option<String> {
        self.candidates.map(|c| c.scalar("count(*)"))
    }
}

/// The `dense` CTE (seq, rnk): the best `pool` dense candidates among the memories that
/// pass `filter`, ranked.
pub(super) fn dense_ranks(
    ctes: &mut Ctes,
    names: &Names,
    plan: DensePlan,
    user: &str,
    unit_query: &[f32],
    top_k: usize,
    filter: &MemoryFilter,
) -> DenseCtes {
    let pool = candidate_pool(top_k);
    let query = Vector::from(unit_query.to_vec());
    let live = Live {
        names,
        user,
        filter,
    };
    match plan {
        DensePlan::Exact => DenseCtes {
            ranks: exact_dense(ctes, live, &query, pool),
            candidates: None,
        },
        DensePlan::Index { dimension } => hnsw_dense(ctes, live, &query, dimension, pool),
    }
}

/// The memories a dense side reads: the user's live ones that pass the filter.
#[derive(Clone, Copy)]
struct Live<'a> {
    names: &'a Names,
    user: &'a str,
    filter: &'a MemoryFilter,
}

/// HNSW candidates, approximate by configuration: ranked by pgvector's own distance, ties
/// by insertion. Re-scoring near-ties with the core's arithmetic (as exact mode does) cost
/// half of a dense search at 100k and only reorders memories whose distances agree to
/// float rounding, far finer than the index's own error.
fn hnsw_dense(
    ctes: &mut Ctes,
    live: Live<'_>,
    query: &Vector,
    dimension: usize,
    pool: usize,
) -> DenseCtes {
    // The shape the index serves: ORDER BY <indexed expression> <=> $q LIMIT n. The
    // distance kept is the full-precision one (the index is halfvec).
    let order = format!(
        "{} <=> {}",
        indexed_expression("m.", dimension),
        query_expression(dimension)
    );
    let candidates = ctes.add(
        CteName::DCand,
        live_distances(live, query)
            .order_by_expr(Expr::cust_with_values(order, [query.clone()]), Order::Asc)
            .limit(sql_count(hnsw_candidates(pool)))
            .to_owned(),
    );
    let ranks = ctes.add(
        CteName::Dense,
        Query::select()
            .column(Col::Seq)
            .expr_as(
                Expr::cust("row_number() OVER (ORDER BY dist, seq)"),
                Col::Rnk,
            )
            .from_subquery(
                Query::select()
                    .columns([Col::Seq, Col::Dist])
                    .from(candidates.name())
                    .order_by(Col::Dist, Order::Asc)
                    .order_by(Col::Seq, Order::Asc)
                    .limit(sql_count(pool))
                    .to_owned(),
                As::B,
            )
            .to_owned(),
    );
    DenseCtes {
        ranks,
        candidates: Some(candidates),
    }
}

/// Exact dense ranks as the core computes them: every live memory's pgvector distance, the
/// candidates within [`candidate_margin`] of the pool-th, and each run of near-equal
/// distances re-ordered by the core's own cosine (`cortex_unit_dot`, once per distinct
/// embedding, see [`super::tie_break`]).
fn exact_dense(ctes: &mut Ctes, live: Live<'_>, query: &Vector, pool: usize) -> Cte {
    let margin = candidate_margin(query.as_slice().len());
    // Every live memory's distance, once (materialised: read twice below).
    let all = ctes.add(CteName::DAll, proven_distances(live, query));
    // The pool-th smallest distance (none when the user has fewer memories).
    let cut = ctes.add(
        CteName::DCut,
        Query::select()
            .column(Col::Dist)
            .from(all.name())
            .order_by(Col::Dist, Order::Asc)
            .limit(1)
            .offset(sql_count(pool) - 1)
            .to_owned(),
    );
    // Everything within the margin of the cut: a superset of the core's pool.
    let candidates = ctes.add(
        CteName::DCand,
        Query::select()
            .columns([Col::Seq, Col::Dist, Col::Zero])
            .from(all.name())
            .and_where(Expr::cust_with_values(
                format!(
                    "dist <= COALESCE({}, 'Infinity'::float8) + $1::float8",
                    cut.scalar(Col::Dist)
                ),
                [margin],
            ))
            .to_owned(),
    );
    // Runs of candidates whose consecutive distances lie within the margin: between runs
    // pgvector's order is the core's; within a run of more than one, only the core's own
    // arithmetic can order them (with real-valued embeddings that is almost never; with
    // tied vectors it is every tie).
    super::tie_break::ranked(ctes, live.names, candidates, query, margin, sql_count(pool))
}

/// Every live memory of the user that passes the filter, with its pgvector distance to
/// `query`.
fn live_distances(live: Live<'_>, query: &Vector) -> SelectStatement {
    let mut select = Query::select();
    select
        .column((As::M, Memories::Seq))
        .expr_as(
            Expr::cust_with_values("m.embedding <=> $1::vector", [query.clone()]),
            Col::Dist,
        )
        .from_as(live.names.table(Memories::Table), As::M)
        .and_where(Expr::col((As::M, Memories::UserId)).eq(live.user))
        .and_where(Expr::cust("NOT m.superseded"));
    and_filter(&mut select, As::M.as_str(), live.filter).to_owned()
}

/// [`live_distances`] with `zero`: whether the memory's exact score is proven ±0 (see
/// [`query_mask`]).
fn proven_distances(live: Live<'_>, query: &Vector) -> SelectStatement {
    // OFFSET 0 keeps the distance computed once per row, not again in `zero`.
    let inner = live_distances(live, query)
        .column((As::M, Memories::Embedding))
        .offset(0)
        .to_owned();
    // An embedding that is 0 wherever the query is not has every product of the core's
    // dot 0, so its exact score is ±0 (equal to 0 in the core's order) and its pgvector
    // distance exactly 1: both checks are C, so a mass of such ties (every memory sharing
    // no word with the query, under the fake embedder) costs no exact score at all. The
    // mask holds only 0 and 1: the product cannot overflow nor underflow, and the norm
    // of non-zero f32 values (squared in double) is never 0.
    Query::select()
        .columns([(As::S, Col::Seq), (As::S, Col::Dist)])
        .expr_as(
            Expr::cust_with_values(
                "(s.dist = 1::float8 AND vector_norm(s.embedding * $1::vector) = 0::float8)",
                [query_mask(query)],
            ),
            Col::Zero,
        )
        .from_subquery(inner, As::S)
        .to_owned()
}

/// 1 where the query is not 0, else 0. The core's unit query is 0 at least where the
/// query is (a component can only vanish in the normalisation, which makes the mask a
/// superset and the proof stricter, never wrong).
fn query_mask(query: &Vector) -> Vector {
    Vector::from(
        query
            .as_slice()
            .iter()
            .map(|&x| if x == 0.0 { 0.0 } else { 1.0 })
            .collect::<Vec<f32>>(),
    )
}
