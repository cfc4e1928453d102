//! What every BM25 path reads first: the query terms, the user's statistics, each term's
//! idf and the bound on its scores, and (for several terms) the terms from the rarest.

use sea_query::{Expr, ExprTrait, JoinType, Query};

use super::aliases::{As, Col, CteName};
use super::bm25::{BM25_PARAMS, IDF, saturation};
use super::cte::{Cte, Ctes};
use crate::names::Names;
use crate::tables::{Postings, Terms, Users};

/// Relative (and absolute) widening of the bounds, far above float rounding: a looser
/// bound only prunes a little less.
pub(super) const BOUND_SLACK: f64 = 1e-6;

/// Up to which tf [`term_bound`] reads each tf's shortest memory.
const BOUND_TFS: i32 = 32;

/// The CTE [`term_statistics`] adds that the paths read as their terms. (The other,
/// `stats`, is one row every scoring expression reads by that name, see [`super::bm25`].)
#[derive(Debug, Clone, Copy)]
pub(super) struct Statistics {
    /// `l_idf`: the query terms some live memory holds (term, ord, df, max_tf, idf, ub).
    pub terms: Cte,
    /// `q_terms`: every query term (term, ord).
    pub query: Cte,
}

/// The query terms (`q_terms`: term, ord), the user's BM25 statistics (`stats`) and each
/// term's idf and score bound (`l_idf`).
pub(super) fn term_statistics(
    ctes: &mut Ctes,
    names: &Names,
    user: &str,
    terms: &[String],
) -> Statistics {
    let ordinals: Vec<i64> = (1..=terms.len() as i64).collect();
    let q_terms = ctes.add(
        CteName::QTerms,
        Query::select()
            .expr_as(
                Expr::cust_with_values("unnest($1::text[]) COLLATE \"C\"", [terms.to_vec()]),
                Col::Term,
            )
            .expr_as(
                Expr::cust_with_values("unnest($1::int8[])", [ordinals]),
                Col::Ord,
            )
            .to_owned(),
    );
    let param = |i: usize| Expr::cust_with_values("$1::float8", [BM25_PARAMS[i]]);
    let stats = ctes.add(
        CteName::Stats,
        Query::select()
            .expr_as(Expr::cust("s.doc_count::float8"), Col::N)
            .expr_as(
                Expr::cust("s.total_len::float8 / s.doc_count::float8"),
                Col::Avgdl,
            )
            // For the pruned terms' lookups, which read these instead of binding them again.
            .expr_as(Expr::cust("s.user_id"), Col::Uid)
            .expr_as(param(0), Col::K1p1)
            .expr_as(param(1), Col::K1)
            .expr_as(param(2), Col::Omb)
            .expr_as(param(3), Col::B)
            .from_as(names.table(Users::Table), As::S)
            .and_where(Expr::col((As::S, Users::UserId)).eq(user))
            .and_where(Expr::cust("s.doc_count > 0"))
            .to_owned(),
    );
    let terms = ctes.add(
        CteName::LIdf,
        Query::select()
            .column((As::Q, Col::Term))
            .column((As::Q, Col::Ord))
            .column((As::T, Terms::Df))
            .column((As::T, Terms::MaxTf))
            // df kept by the postings' triggers (a term no live memory holds has no row).
            .expr_as(Expr::cust(IDF), Col::Idf)
            .expr_as(Expr::cust(term_bound(names)), Col::Ub)
            .from_as(q_terms.name(), As::Q)
            .join_as(
                JoinType::InnerJoin,
                names.table(Terms::Table),
                As::T,
                Expr::cust_with_values("t.user_id = $1 AND t.term = q.term AND t.df > 0", [user]),
            )
            .join_as(JoinType::InnerJoin, stats.name(), As::S, Expr::cust("true"))
            .to_owned(),
    );
    Statistics {
        terms,
        query: q_terms,
    }
}

/// The largest score any posting of a term (`t`, over `stats` as `s`) can have. The score
/// rises with tf and falls with length, so up to [`BOUND_TFS`] it is the largest, over the
/// tfs, of the score at that tf's shortest memory: one read of the impact index per tf.
/// Above, a memory holding the term tf times is at least tf long, so `max_tf` at that
/// length (or the term's shortest, if longer) bounds every larger tf. The bound before,
/// `max_tf` in `min_len`, is often no posting at all: a common word's largest tf is
/// rarely in its shortest memory, and the looser the bound, the more candidates a pruned
/// search must look up.
fn term_bound(names: &Names) -> String {
    // Reading no posting at all (impossible within one snapshot: `max_tf` has one) would
    // leave NULL: then the looser bound.
    format!(
        "({IDF}) * COALESCE(GREATEST(\
         CASE WHEN t.max_tf > {BOUND_TFS} THEN {above} END, \
         (SELECT max({exact}) FROM generate_series(1, LEAST(t.max_tf, {BOUND_TFS})) g(tf))), \
         {loose})",
        above = saturation(
            "t.max_tf",
            &format!("GREATEST(t.min_len, {})", BOUND_TFS + 1),
            "s"
        ),
        exact = saturation(
            "g.tf",
            &format!(
                "(SELECT min(p.doc_len) FROM {postings} p WHERE p.user_id = s.uid \
                 AND p.term = t.term AND p.tf = g.tf)",
                postings = names.q(Postings::Table),
            ),
            "s"
        ),
        loose = saturation("t.max_tf", "t.min_len", "s"),
    )
}

/// The query terms from the rarest (`l_split`): each with its postings so far (`cum`),
/// every term's (`all_df`), and the widened bounds of it and every commoner term
/// (`tail`).
pub(super) fn split(ctes: &mut Ctes, statistics: Statistics) -> Cte {
    ctes.add(
        CteName::LSplit,
        Query::select()
            .columns([Col::Term, Col::Ord, Col::Idf, Col::Ub, Col::MaxTf])
            .expr_as(
                Expr::cust("(sum(df) OVER (ORDER BY df, ord))::int8"),
                Col::Cum,
            )
            .expr_as(Expr::cust("(sum(df) OVER ())::int8"), Col::AllDf)
            .expr_as(
                Expr::cust_with_values(
                    "sum(ub) OVER (ORDER BY df, ord ROWS BETWEEN CURRENT ROW AND UNBOUNDED \
                     FOLLOWING) * $1::float8 + $2::float8",
                    [1.0 + BOUND_SLACK, BOUND_SLACK],
                ),
                Col::Tail,
            )
            .from(statistics.terms.name())
            .to_owned(),
    )
}
