//! The BM25 side's statement: which path a query takes (impact-ordered, rarest-first or
//! MaxScore, or the grouped scan of a long query) and its one result row.

use cortex_core::fusion::{lexical_bound, lexical_share};
use cortex_core::hybrid::candidate_pool;
use cortex_core::index::bm25_idf;
use cortex_core::{error::StoreError, filter::MemoryFilter};
use sea_query::{Expr, Query};
use tokio_postgres::Row;

use super::Ranked;
use super::aliases::{Col, CteName};
use super::cte::Ctes;
use super::impact::impact_ordered;
use super::lexical_path::{LexicalPath, RarestFirstLookups};
use super::lexical_query::{LexicalQuery, Scored};
use super::maxscore::maxscore;
use super::rarest_first::two_terms;
use super::scores::{filtered_scores, grouped_scores, ranked};
use super::statistics::term_statistics;
use crate::names::Names;
use crate::sql::{Built, build, get_named};

/// How the BM25 side of several terms prunes (see [`crate::PostgresConfig`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pruning {
    /// `prune_budget`.
    pub budget: u64,
    /// `lookup_cost`.
    pub lookup_cost: u64,
}

/// Above this many query terms the BM25 side scores every posting of every term, summed by
/// an ordered aggregate (path [`LexicalPath::Full`]): the pruned paths carry a few columns
/// per term (`l_row` three), and Postgres allows 1,664 in a target list, which a legal
/// query (32 KiB of one-letter terms and numbers) exceeds several times over. Such a query
/// is rare enough that reading all its terms' postings is the simple, exact answer.
pub(super) const MAX_PRUNED_TERMS: usize = 256;

/// How many terms a statement of `terms` query terms is shaped for: the next power of two.
/// The pruned paths carry a column (and a scan or lookup) per term, so their text depends
/// on the number of terms; shaped for a power of two, the per-connection statement cache
/// holds at most one statement per power of two (9 up to [`MAX_PRUNED_TERMS`]) instead of
/// one per term count. The terms past the query's own are no row of `l_idf`: their scans
/// read nothing and their columns are NULL, which the fold adds as zero after every real
/// term (`x + 0` is `x`), so the sums stay the core's bit for bit.
fn shape_width(terms: usize) -> usize {
    terms.checked_next_power_of_two().unwrap_or(terms)
}

/// The BM25 side of one query (`terms`, in their given order; none: no statement), as one
/// statement returning one row: the ranked memories as two arrays (see [`Ranked`]) and
/// the path it took (see [`decode_lexical`]).
///
/// Its text depends only on the power of two at or above the number of terms (see
/// [`shape_width`]) and the pruning settings, and every value in it is bound (`top_k`
/// too), so the store runs it with a generic plan, planned once per
/// connection: planning it per search cost as much as executing the median search's BM25
/// side (docs/BENCHMARKS.md). Its shape does not hinge on estimates: every term's postings
/// are read through the index by laterals, correlated lookups or full joins of one term's
/// list with another's.
///
/// With a non-empty `filter` only the memories that pass are candidates, and the path is
/// [`LexicalPath::Full`]: every posting of every query term, joined to its memory row
/// where the filter's conditions hold, scored and summed as the long query's scan sums
/// them ([`filtered_scores`]). The pruned paths are not taken: their floors and gates
/// are pool-th best scores over every memory, which a filter can leave with fewer than a
/// pool (or none) of them among the memories that pass. The statistics the scores and
/// the bound are computed from (`stats`, `l_idf`, the live count and the dfs) are read
/// as without a filter: every live memory's, so a memory that passes scores what it
/// scores unfiltered. The empty filter builds exactly the statement it built before
/// filters existed.
pub(crate) fn lexical(
    names: &Names,
    user: &str,
    terms: &[String],
    top_k: usize,
    pruning: Pruning,
    filter: &MemoryFilter,
) -> Option<Built> {
    if terms.is_empty() {
        return None;
    }
    let mut ctes = Ctes::new();
    let statistics = term_statistics(&mut ctes, names, user, terms);
    let query = LexicalQuery {
        names,
        user,
        terms,
        width: shape_width(terms.len()),
        statistics,
        pool: candidate_pool(top_k),
        budget: i64::try_from(pruning.budget).unwrap_or(i64::MAX),
        lookup_cost: pruning.lookup_cost,
    };
    let none = || Expr::cust("0::int8");
    let scored = match terms {
        _ if !filter.is_empty() => {
            let passing = filtered_scores(names, user, statistics.terms, query.width, filter);
            Scored {
                scored: ctes.add(CteName::LScored, passing),
                path: Expr::cust(LexicalPath::Full.code().to_string()),
                rarest: None,
            }
        }
        [term] => {
            let candidates = impact_ordered(&mut ctes, names, user, statistics, term, query.pool);
            Scored {
                scored: candidates,
                path: Expr::cust(LexicalPath::Impact.code().to_string()),
                rarest: None,
            }
        }
        _ if terms.len() > MAX_PRUNED_TERMS => {
            let all = grouped_scores(names, user, statistics.terms, terms.len());
            Scored {
                scored: ctes.add(CteName::LScored, all),
                path: Expr::cust(LexicalPath::Full.code().to_string()),
                rarest: None,
            }
        }
        [_, _] if query.budget > 0 => two_terms(&mut ctes, &query),
        _ => maxscore(&mut ctes, &query),
    };
    let lexical = ctes.add(CteName::Lexical, ranked(scored.scored, query.pool));
    let (candidates, looked_up) = match &scored.rarest {
        Some(rarest) => rarest.counts(),
        None => (none(), none()),
    };
    // Read by name (see `decode_lexical`).
    let mut select = Query::select();
    select
        .expr_as(
            Expr::cust("COALESCE(array_agg(seq ORDER BY rnk), '{}'::int8[])"),
            Col::Seqs,
        )
        .expr_as(
            Expr::cust("COALESCE(array_agg(rnk ORDER BY rnk), '{}'::int8[])"),
            Col::Ranks,
        )
        .expr_as(scored.path, Col::LexicalPath)
        .expr_as(candidates, Col::RCandidates)
        .expr_as(looked_up, Col::RLookedUp)
        .expr_as(
            Expr::cust("COALESCE(array_agg(score ORDER BY rnk), '{}'::float8[])"),
            Col::Scores,
        )
        // What the query's bound is computed from (see `LexicalSide`): the live count and
        // every query term's df in the terms' order, 0 for a term no live memory holds.
        .expr_as(Expr::cust("(SELECT n::int8 FROM stats)"), Col::Live)
        .expr_as(
            Expr::cust(format!(
                "(SELECT array_agg(COALESCE(i.df, 0)::int8 ORDER BY q.ord) FROM {} q \
                 LEFT JOIN {} i ON i.ord = q.ord)",
                statistics.query, statistics.terms
            )),
            Col::Dfs,
        )
        .from(lexical.name())
        .with_cte(ctes.finish());
    Some(build(&select))
}

/// The BM25 side as the fused statement reads it: the ranked memories and each one's
/// weighted-share input, its [`lexical_share`] of the query's [`lexical_bound`], computed
/// here by the core's own functions from the statement's scores, live count and dfs.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LexicalSide {
    pub ranked: Ranked,
    /// Per ranked memory, best first.
    pub shares: Vec<f64>,
}

impl LexicalSide {
    fn new(ranked: Ranked, scores: &[f64], live: Option<i64>, dfs: &[i64]) -> Self {
        let live = live.and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
        let bound = lexical_bound(
            dfs.iter()
                .map(|&df| bm25_idf(live, u64::try_from(df).unwrap_or(0))),
        );
        let shares = scores.iter().map(|&s| lexical_share(s, bound)).collect();
        Self { ranked, shares }
    }

    /// The share of BM25's first memory (0 with none): its confidence.
    pub fn confidence(&self) -> f64 {
        self.shares.first().copied().unwrap_or(0.0)
    }
}

/// The [`lexical`] statement's row.
pub(crate) fn decode_lexical(
    row: &Row,
) -> Result<(LexicalSide, LexicalPath, RarestFirstLookups), StoreError> {
    let count = |column: Col| -> Result<u64, StoreError> {
        let n: i64 = get_named(row, column)?;
        u64::try_from(n).map_err(|_| StoreError::Corrupt(format!("lookup count {n}")))
    };
    let ranked = Ranked::decode(row)?;
    let scores: Vec<f64> = get_named(row, Col::Scores)?;
    let dfs: Option<Vec<i64>> = get_named(row, Col::Dfs)?;
    if scores.len() != ranked.seqs.len() {
        return Err(StoreError::Corrupt(format!(
            "{} BM25 scores for {} ranked memories",
            scores.len(),
            ranked.seqs.len()
        )));
    }
    let live = get_named(row, Col::Live)?;
    let side = LexicalSide::new(ranked, &scores, live, &dfs.unwrap_or_default());
    Ok((
        side,
        LexicalPath::from_code(get_named(row, Col::LexicalPath)?)?,
        RarestFirstLookups {
            candidates: count(Col::RCandidates)?,
            looked_up: count(Col::RLookedUp)?,
        },
    ))
}
