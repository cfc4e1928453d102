//! `/search`: recall as the agent recalls, with filters; each result shows its fused
//! score and its dense and BM25 ranks.

use axum::extract::{RawQuery, State};
use axum::response::Html;
use maud::html;

use super::filter_fields;
use crate::error::WebError;
use crate::html::{content_link, layout, tags, when};
use crate::params::ListParams;
use crate::security::CurrentSession;
use crate::state::WebState;

pub async fn page(
    State(state): State<WebState>,
    current: CurrentSession,
    RawQuery(query): RawQuery,
) -> Result<Html<String>, WebError> {
    let params = ListParams::parse(query.as_deref());
    let filter = params.filter()?;
    let results = if params.q.trim().is_empty() {
        None
    } else {
        Some(
            state
                .engine()
                .await?
                .memory
                .recall_filtered(
                    current.session.user(),
                    &params.q,
                    state.config.search_results,
                    &filter,
                )
                .await?,
        )
    };
    let rank = |r: Option<u32>| r.map_or_else(|| "—".to_owned(), |r| r.to_string());
    let body = html! {
        form.search method="get" action="/search" {
            label { "Query " input type="search" name="q" value=(params.q) autofocus; }
            (filter_fields(&params))
            button type="submit" { "Search" }
        }
        @if let Some(results) = &results {
            @if results.is_empty() {
                p.empty { "Nothing matches." }
            } @else {
                table.results {
                    thead { tr {
                        th { "#" } th { "Memory" } th { "Kind" } th { "Tags" } th { "Created" }
                        th { "Score" } th { "Dense rank" } th { "BM25 rank" }
                    } }
                    tbody {
                        @for (i, r) in results.iter().enumerate() {
                            tr {
                                td.num { (i + 1) }
                                td { (content_link(&r.memory)) }
                                td.kind { (r.memory.kind.as_str()) }
                                td { (tags(&r.memory)) }
                                td.date { (when(r.memory.created_at)) }
                                td.num.score { (format!("{:.4}", r.score)) }
                                td.num.dense { (rank(r.dense_rank)) }
                                td.num.bm25 { (rank(r.lexical_rank)) }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(Html(
        layout("Search", Some(&current.session), body).into_string(),
    ))
}
