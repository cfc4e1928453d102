//! MaxScore pruning for queries of three terms or more (or two with pruning off): the
//! rarest terms, up to the budget's postings in all, are scored first, alone (`c_part`);
//! the pool-th best of those partial scores (`c_cut`) is a floor under the pool-th best
//! full score, since adding terms only raises a score. Walking the terms from the rarest,
//! a term stays essential while the bounds of it and every commoner term (`tail`) could
//! still reach that floor; the terms past that point are pruned: a memory holding only
//! those scores below the floor and cannot enter the pool. The candidates are the memories
//! holding an essential term whose partial score plus the pruned terms' bounds (`rest`)
//! reaches the floor; they are scored in full, the pruned terms by key lookups. When no
//! term can be pruned every posting of every term is scored, as without pruning. Either
//! way the pool is exactly the one scoring everything gives.

use sea_query::{Asterisk, Expr, JoinType, Order, Query, SelectStatement, TableRef, UnionType};

use super::aliases::{As, Col, CteName};
use super::bm25;
use super::cte::{Cte, Ctes};
use super::lexical_path::LexicalPath;
use super::lexical_query::{LexicalQuery, RarestFirst, Scored};
use super::rarest_first::rarest_first;
use super::scores::{
    MAX_UNROLLED_TERMS, every_posting, fold, grouped_scores, per_term_columns, summed_in_order,
    term_scores,
};
use super::sql_count;
use super::statistics::split;
use crate::tables::Postings;

/// The CTEs the MaxScore stages hand on.
#[derive(Debug, Clone, Copy)]
struct Stages {
    /// `l_once`: whether every query term was within the prune budget (`once`).
    once: Cte,
    /// `c_part` (seq, v1.., partial): the rarest terms' scores.
    part: Cte,
    /// `l_ess`: each term and whether it is essential.
    essential: Cte,
    /// `gate`: one row when some term is pruned (cut, rest, n_pruned, all_df, ok).
    gate: Cte,
}

impl Stages {
    fn once(&self) -> String {
        format!("COALESCE({}, true)", self.once.scalar(Col::Once))
    }

    fn pruned(&self) -> String {
        format!("COALESCE({}, false)", self.gate.scalar(Col::Ok))
    }
}

/// The BM25 side of a query of three terms or more, or of two with pruning off
/// (`l_scored`: seq, score), pruned where it can be (rarest-first first, when the budget
/// allows pruning at all), with the expression naming the path it took.
pub(super) fn maxscore(ctes: &mut Ctes, query: &LexicalQuery<'_>) -> Scored {
    let split = split(ctes, query.statistics);
    // A budget of 0 turns every pruning off, this one too.
    let rarest = (query.budget > 0).then(|| rarest_first(ctes, query, split));
    let (r_ok, r_lookup) = match &rarest {
        Some(rarest) => (rarest.applies(), rarest.looks_up()),
        None => ("false".to_owned(), "false".to_owned()),
    };
    let stages = first_stages(ctes, query, split, &r_ok);
    let (survivors, mode) = survivors(ctes, query, &stages);
    let scored_by_lookups = format!("COALESCE({}, false)", mode.scalar(Col::Lookup));
    let pruned = lookups(ctes, query, &stages, survivors, &scored_by_lookups);
    // Not pruned and not within the budget: every posting of every term can matter. The
    // terms to scan in full, decided once (each scan reads them as a join, not a
    // subquery: cheaper to plan).
    let full = ctes.add(
        CteName::LFull,
        Query::select()
            .column(Asterisk)
            .from(query.statistics.terms.name())
            .and_where(Expr::cust(format!(
                "CASE WHEN {r_ok} THEN NOT {r_lookup} \
                 ELSE NOT {scored_by_lookups} AND NOT {} END",
                stages.once()
            )))
            .to_owned(),
    );
    let scored = ctes.add(
        CteName::LScored,
        every_score(query, &stages, full, pruned, rarest.as_ref()),
    );
    let path = Expr::cust_with_values(
        format!(
            "CASE WHEN {r_ok} THEN CASE WHEN {r_lookup} THEN {rarest_code} ELSE {full} END \
             WHEN {once_ok} THEN {once} WHEN {scored_by_lookups} THEN \
             CASE WHEN EXISTS (SELECT 1 FROM {essential} WHERE essential AND cum > $1::int8) \
             THEN {extended} ELSE {pruned_code} END ELSE {full} END",
            once_ok = stages.once(),
            essential = stages.essential,
            rarest_code = LexicalPath::RarestFirst.code(),
            once = LexicalPath::Once.code(),
            extended = LexicalPath::PrunedExtended.code(),
            pruned_code = LexicalPath::Pruned.code(),
            full = LexicalPath::Full.code(),
        ),
        [query.budget],
    );
    Scored {
        scored,
        path,
        rarest,
    }
}

/// `l_once`, `c_part` (the terms within the budget, scored alone unless rarest-first
/// applies), `c_cut` (their pool-th best partial score), `l_ess` (which terms stay
/// essential) and `gate`.
fn first_stages(ctes: &mut Ctes, query: &LexicalQuery<'_>, split: Cte, r_ok: &str) -> Stages {
    let LexicalQuery {
        names,
        user,
        terms,
        pool,
        budget,
        ..
    } = *query;
    let k = query.width;
    // Every term within the budget: `c_part` already holds the full scores.
    let once = ctes.add(
        CteName::LOnce,
        Query::select()
            .expr_as(
                Expr::cust_with_values("COALESCE(max(cum), 0) <= $1::int8", [budget]),
                Col::Once,
            )
            .from(split.name())
            .to_owned(),
    );
    let within_budget = format!("e.cum <= {budget}::int8 AND NOT {r_ok}");
    let c_part = match k {
        1..=MAX_UNROLLED_TERMS => {
            let mut select = every_posting(names, user, split, terms, k, &within_budget);
            per_term_columns(&mut select, k, |i| format!("s{i}.v"));
            select
        }
        _ => per_term_columns(Query::select().column(Col::Seq), k, |i| {
            format!("max(v) FILTER (WHERE ord = {i})")
        })
        .expr_as(Expr::cust(summed_in_order(k)), Col::Partial)
        .from_subquery(
            term_scores(names, user, split, As::E)
                .and_where(Expr::cust(within_budget.clone()))
                .to_owned(),
            As::C,
        )
        .group_by_col(Col::Seq)
        .to_owned(),
    };
    let part = ctes.add(CteName::CPart, c_part);
    let cut = ctes.add(CteName::CCut, nth_partial(part, pool));
    let essential = ctes.add(
        CteName::LEss,
        Query::select()
            .columns([
                Col::Term,
                Col::Ord,
                Col::Idf,
                Col::Cum,
                Col::Tail,
                Col::AllDf,
            ])
            .expr_as(
                Expr::cust_with_values(
                    format!(
                        "cum <= $1::int8 OR COALESCE(tail >= {}, true)",
                        cut.scalar(Col::Cut)
                    ),
                    [budget],
                ),
                Col::Essential,
            )
            .from(split.name())
            .to_owned(),
    );
    let gate = ctes.add(CteName::Gate, gate_select(cut, essential));
    Stages {
        once,
        part,
        essential,
        gate,
    }
}

/// `(cut)`: the pool-th best `partial` of `source`.
fn nth_partial(source: Cte, pool: usize) -> SelectStatement {
    Query::select()
        .expr_as(Expr::col(Col::Partial), Col::Cut)
        .from(source.name())
        .order_by(Col::Partial, Order::Desc)
        .limit(1)
        .offset(sql_count(pool) - 1)
        .to_owned()
}

/// One row when some term is pruned: the floor and the pruned terms' summed bounds (the
/// largest tail among them: the tail of the first), how many they are and how many
/// postings a full scan would read.
fn gate_select(cut: Cte, essential: Cte) -> SelectStatement {
    Query::select()
        .column((As::C, Col::Cut))
        .column((As::R, Col::Rest))
        .column((As::R, Col::NPruned))
        .column((As::R, Col::AllDf))
        .expr_as(Expr::cust("c.cut > r.rest"), Col::Ok)
        .from_as(cut.name(), As::C)
        .join_subquery(
            JoinType::InnerJoin,
            Query::select()
                .expr_as(Expr::cust("max(tail)"), Col::Rest)
                .expr_as(Expr::cust("count(*)"), Col::NPruned)
                .expr_as(Expr::cust("max(all_df)"), Col::AllDf)
                .from(essential.name())
                .and_where(Expr::cust("NOT essential"))
                .to_owned(),
            As::R,
            Expr::cust("r.rest IS NOT NULL"),
        )
        .to_owned()
}

/// The survivors (`c_ess`): the memories holding an essential term (those scored in
/// `c_part`, and the ones the essential terms past the budget add, scanned only when
/// pruning) that could reach the floor, with each essential term's score and their sum.
/// Their pool-th best sum is a higher floor still (`c_cut2`), which leaves fewer to score
/// in full. Then whether the survivors are scored by key lookups (`l_mode`, the pruned
/// path) or every posting is scanned after all: a lookup costs several postings' scan,
/// and when the pruned terms' bounds are high beside the floor nearly every memory
/// holding an essential term survives. Returns `c_ess`, `c_cut2` and `l_mode`.
fn survivors(ctes: &mut Ctes, query: &LexicalQuery<'_>, stages: &Stages) -> ((Cte, Cte), Cte) {
    let k = query.width;
    let pruned = stages.pruned();
    let mut e2 = Query::select();
    e2.column(Col::Seq);
    let e2 = per_term_columns(&mut e2, k, |i| format!("CASE WHEN ord = {i} THEN v END"))
        .from_subquery(
            term_scores(query.names, query.user, stages.essential, As::E)
                .and_where(Expr::cust_with_values(
                    "e.essential AND e.cum > $1::int8",
                    [query.budget],
                ))
                .and_where(Expr::cust(pruned.clone()))
                .to_owned(),
            As::M,
        )
        .to_owned();
    let mut c1 = Query::select();
    c1.column(Col::Seq);
    let c1 = per_term_columns(&mut c1, k, |i| format!("v{i}"))
        .from(stages.part.name())
        .union(UnionType::All, e2)
        .to_owned();
    let ess_sum = fold((1..=k).map(|i| format!("max(x.v{i})")));
    let gate = stages.gate;
    let survivors = ctes.add(
        CteName::CEss,
        per_term_columns(Query::select().column((As::X, Col::Seq)), k, |i| {
            format!("max(x.v{i})")
        })
        .expr_as(Expr::cust(ess_sum.clone()), Col::Partial)
        .from_subquery(c1, As::X)
        .and_where(Expr::cust(pruned))
        .group_by_col((As::X, Col::Seq))
        .and_having(Expr::cust(format!(
            "{ess_sum} + {} >= {}",
            gate.scalar(Col::Rest),
            gate.scalar(Col::Cut)
        )))
        .to_owned(),
    );
    let cut2 = ctes.add(CteName::CCut2, nth_partial(survivors, query.pool));
    let mode = ctes.add(
        CteName::LMode,
        Query::select()
            .expr_as(
                Expr::cust(format!(
                    "g.ok AND (SELECT count(*) FROM {survivors} c WHERE c.partial + g.rest \
                     >= {})::float8 * g.n_pruned::float8 \
                     * {lookup_cost}::float8 <= g.all_df::float8",
                    cut2.scalar(Col::Cut),
                    lookup_cost = query.lookup_cost,
                )),
                Col::Lookup,
            )
            .from_as(gate.name(), As::G)
            .to_owned(),
    );
    ((survivors, cut2), mode)
}

/// The survivors' full scores (`l_pruned`: seq, score): each essential term's score is
/// known; a pruned term's comes from a key lookup (only for the pruned terms, and only
/// where it is missing). Added in the query terms' order, as the core does.
fn lookups(
    ctes: &mut Ctes,
    query: &LexicalQuery<'_>,
    stages: &Stages,
    (survivors, cut2): (Cte, Cte),
    scored_by_lookups: &str,
) -> Cte {
    let k = query.width;
    // The pruned terms in one row (`pr{i}`, with `idf{i}` and `term{i}`; NULL for a term
    // no memory holds), so a lookup reads them as columns: one-time subqueries for each
    // of them cost more to plan than the rest of the statement.
    let mut row = Query::select();
    for i in 1..=k {
        row.expr_as(
            Expr::cust(format!("bool_or(NOT essential) FILTER (WHERE ord = {i})")),
            format!("pr{i}"),
        )
        .expr_as(
            Expr::cust(format!("max(idf) FILTER (WHERE ord = {i})")),
            format!("idf{i}"),
        )
        .expr_as(
            Expr::cust(format!("max(term) FILTER (WHERE ord = {i})")),
            format!("term{i}"),
        );
    }
    let row = ctes.add(CteName::LRow, row.from(stages.essential.name()).to_owned());
    let postings = query.names.q(Postings::Table);
    let looked_up = |i: usize| {
        format!(
            "COALESCE(c.v{i}, CASE WHEN r.pr{i} THEN (SELECT {} \
             FROM {postings} p \
             WHERE p.user_id = s.uid AND p.seq = c.seq AND p.term = r.term{i}) END)",
            bm25::term_score(&format!("r.idf{i}"), "p", "s"),
        )
    };
    ctes.add(
        CteName::LPruned,
        Query::select()
            .column((As::C, Col::Seq))
            .expr_as(Expr::cust(fold((1..=k).map(looked_up))), Col::Score)
            .from_as(survivors.name(), As::C)
            .cross_join(TableRef::from(row.name()).alias(As::R))
            .cross_join(TableRef::from(CteName::Stats).alias(As::S))
            .and_where(Expr::cust(format!(
                "c.partial + {} >= {}",
                stages.gate.scalar(Col::Rest),
                cut2.scalar(Col::Cut)
            )))
            .and_where(Expr::cust(scored_by_lookups.to_owned()))
            .to_owned(),
    )
}

/// `l_scored`: the full scan of `full`'s terms, `c_part` when it holds every term,
/// `l_pruned`'s survivors and the rarest-first path's; at most one of them has rows.
fn every_score(
    query: &LexicalQuery<'_>,
    stages: &Stages,
    full: Cte,
    pruned: Cte,
    rarest: Option<&RarestFirst>,
) -> SelectStatement {
    let k = query.width;
    let mut unpruned = match k {
        ..=MAX_UNROLLED_TERMS => Query::select()
            .column(Col::Seq)
            .expr_as(Expr::col(Col::Partial), Col::Score)
            .from_subquery(
                every_posting(query.names, query.user, full, query.terms, k, "true"),
                As::A,
            )
            .to_owned(),
        _ => grouped_scores(query.names, query.user, full, k),
    };
    unpruned
        .union(
            UnionType::All,
            Query::select()
                .column(Col::Seq)
                .expr_as(Expr::col(Col::Partial), Col::Score)
                .from(stages.part.name())
                .and_where(Expr::cust(stages.once()))
                .to_owned(),
        )
        .union(
            UnionType::All,
            Query::select()
                .columns([Col::Seq, Col::Score])
                .from(pruned.name())
                .to_owned(),
        );
    if let Some(rarest) = rarest {
        unpruned.union(
            UnionType::All,
            Query::select()
                .columns([Col::Seq, Col::Score])
                .from(rarest.scored.name())
                .to_owned(),
        );
    }
    unpruned
}
