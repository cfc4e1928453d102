//! The exact dense tie-break: the core's own cosine (`cortex_unit_dot`) for candidates
//! whose pgvector distances lie too close together for pgvector to order them as the core
//! does (see [`super::dense_plan`]).
//!
//! `cortex_unit_dot` is a PL/pgSQL loop, about 0.2 ms per call at 384 dimensions: scored
//! once per tied candidate, 4,600 memories sharing one vector cost 0.6-1 s per search
//! (docs/BENCHMARKS.md, "PostgreSQL pushdown: mass ties"). Equal embeddings have equal
//! exact scores whatever the query, so the tie-break scores each distinct embedding once
//! and hands its score to every tied candidate holding the same embedding. A cheap key (the
//! distance and an inner product with a fixed probe vector, both C) groups the candidates
//! that are likely equal; each group's first candidate is scored, and every other member
//! is compared with it for equality before it takes that score (a member that differs, a
//! key collision, is scored itself), so the ranks stay exactly the core's. The cost is
//! one exact score per distinct tied embedding plus two key lookups per tied candidate.
//!
//! Candidates proven to score ±0 (`zero`, see `dense_side::proven_distances`) need neither:
//! they all score exactly 0, so they rank among themselves by sequence, and within a run
//! only the first `pool` of them by sequence can reach the pool (each later one has `pool`
//! equal scores with smaller sequences ahead of it). A mass of such ties costs no exact
//! score and no lookup past the pool.

use pgvector::Vector;
use sea_query::{Expr, JoinType, Order, Query};

use super::aliases::{As, Col, CteName};
use super::cte::{Cte, Ctes};
use super::dense_plan::UNIT_DOT;
use crate::names::Names;
use crate::tables::Memories;

/// Adds the CTEs that rank `candidates` (`seq`, `dist`: the exact-mode candidates, a
/// superset of the core's pool) as the core does, ending with `dense` (`seq`, `rnk`): the best
/// `pool`, 1-based. Runs of candidates whose consecutive distances lie within `margin` are
/// ordered by the core's score, then by sequence; between runs pgvector's order is the
/// core's.
pub(crate) fn ranked(
    ctes: &mut Ctes,
    names: &Names,
    candidates: Cte,
    query: &Vector,
    margin: f64,
    pool: u64,
) -> Cte {
    let runs = runs(ctes, candidates, margin);
    let keyed = keyed(ctes, names, runs, query, pool);
    let first = first_scores(ctes, names, keyed, query);
    scored(ctes, names, keyed, first, query, pool)
}

/// `d_runs` (seq, dist, zero, run): the candidates numbered by run, a run being
/// consecutive candidates whose distances lie within `margin` of each other.
fn runs(ctes: &mut Ctes, candidates: Cte, margin: f64) -> Cte {
    let gaps = ctes.add(
        CteName::DGaps,
        Query::select()
            .columns([Col::Seq, Col::Dist, Col::Zero])
            .expr_as(
                Expr::cust_with_values(
                    "CASE WHEN dist - lag(dist) OVER (ORDER BY dist, seq) > $1::float8 \
                     THEN 1 ELSE 0 END",
                    [margin],
                ),
                Col::Step,
            )
            .from(candidates.name())
            .to_owned(),
    );
    // (dist, seq) is unique, so a ROWS frame sums the same as the default RANGE one, and
    // does not look for peers.
    ctes.add(
        CteName::DRuns,
        Query::select()
            .columns([Col::Seq, Col::Dist, Col::Zero])
            .expr_as(
                Expr::cust("sum(step) OVER (ORDER BY dist, seq ROWS UNBOUNDED PRECEDING)"),
                Col::Run,
            )
            .from(gaps.name())
            .to_owned(),
    )
}

/// `d_keyed` (seq, dist, run, zero, probe): each candidate with its grouping key (the
/// probe's inner product) when its run has more than one member and it is not proven to
/// score 0; of the proven ones, only each run's first `pool` by sequence.
fn keyed(ctes: &mut Ctes, names: &Names, runs: Cte, query: &Vector, pool: u64) -> Cte {
    let memories = names.q(Memories::Table);
    let probe = Vector::from(probe(query.as_slice().len()));
    // The run's size before any cut: a lone survivor of a cut run still needs its score.
    let counted = Query::select()
        .columns([Col::Seq, Col::Dist, Col::Run, Col::Zero])
        .expr_as(Expr::cust("count(*) OVER (PARTITION BY run)"), Col::RunSize)
        .expr_as(
            Expr::cust("row_number() OVER (PARTITION BY run, zero ORDER BY seq)"),
            Col::Nth,
        )
        .from(runs.name())
        .to_owned();
    // Only runs of more than one need the exact score; their members get the key, each
    // through a keyed lookup (a join could read every candidate's embedding).
    ctes.add(
        CteName::DKeyed,
        Query::select()
            .columns([
                (As::R, Col::Seq),
                (As::R, Col::Dist),
                (As::R, Col::Run),
                (As::R, Col::Zero),
            ])
            .expr_as(
                Expr::cust_with_values(
                    format!(
                        "CASE WHEN r.run_size > 1 AND NOT r.zero \
                         THEN (SELECT m.embedding <#> $1::vector FROM {memories} m \
                               WHERE m.seq = r.seq) END"
                    ),
                    [probe],
                ),
                Col::Probe,
            )
            .from_subquery(counted, As::R)
            .and_where(Expr::cust_with_values(
                "NOT r.zero OR r.nth <= $1",
                [i64::try_from(pool).unwrap_or(i64::MAX)],
            ))
            .to_owned(),
    )
}

/// `d_first` (run, dist, probe, seq, embedding, score): each key's first member, scored
/// by the core's own cosine.
fn first_scores(ctes: &mut Ctes, names: &Names, keyed: Cte, query: &Vector) -> Cte {
    let unit_dot = names.q_object(UNIT_DOT);
    // One exact score per key: its first member's. Materialised, so each is computed
    // once, not once per row it is joined to; the lateral lookup stays a keyed one.
    let firsts = Query::select()
        .columns([Col::Run, Col::Dist, Col::Probe])
        .expr_as(Expr::cust("min(seq)"), Col::Seq)
        .from(keyed.name())
        .and_where(Expr::cust("probe IS NOT NULL"))
        .group_by_columns([Col::Run, Col::Dist, Col::Probe])
        .to_owned();
    let exact = Query::select()
        .expr_as(Expr::cust("m.embedding"), Col::Embedding)
        .expr_as(
            Expr::cust_with_values(
                format!("{unit_dot}(m.embedding::real[], $1::vector::real[])"),
                [query.clone()],
            ),
            Col::Score,
        )
        .from_as(names.table(Memories::Table), As::M)
        .and_where(Expr::cust("m.seq = f.seq"))
        .offset(0)
        .to_owned();
    ctes.add_materialized(
        CteName::DFirst,
        Query::select()
            .columns([
                (As::F, Col::Run),
                (As::F, Col::Dist),
                (As::F, Col::Probe),
                (As::F, Col::Seq),
            ])
            .columns([(As::X, Col::Embedding), (As::X, Col::Score)])
            .from_subquery(firsts, As::F)
            .join_lateral(JoinType::InnerJoin, exact, As::X, Expr::cust("true"))
            .to_owned(),
    )
}

/// `d_scored` (seq, run, score) and `dense` (seq, rnk): every tied candidate's exact
/// score, then the best `pool` ranked.
fn scored(
    ctes: &mut Ctes,
    names: &Names,
    keyed: Cte,
    first: Cte,
    query: &Vector,
    pool: u64,
) -> Cte {
    let memories = names.q(Memories::Table);
    let unit_dot = names.q_object(UNIT_DOT);
    // Every tied candidate: its key's score when its embedding is that key's, else its
    // own (a key collision).
    let scored = ctes.add(
        CteName::DScored,
        Query::select()
            .columns([(As::K, Col::Seq), (As::K, Col::Run)])
            .expr_as(
                Expr::cust_with_values(
                    format!(
                        "CASE WHEN k.zero THEN 0::real \
                         WHEN k.probe IS NULL THEN NULL \
                         WHEN k.seq = f.seq THEN f.score \
                         ELSE (SELECT CASE WHEN m.embedding = f.embedding THEN f.score \
                               ELSE {unit_dot}(m.embedding::real[], $1::vector::real[]) END \
                               FROM {memories} m WHERE m.seq = k.seq) END"
                    ),
                    [query.clone()],
                ),
                Col::Score,
            )
            .from_as(keyed.name(), As::K)
            .join_as(
                JoinType::LeftJoin,
                first.name(),
                As::F,
                Expr::cust("f.run = k.run AND f.dist = k.dist AND f.probe = k.probe"),
            )
            .to_owned(),
    );
    ctes.add(
        CteName::Dense,
        Query::select()
            .column(Col::Seq)
            .expr_as(
                Expr::cust("row_number() OVER (ORDER BY run, score DESC, seq)"),
                Col::Rnk,
            )
            .from(scored.name())
            .order_by(Col::Run, Order::Asc)
            .order_by(Col::Score, Order::Desc)
            .order_by(Col::Seq, Order::Asc)
            .limit(pool)
            .to_owned(),
    )
}

/// A fixed vector of `dimension` components in [-1, 1], different at every position, so
/// its inner product with an embedding tells most distinct embeddings at one distance
/// apart (a permutation or a sign flip changes it). It only groups: equality is checked.
fn probe(dimension: usize) -> Vec<f32> {
    let mut state: u64 = 0x243f_6a88_85a3_08d3;
    (0..dimension)
        .map(|_| {
            // SplitMix64.
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            ((z >> 40) as f64 / (1u64 << 24) as f64 * 2.0 - 1.0) as f32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_is_fixed_bounded_and_varied() {
        let p = probe(384);
        assert_eq!(p, probe(384));
        assert_eq!(p[..13], probe(13)[..]);
        assert!(p.iter().all(|x| (-1.0..=1.0).contains(x)));
        let mut distinct = p.clone();
        distinct.sort_by(f32::total_cmp);
        distinct.dedup();
        assert!(distinct.len() > 380, "{}", distinct.len());
    }
}
