//! Fusion (`cortex_core::fusion`): the two sides' ranks, weighted per query and the BM25
//! side's by each memory's share, each candidate smoothed by its neighbours' fused scores,
//! and the best `top_k` memories read.
//!
//! A filter reaches the fusion only through the two sides: their ranks (and so the
//! weights: dense's first two scores, BM25's first share) are among the memories that
//! pass. The neighbours are still the user's live memories just before and after by
//! sequence, whether or not they pass; one that fails the filter is no fused row and
//! counts zero, as in `hybrid_retrieve_filtered`.

use cortex_core::fusion::ListWeights;
use cortex_core::fusion::NEIGHBOUR_WEIGHT;
use cortex_core::fusion::RRF_K;
use cortex_core::hybrid::ScoredMemory;
use cortex_core::{error::StoreError, memory::Memory};
use sea_query::{Expr, ExprTrait, JoinType, Order, Query, SelectStatement};
use tokio_postgres::Row;

use super::aliases::{As, Col, CteName};
use super::cte::{Cte, Ctes};
use super::dense_side::DenseRanks;
use super::sql_count;
use super::{LexicalSide, Ranked};
use crate::codec::{memory_columns, memory_of};
use crate::names::Names;
use crate::sql::{Built, build, get_named};
use crate::tables::{Memories, Users};

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

/// The fused statement for one query: the dense side's ranks (from the
/// [`dense`](super::dense) statement) fused with the BM25 side's (from the
/// [`lexical`](super::lexical) statement; both in the same snapshot), and the best `top_k`
/// memories read. The lists' weights are `ListWeights::new` of the two sides'
/// confidences, computed by the core and bound as values. Its shape depends on nothing
/// but its text: planned once per connection (see [`super::transaction`]).
pub(crate) fn fused(
    names: &Names,
    user: &str,
    top_k: usize,
    dense: &DenseRanks,
    lexical: &LexicalSide,
) -> Built {
    let mut ctes = Ctes::new();
    let weights = ListWeights::new(lexical.confidence(), dense.confidence);
    let dense = ctes.add(CteName::Dense, unnested(&dense.ranked));
    // The BM25 side's ranks and shares.
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

/// `(seq, d_rank, l_rank, score)`: both sides' weighted terms, dense first then lexical,
/// as the core adds them (`dense_term`, `lexical_numerator`, `lexical_term`).
fn rrf(dense: Cte, lexical: Cte, weights: ListWeights) -> SelectStatement {
    Query::select()
        .expr_as(Expr::cust("COALESCE(d.seq, l.seq)"), Col::Seq)
        .expr_as(Expr::cust("d.rnk"), Col::DRank)
        .expr_as(Expr::cust("l.rnk"), Col::LRank)
        .expr_as(
            Expr::cust_with_values(
                "COALESCE($1::float8 / ($2::float8 + d.rnk::float8), 0::float8) \
                 + COALESCE(($3::float8 * l.share) / ($4::float8 + l.rnk::float8), 0::float8)",
                [weights.dense, RRF_K, weights.lexical, RRF_K],
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
        .to_owned()
}

/// Each candidate adds NEIGHBOUR_WEIGHT times the better fused score of the user's live
/// memories written just before and just after it (zero for one that is no candidate), as
/// the core adds it.
///
/// Every fused row is a live memory of the user, so a candidate's live neighbour is a
/// candidate only if it is the next candidate by sequence (or the one before) with no
/// live memory of the user between the two. The candidates are ordered by sequence once
/// (`around`: each with the next one's sequence and score), and each pair of consecutive
/// ones is checked with one index probe on (user_id, seq) of live memories, none when
/// their sequences are consecutive (`linked`); a candidate's link before is its
/// predecessor's link after (`smoothed`). One probe per candidate: looking up each one's
/// neighbours before and after was two, the larger part of the fused statement at a
/// million memories (docs/BENCHMARKS.md).
fn smoothed(ctes: &mut Ctes, names: &Names, user: &str, fused: Cte) -> Cte {
    let around = ctes.add(
        CteName::Around,
        Query::select()
            .columns([Col::Seq, Col::DRank, Col::LRank, Col::Score])
            .expr_as(Expr::cust("lead(f.seq) OVER (ORDER BY f.seq)"), Col::Next)
            .expr_as(
                Expr::cust("lead(f.score) OVER (ORDER BY f.seq)"),
                Col::NextScore,
            )
            .from_as(fused.name(), As::F)
            .to_owned(),
    );
    // CASE, not AND/OR: it evaluates in order, so the probe runs only when needed.
    // Materialised: `smoothed` reads `joined` twice, and an inlined CTE would probe twice.
    let linked = ctes.add_materialized(
        CteName::Linked,
        Query::select()
            .columns([Col::Seq, Col::DRank, Col::LRank, Col::Score, Col::NextScore])
            .expr_as(
                Expr::cust_with_values(
                    format!(
                        "CASE WHEN a.next IS NULL THEN false \
                         WHEN a.next = a.seq + 1 THEN true \
                         ELSE NOT EXISTS (SELECT 1 FROM {} m WHERE m.user_id = $1 \
                         AND NOT m.superseded AND m.seq > a.seq AND m.seq < a.next) END",
                        names.q(Memories::Table)
                    ),
                    [user],
                ),
                Col::Joined,
            )
            .from_as(around.name(), As::A)
            .to_owned(),
    );
    ctes.add(
        CteName::Smoothed,
        Query::select()
            .columns([Col::Seq, Col::DRank, Col::LRank])
            .expr_as(
                Expr::cust_with_values(
                    "k.score + $1::float8 * GREATEST(\
                     CASE WHEN lag(k.joined) OVER (ORDER BY k.seq) \
                     THEN lag(k.score) OVER (ORDER BY k.seq) ELSE 0::float8 END, \
                     CASE WHEN k.joined THEN k.next_score ELSE 0::float8 END)",
                    [NEIGHBOUR_WEIGHT],
                ),
                Col::Score,
            )
            .from_as(linked.name(), As::K)
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
