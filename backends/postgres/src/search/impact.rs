//! The impact-ordered read of one term's postings: only those that can reach the pool.
//! A one-term search is this alone; the rarest-first path reads its rare term this way.

use sea_query::{Expr, JoinType, Order, Query, SelectStatement};

use super::aliases::{As, Col, CteName};
use super::bm25;
use super::cte::{Cte, Ctes};
use super::sql_count;
use super::statistics::Statistics;
use crate::names::Names;
use crate::tables::Postings;

/// A one-term search, read in impact order (`i_cand`: `(seq, score)`).
///
/// Within one tf a posting's score falls as its memory grows longer, so the postings
/// index in (tf, doc_len, seq) order lists each tf's postings best first. The first
/// `pool` of each tf (`i_seed`) hold the pool-th best score or better, so their pool-th
/// best score (`i_floor`) is a floor under it. The candidates are then, per tf, the
/// postings short enough to reach that floor, the length bound solved from the score and
/// widened past rounding: a superset of every posting scoring at least the floor, so
/// their best `pool` are the pool, ties included. A few hundred index entries instead of
/// the whole list.
pub(super) fn impact_ordered(
    ctes: &mut Ctes,
    names: &Names,
    user: &str,
    statistics: Statistics,
    term: &str,
    pool: usize,
) -> Cte {
    let source = statistics.terms;
    let seed = ctes.add(
        CteName::ISeed,
        impact_scan(names, user, source, Some(term), None, None, pool),
    );
    let floor = ctes.add(
        CteName::IFloor,
        Query::select()
            .column(Col::Score)
            .from(seed.name())
            .order_by(Col::Score, Order::Desc)
            .limit(1)
            .offset(sql_count(pool) - 1)
            .to_owned(),
    );
    ctes.add(
        CteName::ICand,
        impact_scan(
            names,
            user,
            source,
            Some(term),
            Some(&floor.scalar(Col::Score)),
            None,
            pool,
        ),
    )
}

/// `(seq, score)`: one term's postings in impact order, the term's row in `source` (`e`,
/// with `term`, `idf` and `max_tf`), the term itself bound when known (so the planner
/// sees which term it reads). Without a floor, the first `pool` of each tf (the seeds);
/// with one, per tf every posting short enough to score the floor or more (its length
/// bound solved from the score and widened past rounding; no floor bounds nothing). Read
/// only when `guard` holds.
pub(super) fn impact_scan(
    names: &Names,
    user: &str,
    source: Cte,
    term: Option<&str>,
    floor: Option<&str>,
    guard: Option<&str>,
    pool: usize,
) -> SelectStatement {
    let mut scan = Query::select();
    scan.columns([
        (As::Q, Postings::Seq),
        (As::Q, Postings::Tf),
        (As::Q, Postings::DocLen),
    ])
    .from_as(names.table(Postings::Table), As::Q)
    .and_where(Expr::cust("q.tf = g.tf"));
    match term {
        Some(term) => scan.and_where(Expr::cust_with_values(
            "q.user_id = $1 AND q.term = $2",
            [user.to_owned(), term.to_owned()],
        )),
        None => scan.and_where(Expr::cust_with_values(
            "q.user_id = $1 AND q.term = e.term",
            [user],
        )),
    };
    match floor {
        // OFFSET 0 keeps the scan a lateral one, an index range per tf: flattened into a
        // join it became a merge join over the term's whole list.
        Some(floor) => scan
            .and_where(Expr::cust(format!(
                "q.doc_len <= {}",
                bm25::length_bound(floor)
            )))
            .offset(0),
        None => scan
            .order_by((As::Q, Postings::DocLen), Order::Asc)
            .order_by((As::Q, Postings::Seq), Order::Asc)
            .limit(sql_count(pool)),
    };
    let mut select = Query::select();
    select
        .column((As::P, Postings::Seq))
        .expr_as(
            Expr::cust(bm25::term_score("e.idf", "p", "stats")),
            Col::Score,
        )
        .from_as(source.name(), As::E)
        .cross_join(CteName::Stats)
        .join_lateral(
            JoinType::InnerJoin,
            Query::select()
                .expr_as(Expr::cust("generate_series(1, e.max_tf)"), Col::Tf)
                .to_owned(),
            As::G,
            Expr::cust("true"),
        )
        .join_lateral(
            JoinType::InnerJoin,
            scan.to_owned(),
            As::P,
            Expr::cust("true"),
        );
    if let Some(guard) = guard {
        select.and_where(Expr::cust(guard.to_owned()));
    }
    select
}
