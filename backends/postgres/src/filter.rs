//! A [`MemoryFilter`] as SQL conditions on a memories alias, shared by `list` and both
//! sides of the search pushdown so that every path filters alike; and the probe that lets
//! a search leave out the expiry condition when it holds for every memory.

use chrono::{DateTime, SubsecRound, Utc};
use cortex_core::filter::MemoryFilter;
use sea_query::{Expr, ExprTrait, Query, SelectStatement};

use crate::names::Names;
use crate::sql::{Built, build};
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
    if let Some(at) = filter.alive_at {
        // Not expired at `at`: expiry is exact, so a memory expiring at `at` fails.
        let expires_at = || Expr::col((alias, Memories::ExpiresAt));
        out.push(
            expires_at()
                .is_null()
                .or(expires_at().gt(stored_instant(at))),
        );
    }
    out
}

/// `at` as the stores compare it with a stored time: truncated to the microsecond. Stored
/// times have microseconds, so for such a time `e`, `e > at` is `e > trunc(at)` and
/// `e <= at` is `e <= trunc(at)` (the driver would otherwise truncate toward 2000-01-01,
/// which before it rounds up).
fn stored_instant(at: DateTime<Utc>) -> DateTime<Utc> {
    at.trunc_subsecs(6)
}

/// Whether any of `user`'s live memories has expired at `at` (`expires_at <= at`): a
/// probe the partial index `memories_user_expiry` answers by reading at most one entry.
/// When none has, "not expired at `at`" holds for every live memory, and a search can
/// leave the condition out (see `PostgresStore::search_request`).
pub(crate) fn any_expired(names: &Names, user: &str, at: DateTime<Utc>) -> Built {
    let expired = Query::select()
        .expr(Expr::cust("1"))
        .from_as(names.table(Memories::Table), "m")
        .and_where(Expr::col(("m", Memories::UserId)).eq(user))
        .and_where(Expr::cust("NOT m.superseded"))
        .and_where(Expr::col(("m", Memories::ExpiresAt)).lte(stored_instant(at)))
        .to_owned();
    build(Query::select().expr(Expr::exists(expired)))
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
