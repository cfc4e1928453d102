//! Per-term scores of postings and their per-memory sums, added in the core's order: the
//! core adds a memory's term scores in the query terms' order starting from zero, and
//! float addition is not associative, so the SQL adds in that order too.

use cortex_core::filter::MemoryFilter;
use sea_query::{Expr, ExprTrait, IdenStatic, JoinType, Order, Query, SelectStatement};

use super::aliases::{As, Col, CteName};
use super::bm25;
use super::cte::Cte;
use super::sql_count;
use crate::filter::and_filter;
use crate::names::Names;
use crate::tables::{Memories, Postings};

/// Above this many query terms the per-memory sum is an ordered aggregate instead of one
/// column per term (whose expression grows with the terms).
pub(super) const MAX_UNROLLED_TERMS: usize = 32;

/// `(seq, ord, v)`: every posting of the terms in `source` (aliased `alias`, with `term`,
/// `ord` and `idf`), with its term score.
pub(super) fn term_scores(names: &Names, user: &str, source: Cte, alias: As) -> SelectStatement {
    let alias_name = alias.as_str();
    Query::select()
        .column((As::P, Postings::Seq))
        .expr_as(Expr::col((alias, Col::Ord)), Col::Ord)
        .expr_as(
            Expr::cust(bm25::term_score(&format!("{alias_name}.idf"), "p", "stats")),
            Col::V,
        )
        .from_as(source.name(), alias)
        .join_as(
            JoinType::InnerJoin,
            names.table(Postings::Table),
            As::P,
            Expr::cust_with_values(
                format!("p.user_id = $1 AND p.term = {alias_name}.term"),
                [user],
            ),
        )
        .cross_join(CteName::Stats)
        .to_owned()
}

/// `(seq, v)`: every posting of the query's `ord`-th term (bound as `term`, so the planner
/// sees which term it reads), with its term score, when `guard` holds.
fn one_term_scores(
    names: &Names,
    user: &str,
    source: Cte,
    term: &str,
    ord: usize,
    guard: &str,
) -> SelectStatement {
    Query::select()
        .column((As::P, Postings::Seq))
        .expr_as(Expr::cust(bm25::term_score("e.idf", "p", "stats")), Col::V)
        .from_as(source.name(), As::E)
        .join_as(
            JoinType::InnerJoin,
            names.table(Postings::Table),
            As::P,
            Expr::cust_with_values(
                "p.user_id = $1 AND p.term = $2",
                [user.to_owned(), term.to_owned()],
            ),
        )
        .cross_join(CteName::Stats)
        .and_where(Expr::cust(format!("e.ord = {ord} AND {guard}")))
        .to_owned()
}

/// `(seq, partial)`: every memory holding a query term of `source` (aliased `e`, with
/// `ord`, `idf` and whatever `guard` reads) whose row passes `guard`, with the sum of
/// those terms' scores; each term's own score is `s{ord}.v`, for `width` terms (those past
/// `terms` read nothing: `source` has no row with their `ord`). One scan per term,
/// full-joined on the memory: grouping every posting by memory instead (a hash aggregate
/// with one column per term) took three times as long on common terms, and spilled.
pub(super) fn every_posting(
    names: &Names,
    user: &str,
    source: Cte,
    terms: &[String],
    width: usize,
    guard: &str,
) -> SelectStatement {
    let mut select = Query::select();
    let seqs: Vec<String> = (1..=width).map(|i| format!("s{i}.seq")).collect();
    select
        .expr_as(
            Expr::cust(format!("COALESCE({})", seqs.join(", "))),
            Col::Seq,
        )
        .expr_as(
            Expr::cust(fold((1..=width).map(|i| format!("s{i}.v")))),
            Col::Partial,
        );
    for i in 0..width {
        let term = terms.get(i).map_or("", String::as_str);
        let scan = one_term_scores(names, user, source, term, i + 1, guard);
        match i {
            0 => select.from_subquery(scan, "s1"),
            _ => select.join_subquery(
                JoinType::FullOuterJoin,
                scan,
                format!("s{}", i + 1),
                Expr::cust(format!(
                    "s{}.seq = COALESCE({})",
                    i + 1,
                    seqs[..i].join(", ")
                )),
            ),
        };
    }
    select
}

/// `(seq, score)`: every memory holding a term of `source`, scored in full by an ordered
/// aggregate over its postings: no column per term, so any number of terms fits in one
/// statement (Postgres allows 1,664 columns in a target list).
pub(super) fn grouped_scores(
    names: &Names,
    user: &str,
    source: Cte,
    terms: usize,
) -> SelectStatement {
    Query::select()
        .column(Col::Seq)
        .expr_as(Expr::cust(summed_in_order(terms)), Col::Score)
        .from_subquery(term_scores(names, user, source, As::I), As::X)
        .group_by_col(Col::Seq)
        .to_owned()
}

/// `(seq, score)`: every memory that passes `filter` and holds a term of `source`, scored
/// in full as [`grouped_scores`] scores it (its postings joined to its memory row, where
/// the filter's conditions are read). The scores are the unfiltered ones: the idfs and
/// the statistics they are computed from are every live memory's. `terms` may exceed the
/// query's own count (a shape width): the terms past it have no postings and add zero.
pub(super) fn filtered_scores(
    names: &Names,
    user: &str,
    source: Cte,
    terms: usize,
    filter: &MemoryFilter,
) -> SelectStatement {
    let mut postings = term_scores(names, user, source, As::I);
    postings.join_as(
        JoinType::InnerJoin,
        names.table(Memories::Table),
        As::M,
        Expr::col((As::M, Memories::Seq)).equals((As::P, Postings::Seq)),
    );
    and_filter(&mut postings, As::M.as_str(), filter);
    Query::select()
        .column(Col::Seq)
        .expr_as(Expr::cust(summed_in_order(terms)), Col::Score)
        .from_subquery(postings, As::X)
        .group_by_col(Col::Seq)
        .to_owned()
}

/// One column `v1`..`v{k}` per query term, `expr(i)` each.
pub(super) fn per_term_columns(
    select: &mut SelectStatement,
    k: usize,
    expr: impl Fn(usize) -> String,
) -> &mut SelectStatement {
    for i in 1..=k {
        select.expr_as(Expr::cust(expr(i)), format!("v{i}"));
    }
    select
}

/// The left fold `0 + a + b + ...` of per-term scores, a missing one adding zero: the
/// core's order of addition.
pub(super) fn fold(scores: impl Iterator<Item = String>) -> String {
    let terms: Vec<String> = scores
        .map(|s| format!("COALESCE({s}, 0::float8)"))
        .collect();
    match terms.is_empty() {
        true => "0::float8".to_owned(),
        false => terms.join(" + "),
    }
}

/// A memory's BM25 score from its `(ord, v)` rows, in the query terms' order.
/// `sum(v ORDER BY ord)` says so but keeps Postgres from hashing the groups (it sorts
/// every posting by memory, then each group by term); one `max(v) FILTER (WHERE ord = i)`
/// column per term (each memory has at most one row per term) added left to right is the
/// same fold, and hashes. A term the memory lacks adds zero, which changes no sum of
/// non-negative scores. (`sum` over float8 starts from its first value, the core from
/// zero: the same, as 0 + x is x for any score.)
pub(super) fn summed_in_order(term_count: usize) -> String {
    if term_count == 0 || term_count > MAX_UNROLLED_TERMS {
        return "sum(v ORDER BY ord)".to_owned();
    }
    (1..=term_count)
        .map(|ord| format!("COALESCE(max(v) FILTER (WHERE ord = {ord}), 0::float8)"))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// `source`'s rows ranked 1-based by score, ties by sequence, the best `pool`. The best
/// `pool` are picked first (a top-N heap sort) and only those numbered: a window over
/// every row would sort all of them, tens of thousands when a query term is common.
pub(super) fn ranked(source: Cte, pool: usize) -> SelectStatement {
    Query::select()
        .column(Col::Seq)
        .column(Col::Score)
        .expr_as(
            Expr::cust("row_number() OVER (ORDER BY score DESC, seq ASC)"),
            Col::Rnk,
        )
        .from_subquery(
            Query::select()
                .columns([Col::Seq, Col::Score])
                .from(source.name())
                .order_by(Col::Score, Order::Desc)
                .order_by(Col::Seq, Order::Asc)
                .limit(sql_count(pool))
                .to_owned(),
            As::B,
        )
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_fold_left_in_term_order() {
        assert_eq!(
            summed_in_order(2),
            "COALESCE(max(v) FILTER (WHERE ord = 1), 0::float8) + \
             COALESCE(max(v) FILTER (WHERE ord = 2), 0::float8)"
        );
        assert_eq!(
            summed_in_order(MAX_UNROLLED_TERMS + 1),
            "sum(v ORDER BY ord)"
        );
    }
}
