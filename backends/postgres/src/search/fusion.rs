//! Fusion (`cortex_core::fusion`): the two sides' ranks, weighted per query and the BM25
//! side's by each memory's share, each candidate smoothed by its neighbours' fused scores,
//! and the best `top_k` memories read.
//!
//! A filter reaches the fusion only through the two sides: their ranks (and so the
//! weights: dense's first two cosines, BM25's first share) are among the memories that
//! pass. The neighbours are still the user's live memories just before and after by
//! sequence, whether or not they pass; one that fails the filter is no fused row and
//! counts zero, as in `hybrid_retrieve_filtered`.

use cortex_core::fusion::{EPSILON, LEXICAL_CONFIDENCE, MIN_WEIGHT};
use cortex_core::hybrid::{NEIGHBOUR_WEIGHT, RRF_K, ScoredMemory};
use cortex_core::{Memory, MemoryFilter, StoreError};
use pgvector::Vector;
use sea_query::{Expr, ExprTrait, JoinType, Order, Query, SelectStatement};
use tokio_postgres::Row;

use super::aliases::{As, Col, CteName};
use super::cte::{Cte, Ctes};
use super::dense_plan::{DensePlan, UNIT_DOT};
use super::dense_side::dense_ranks;
use super::sql_count;
use super::{LexicalSide, Ranked};
use crate::codec::{memory_columns, memory_of};
use crate::names::Names;
use crate::sql::{Built, build, get_named};
use crate::tables::{Memories, Users};

/// Where the fused statement's dense ranks come from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum DenseSide<'a> {
    /// Searched by the fused statement itself, among the memories that pass `filter`.
    /// `unit_query` is the query embedding scaled to unit length by the core
    /// (`normalized`).
    Inline {
        plan: DensePlan,
        unit_query: &'a [f32],
        filter: &'a MemoryFilter,
    },
    /// Already ranked by the [`dense`](super::dense) statement in the same snapshot.
    Ranked(&'a Ranked),
}

/// The `seq, rnk` rows of a side already ranked (see [`Ranked`]).
fn unnested(ranked: &Ranked) -> SelectStatement {
    Query::select()
        .expr_as(
            Expr::cust_with_values("unnest($1::int8[])", [ranked.seqs.clone()]),
            Col::Seq,
        )
        .expr_as(
            Expr::cust_with_values("unnest($1::int8[])", [ranked.ranks.clone()]),
            Col::Rnk,
        )
        .to_owned()
}

/// The fused statement for one query: the dense side's ranks (`dense`: searched here, or
/// from the [`dense`](super::dense) statement), fused with the BM25 side's (`lexical`,
/// from the [`lexical`](super::lexical) statement; both in the same snapshot), and the
/// best `top_k` memories read. `unit_query` is the query embedding scaled to unit length
/// by the core. Planned per search when it searches the dense side (see
/// [`super::transaction`]).
pub(crate) fn fused(
    names: &Names,
    user: &str,
    top_k: usize,
    unit_query: &[f32],
    dense: DenseSide<'_>,
    lexical: &LexicalSide,
) -> Built {
    let mut ctes = Ctes::new();
    // Searched here in HNSW mode, every row also says how many candidates the index scan
    // returned (see `dense_side::Walked`).
    let (dense, found) = match dense {
        DenseSide::Inline {
            plan,
            unit_query,
            filter,
        } => {
            let dense = dense_ranks(&mut ctes, names, plan, user, unit_query, top_k, filter);
            (dense.ranks, dense.found())
        }
        DenseSide::Ranked(ranked) => (ctes.add(CteName::Dense, unnested(ranked)), None),
    };
    // The BM25 side's ranks and shares.
    let weights = weights(&mut ctes, names, dense, unit_query, lexical.confidence());
    let lexical = ctes.add(
        CteName::Lexical,
        unnested(&lexical.ranked)
            .expr_as(
                Expr::cust_with_values("unnest($1::float8[])", [lexical.shares.clone()]),
                Col::Share,
            )
            .to_owned(),
    );
    let fused = ctes.add(CteName::Fused, rrf(dense, lexical, weights));
    let smoothed = smoothed(&mut ctes, names, user, fused);
    // The best `top_k`, before any memory is read: the fused rows are up to twice the
    // pool, and only these are returned (every fused row is a live memory's).
    let top = ctes.add(
        CteName::Top,
        Query::select()
            .columns([Col::Seq, Col::DRank, Col::LRank, Col::Score])
            .from(smoothed.name())
            .order_by(Col::Score, Order::Desc)
            .order_by(Col::Seq, Order::Asc)
            .limit(sql_count(top_k))
            .to_owned(),
    );
    // Read by name (see `decode`): the memory's columns, then the fused ones.
    let mut select = Query::select();
    select
        .columns(memory_columns(As::M))
        .column((As::F, Col::Score))
        .column((As::F, Col::DRank))
        .column((As::F, Col::LRank))
        .expr_as(
            Expr::cust_with_values(
                format!(
                    "(SELECT u.doc_count FROM {} u WHERE u.user_id = $1)",
                    names.q(Users::Table)
                ),
                [user],
            ),
            Col::Live,
        );
    if let Some(found) = found {
        select.expr_as(Expr::cust(found), Col::Found);
    }
    select
        .from_as(top.name(), As::F)
        .join_as(
            JoinType::InnerJoin,
            names.table(Memories::Table),
            As::M,
            Expr::col((As::M, Memories::Seq)).equals((As::F, Col::Seq)),
        )
        .order_by((As::F, Col::Score), Order::Desc)
        .order_by((As::F, Col::Seq), Order::Asc)
        .with_cte(ctes.finish());
    build(&select)
}

/// `weights` (`wd`, `wl`): the lists' weights as `ListWeights::new` computes them, from
/// the BM25 side's confidence (bound, computed by the core) and the gap between the
/// core's own cosines (`cortex_unit_dot`) of the dense side's first two memories.
fn weights(
    ctes: &mut Ctes,
    names: &Names,
    dense: Cte,
    unit_query: &[f32],
    lexical_confidence: f64,
) -> Cte {
    // Materialised: inlined, a plan made for a filter's values ran it (two exact scores)
    // once per fused row, 80 exact scores and 16 ms for a pool of 40.
    let gap = ctes.add_materialized(
        CteName::DGap,
        Query::select()
            .expr_as(
                Expr::cust(
                    "COALESCE(max(cos) FILTER (WHERE rnk = 1) - max(cos) FILTER (WHERE rnk = 2), \
                     0::float8)",
                ),
                Col::Gap,
            )
            .from_subquery(
                Query::select()
                    .column((As::D, Col::Rnk))
                    .expr_as(
                        Expr::cust_with_values(
                            format!(
                                "{}(m.embedding::real[], $1::vector::real[])::float8",
                                names.q_object(UNIT_DOT)
                            ),
                            [Vector::from(unit_query.to_vec())],
                        ),
                        Col::Cos,
                    )
                    .from_as(dense.name(), As::D)
                    .join_as(
                        JoinType::InnerJoin,
                        names.table(Memories::Table),
                        As::M,
                        Expr::col((As::M, Memories::Seq)).equals((As::D, Col::Seq)),
                    )
                    .and_where(Expr::cust("d.rnk <= 2"))
                    .to_owned(),
                As::T,
            )
            .to_owned(),
    );
    // lexical = LEXICAL_CONFIDENCE * confidence + EPSILON, computed here as the core does.
    let lexical = LEXICAL_CONFIDENCE * lexical_confidence + EPSILON;
    let balanced = ctes.add(
        CteName::WLex,
        Query::select()
            .expr_as(
                Expr::cust_with_values(
                    "$1::float8 + $2::float8 * ($3::float8 / ($4::float8 + \
                     (GREATEST(g.gap, 0::float8) + $5::float8)))",
                    [
                        MIN_WEIGHT,
                        1.0 - 2.0 * MIN_WEIGHT,
                        lexical,
                        lexical,
                        EPSILON,
                    ],
                ),
                Col::Wl,
            )
            .from_as(gap.name(), As::G)
            .to_owned(),
    );
    ctes.add(
        CteName::Weights,
        Query::select()
            .expr_as(Expr::cust("2::float8 * (1::float8 - b.wl)"), Col::Wd)
            .expr_as(Expr::cust("2::float8 * b.wl"), Col::Wl)
            .from_as(balanced.name(), As::B)
            .to_owned(),
    )
}

/// `(seq, d_rank, l_rank, score)`: both sides' weighted terms, dense first then lexical,
/// as the core adds them.
fn rrf(dense: Cte, lexical: Cte, weights: Cte) -> SelectStatement {
    Query::select()
        .expr_as(Expr::cust("COALESCE(d.seq, l.seq)"), Col::Seq)
        .expr_as(Expr::cust("d.rnk"), Col::DRank)
        .expr_as(Expr::cust("l.rnk"), Col::LRank)
        .expr_as(
            Expr::cust_with_values(
                "COALESCE(w.wd / ($1::float8 + d.rnk::float8), 0::float8) \
                 + COALESCE((w.wl * l.share) / ($2::float8 + l.rnk::float8), 0::float8)",
                [RRF_K, RRF_K],
            ),
            Col::Score,
        )
        .from_as(dense.name(), As::D)
        .join_as(
            JoinType::FullOuterJoin,
            lexical.name(),
            As::L,
            Expr::col((As::D, Col::Seq)).equals((As::L, Col::Seq)),
        )
        .join_as(
            JoinType::InnerJoin,
            weights.name(),
            As::W,
            Expr::cust("true"),
        )
        .to_owned()
}

/// Each candidate adds NEIGHBOUR_WEIGHT times the better fused score of the user's live
/// memories written just before and just after it (zero for one that is no candidate), as
/// the core adds it. The neighbours are two index lookups on (user_id, seq) of live
/// memories per fused row (`around`); their scores are joined back (`smoothed`).
fn smoothed(ctes: &mut Ctes, names: &Names, user: &str, fused: Cte) -> Cte {
    let memories_table = names.q(Memories::Table);
    let neighbour = |cmp: &str, order: &str| {
        format!(
            "(SELECT m.seq FROM {memories_table} m WHERE m.user_id = $1 AND NOT m.superseded \
              AND m.seq {cmp} f.seq ORDER BY m.seq {order} LIMIT 1)"
        )
    };
    let around = ctes.add(
        CteName::Around,
        Query::select()
            .columns([Col::Seq, Col::DRank, Col::LRank, Col::Score])
            .expr_as(
                Expr::cust_with_values(neighbour("<", "DESC"), [user]),
                Col::Prev,
            )
            .expr_as(
                Expr::cust_with_values(neighbour(">", "ASC"), [user]),
                Col::Next,
            )
            .from_as(fused.name(), As::F)
            .to_owned(),
    );
    ctes.add(
        CteName::Smoothed,
        Query::select()
            .columns([(As::A, Col::Seq), (As::A, Col::DRank), (As::A, Col::LRank)])
            .expr_as(
                Expr::cust_with_values(
                    "a.score + $1::float8 * GREATEST(COALESCE(p.score, 0::float8), \
                     COALESCE(x.score, 0::float8))",
                    [NEIGHBOUR_WEIGHT],
                ),
                Col::Score,
            )
            .from_as(around.name(), As::A)
            .join_as(
                JoinType::LeftJoin,
                fused.name(),
                As::P,
                Expr::col((As::P, Col::Seq)).equals((As::A, Col::Prev)),
            )
            .join_as(
                JoinType::LeftJoin,
                fused.name(),
                As::X,
                Expr::col((As::X, Col::Seq)).equals((As::A, Col::Next)),
            )
            .to_owned(),
    )
}

/// One result row of the [`fused`] statement and the user's live count.
pub(crate) fn decode(row: &Row) -> Result<(ScoredMemory, Option<i64>), StoreError> {
    let memory: Memory = memory_of(row)?;
    let rank = |column: Col| -> Result<Option<u32>, StoreError> {
        get_named::<Option<i64>>(row, column)?
            .map(|r| u32::try_from(r).map_err(|_| StoreError::Corrupt(format!("rank {r}"))))
            .transpose()
    };
    Ok((
        ScoredMemory {
            memory,
            score: get_named(row, Col::Score)?,
            dense_rank: rank(Col::DRank)?,
            lexical_rank: rank(Col::LRank)?,
            rerank_score: None,
        },
        get_named(row, Col::Live)?,
    ))
}
