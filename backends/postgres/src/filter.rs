//! A [`MemoryFilter`] as SQL conditions on a memories alias, shared by `list` and both
//! sides of the search pushdown so that every path filters alike.

use cortex_core::MemoryFilter;
use sea_query::{Expr, ExprTrait, SelectStatement};

use crate::tables::Memories;

/// One condition per part of `filter` that is set (none for the empty filter), on the
/// memories table under `alias`. Parameters are bound, never spliced.
pub(crate) fn filter_conditions(alias: &'static str, filter: &MemoryFilter) -> Vec<Expr> {
    let mut out = Vec::new();
    if !filter.kinds.is_empty() {
        let kinds: Vec<String> = filter.kinds.iter().map(|k| k.as_str().to_owned()).collect();
        out.push(Expr::cust_with_values(
            format!("{alias}.kind = ANY($1::text[])"),
            [kinds],
        ));
    }
    if !filter.tags.is_empty() {
        out.push(Expr::cust_with_values(
            format!("{alias}.tags && $1::text[]"),
            [filter.tags.clone()],
        ));
    }
    if !filter.tags_all.is_empty() {
        out.push(Expr::cust_with_values(
            format!("{alias}.tags @> $1::text[]"),
            [filter.tags_all.clone()],
        ));
    }
    if let Some(since) = filter.created.since {
        out.push(Expr::col((alias, Memories::CreatedAt)).gte(since));
    }
    if let Some(until) = filter.created.until {
        out.push(Expr::col((alias, Memories::CreatedAt)).lt(until));
    }
    out
}

/// `select` with every condition of `filter` on the memories under `alias` (nothing
/// added for the empty filter, so an unfiltered statement's text is unchanged).
pub(crate) fn and_filter<'s>(
    select: &'s mut SelectStatement,
    alias: &'static str,
    filter: &MemoryFilter,
) -> &'s mut SelectStatement {
    for condition in filter_conditions(alias, filter) {
        select.and_where(condition);
    }
    select
}
