//! The search pushdown: the whole hybrid query in SQL, as statements in one snapshot: the
//! BM25 side ([`lexical`], run with a generic plan), then the dense side fused with it
//! ([`fused`], planned per search); or, side by side on two connections, the BM25 side and
//! the dense side ([`dense`], planned per search), then their fusion ([`fused`] reading
//! both sides' ranks, generic).
//!
//! It returns what `hybrid_retrieve` over `build_index` returns on the same data: the same
//! ids in the same order, the same ranks and bit-equal fused scores. The arithmetic follows
//! the core's expression by expression, in float8 with every literal and parameter cast:
//!
//! - dense: candidates and their order by pgvector's `<=>` (see [`crate::dense`]), with
//!   every run of near-equal distances re-ordered by the core's own cosine
//!   (`cortex_unit_dot`, once per distinct embedding, see [`crate::tie_break`]), 1-based,
//!   ties by insertion sequence (in HNSW mode, which is approximate anyway, by `<=>`
//!   alone);
//! - lexical: `bm25_term_score(bm25_idf(N, df), tf, dl, total_len / N)` per matched
//!   (memory, term), with df from the `terms` table the postings' triggers keep, summed in
//!   the query terms' order (byte order, see [`summed_in_order`]), only memories with a
//!   query term, ranked by score then sequence (a one-term query reads only the postings
//!   that can reach the pool, in impact order, see [`impact_ordered`]; when the rarest of
//!   several terms carries the pool, only its postings that can reach it are read, the
//!   same way, and the others looked up for those, in stages, see [`rarest_first`];
//!   otherwise several terms prune the commonest lists where they cannot change the pool,
//!   see [`maxscore`]);
//! - fusion: `1 / (RRF_K + dense_rank)` then `+ 1 / (RRF_K + lexical_rank)`, plus
//!   `NEIGHBOUR_WEIGHT` times the larger of the two neighbouring live memories' fused
//!   scores (by sequence; 0 when not fused), ordered by score then sequence, the best
//!   `top_k`.

use cortex_core::hybrid::{NEIGHBOUR_WEIGHT, RRF_K, ScoredMemory, candidate_pool};
use cortex_core::index::{BM25_B, BM25_K1};
use cortex_core::{Memory, StoreError};
use pgvector::Vector;
use sea_query::{
    Asterisk, CommonTableExpression, Expr, ExprTrait, JoinType, Order, Query, SelectStatement,
    WithClause,
};
use tokio_postgres::Row;

use crate::codec::{memory_at, memory_columns};
use crate::dense::{
    DensePlan, candidate_margin, hnsw_candidates, indexed_expression, query_expression,
};
use crate::lexical_paths::{LexicalPath, RarestFirstLookups};
use crate::schema::Names;
use crate::sql::{Built, build, get};

/// How the BM25 side of several terms prunes (see [`crate::PostgresConfig`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pruning {
    /// `prune_budget`.
    pub budget: u64,
    /// `lookup_cost`.
    pub lookup_cost: u64,
}

/// One side's result, which the fused statement reads: the best `pool` memories' sequence
/// numbers and their 1-based ranks, best first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Ranked {
    pub seqs: Vec<i64>,
    pub ranks: Vec<i64>,
}

impl Ranked {
    /// A [`lexical`] or [`dense`] statement's first two columns.
    fn decode(row: &Row) -> Result<Self, StoreError> {
        Ok(Self {
            seqs: get(row, 0)?,
            ranks: get(row, 1)?,
        })
    }
}

/// Where the fused statement's dense ranks come from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum DenseSide<'a> {
    /// Searched by the fused statement itself. `unit_query` is the query embedding scaled
    /// to unit length by the core (`normalized`).
    Inline {
        plan: DensePlan,
        unit_query: &'a [f32],
    },
    /// Already ranked by the [`dense`] statement in the same snapshot.
    Ranked(&'a Ranked),
}

/// The BM25 side of one query (`terms`, in their given order; none: no statement), as one
/// statement returning one row: the ranked memories as two arrays (see [`Ranked`]) and
/// the path it took (see [`decode_lexical`]).
///
/// Its text depends only on the number of terms, `top_k` and the pruning settings, and
/// every value in it is bound, so the store runs it with a generic plan, planned once per
/// connection: planning it per search cost as much as executing the median search's BM25
/// side (docs/BENCHMARKS.md). Its shape does not hinge on estimates: every term's postings
/// are read through the index by laterals, correlated lookups or full joins of one term's
/// list with another's.
pub(crate) fn lexical(
    names: &Names,
    user: &str,
    terms: &[String],
    top_k: usize,
    pruning: Pruning,
) -> Option<Built> {
    let Pruning {
        budget,
        lookup_cost,
    } = pruning;
    let budget = i64::try_from(budget).unwrap_or(i64::MAX);
    let pool = candidate_pool(top_k);
    let k = terms.len();
    let mut with = WithClause::new();
    // By the number of query terms: one (read in impact order) or several (rarest-first,
    // MaxScore).
    let none = || Expr::cust("0::int8");
    let (path, candidates, looked_up) = match k {
        0 => return None,
        1 => {
            term_statistics(&mut with, names, user, terms);
            impact_ordered(&mut with, names, user, &terms[0], pool);
            cte(&mut with, "lexical", ranked("i_cand", pool));
            (
                Expr::cust(LexicalPath::Impact.code().to_string()),
                none(),
                none(),
            )
        }
        _ => {
            term_statistics(&mut with, names, user, terms);
            let path = match (k, budget > 0) {
                (2, true) => two_terms(&mut with, names, user, terms, pool, budget, lookup_cost),
                _ => maxscore(&mut with, names, user, terms, pool, budget, lookup_cost),
            };
            cte(&mut with, "lexical", ranked("l_scored", pool));
            // Counted only where the lookups ran: the candidates are then read anyway.
            let count = |cte: &str| {
                Expr::cust(format!(
                    "CASE WHEN {R_LOOKUP} THEN (SELECT count(*) FROM {cte}) ELSE 0 END"
                ))
            };
            match budget > 0 {
                true => (path, count("r_cand"), count("r_scored")),
                false => (path, none(), none()),
            }
        }
    };
    let mut select = Query::select();
    select
        .expr_as(
            Expr::cust("COALESCE(array_agg(seq ORDER BY rnk), '{}'::int8[])"),
            "seqs",
        )
        .expr_as(
            Expr::cust("COALESCE(array_agg(rnk ORDER BY rnk), '{}'::int8[])"),
            "ranks",
        )
        .expr_as(path, "lexical_path")
        .expr_as(candidates, "r_candidates")
        .expr_as(looked_up, "r_looked_up")
        .from("lexical")
        .with_cte(with);
    Some(build(&select))
}

/// The [`lexical`] statement's row.
pub(crate) fn decode_lexical(
    row: &Row,
) -> Result<(Ranked, LexicalPath, RarestFirstLookups), StoreError> {
    let count = |i: usize| -> Result<u64, StoreError> {
        let n: i64 = get(row, i)?;
        u64::try_from(n).map_err(|_| StoreError::Corrupt(format!("lookup count {n}")))
    };
    Ok((
        Ranked::decode(row)?,
        LexicalPath::from_code(get(row, 2)?)?,
        RarestFirstLookups {
            candidates: count(3)?,
            looked_up: count(4)?,
        },
    ))
}

/// The dense side of one query alone, as one statement returning one row: the ranked
/// memories as two arrays (see [`Ranked`]), for a search that runs it beside the BM25
/// statement on a second connection. `unit_query` is the query embedding scaled to unit
/// length by the core (`normalized`). Planned per search: its best plan depends on the
/// user's size and on the query vector (see the store's `run_search`).
pub(crate) fn dense(
    names: &Names,
    plan: DensePlan,
    user: &str,
    unit_query: &[f32],
    top_k: usize,
) -> Built {
    let mut with = WithClause::new();
    dense_ranks(&mut with, names, plan, user, unit_query, top_k);
    let mut select = Query::select();
    select
        .expr_as(
            Expr::cust("COALESCE(array_agg(seq ORDER BY rnk), '{}'::int8[])"),
            "seqs",
        )
        .expr_as(
            Expr::cust("COALESCE(array_agg(rnk ORDER BY rnk), '{}'::int8[])"),
            "ranks",
        )
        .from("dense")
        .with_cte(with);
    build(&select)
}

/// The [`dense`] statement's row.
pub(crate) fn decode_dense(row: &Row) -> Result<Ranked, StoreError> {
    Ranked::decode(row)
}

/// The `dense` CTE (seq, rnk): the best `pool` dense candidates, ranked.
fn dense_ranks(
    with: &mut WithClause,
    names: &Names,
    plan: DensePlan,
    user: &str,
    unit_query: &[f32],
    top_k: usize,
) {
    let pool = candidate_pool(top_k);
    let query = Vector::from(unit_query.to_vec());
    let memories = || names.table("memories");
    match plan {
        DensePlan::Exact => exact_dense(with, names, user, &query, pool),
        DensePlan::Hnsw { dimension } => {
            // The shape the index serves: ORDER BY <indexed expression> <=> $q LIMIT n.
            // The distance kept is the full-precision one (the index is halfvec).
            let order = format!(
                "{} <=> {}",
                indexed_expression("m.", dimension),
                query_expression(dimension)
            );
            cte(
                with,
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
            // Approximate by configuration: ranked by pgvector's own distance, ties by
            // insertion. Re-scoring near-ties with the core's arithmetic (as exact mode
            // does) cost half of a dense search at 100k and only reorders memories whose
            // distances agree to float rounding, far finer than the index's own error.
            cte(
                with,
                "dense",
                Query::select()
                    .column("seq")
                    .expr_as(Expr::cust("row_number() OVER (ORDER BY dist, seq)"), "rnk")
                    .from_subquery(
                        Query::select()
                            .columns(["seq", "dist"])
                            .from("d_cand")
                            .order_by("dist", Order::Asc)
                            .order_by("seq", Order::Asc)
                            .limit(sql_count(pool))
                            .to_owned(),
                        "b",
                    )
                    .to_owned(),
            );
        }
    }
}

/// The `seq, rnk` rows of a side already ranked (see [`Ranked`]).
fn unnested(ranked: &Ranked) -> SelectStatement {
    Query::select()
        .expr_as(
            Expr::cust_with_values("unnest($1::int8[])", [ranked.seqs.clone()]),
            "seq",
        )
        .expr_as(
            Expr::cust_with_values("unnest($1::int8[])", [ranked.ranks.clone()]),
            "rnk",
        )
        .to_owned()
}

/// The fused statement for one query: the dense side's ranks (`dense`: searched here, or
/// from the [`dense`] statement), fused with the BM25 side's (`lexical`, from the
/// [`lexical`] statement; both in the same snapshot), and the best `top_k` memories read.
/// Planned per search when it searches the dense side (see the store's `run_search`).
pub(crate) fn fused(
    names: &Names,
    user: &str,
    top_k: usize,
    dense: DenseSide<'_>,
    lexical: &Ranked,
) -> Built {
    let memories = || names.table("memories");
    let mut with = WithClause::new();
    match dense {
        DenseSide::Inline { plan, unit_query } => {
            dense_ranks(&mut with, names, plan, user, unit_query, top_k)
        }
        DenseSide::Ranked(ranked) => cte(&mut with, "dense", unnested(ranked)),
    }

    // The BM25 side's ranks.
    cte(&mut with, "lexical", unnested(lexical));

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

    // Each candidate adds NEIGHBOUR_WEIGHT times the better RRF score of the user's live
    // memories written just before and just after it (zero for one that is no
    // candidate), as the core adds it. The neighbours are two index lookups on
    // (user_id, seq) of live memories per fused row; their scores are joined back.
    let memories_table = names.q("memories");
    let neighbour = |cmp: &str, order: &str| {
        format!(
            "(SELECT m.seq FROM {memories_table} m WHERE m.user_id = $1 AND NOT m.superseded \
              AND m.seq {cmp} f.seq ORDER BY m.seq {order} LIMIT 1)"
        )
    };
    cte(
        &mut with,
        "around",
        Query::select()
            .columns(["seq", "d_rank", "l_rank", "score"])
            .expr_as(
                Expr::cust_with_values(neighbour("<", "DESC"), [user]),
                "prev",
            )
            .expr_as(
                Expr::cust_with_values(neighbour(">", "ASC"), [user]),
                "next",
            )
            .from_as("fused", "f")
            .to_owned(),
    );
    cte(
        &mut with,
        "smoothed",
        Query::select()
            .columns([("a", "seq"), ("a", "d_rank"), ("a", "l_rank")])
            .expr_as(
                Expr::cust_with_values(
                    "a.score + $1::float8 * GREATEST(COALESCE(p.score, 0::float8), \
                     COALESCE(x.score, 0::float8))",
                    [NEIGHBOUR_WEIGHT],
                ),
                "score",
            )
            .from_as("around", "a")
            .join_as(
                JoinType::LeftJoin,
                "fused",
                "p",
                Expr::col(("p", "seq")).equals(("a", "prev")),
            )
            .join_as(
                JoinType::LeftJoin,
                "fused",
                "x",
                Expr::col(("x", "seq")).equals(("a", "next")),
            )
            .to_owned(),
    );

    // The best `top_k`, before any memory is read: the fused rows are up to twice the
    // pool, and only these are returned (every fused row is a live memory's).
    cte(
        &mut with,
        "top",
        Query::select()
            .columns(["seq", "d_rank", "l_rank", "score"])
            .from("smoothed")
            .order_by("score", Order::Desc)
            .order_by("seq", Order::Asc)
            .limit(sql_count(top_k))
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
        .from_as("top", "f")
        .join_as(
            JoinType::InnerJoin,
            memories(),
            "m",
            Expr::col(("m", "seq")).equals(("f", "seq")),
        )
        .order_by(("f", "score"), Order::Desc)
        .order_by(("f", "seq"), Order::Asc)
        .with_cte(with);
    build(&select)
}

/// The query terms (`q_terms`: term, ord), the user's BM25 statistics (`stats`) and each
/// term's idf and score bound (`l_idf`).
fn term_statistics(with: &mut WithClause, names: &Names, user: &str, terms: &[String]) {
    let ordinals: Vec<i64> = (1..=terms.len() as i64).collect();
    cte(
        with,
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
        with,
        "stats",
        Query::select()
            .expr_as(Expr::cust("s.doc_count::float8"), "n")
            .expr_as(
                Expr::cust("s.total_len::float8 / s.doc_count::float8"),
                "avgdl",
            )
            // For the pruned terms' lookups, which read these instead of binding them again.
            .expr_as(Expr::cust("s.user_id"), "uid")
            .expr_as(
                Expr::cust_with_values("$1::float8", [BM25_PARAMS[0]]),
                "k1p1",
            )
            .expr_as(Expr::cust_with_values("$1::float8", [BM25_PARAMS[1]]), "k1")
            .expr_as(
                Expr::cust_with_values("$1::float8", [BM25_PARAMS[2]]),
                "omb",
            )
            .expr_as(Expr::cust_with_values("$1::float8", [BM25_PARAMS[3]]), "b")
            .from_as(names.table("users"), "s")
            .and_where(Expr::col(("s", "user_id")).eq(user))
            .and_where(Expr::cust("s.doc_count > 0"))
            .to_owned(),
    );
    cte(
        with,
        "l_idf",
        Query::select()
            .column(("q", "term"))
            .column(("q", "ord"))
            .column(("t", "df"))
            .column(("t", "max_tf"))
            // bm25_idf: ln(1 + (N - df + 0.5) / (df + 0.5)), df kept by the postings'
            // triggers (a term no live memory holds has no row).
            .expr_as(Expr::cust(IDF), "idf")
            .expr_as(Expr::cust(term_bound(names)), "ub")
            .from_as("q_terms", "q")
            .join_as(
                JoinType::InnerJoin,
                names.table("terms"),
                "t",
                Expr::cust_with_values("t.user_id = $1 AND t.term = q.term AND t.df > 0", [user]),
            )
            .join_as(JoinType::InnerJoin, "stats", "s", Expr::cust("true"))
            .to_owned(),
    );
}

/// Up to which tf [`term_bound`] reads each tf's shortest memory.
const BOUND_TFS: i32 = 32;

/// The largest score any posting of a term (`t`, over `stats` as `s`) can have. The score
/// rises with tf and falls with length, so up to [`BOUND_TFS`] it is the largest, over the
/// tfs, of the score at that tf's shortest memory: one read of the impact index per tf.
/// Above, a memory holding the term tf times is at least tf long, so `max_tf` at that
/// length (or the term's shortest, if longer) bounds every larger tf. The bound before,
/// `max_tf` in `min_len`, is often no posting at all: a common word's largest tf is
/// rarely in its shortest memory, and the looser the bound, the more candidates a pruned
/// search must look up.
fn term_bound(names: &Names) -> String {
    let saturation = |tf: &str, len: &str| {
        format!(
            "{tf}::float8 * s.k1p1 / ({tf}::float8 + s.k1 * (s.omb + s.b * {len}::float8 \
             / s.avgdl))"
        )
    };
    // Reading no posting at all (impossible within one snapshot: `max_tf` has one) would
    // leave NULL: then the looser bound.
    format!(
        "({IDF}) * COALESCE(GREATEST(\
         CASE WHEN t.max_tf > {BOUND_TFS} THEN {above} END, \
         (SELECT max({exact}) FROM generate_series(1, LEAST(t.max_tf, {BOUND_TFS})) g(tf))), \
         {loose})",
        above = saturation(
            "t.max_tf",
            &format!("GREATEST(t.min_len, {})", BOUND_TFS + 1)
        ),
        exact = saturation(
            "g.tf",
            &format!(
                "(SELECT min(p.doc_len) FROM {postings} p WHERE p.user_id = s.uid \
                 AND p.term = t.term AND p.tf = g.tf)",
                postings = names.q("postings"),
            ),
        ),
        loose = saturation("t.max_tf", "t.min_len"),
    )
}

/// The query terms from the rarest (`l_split`): each with its postings so far (`cum`),
/// every term's (`all_df`), and the widened bounds of it and every commoner term
/// (`tail`).
fn split(with: &mut WithClause) {
    cte(
        with,
        "l_split",
        Query::select()
            .columns(["term", "ord", "idf", "ub", "max_tf"])
            .expr_as(Expr::cust("(sum(df) OVER (ORDER BY df, ord))::int8"), "cum")
            .expr_as(Expr::cust("(sum(df) OVER ())::int8"), "all_df")
            .expr_as(
                Expr::cust_with_values(
                    "sum(ub) OVER (ORDER BY df, ord ROWS BETWEEN CURRENT ROW AND UNBOUNDED \
                     FOLLOWING) * $1::float8 + $2::float8",
                    [1.0 + BOUND_SLACK, BOUND_SLACK],
                ),
                "tail",
            )
            .from("l_idf")
            .to_owned(),
    );
}

/// Two terms: the rarest-first path when the rarer term carries the pool, else every
/// posting of both (with two terms there is nothing else to prune: a pruned term needs
/// the other to carry the pool, which is the rarest-first condition).
fn two_terms(
    with: &mut WithClause,
    names: &Names,
    user: &str,
    terms: &[String],
    pool: usize,
    budget: i64,
    lookup_cost: u64,
) -> Expr {
    split(with);
    rarest_first(with, names, user, terms.len(), pool, lookup_cost);
    cte(
        with,
        "l_full",
        Query::select()
            .column(Asterisk)
            .from("l_idf")
            .and_where(Expr::cust(format!("NOT {R_LOOKUP}")))
            .to_owned(),
    );
    let mut scored = Query::select();
    scored
        .column("seq")
        .expr_as(Expr::col("partial"), "score")
        .from_subquery(every_posting(names, user, "l_full", terms, "true"), "a")
        .union(
            sea_query::UnionType::All,
            Query::select()
                .columns(["seq", "score"])
                .from("r_scored")
                .to_owned(),
        );
    cte(with, "l_scored", scored);
    Expr::cust_with_values(
        format!(
            "CASE WHEN {R_LOOKUP} THEN {rarest} \
             WHEN (SELECT max(cum) FROM l_split) <= $1::int8 THEN {once} ELSE {full} END",
            rarest = LexicalPath::RarestFirst.code(),
            once = LexicalPath::Once.code(),
            full = LexicalPath::Full.code(),
        ),
        [budget],
    )
}

/// The BM25 side of a query of three terms or more, or of two with pruning off
/// (`l_scored`: seq, score), pruned where
/// it can be (rarest-first first, when the budget allows pruning at all); returns the
/// expression naming the path it took.
fn maxscore(
    with: &mut WithClause,
    names: &Names,
    user: &str,
    terms: &[String],
    pool: usize,
    budget: i64,
    lookup_cost: u64,
) -> Expr {
    let k = terms.len();
    // Pruning (MaxScore). The rarest terms, up to the budget's postings in all, are
    // scored first, alone (`c_part`); the pool-th best of those partial scores (`c_cut`)
    // is a floor under the pool-th best full score, since adding terms only raises a
    // score. Walking the terms from the rarest, a term stays essential while the bounds
    // of it and every commoner term (`tail`) could still reach that floor; the terms past
    // that point are pruned: a memory holding only those scores below the floor and
    // cannot enter the pool. The candidates are the memories holding an essential term
    // whose partial score plus the pruned terms' bounds (`rest`) reaches the floor; they
    // are scored in full, the pruned terms by key lookups. When no term can be pruned every
    // posting of every term is scored, as without pruning. Either way the pool is
    // exactly the one scoring everything gives.
    split(with);
    // A budget of 0 turns every pruning off, this one too.
    let rarest = budget > 0;
    if rarest {
        rarest_first(with, names, user, k, pool, lookup_cost);
    }
    let r_ok = if rarest { R_OK } else { "false" };
    let r_lookup = if rarest { R_LOOKUP } else { "false" };
    // Every term within the budget: `c_part` already holds the full scores.
    cte(
        with,
        "l_once",
        Query::select()
            .expr_as(
                Expr::cust_with_values("COALESCE(max(cum), 0) <= $1::int8", [budget]),
                "once",
            )
            .from("l_split")
            .to_owned(),
    );
    let within_budget = format!("e.cum <= {budget}::int8 AND NOT {r_ok}");
    let c_part = match k {
        1..=MAX_UNROLLED_TERMS => {
            let mut select = every_posting(names, user, "l_split", terms, &within_budget);
            per_term_columns(&mut select, k, |i| format!("s{i}.v"));
            select
        }
        _ => per_term_columns(Query::select().column("seq"), k, |i| {
            format!("max(v) FILTER (WHERE ord = {i})")
        })
        .expr_as(Expr::cust(summed_in_order(k)), "partial")
        .from_subquery(
            term_scores(names, user, "l_split", "e")
                .and_where(Expr::cust(within_budget.clone()))
                .to_owned(),
            "c",
        )
        .group_by_col("seq")
        .to_owned(),
    };
    cte(with, "c_part", c_part);
    cte(
        with,
        "c_cut",
        Query::select()
            .expr_as(Expr::col("partial"), "cut")
            .from("c_part")
            .order_by("partial", Order::Desc)
            .limit(1)
            .offset(sql_count(pool) - 1)
            .to_owned(),
    );
    cte(
        with,
        "l_ess",
        Query::select()
            .columns(["term", "ord", "idf", "cum", "tail", "all_df"])
            .expr_as(
                Expr::cust_with_values(
                    "cum <= $1::int8 OR COALESCE(tail >= (SELECT cut FROM c_cut), true)",
                    [budget],
                ),
                "essential",
            )
            .from("l_split")
            .to_owned(),
    );
    // One row when some term is pruned: the floor and the pruned terms' summed bounds
    // (the largest tail among them: the tail of the first), how many they are and how
    // many postings a full scan would read.
    cte(
        with,
        "gate",
        Query::select()
            .column(("c", "cut"))
            .column(("r", "rest"))
            .column(("r", "n_pruned"))
            .column(("r", "all_df"))
            .expr_as(Expr::cust("c.cut > r.rest"), "ok")
            .from_as("c_cut", "c")
            .join_subquery(
                JoinType::InnerJoin,
                Query::select()
                    .expr_as(Expr::cust("max(tail)"), "rest")
                    .expr_as(Expr::cust("count(*)"), "n_pruned")
                    .expr_as(Expr::cust("max(all_df)"), "all_df")
                    .from("l_ess")
                    .and_where(Expr::cust("NOT essential"))
                    .to_owned(),
                "r",
                Expr::cust("r.rest IS NOT NULL"),
            )
            .to_owned(),
    );
    let pruned = "COALESCE((SELECT ok FROM gate), false)";
    // The memories holding an essential term (those scored in `c_part`, and the ones the
    // essential terms past the budget add, scanned only when pruning) that could reach the
    // floor, with each essential term's score and their sum. Their pool-th best sum is a
    // higher floor still (`c_cut2`), which leaves fewer to score in full.
    let mut e2 = Query::select();
    e2.column("seq");
    let e2 = per_term_columns(&mut e2, k, |i| format!("CASE WHEN ord = {i} THEN v END"))
        .from_subquery(
            term_scores(names, user, "l_ess", "e")
                .and_where(Expr::cust_with_values(
                    "e.essential AND e.cum > $1::int8",
                    [budget],
                ))
                .and_where(Expr::cust(pruned))
                .to_owned(),
            "m",
        )
        .to_owned();
    let mut c1 = Query::select();
    c1.column("seq");
    let c1 = per_term_columns(&mut c1, k, |i| format!("v{i}"))
        .from("c_part")
        .union(sea_query::UnionType::All, e2)
        .to_owned();
    let ess_sum = fold((1..=k).map(|i| format!("max(x.v{i})")));
    cte(
        with,
        "c_ess",
        per_term_columns(Query::select().column(("x", "seq")), k, |i| {
            format!("max(x.v{i})")
        })
        .expr_as(Expr::cust(ess_sum.clone()), "partial")
        .from_subquery(c1, "x")
        .and_where(Expr::cust(pruned))
        .group_by_col(("x", "seq"))
        .and_having(Expr::cust(format!(
            "{ess_sum} + (SELECT rest FROM gate) >= (SELECT cut FROM gate)"
        )))
        .to_owned(),
    );
    cte(
        with,
        "c_cut2",
        Query::select()
            .expr_as(Expr::col("partial"), "cut")
            .from("c_ess")
            .order_by("partial", Order::Desc)
            .limit(1)
            .offset(sql_count(pool) - 1)
            .to_owned(),
    );
    // Whether the survivors are scored by key lookups (the pruned path) or every posting
    // is scanned after all: a lookup costs several postings' scan, and when the pruned
    // terms' bounds are high beside the floor nearly every memory holding an essential
    // term survives.
    cte(
        with,
        "l_mode",
        Query::select()
            .expr_as(
                Expr::cust(format!(
                    "g.ok AND (SELECT count(*) FROM c_ess c WHERE c.partial + g.rest \
                     >= (SELECT cut FROM c_cut2))::float8 * g.n_pruned::float8 \
                     * {lookup_cost}::float8 <= g.all_df::float8"
                )),
                "lookup",
            )
            .from_as("gate", "g")
            .to_owned(),
    );
    let scored_by_lookups = LOOKED_UP;
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
    cte(with, "l_row", row.from("l_ess").to_owned());
    // The survivors' full scores: each essential term's score is known; a pruned term's
    // comes from a key lookup (only for the pruned terms, and only where it is missing).
    // Added in the query terms' order, as the core does.
    let looked_up = |i: usize| {
        // term_score's arithmetic, with k1 + 1, k1, 1 - b and b from `stats`.
        format!(
            "COALESCE(c.v{i}, CASE WHEN r.pr{i} THEN (SELECT r.idf{i} * (p.tf::float8 \
             * s.k1p1 / (p.tf::float8 + s.k1 * (s.omb + s.b * p.doc_len::float8 / s.avgdl))) \
             FROM {postings} p \
             WHERE p.user_id = s.uid AND p.seq = c.seq AND p.term = r.term{i}) END)",
            postings = names.q("postings"),
        )
    };
    cte(
        with,
        "l_pruned",
        Query::select()
            .column(("c", "seq"))
            .expr_as(Expr::cust(fold((1..=k).map(looked_up))), "score")
            .from_as("c_ess", "c")
            .cross_join(sea_query::TableRef::from("l_row").alias("r"))
            .cross_join(sea_query::TableRef::from("stats").alias("s"))
            .and_where(Expr::cust(
                "c.partial + (SELECT rest FROM gate) >= (SELECT cut FROM c_cut2)",
            ))
            .and_where(Expr::cust(scored_by_lookups))
            .to_owned(),
    );
    // Not pruned and not within the budget: every posting of every term can matter. The
    // terms to scan in full, decided once (each scan reads them as a join, not a
    // subquery: cheaper to plan).
    cte(
        with,
        "l_full",
        Query::select()
            .column(Asterisk)
            .from("l_idf")
            .and_where(Expr::cust(format!(
                "CASE WHEN {r_ok} THEN NOT {r_lookup} \
                 ELSE NOT {scored_by_lookups} AND NOT {ONCE} END"
            )))
            .to_owned(),
    );
    let mut unpruned = match k {
        ..=MAX_UNROLLED_TERMS => Query::select()
            .column("seq")
            .expr_as(Expr::col("partial"), "score")
            .from_subquery(every_posting(names, user, "l_full", terms, "true"), "a")
            .to_owned(),
        _ => Query::select()
            .column("seq")
            .expr_as(Expr::cust(summed_in_order(k)), "score")
            .from_subquery(term_scores(names, user, "l_full", "i"), "x")
            .group_by_col("seq")
            .to_owned(),
    };
    unpruned
        .union(
            sea_query::UnionType::All,
            Query::select()
                .column("seq")
                .expr_as(Expr::col("partial"), "score")
                .from("c_part")
                .and_where(Expr::cust(ONCE))
                .to_owned(),
        )
        .union(
            sea_query::UnionType::All,
            Query::select()
                .columns(["seq", "score"])
                .from("l_pruned")
                .to_owned(),
        );
    if rarest {
        unpruned.union(
            sea_query::UnionType::All,
            Query::select()
                .columns(["seq", "score"])
                .from("r_scored")
                .to_owned(),
        );
    }
    cte(with, "l_scored", unpruned);
    Expr::cust_with_values(
        format!(
            "CASE WHEN {r_ok} THEN CASE WHEN {r_lookup} THEN {rarest_code} ELSE {full} END \
             WHEN {ONCE} THEN {once} WHEN {scored_by_lookups} THEN \
             CASE WHEN EXISTS (SELECT 1 FROM l_ess WHERE essential AND cum > $1::int8) \
             THEN {extended} ELSE {pruned_code} END ELSE {full} END",
            rarest_code = LexicalPath::RarestFirst.code(),
            once = LexicalPath::Once.code(),
            extended = LexicalPath::PrunedExtended.code(),
            pruned_code = LexicalPath::Pruned.code(),
            full = LexicalPath::Full.code(),
        ),
        [budget],
    )
}

/// Whether the rarest-first path applies (see [`rarest_first`]).
const R_OK: &str = "COALESCE((SELECT ok FROM r_gate), false)";

/// Whether the rarest-first path scores its candidates by lookups (else it scans every
/// posting).
const R_LOOKUP: &str = "COALESCE((SELECT lookup FROM r_mode), false)";

/// The rarest query term carries the pool when its own pool-th best score (`cut`) beats
/// the summed bounds of every other term (`rest`): a memory without it, or with a score
/// for it below `cut - rest`, scores below `cut`, which the pool-th best full score is at
/// least. So the candidates are that term's postings scoring `cut - rest` or more, read in
/// impact order as a one-term search reads its pool (see [`impact_ordered`]), and the
/// other terms are looked up for them alone (`r_scored`: seq, score), best candidates
/// first, in stages whose full scores raise the floor for the next (see [`FIRST_STAGE`]).
/// `MaxScore` would scan every posting of the rare term to find the same candidates. When
/// the lookups would cost more than a full scan (`r_mode`), every posting is scanned
/// instead.
fn rarest_first(
    with: &mut WithClause,
    names: &Names,
    user: &str,
    k: usize,
    pool: usize,
    lookup_cost: u64,
) {
    // The rarest term, with the others' summed bounds (the next term's tail; none: 0).
    cte(
        with,
        "r_term",
        Query::select()
            .columns(["term", "ord", "idf", "max_tf"])
            .expr_as(
                Expr::cust("COALESCE(lead(tail) OVER (ORDER BY cum), 0::float8)"),
                "rest",
            )
            .expr_as(Expr::cust("all_df"), "all_df")
            .from("l_split")
            .order_by("cum", Order::Asc)
            .limit(1)
            .to_owned(),
    );
    cte(
        with,
        "r_seed",
        impact_scan(names, user, "r_term", None, None, None, pool),
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
    cte(with, "r_row", row.from("l_idf").to_owned());
    // A memory's full score (`c`: seq, score of the rare term): the rare term's score is
    // its own; every other term's comes from a key lookup (none for a term no memory
    // holds). Added in the query terms' order.
    let score = |i: usize| {
        format!(
            "CASE WHEN e.ord = {i} THEN c.score WHEN r.term{i} IS NOT NULL THEN \
             (SELECT r.idf{i} * (p.tf::float8 * s.k1p1 / (p.tf::float8 + s.k1 * (s.omb \
             + s.b * p.doc_len::float8 / s.avgdl))) FROM {postings} p \
             WHERE p.user_id = s.uid AND p.seq = c.seq AND p.term = r.term{i}) END",
            postings = names.q("postings"),
        )
    };
    let full_score = fold((1..=k).map(score));
    let scored = |source: SelectStatement| {
        Query::select()
            .column(("c", "seq"))
            .expr_as(Expr::cust(full_score.clone()), "score")
            .from_subquery(source, "c")
            .cross_join(sea_query::TableRef::from("r_term").alias("e"))
            .cross_join(sea_query::TableRef::from("r_row").alias("r"))
            .cross_join(sea_query::TableRef::from("stats").alias("s"))
            .to_owned()
    };
    cte(
        with,
        "r_gate",
        Query::select()
            .expr_as(Expr::cust("f.score"), "cut")
            .expr_as(Expr::cust("e.rest"), "rest")
            .expr_as(Expr::cust("f.score > e.rest"), "ok")
            .from_subquery(
                Query::select()
                    .column("score")
                    .from("r_seed")
                    .order_by("score", Order::Desc)
                    .limit(1)
                    .offset(sql_count(pool) - 1)
                    .to_owned(),
                "f",
            )
            .cross_join(sea_query::TableRef::from("r_term").alias("e"))
            .to_owned(),
    );
    cte(
        with,
        "r_cand",
        impact_scan(
            names,
            user,
            "r_term",
            None,
            Some("(SELECT cut - rest FROM r_gate)"),
            Some(R_OK),
            pool,
        ),
    );
    // Counting stops one past the most candidates whose lookups would pay: when there are
    // more, the rest of the list is never read.
    let others = k - 1;
    let pays = match lookup_cost {
        0 => "g.ok".to_owned(),
        cost => format!(
            "g.ok AND (SELECT count(*) FROM (SELECT 1 FROM r_cand LIMIT (SELECT \
             floor(t.all_df::float8 / ({others}::float8 * {cost}::float8))::int8 + 1 \
             FROM r_term t)) z)::float8 * {others}::float8 * {cost}::float8 \
             <= e.all_df::float8"
        ),
    };
    cte(
        with,
        "r_mode",
        Query::select()
            .expr_as(Expr::cust(pays), "lookup")
            .from_as("r_gate", "g")
            .cross_join(sea_query::TableRef::from("r_term").alias("e"))
            .to_owned(),
    );
    // The lookups in stages, best candidates first: each stage's full scores raise the
    // floor under the pool-th best full score (adding terms only raises a score), so the
    // next stage reads only the candidates whose score for the rare term plus the others'
    // bounds still reaches it. The floor from the rare term alone is low when the others'
    // bounds are large beside its spread of scores: then nearly every posting of it is a
    // candidate, though few can reach the pool once a few hundred are scored in full.
    let (first, second) = (
        pool.saturating_mul(FIRST_STAGE),
        pool.saturating_mul(SECOND_STAGE),
    );
    // The stages split the candidates by score: the first holds the best `first` (and
    // their ties), the second the next `second`; no such score: the stages before hold
    // every candidate. Two top-N heaps over the candidates, not a sort of all of them.
    let nth_best = |n: usize| {
        Expr::cust(format!(
            "(SELECT score FROM r_cand ORDER BY score DESC LIMIT 1 OFFSET {})",
            sql_count(n) - 1
        ))
    };
    cte(
        with,
        "r_edges",
        Query::select()
            .expr_as(nth_best(first), "e1")
            .expr_as(nth_best(first.saturating_add(second)), "e2")
            .and_where(Expr::cust(R_LOOKUP))
            .to_owned(),
    );
    let (edge1, edge2) = ("(SELECT e1 FROM r_edges)", "(SELECT e2 FROM r_edges)");
    // Kept: at least `floor - rest` (and, as every candidate, `cut - rest`).
    let reaches = |floor: &str| {
        format!("score >= COALESCE({floor} - (SELECT rest FROM r_term), '-Infinity'::float8)")
    };
    // The pool-th best full score the stages so far have found (none: fewer than a pool).
    let floor_of = |stages: &[&str]| {
        let scores: Vec<String> = stages
            .iter()
            .map(|stage| format!("SELECT score FROM {stage}"))
            .collect();
        format!(
            "(SELECT u.score FROM ({}) u ORDER BY u.score DESC LIMIT 1 OFFSET {})",
            scores.join(" UNION ALL "),
            sql_count(pool) - 1
        )
    };
    let stage = |condition: String| {
        scored(
            Query::select()
                .columns(["seq", "score"])
                .from("r_cand")
                .and_where(Expr::cust(format!("{R_LOOKUP} AND {condition}")))
                .to_owned(),
        )
    };
    cte(
        with,
        "r_s1",
        stage(format!("score >= COALESCE({edge1}, '-Infinity'::float8)")),
    );
    cte(
        with,
        "r_s2",
        stage(format!(
            "score < {edge1} AND score >= COALESCE({edge2}, '-Infinity'::float8) AND {}",
            reaches(&floor_of(&["r_s1"]))
        )),
    );
    cte(
        with,
        "r_s3",
        stage(format!(
            "score < {edge2} AND {}",
            reaches(&floor_of(&["r_s1", "r_s2"]))
        )),
    );
    let mut staged = Query::select()
        .columns(["seq", "score"])
        .from("r_s1")
        .to_owned();
    for stage in ["r_s2", "r_s3"] {
        staged.union(
            sea_query::UnionType::All,
            Query::select()
                .columns(["seq", "score"])
                .from(stage)
                .to_owned(),
        );
    }
    cte(with, "r_scored", staged);
}

/// The rarest-first lookups' stages, in pools: the best `FIRST_STAGE` pools of candidates,
/// then the next `SECOND_STAGE` that still reach the first stage's floor, then the rest
/// that reach the floor of both. On the bench's 34 rarest-first queries at 100k memories
/// (up to 9,013 candidates each) this looks up 32,827 of 57,885 candidates, up to 5.3x
/// fewer per query; counted offline, that is at most 1.5x the fewest any floor could
/// leave (the final pool's, known in advance), where one stage of 4 or 8 pools left up
/// to 3.8x or 2.0x the fewest.
const FIRST_STAGE: usize = 4;
const SECOND_STAGE: usize = 16;

/// Exact dense ranks as the core computes them: every live memory's pgvector distance, the
/// candidates within [`candidate_margin`] of the pool-th, and each run of near-equal
/// distances re-ordered by the core's own cosine (`cortex_unit_dot`, once per distinct
/// embedding, see [`crate::tie_break`]).
fn exact_dense(with: &mut WithClause, names: &Names, user: &str, query: &Vector, pool: usize) {
    let memories = || names.table("memories");
    let margin = candidate_margin(query.as_slice().len());
    // Every live memory's distance, once (materialised: read twice below).
    cte(
        with,
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
        with,
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
        with,
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
    // Runs of candidates whose consecutive distances lie within the margin: between runs
    // pgvector's order is the core's; within a run of more than one, only the core's own
    // arithmetic can order them (with real-valued embeddings that is almost never; with
    // tied vectors it is every tie).
    crate::tie_break::ranked(with, names, query, margin, sql_count(pool));
}

pub(crate) fn cte(with: &mut WithClause, name: &'static str, select: SelectStatement) {
    with.cte(
        CommonTableExpression::new()
            .query(select)
            .table_name(name)
            .to_owned(),
    );
}

/// Whether every query term was within the prune budget (see `l_once`).
const ONCE: &str = "COALESCE((SELECT once FROM l_once), true)";

/// bm25_idf: ln(1 + (N - df + 0.5) / (df + 0.5)), over `l_idf`'s `t` and `stats`' `s`.
const IDF: &str =
    "ln(1::float8 + (s.n - t.df::float8 + 0.5::float8) / (t.df::float8 + 0.5::float8))";

/// The values of [`term_score`]'s `$1..$4`: k1 + 1, k1, 1 - b, b.
const BM25_PARAMS: [f64; 4] = [BM25_K1 + 1.0, BM25_K1, 1.0 - BM25_B, BM25_B];

/// bm25_term_score of a posting `p` with the term's `idf` (a column):
/// idf * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))), bound to [`BM25_PARAMS`].
fn term_score(idf: &str) -> Expr {
    Expr::cust_with_values(
        format!(
            "{idf} * (p.tf::float8 * $1::float8 / (p.tf::float8 + $2::float8 \
             * ($3::float8 + $4::float8 * p.doc_len::float8 / stats.avgdl)))"
        ),
        BM25_PARAMS,
    )
}

/// Whether the pruned path scores its survivors (see `l_mode`).
const LOOKED_UP: &str = "COALESCE((SELECT lookup FROM l_mode), false)";

/// Relative (and absolute) widening of the bounds, far above float rounding: a looser
/// bound only prunes a little less.
const BOUND_SLACK: f64 = 1e-6;

/// `(seq, ord, v)`: every posting of the terms in `source` (aliased `alias`, with `term`,
/// `ord` and `idf`), with its term score.
fn term_scores(
    names: &Names,
    user: &str,
    source: &'static str,
    alias: &'static str,
) -> SelectStatement {
    Query::select()
        .column(("p", "seq"))
        .expr_as(Expr::col((alias, "ord")), "ord")
        .expr_as(term_score(&format!("{alias}.idf")), "v")
        .from_as(source, alias)
        .join_as(
            JoinType::InnerJoin,
            names.table("postings"),
            "p",
            Expr::cust_with_values(format!("p.user_id = $1 AND p.term = {alias}.term"), [user]),
        )
        .cross_join("stats")
        .to_owned()
}

/// `(seq, v)`: every posting of the query's `ord`-th term (bound as `term`, so the planner
/// sees which term it reads), with its term score, when `guard` holds.
fn one_term_scores(
    names: &Names,
    user: &str,
    source: &'static str,
    term: &str,
    ord: usize,
    guard: &str,
) -> SelectStatement {
    Query::select()
        .column(("p", "seq"))
        .expr_as(term_score("e.idf"), "v")
        .from_as(source, "e")
        .join_as(
            JoinType::InnerJoin,
            names.table("postings"),
            "p",
            Expr::cust_with_values(
                "p.user_id = $1 AND p.term = $2",
                [user.to_owned(), term.to_owned()],
            ),
        )
        .cross_join("stats")
        .and_where(Expr::cust(format!("e.ord = {ord} AND {guard}")))
        .to_owned()
}

/// `(seq, partial)`: every memory holding a query term of `source` (aliased `e`, with
/// `ord`, `idf` and whatever `guard` reads) whose row passes `guard`, with the sum of
/// those terms' scores; each term's own score is `s{ord}.v`. One scan per term,
/// full-joined on the memory: grouping every posting by memory instead (a hash aggregate
/// with one column per term) took three times as long on common terms, and spilled.
fn every_posting(
    names: &Names,
    user: &str,
    source: &'static str,
    terms: &[String],
    guard: &str,
) -> SelectStatement {
    let mut select = Query::select();
    let seqs: Vec<String> = (1..=terms.len()).map(|i| format!("s{i}.seq")).collect();
    select
        .expr_as(Expr::cust(format!("COALESCE({})", seqs.join(", "))), "seq")
        .expr_as(
            Expr::cust(fold((1..=terms.len()).map(|i| format!("s{i}.v")))),
            "partial",
        );
    for (i, term) in terms.iter().enumerate() {
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
fn impact_ordered(with: &mut WithClause, names: &Names, user: &str, term: &str, pool: usize) {
    cte(
        with,
        "i_seed",
        impact_scan(names, user, "l_idf", Some(term), None, None, pool),
    );
    cte(
        with,
        "i_floor",
        Query::select()
            .column("score")
            .from("i_seed")
            .order_by("score", Order::Desc)
            .limit(1)
            .offset(sql_count(pool) - 1)
            .to_owned(),
    );
    cte(
        with,
        "i_cand",
        impact_scan(
            names,
            user,
            "l_idf",
            Some(term),
            Some("(SELECT score FROM i_floor)"),
            None,
            pool,
        ),
    );
}

/// `(seq, score)`: one term's postings in impact order, the term's row in `source` (`e`,
/// with `term`, `idf` and `max_tf`), the term itself bound when known (so the planner
/// sees which term it reads). Without a floor, the first `pool` of each tf (the seeds);
/// with one, per tf every posting short enough to score the floor or more (its length
/// bound solved from the score and widened past rounding; no floor bounds nothing). Read
/// only when `guard` holds.
fn impact_scan(
    names: &Names,
    user: &str,
    source: &'static str,
    term: Option<&str>,
    floor: Option<&str>,
    guard: Option<&str>,
    pool: usize,
) -> SelectStatement {
    let mut scan = Query::select();
    scan.columns([("q", "seq"), ("q", "tf"), ("q", "doc_len")])
        .from_as(names.table("postings"), "q")
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
        // idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)) >= floor, solved
        // for dl, with the floor lowered by far more than rounding. OFFSET 0 keeps the
        // scan a lateral one, an index range per tf: flattened into a join it became a
        // merge join over the term's whole list.
        Some(floor) => scan
            .and_where(Expr::cust(format!(
                "q.doc_len <= LEAST(GREATEST(COALESCE(floor(((e.idf * g.tf::float8 \
                 * stats.k1p1 / ({floor} * {keep}::float8) - g.tf::float8) / stats.k1 \
                 - stats.omb) * stats.avgdl / stats.b) + 1::float8, {max}::float8), \
                 0::float8), {max}::float8)::int4",
                keep = 1.0 - FLOOR_SLACK,
                max = i32::MAX,
            )))
            .offset(0),
        None => scan
            .order_by(("q", "doc_len"), Order::Asc)
            .order_by(("q", "seq"), Order::Asc)
            .limit(sql_count(pool)),
    };
    let mut select = Query::select();
    select
        .column(("p", "seq"))
        .expr_as(term_score("e.idf"), "score")
        .from_as(source, "e")
        .cross_join("stats")
        .join_lateral(
            JoinType::InnerJoin,
            Query::select()
                .expr_as(Expr::cust("generate_series(1, e.max_tf)"), "tf")
                .to_owned(),
            "g",
            Expr::cust("true"),
        )
        .join_lateral(
            JoinType::InnerJoin,
            scan.to_owned(),
            "p",
            Expr::cust("true"),
        );
    if let Some(guard) = guard {
        select.and_where(Expr::cust(guard.to_owned()));
    }
    select
}

/// How far below the seeds' floor the impact-ordered candidates reach: far beyond the few
/// ulps the score and its inversion round by.
const FLOOR_SLACK: f64 = 1e-9;

/// One column `v1`..`v{k}` per query term, `expr(i)` each.
fn per_term_columns(
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
fn fold(scores: impl Iterator<Item = String>) -> String {
    let terms: Vec<String> = scores
        .map(|s| format!("COALESCE({s}, 0::float8)"))
        .collect();
    match terms.is_empty() {
        true => "0::float8".to_owned(),
        false => terms.join(" + "),
    }
}

/// Above this many query terms the per-memory sum is an ordered aggregate instead of one
/// column per term (whose expression grows with the terms).
const MAX_UNROLLED_TERMS: usize = 32;

/// A memory's BM25 score from its `l_terms` rows: the core adds the terms' scores in the
/// query terms' order starting from zero, and float addition is not associative, so the
/// SQL must add in that order too. `sum(v ORDER BY ord)` says so but keeps Postgres from
/// hashing the groups (it sorts every posting by memory, then each group by term); one
/// `max(v) FILTER (WHERE ord = i)` column per term (each memory has at most one row per
/// term) added left to right is the same fold, and hashes. A term the memory lacks adds
/// zero, which changes no sum of non-negative scores.
fn summed_in_order(term_count: usize) -> String {
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
fn ranked(source: &'static str, pool: usize) -> SelectStatement {
    Query::select()
        .column("seq")
        .expr_as(
            Expr::cust("row_number() OVER (ORDER BY score DESC, seq ASC)"),
            "rnk",
        )
        .from_subquery(
            Query::select()
                .columns(["seq", "score"])
                .from(source)
                .order_by("score", Order::Desc)
                .order_by("seq", Order::Asc)
                .limit(sql_count(pool))
                .to_owned(),
            "b",
        )
        .to_owned()
}

fn sql_count(n: usize) -> u64 {
    Ord::max(crate::sql::limit(n), 1)
}

/// One result row of the [`fused`] statement and the user's live count.
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
