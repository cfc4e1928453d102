//! The search pushdown: the whole hybrid query as one SQL statement.
//!
//! It returns what `hybrid_retrieve` over `build_index` returns on the same data: the same
//! ids in the same order, the same ranks and bit-equal fused scores. The arithmetic follows
//! the core's expression by expression, in float8 with every literal and parameter cast:
//!
//! - dense: candidates and their order by pgvector's `<=>` (see [`crate::dense`]), with
//!   every run of near-equal distances re-ordered by the core's own cosine
//!   (`cortex_unit_dot`), 1-based, ties by insertion sequence;
//! - lexical: `bm25_term_score(bm25_idf(N, df), tf, dl, total_len / N)` per matched
//!   (memory, term), summed in the query terms' order (byte order), only memories with a
//!   query term, ranked by score then sequence;
//! - fusion: `1 / (60 + dense_rank)` then `+ 1 / (60 + lexical_rank)`, ordered by score
//!   then sequence, the best `top_k`.

use cortex_core::hybrid::{RRF_K, ScoredMemory, candidate_pool};
use cortex_core::index::{BM25_B, BM25_K1};
use cortex_core::{Memory, StoreError};
use pgvector::Vector;
use sea_query::{
    CommonTableExpression, Expr, ExprTrait, JoinType, Order, Query, SelectStatement, WithClause,
};
use tokio_postgres::Row;

use crate::codec::{memory_at, memory_columns};
use crate::dense::{
    DensePlan, candidate_margin, hnsw_candidates, indexed_expression, query_expression,
};
use crate::schema::Names;
use crate::sql::{Built, build, get};

/// The statement for one query. `unit_query` is the query embedding scaled to unit length
/// by the core (`normalized`), `terms` the request's terms in their given order.
pub(crate) fn statement(
    names: &Names,
    plan: DensePlan,
    user: &str,
    unit_query: &[f32],
    terms: &[String],
    top_k: usize,
) -> Built {
    let pool = candidate_pool(top_k);
    let query = Vector::from(unit_query.to_vec());
    let memories = || names.table("memories");
    let mut with = WithClause::new();
    let cte = |with: &mut WithClause, name: &'static str, select: SelectStatement| {
        with.cte(
            CommonTableExpression::new()
                .query(select)
                .table_name(name)
                .to_owned(),
        );
    };

    // Dense candidates, with pgvector's distance.
    let margin = candidate_margin(unit_query.len());
    match plan {
        DensePlan::Exact => {
            // Every live memory's distance, once (materialised: read twice below).
            cte(
                &mut with,
                "d_all",
                Query::select()
                    .column(("m", "seq"))
                    .expr_as(
                        Expr::cust_with_values("m.embedding <=> $1::vector", [query.clone()]),
                        "dist",
                    )
                    .from_as(memories(), "m")
                    .and_where(Expr::col(("m", "user_id")).eq(user))
                    .and_where(Expr::cust("NOT m.superseded"))
                    .to_owned(),
            );
            // The pool-th smallest distance (none when the user has fewer memories).
            cte(
                &mut with,
                "d_cut",
                Query::select()
                    .column("dist")
                    .from("d_all")
                    .order_by("dist", Order::Asc)
                    .limit(1)
                    .offset(sql_count(pool) - 1)
                    .to_owned(),
            );
            // Everything within the margin of the cut: a superset of the core's pool.
            cte(
                &mut with,
                "d_cand",
                Query::select()
                    .columns(["seq", "dist"])
                    .from("d_all")
                    .and_where(Expr::cust_with_values(
                        "dist <= COALESCE((SELECT dist FROM d_cut), 'Infinity'::float8) \
                         + $1::float8",
                        [margin],
                    ))
                    .to_owned(),
            );
        }
        DensePlan::Hnsw { dimension } => {
            // The shape the index serves: ORDER BY <indexed expression> <=> $q LIMIT n.
            // The distance kept is the full-precision one (the index may be halfvec).
            let order = format!(
                "{} <=> {}",
                indexed_expression("m.", dimension),
                query_expression(dimension)
            );
            cte(
                &mut with,
                "d_cand",
                Query::select()
                    .column(("m", "seq"))
                    .expr_as(
                        Expr::cust_with_values("m.embedding <=> $1::vector", [query.clone()]),
                        "dist",
                    )
                    .from_as(memories(), "m")
                    .and_where(Expr::col(("m", "user_id")).eq(user))
                    .and_where(Expr::cust("NOT m.superseded"))
                    .order_by_expr(Expr::cust_with_values(order, [query.clone()]), Order::Asc)
                    .limit(sql_count(hnsw_candidates(pool)))
                    .to_owned(),
            );
        }
    }
    // Runs of candidates whose consecutive distances lie within the margin: between runs
    // pgvector's order is the core's; within a run of more than one, only the core's own
    // arithmetic can order them, so only those are re-scored (with real-valued embeddings
    // that is almost never; with tied vectors it is every tie).
    cte(
        &mut with,
        "d_gaps",
        Query::select()
            .columns(["seq", "dist"])
            .expr_as(
                Expr::cust_with_values(
                    "CASE WHEN dist - lag(dist) OVER (ORDER BY dist, seq) > $1::float8 \
                     THEN 1 ELSE 0 END",
                    [margin],
                ),
                "step",
            )
            .from("d_cand")
            .to_owned(),
    );
    cte(
        &mut with,
        "d_runs",
        Query::select()
            .columns(["seq", "dist"])
            .expr_as(Expr::cust("sum(step) OVER (ORDER BY dist, seq)"), "run")
            .from("d_gaps")
            .to_owned(),
    );
    // The exact score through a keyed lookup, only for rows in runs (a join would read
    // every candidate's embedding).
    cte(
        &mut with,
        "d_scored",
        Query::select()
            .column(("r", "seq"))
            .column(("r", "run"))
            .expr_as(
                Expr::cust_with_values(
                    format!(
                        "CASE WHEN count(*) OVER (PARTITION BY r.run) > 1 \
                         THEN (SELECT {}(m.embedding::real[], $1::vector::real[]) \
                               FROM {} m WHERE m.seq = r.seq) END",
                        names.q("cortex_unit_dot"),
                        names.q("memories"),
                    ),
                    [query],
                ),
                "score",
            )
            .from_as("d_runs", "r")
            .to_owned(),
    );
    cte(
        &mut with,
        "dense",
        Query::select()
            .column("seq")
            .expr_as(
                Expr::cust("row_number() OVER (ORDER BY run, score DESC, seq)"),
                "rnk",
            )
            .from("d_scored")
            .order_by("run", Order::Asc)
            .order_by("score", Order::Desc)
            .order_by("seq", Order::Asc)
            .limit(sql_count(pool))
            .to_owned(),
    );

    // Lexical candidates.
    let ordinals: Vec<i64> = (1..=terms.len() as i64).collect();
    cte(
        &mut with,
        "q_terms",
        Query::select()
            .expr_as(
                Expr::cust_with_values("unnest($1::text[]) COLLATE \"C\"", [terms.to_vec()]),
                "term",
            )
            .expr_as(
                Expr::cust_with_values("unnest($1::int8[])", [ordinals]),
                "ord",
            )
            .to_owned(),
    );
    cte(
        &mut with,
        "stats",
        Query::select()
            .expr_as(Expr::cust("s.doc_count::float8"), "n")
            .expr_as(
                Expr::cust("s.total_len::float8 / s.doc_count::float8"),
                "avgdl",
            )
            .from_as(names.table("users"), "s")
            .and_where(Expr::col(("s", "user_id")).eq(user))
            .and_where(Expr::cust("s.doc_count > 0"))
            .to_owned(),
    );
    cte(
        &mut with,
        "l_idf",
        Query::select()
            .column(("q", "term"))
            .column(("q", "ord"))
            // bm25_idf: ln(1 + (N - df + 0.5) / (df + 0.5))
            .expr_as(
                Expr::cust(
                    "ln(1::float8 + (s.n - count(*)::float8 + 0.5::float8) \
                     / (count(*)::float8 + 0.5::float8))",
                ),
                "idf",
            )
            .from_as("q_terms", "q")
            .join_as(
                JoinType::InnerJoin,
                names.table("postings"),
                "p",
                Expr::cust_with_values("p.user_id = $1 AND p.term = q.term", [user]),
            )
            .join_as(JoinType::InnerJoin, "stats", "s", Expr::cust("true"))
            .group_by_col(("q", "term"))
            .group_by_col(("q", "ord"))
            .group_by_col(("s", "n"))
            .to_owned(),
    );
    cte(
        &mut with,
        "l_scored",
        Query::select()
            .column(("p", "seq"))
            // bm25_term_score: idf * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))),
            // summed in the terms' order.
            .expr_as(
                Expr::cust_with_values(
                    "sum(i.idf * (p.tf::float8 * $1::float8 / (p.tf::float8 + $2::float8 \
                     * ($3::float8 + $4::float8 * p.doc_len::float8 / s.avgdl))) \
                     ORDER BY i.ord)",
                    [BM25_K1 + 1.0, BM25_K1, 1.0 - BM25_B, BM25_B],
                ),
                "score",
            )
            .from_as("l_idf", "i")
            .join_as(
                JoinType::InnerJoin,
                names.table("postings"),
                "p",
                Expr::cust_with_values("p.user_id = $1 AND p.term = i.term", [user]),
            )
            .join_as(JoinType::InnerJoin, "stats", "s", Expr::cust("true"))
            .group_by_col(("p", "seq"))
            .to_owned(),
    );
    cte(&mut with, "lexical", ranked("l_scored", pool));

    // Fusion, dense first then lexical, as the core adds them.
    cte(
        &mut with,
        "fused",
        Query::select()
            .expr_as(Expr::cust("COALESCE(d.seq, l.seq)"), "seq")
            .expr_as(Expr::cust("d.rnk"), "d_rank")
            .expr_as(Expr::cust("l.rnk"), "l_rank")
            .expr_as(
                Expr::cust_with_values(
                    "COALESCE(1::float8 / ($1::float8 + d.rnk::float8), 0::float8) \
                     + COALESCE(1::float8 / ($2::float8 + l.rnk::float8), 0::float8)",
                    [RRF_K, RRF_K],
                ),
                "score",
            )
            .from_as("dense", "d")
            .join_as(
                JoinType::FullOuterJoin,
                "lexical",
                "l",
                Expr::col(("d", "seq")).equals(("l", "seq")),
            )
            .to_owned(),
    );

    let mut select = Query::select();
    select
        .columns(memory_columns("m"))
        .column(("f", "score"))
        .column(("f", "d_rank"))
        .column(("f", "l_rank"))
        .expr_as(
            Expr::cust_with_values(
                format!(
                    "(SELECT u.doc_count FROM {} u WHERE u.user_id = $1)",
                    names.q("users")
                ),
                [user],
            ),
            "live",
        )
        .from_as("fused", "f")
        .join_as(
            JoinType::InnerJoin,
            memories(),
            "m",
            Expr::col(("m", "seq")).equals(("f", "seq")),
        )
        .order_by(("f", "score"), Order::Desc)
        .order_by(("f", "seq"), Order::Asc)
        .limit(sql_count(top_k))
        .with_cte(with);
    build(&select)
}

/// `source`'s rows ranked 1-based by score, ties by sequence, the best `pool`.
fn ranked(source: &'static str, pool: usize) -> SelectStatement {
    Query::select()
        .column("seq")
        .expr_as(
            Expr::cust("row_number() OVER (ORDER BY score DESC, seq ASC)"),
            "rnk",
        )
        .from(source)
        .order_by("score", Order::Desc)
        .order_by("seq", Order::Asc)
        .limit(sql_count(pool))
        .to_owned()
}

fn sql_count(n: usize) -> u64 {
    Ord::max(crate::sql::limit(n), 1)
}

/// One result row, and the user's live count it reported.
pub(crate) fn decode(row: &Row) -> Result<(ScoredMemory, Option<i64>), StoreError> {
    let memory: Memory = memory_at(row, 0)?;
    let rank = |i: usize| -> Result<Option<u32>, StoreError> {
        get::<Option<i64>>(row, i)?
            .map(|r| u32::try_from(r).map_err(|_| StoreError::Corrupt(format!("rank {r}"))))
            .transpose()
    };
    Ok((
        ScoredMemory {
            memory,
            score: get(row, 7)?,
            dense_rank: rank(8)?,
            lexical_rank: rank(9)?,
            rerank_score: None,
        },
        get(row, 10)?,
    ))
}
