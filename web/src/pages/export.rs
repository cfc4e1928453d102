//! `/export`: download your memories, as JSON Lines that `cortex import` reads back or as
//! a markdown document to read. The file is streamed a store page at a time, so a large
//! store is never held in memory whole.

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{Html, IntoResponse, Response};
use cortex_app::transfer::{Export, ExportFormat};
use maud::html;
use tokio::sync::mpsc;

use crate::error::WebError;
use crate::html::layout;
use crate::security::CurrentSession;
use crate::state::WebState;

/// `GET /export`: the choices.
pub async fn page(current: CurrentSession) -> Html<String> {
    let body = html! {
        section.export {
            p { "Everything stored for you: every memory (live and superseded, with its history), the timeline's events and the entity graph." }
            p {
                a.download #download-jsonl href="/export/download?format=jsonl" download { "Download JSON Lines" }
                a.download #download-markdown href="/export/download?format=markdown" download { "Download markdown" }
                a.download #download-vectors href="/export/download?format=jsonl&vectors=on" download { "JSON Lines with vectors" }
            }
            p.summary {
                "JSON Lines is what " code { "cortex import" } " reads back (docs/FORMAT.md); with vectors, an import "
                "into a store of the same embedder calls no model. Markdown is for reading."
            }
        }
    };
    Html(layout("Export", Some(&current.session), body).into_string())
}

/// `GET /export/download?format=jsonl|markdown[&vectors=on]`: the file.
pub async fn download(
    State(state): State<WebState>,
    current: CurrentSession,
    RawQuery(query): RawQuery,
) -> Result<Response, WebError> {
    let mut format = ExportFormat::Jsonl;
    let mut vectors = false;
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match (key.as_ref(), value.as_ref()) {
            ("format", "jsonl") => format = ExportFormat::Jsonl,
            ("format", "markdown") => format = ExportFormat::Markdown,
            ("format", other) => {
                return Err(WebError::BadRequest(format!(
                    "unknown export format {other:?}: use jsonl or markdown"
                )));
            }
            ("vectors", v) => vectors = v == "on" || v == "yes",
            _ => {}
        }
    }
    let engine = state.engine().await?;
    let user = current.session.user().to_owned();
    let filename = format!(
        "cortex-{}-{}.{}",
        file_safe(&user),
        chrono::Utc::now().format("%Y%m%d"),
        format.extension()
    );
    // A store that cannot be read gives an error page rather than a broken download.
    engine.store.signature().await?;
    let vectors = vectors && format == ExportFormat::Jsonl;
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::spawn(async move {
        let users = vec![user];
        let failed = |e: cortex_core::error::StoreError| {
            tracing::error!(error = %e, "an export download failed part way");
            std::io::Error::other(e.to_string())
        };
        let mut export = match Export::start(engine.store.as_ref(), &users, vectors, format).await {
            Ok(export) => export,
            Err(e) => {
                let _ = tx.send(Err(failed(e))).await;
                return;
            }
        };
        loop {
            let item = match export.next_chunk().await {
                Ok(Some(chunk)) => Ok(Bytes::from(chunk.bytes)),
                Ok(None) => return,
                Err(e) => Err(failed(e)),
            };
            let stop = item.is_err();
            // A closed channel: the browser went away; stop reading the store.
            if tx.send(item).await.is_err() || stop {
                return;
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Ok((
        [
            (CONTENT_TYPE, format.content_type().to_owned()),
            (
                CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

/// `name` with everything but ASCII letters, digits, `.`, `_` and `-` made `_`: safe in
/// a quoted header value and as a file name everywhere.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .collect()
}
