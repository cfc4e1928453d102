//! The rarest-first path: when the rarest query term carries the pool, only its postings
//! that can reach the pool are read (in impact order), and the other terms are looked up
//! for those alone, in stages. Also the two-term search, which is this path or a full
//! scan of both lists.

use sea_query::{Asterisk, Expr, Order, Query, SelectStatement, TableRef, UnionType};

use super::aliases::{As, Col, CteName};
use super::bm25;
use super::cte::{Cte, Ctes};
use super::impact::impact_scan;
use super::lexical_path::LexicalPath;
use super::lexical_query::{LexicalQuery, RarestFirst, Scored};
use super::scores::{every_posting, fold};
use super::sql_count;
use crate::names::Names;
use crate::tables::Postings;

/// The rarest-first lookups' stages, in pools: the best `FIRST_STAGE` pools of candidates,
/// then the next `SECOND_STAGE` that still reach the first stage's floor, then the rest
/// that reach the floor of both. On the bench's 34 rarest-first queries at 100k memories
/// (up to 9,013 candidates each) this looks up 32,827 of 57,885 candidates, up to 5.3x
/// fewer per query; counted offline, that is at most 1.5x the fewest any floor could
/// leave (the final pool's, known in advance), where one stage of 4 or 8 pools left up
/// to 3.8x or 2.0x the fewest.
const FIRST_STAGE: usize = 4;
const SECOND_STAGE: usize = 16;

/// Two terms: the rarest-first path when the rarer term carries the pool, else every
/// posting of both (with two terms there is nothing else to prune: a pruned term needs
/// the other to carry the pool, which is the rarest-first condition).
pub(super) fn two_terms(ctes: &mut Ctes, query: &LexicalQuery<'_>) -> Scored {
    let LexicalQuery {
        names,
        user,
        terms,
        statistics,
        budget,
        ..
    } = *query;
    let split = super::statistics::split(ctes, statistics);
    let rarest = rarest_first(ctes, query, split);
    let full = ctes.add(
        CteName::LFull,
        Query::select()
            .column(Asterisk)
            .from(statistics.terms.name())
            .and_where(Expr::cust(format!("NOT {}", rarest.looks_up())))
            .to_owned(),
    );
    let mut scored = Query::select();
    scored
        .column(Col::Seq)
        .expr_as(Expr::col(Col::Partial), Col::Score)
        .from_subquery(
            every_posting(names, user, full, terms, query.width, "true"),
            As::A,
        )
        .union(
            UnionType::All,
            Query::select()
                .columns([Col::Seq, Col::Score])
                .from(rarest.scored.name())
                .to_owned(),
        );
    let scored = ctes.add(CteName::LScored, scored);
    let path = Expr::cust_with_values(
        format!(
            "CASE WHEN {lookup} THEN {rarest_code} \
             WHEN (SELECT max(cum) FROM {split}) <= $1::int8 THEN {once} ELSE {full_code} END",
            lookup = rarest.looks_up(),
            rarest_code = LexicalPath::RarestFirst.code(),
            once = LexicalPath::Once.code(),
            full_code = LexicalPath::Full.code(),
        ),
        [budget],
    );
    Scored {
        scored,
        path,
        rarest: Some(rarest),
    }
}

/// The rarest query term carries the pool when its own pool-th best score (`cut`) beats
/// the summed bounds of every other term (`rest`): a memory without it, or with a score
/// for it below `cut - rest`, scores below `cut`, which the pool-th best full score is at
/// least. So the candidates are that term's postings scoring `cut - rest` or more, read in
/// impact order as a one-term search reads its pool (see
/// [`impact_ordered`](super::impact::impact_ordered)), and the other terms are looked up
/// for them alone (`r_scored`: seq, score), best candidates first, in stages whose full
/// scores raise the floor for the next (see [`FIRST_STAGE`]). `MaxScore` would scan every
/// posting of the rare term to find the same candidates. When the lookups would cost more
/// than a full scan (`r_mode`), every posting is scanned instead.
pub(super) fn rarest_first(ctes: &mut Ctes, query: &LexicalQuery<'_>, split: Cte) -> RarestFirst {
    let LexicalQuery {
        names,
        user,
        statistics,
        pool,
        lookup_cost,
        ..
    } = *query;
    let k = query.width;
    // The rarest term, with the others' summed bounds (the next term's tail; none: 0).
    let term = ctes.add(
        CteName::RTerm,
        Query::select()
            .columns([Col::Term, Col::Ord, Col::Idf, Col::MaxTf])
            .expr_as(
                Expr::cust("COALESCE(lead(tail) OVER (ORDER BY cum), 0::float8)"),
                Col::Rest,
            )
            .expr_as(Expr::cust("all_df"), Col::AllDf)
            .from(split.name())
            .order_by(Col::Cum, Order::Asc)
            .limit(1)
            .to_owned(),
    );
    let seed = ctes.add(
        CteName::RSeed,
        impact_scan(names, user, term, None, None, None, pool),
    );
    // Every term's idf and text in one row, for the lookups.
    let mut row = Query::select();
    for i in 1..=k {
        row.expr_as(
            Expr::cust(format!("max(idf) FILTER (WHERE ord = {i})")),
            format!("idf{i}"),
        )
        .expr_as(
            Expr::cust(format!("max(term) FILTER (WHERE ord = {i})")),
            format!("term{i}"),
        );
    }
    let row = ctes.add(CteName::RRow, row.from(statistics.terms.name()).to_owned());
    let gate = ctes.add(CteName::RGate, gate_select(seed, term, pool));
    let ok = format!("COALESCE({}, false)", gate.scalar(Col::Ok));
    let candidates = ctes.add(
        CteName::RCand,
        impact_scan(
            names,
            user,
            term,
            None,
            Some(&gate.scalar("cut - rest")),
            Some(&ok),
            pool,
        ),
    );
    let mode = ctes.add(
        CteName::RMode,
        mode_select(gate, term, candidates, query.terms.len(), lookup_cost),
    );
    let handles = RarestFirst {
        gate,
        mode,
        candidates,
        scored: candidates,
    };
    let lookups = Lookups {
        names,
        term,
        row,
        k,
    };
    let scored = staged_lookups(ctes, &handles, &lookups, pool);
    RarestFirst { scored, ..handles }
}

/// `r_gate`: the rare term's pool-th best score (`cut`) from its seeds, the others'
/// summed bounds (`rest`), and whether the cut beats them (`ok`).
fn gate_select(seed: Cte, term: Cte, pool: usize) -> SelectStatement {
    Query::select()
        .expr_as(Expr::cust("f.score"), Col::Cut)
        .expr_as(Expr::cust("e.rest"), Col::Rest)
        .expr_as(Expr::cust("f.score > e.rest"), Col::Ok)
        .from_subquery(
            Query::select()
                .column(Col::Score)
                .from(seed.name())
                .order_by(Col::Score, Order::Desc)
                .limit(1)
                .offset(sql_count(pool) - 1)
                .to_owned(),
            As::F,
        )
        .cross_join(TableRef::from(term.name()).alias(As::E))
        .to_owned()
}

/// `r_mode`: whether the lookups pay (their count times the other terms times
/// `lookup_cost` within a full scan's postings). Counting stops one past the most
/// candidates whose lookups would pay: when there are more, the rest of the list is never
/// read. The number of other terms is bound (the statement's shape is the same for
/// several term counts).
fn mode_select(
    gate: Cte,
    term: Cte,
    candidates: Cte,
    k: usize,
    lookup_cost: u64,
) -> SelectStatement {
    // Exact in f64 for any term count a query can have, as it was when written inline.
    let others = (k - 1) as f64;
    let pays = match lookup_cost {
        0 => Expr::cust("g.ok"),
        cost => Expr::cust_with_values(
            format!(
                "g.ok AND (SELECT count(*) FROM (SELECT 1 FROM {candidates} LIMIT (SELECT \
                 floor(t.all_df::float8 / ($1::float8 * {cost}::float8))::int8 + 1 \
                 FROM {term} t)) z)::float8 * $2::float8 * {cost}::float8 \
                 <= e.all_df::float8"
            ),
            [others, others],
        ),
    };
    Query::select()
        .expr_as(pays, Col::Lookup)
        .from_as(gate.name(), As::G)
        .cross_join(TableRef::from(term.name()).alias(As::E))
        .to_owned()
}

/// The OFFSET of the `n`-th row (at least the first), as a bound value.
fn offset(n: usize) -> i64 {
    i64::try_from(sql_count(n) - 1).unwrap_or(i64::MAX)
}

/// What a lookup stage reads: the rare term (`r_term`) and every term's idf and text in
/// one row (`r_row`).
struct Lookups<'a> {
    names: &'a Names,
    term: Cte,
    row: Cte,
    k: usize,
}

impl Lookups<'_> {
    /// `(seq, score)`: the full scores of `source`'s memories (`c`: seq, score of the
    /// rare term): the rare term's score is its own; every other term's comes from a key
    /// lookup (none for a term no memory holds). Added in the query terms' order.
    fn scored(&self, source: SelectStatement) -> SelectStatement {
        let postings = self.names.q(Postings::Table);
        let score = |i: usize| {
            format!(
                "CASE WHEN e.ord = {i} THEN c.score WHEN r.term{i} IS NOT NULL THEN \
                 (SELECT {} FROM {postings} p \
                 WHERE p.user_id = s.uid AND p.seq = c.seq AND p.term = r.term{i}) END",
                bm25::term_score(&format!("r.idf{i}"), "p", "s"),
            )
        };
        Query::select()
            .column((As::C, Col::Seq))
            .expr_as(Expr::cust(fold((1..=self.k).map(score))), Col::Score)
            .from_subquery(source, As::C)
            .cross_join(TableRef::from(self.term.name()).alias(As::E))
            .cross_join(TableRef::from(self.row.name()).alias(As::R))
            .cross_join(TableRef::from(CteName::Stats).alias(As::S))
            .to_owned()
    }
}

/// `r_edges` (e1, e2): the scores that split the candidates into stages. The first holds
/// the best `FIRST_STAGE` pools (and their ties), the second the next `SECOND_STAGE`; no
/// such score: the stages before hold every candidate. Two top-N heaps over the
/// candidates, not a sort of all of them. The offsets are bound, as every count that
/// depends on `top_k`, so the text is one for every pool.
fn stage_edges(rarest: &RarestFirst, pool: usize) -> SelectStatement {
    let (first, second) = (
        pool.saturating_mul(FIRST_STAGE),
        pool.saturating_mul(SECOND_STAGE),
    );
    let candidates = rarest.candidates;
    let nth_best = |n: usize| {
        Expr::cust_with_values(
            format!("(SELECT score FROM {candidates} ORDER BY score DESC LIMIT 1 OFFSET $1)"),
            [offset(n)],
        )
    };
    Query::select()
        .expr_as(nth_best(first), Col::E1)
        .expr_as(nth_best(first.saturating_add(second)), Col::E2)
        .and_where(Expr::cust(rarest.looks_up()))
        .to_owned()
}

/// The lookups in stages, best candidates first (`r_scored`): each stage's full scores
/// raise the floor under the pool-th best full score (adding terms only raises a score),
/// so the next stage reads only the candidates whose score for the rare term plus the
/// others' bounds still reaches it. The floor from the rare term alone is low when the
/// others' bounds are large beside its spread of scores: then nearly every posting of it
/// is a candidate, though few can reach the pool once a few hundred are scored in full.
fn staged_lookups(
    ctes: &mut Ctes,
    rarest: &RarestFirst,
    lookups: &Lookups<'_>,
    pool: usize,
) -> Cte {
    let candidates = rarest.candidates;
    let looks_up = rarest.looks_up();
    let edges = ctes.add(CteName::REdges, stage_edges(rarest, pool));
    let (edge1, edge2) = (edges.scalar(Col::E1), edges.scalar(Col::E2));
    // Kept: at least `floor - rest` (and, as every candidate, `cut - rest`).
    let term = lookups.term;
    let reaches = |floor: &str| {
        format!(
            "score >= COALESCE({floor} - {}, '-Infinity'::float8)",
            term.scalar(Col::Rest)
        )
    };
    // The pool-th best full score the stages so far have found (none: fewer than a
    // pool), its offset bound as `$1`.
    let floor_of = |stages: &[Cte]| {
        let scores: Vec<String> = stages
            .iter()
            .map(|stage| format!("SELECT score FROM {stage}"))
            .collect();
        format!(
            "(SELECT u.score FROM ({}) u ORDER BY u.score DESC LIMIT 1 OFFSET $1)",
            scores.join(" UNION ALL "),
        )
    };
    let stage = |condition: String, values: Vec<i64>| {
        lookups.scored(
            Query::select()
                .columns([Col::Seq, Col::Score])
                .from(candidates.name())
                .and_where(Expr::cust_with_values(
                    format!("{looks_up} AND {condition}"),
                    values,
                ))
                .to_owned(),
        )
    };
    let s1 = ctes.add(
        CteName::RS1,
        stage(
            format!("score >= COALESCE({edge1}, '-Infinity'::float8)"),
            Vec::new(),
        ),
    );
    let s2 = ctes.add(
        CteName::RS2,
        stage(
            format!(
                "score < {edge1} AND score >= COALESCE({edge2}, '-Infinity'::float8) AND {}",
                reaches(&floor_of(&[s1]))
            ),
            vec![offset(pool)],
        ),
    );
    let s3 = ctes.add(
        CteName::RS3,
        stage(
            format!("score < {edge2} AND {}", reaches(&floor_of(&[s1, s2]))),
            vec![offset(pool)],
        ),
    );
    let mut staged = Query::select()
        .columns([Col::Seq, Col::Score])
        .from(s1.name())
        .to_owned();
    for stage in [s2, s3] {
        staged.union(
            UnionType::All,
            Query::select()
                .columns([Col::Seq, Col::Score])
                .from(stage.name())
                .to_owned(),
        );
    }
    ctes.add(CteName::RScored, staged)
}
