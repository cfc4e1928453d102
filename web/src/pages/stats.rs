//! `/stats`: what the store holds for this user (memories by kind and state, the layers'
//! records, the text's size), the embedder and the signature of the stored vectors, and
//! on one person's own store (`cortex ui`) the store's size on disk.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::Html;
use chrono::Utc;
use cortex_app::transfer::format::Line;
use cortex_app::transfer::pager::Pager;
use maud::html;

use crate::error::WebError;
use crate::html::{bytes, layout};
use crate::security::CurrentSession;
use crate::state::WebState;

/// One user's counts.
#[derive(Debug, Default)]
struct Counts {
    live: u64,
    superseded: u64,
    expired: u64,
    by_kind: BTreeMap<&'static str, u64>,
    text_bytes: u64,
    records: BTreeMap<&'static str, u64>,
}

pub async fn page(
    State(state): State<WebState>,
    current: CurrentSession,
) -> Result<Html<String>, WebError> {
    let engine = state.engine().await?;
    let user = current.session.user();
    let now = Utc::now();
    let mut counts = Counts::default();
    let mut pager = Pager::new(engine.store.as_ref(), user, false);
    while let Some(page) = pager.next_page().await? {
        for line in page {
            match line {
                Line::Memory(m) => {
                    counts.text_bytes += m.content.len() as u64;
                    if m.superseded {
                        counts.superseded += 1;
                    } else if m.expires_at.is_some_and(|t| t <= now) {
                        counts.expired += 1;
                    } else {
                        counts.live += 1;
                        *counts.by_kind.entry(m.kind.as_str()).or_default() += 1;
                    }
                }
                other => *counts.records.entry(other.kind()).or_default() += 1,
            }
        }
    }
    let embedder = engine.memory.embedder_signature();
    let stored = engine.store.signature().await?;
    let size = match state.config.show_store_size {
        true => engine.store.size_bytes().await?,
        false => None,
    };
    let record = |kind: &str| counts.records.get(kind).copied().unwrap_or(0);
    let body = html! {
        h2 { "Memories" }
        dl.stats {
            dt { "Live" } dd #live { (counts.live) }
            @for (kind, n) in &counts.by_kind {
                dt { "· " (kind) } dd { (n) }
            }
            dt { "Superseded (kept in history)" } dd #superseded { (counts.superseded) }
            dt { "Expired, not yet pruned" } dd #expired { (counts.expired) }
            dt { "Their text" } dd { (bytes(counts.text_bytes)) }
        }
        h2 { "Timeline and graph" }
        dl.stats {
            dt { "Events" } dd #events { (record("event")) }
            dt { "Entities" } dd #entities { (record("entity")) }
            dt { "Relationships" } dd #relationships { (record("edge")) }
            dt { "Memory–entity links" } dd { (record("link")) }
            dt { "Corrections (supersessions)" } dd { (record("supersession")) }
        }
        h2 { "Embedder" }
        dl.stats {
            dt { "Recall and memorize embed with" } dd #embedder { (embedder) }
            dt { "The stored vectors were written by" }
            dd #signature {
                @match &stored {
                    Some(s) => { (s) @if *s != embedder { " — not the embedder above: run " code { "cortex reembed" } } }
                    None => { "nothing yet (an empty store)" }
                }
            }
        }
        @if let Some(size) = size {
            h2 { "Store" }
            dl.stats { dt { "On disk (every user)" } dd #store-size { (bytes(size)) } }
        }
    };
    Ok(Html(
        layout("Stats", Some(&current.session), body).into_string(),
    ))
}
