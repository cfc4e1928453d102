//! `/`: every live memory, newest first by the date it shows, a page at a time (the list
//! cursor), filtered by kinds, tags and creation dates; above them the user's counts, as
//! `cortex stats` and the Stats page give them.

use axum::extract::{RawQuery, State};
use axum::response::Html;
use cortex_app::memory_stats;
use maud::html;

use super::filter_fields;
use crate::error::WebError;
use crate::html::{content_link, layout, tags, when, when_opt};
use crate::params::ListParams;
use crate::security::CurrentSession;
use crate::state::WebState;

pub async fn page(
    State(state): State<WebState>,
    current: CurrentSession,
    RawQuery(query): RawQuery,
) -> Result<Html<String>, WebError> {
    let user = current.session.user();
    let params = ListParams::parse(query.as_deref());
    let filter = params.filter()?;
    let engine = state.engine().await?;
    let page = engine
        .memory
        .list_page(
            user,
            &filter,
            state.config.page_size,
            params.cursor.as_deref(),
        )
        .await?;
    let now = engine.memory.now();
    let counts = memory_stats(engine.store.as_ref(), user, now).await?;
    let body = html! {
        p.summary {
            span #live-count { (counts.live) }
            @if counts.live == 1 { " live memory" } @else { " live memories" }
            @if counts.expired > 0 {
                ", " span #expired-count { (counts.expired) } " expired, not yet pruned"
            }
            "."
        }
        form.filter method="get" action="/" {
            (filter_fields(&params))
            label { input type="checkbox" name="expired" value="on" checked[params.include_expired]; " include expired" }
            button type="submit" { "Filter" }
        }
        @if page.memories.is_empty() {
            p.empty { "No memories here." }
        } @else {
            table.memories {
                thead { tr { th { "Memory" } th { "Kind" } th { "Tags" } th { "Created" } th { "Expires" } } }
                tbody {
                    @for m in &page.memories {
                        tr.expired[m.expired_at(now)] {
                            td { (content_link(m)) }
                            td.kind { (m.kind.as_str()) }
                            td { (tags(m)) }
                            td.date { (when(m.created_at)) }
                            td.date { (when_opt(m.expires_at)) }
                        }
                    }
                }
            }
        }
        nav.pager {
            @if params.cursor.is_some() {
                a.newest href={ "/?" (params.query_string(None)) } { "Newest" }
            }
            @if let Some(next) = &page.next_cursor {
                a.older href={ "/?" (params.query_string(Some(next))) } { "Older" }
            }
        }
    };
    Ok(Html(
        layout("Your memories", Some(&current.session), body).into_string(),
    ))
}
