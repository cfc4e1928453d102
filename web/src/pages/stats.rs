//! `/stats`: what the store holds for this user (memories by kind and state, the layers'
//! records, the text's size), the embedder and the signature of the stored vectors, and
//! on one person's own store (`cortex ui`) the store's size on disk.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::Html;
use cortex_app::memory_stats;
use cortex_core::{error::StoreError, transfer::RecordKind, transfer::TransferStore};
use maud::html;

use crate::error::WebError;
use crate::html::{bytes, layout};
use crate::security::CurrentSession;
use crate::state::WebState;

/// Records read per store call.
const PAGE: usize = 500;

pub async fn page(
    State(state): State<WebState>,
    current: CurrentSession,
) -> Result<Html<String>, WebError> {
    let engine = state.engine().await?;
    let user = current.session.user();
    let counts = memory_stats(engine.store.as_ref(), user, engine.memory.now()).await?;
    let records = record_counts(engine.store.as_ref(), user).await?;
    let embedder = engine.memory.embedder_signature();
    let stored = engine.store.signature().await?;
    let size = match state.config.show_store_size {
        true => engine.store.size_bytes().await?,
        false => None,
    };
    let record = |kind: RecordKind| records.get(kind.as_str()).copied().unwrap_or(0);
    let body = html! {
        h2 { "Memories" }
        dl.stats {
            dt { "Live" } dd #live { (counts.live) }
            @for (kind, n) in &counts.by_kind {
                dt { "· " (kind) } dd { (n) }
            }
            dt { "Superseded (kept in history)" } dd #superseded { (counts.superseded) }
            dt { "Expired, not yet pruned" } dd #expired { (counts.expired) }
            dt { "Their text" } dd { (bytes(counts.content_bytes)) }
        }
        h2 { "Timeline and graph" }
        dl.stats {
            dt { "Events" } dd #events { (record(RecordKind::Event)) }
            dt { "Entities" } dd #entities { (record(RecordKind::Entity)) }
            dt { "Relationships" } dd #relationships { (record(RecordKind::Edge)) }
            dt { "Memory–entity links" } dd { (record(RecordKind::Link)) }
            dt { "Corrections (supersessions)" } dd { (record(RecordKind::Supersession)) }
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

/// The user's records besides memories, by kind.
async fn record_counts(
    store: &dyn TransferStore,
    user: &str,
) -> Result<BTreeMap<&'static str, u64>, StoreError> {
    let mut counts = BTreeMap::new();
    for kind in RecordKind::ALL {
        let mut offset = 0;
        loop {
            let n = store.records(user, kind, offset, PAGE).await?.len() as u64;
            if n == 0 {
                break;
            }
            offset += n;
        }
        counts.insert(kind.as_str(), offset);
    }
    Ok(counts)
}
