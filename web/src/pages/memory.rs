//! `/memory/{id}`: one memory, its history chain, and the corrections: forget (after a
//! confirmation), retag, replace with a corrected memory. Nothing is deleted without an
//! explicit click on the confirmation page.

use axum::Form;
use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use chrono::Utc;
use cortex_core::{
    engine::HistoryEntry, engine::MemorizeOptions, engine::Retag, memory::MemoryKind,
};
use maud::{Markup, html};
use serde::Deserialize;

use crate::auth::Session;
use crate::error::WebError;
use crate::html::{csrf_field, layout, tags, when, when_opt};
use crate::params::words;
use crate::security::CurrentSession;
use crate::state::WebState;

/// The memory `id` names and its whole chain.
async fn chain(
    state: &WebState,
    user: &str,
    id: &str,
) -> Result<(HistoryEntry, Vec<HistoryEntry>), WebError> {
    let full = state.engine().await?.memory.resolve(user, id).await?;
    let chain = state
        .engine()
        .await?
        .memory
        .history(user, &full.to_string())
        .await?;
    let this = chain
        .iter()
        .find(|e| e.memory.id == full)
        .cloned()
        .ok_or_else(|| WebError::NoSuchPage(format!("/memory/{id}")))?;
    Ok((this, chain))
}

/// `GET /memory/{id}`.
pub async fn show(
    State(state): State<WebState>,
    current: CurrentSession,
    Path(id): Path<String>,
) -> Result<Html<String>, WebError> {
    let session = &current.session;
    let (this, chain) = chain(&state, session.user(), &id).await?;
    let m = &this.memory;
    let expired = m.expired_at(Utc::now());
    let live = this.valid_until.is_none() && !expired;
    let action = |what: &str| format!("/memory/{}/{what}", m.id);
    let body = html! {
        (details(&this, expired))
        @if live && session.viewer.can_write() {
            section.correct {
                h2 { "Correct it" }
                form.retag method="post" action=(action("retag")) {
                    (csrf_field(session))
                    h3 { "Change kind and tags" }
                    label { "Kind " (kind_select("kind", None, Some(m.kind))) }
                    label { "Add tags " input type="text" name="add" placeholder="comma-separated"; }
                    label { "Remove tags " input type="text" name="remove" placeholder="comma-separated"; }
                    button type="submit" { "Save kind and tags" }
                }
                form.replace method="post" action=(action("replace")) {
                    (csrf_field(session))
                    h3 { "Replace with a corrected memory" }
                    textarea name="content" rows="5" required { (m.content) }
                    label { "Kind " (kind_select("kind", Some(m.kind), None)) }
                    label { "Tags " input type="text" name="tags" value=(m.tags.join(", ")); }
                    button type="submit" { "Save the correction" }
                }
            }
        }
        @if session.viewer.can_write() {
            form.forget method="post" action=(action("forget")) {
                (csrf_field(session))
                button.danger type="submit" { "Forget…" }
            }
        }
        section.history {
            h2 { "History" }
            (history(&chain, m.id))
        }
    };
    Ok(Html(layout("Memory", Some(session), body).into_string()))
}

fn details(this: &HistoryEntry, expired: bool) -> Markup {
    let m = &this.memory;
    html! {
        p.memory-content { (m.content) }
        dl.memory {
            dt { "Id" } dd.id { (m.id) }
            dt { "Kind" } dd { (m.kind.as_str()) }
            dt { "Tags" } dd { (tags(m)) }
            dt { "Created" } dd { (when(m.created_at)) }
            dt { "Expires" } dd { (when_opt(m.expires_at)) }
            dt { "State" }
            dd.state {
                @if let Some(until) = this.valid_until {
                    "superseded on " (when(until))
                    @if let Some(reason) = &this.reason { " (" (reason) ")" }
                } @else if expired {
                    "expired"
                } @else {
                    "live"
                }
            }
        }
    }
}

fn history(chain: &[HistoryEntry], current: cortex_core::memory::MemoryId) -> Markup {
    html! {
        table.history {
            thead { tr {
                th { "Version" } th { "Memory" } th { "Kind" } th { "Tags" }
                th { "Valid from" } th { "Valid until" } th { "Why it ended" }
            } }
            tbody {
                @for e in chain {
                    tr.current[e.memory.id == current] {
                        td.id { a href={ "/memory/" (e.memory.id) } { (short(&e.memory.id.to_string())) } }
                        td { (e.memory.content) }
                        td.kind { (e.memory.kind.as_str()) }
                        td { (tags(&e.memory)) }
                        td.date { (when(e.valid_from)) }
                        td.date { (when_opt(e.valid_until)) }
                        td { (e.reason.as_deref().unwrap_or("")) }
                    }
                }
            }
        }
    }
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

/// A kind `<select>`: `selected` preselected, or a first "keep `keep`" option.
fn kind_select(name: &str, selected: Option<MemoryKind>, keep: Option<MemoryKind>) -> Markup {
    html! {
        select name=(name) {
            @if let Some(k) = keep { option value="" selected { "keep " (k.as_str()) } }
            @for kind in MemoryKind::ALL {
                option value=(kind.as_str()) selected[selected == Some(kind)] { (kind.as_str()) }
            }
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct ForgetForm {
    #[serde(default)]
    confirm: String,
}

/// `POST /memory/{id}/forget`: the confirmation page; with `confirm=yes`, the deletion.
pub async fn forget(
    State(state): State<WebState>,
    current: CurrentSession,
    Path(id): Path<String>,
    Form(form): Form<ForgetForm>,
) -> Result<Response, WebError> {
    let session = &current.session;
    if form.confirm == "yes" {
        state
            .engine()
            .await?
            .memory
            .forget(session.user(), &id)
            .await?;
        return Ok(Redirect::to("/").into_response());
    }
    let (this, _) = chain(&state, session.user(), &id).await?;
    Ok(Html(confirm_page(session, &this).into_string()).into_response())
}

fn confirm_page(session: &Session, this: &HistoryEntry) -> Markup {
    let m = &this.memory;
    layout(
        "Forget this memory?",
        Some(session),
        html! {
            p.memory-content { (m.content) }
            p.warning { "It is deleted for good: recall never returns it again, and this cannot be undone." }
            form.confirm method="post" action={ "/memory/" (m.id) "/forget" } {
                (csrf_field(session))
                input type="hidden" name="confirm" value="yes";
                button.danger type="submit" { "Forget for good" }
                " "
                a href={ "/memory/" (m.id) } { "Cancel" }
            }
        },
    )
}

#[derive(Debug, Deserialize)]
pub struct RetagForm {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    add: String,
    #[serde(default)]
    remove: String,
}

/// `POST /memory/{id}/retag`: a new kind and tags; the corrected memory gets a new id.
pub async fn retag(
    State(state): State<WebState>,
    current: CurrentSession,
    Path(id): Path<String>,
    Form(form): Form<RetagForm>,
) -> Result<Redirect, WebError> {
    let change = Retag {
        kind: parse_kind(&form.kind)?,
        add: words(&form.add),
        remove: words(&form.remove),
    };
    let done = state
        .engine()
        .await?
        .memory
        .retag(current.session.user(), &id, &change)
        .await?;
    Ok(Redirect::to(&format!("/memory/{}", done.memory.id)))
}

#[derive(Debug, Deserialize)]
pub struct ReplaceForm {
    #[serde(default)]
    content: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    tags: String,
}

/// `POST /memory/{id}/replace`: writes the corrected memory, which supersedes this one.
pub async fn replace(
    State(state): State<WebState>,
    current: CurrentSession,
    Path(id): Path<String>,
    Form(form): Form<ReplaceForm>,
) -> Result<Redirect, WebError> {
    let kind = parse_kind(&form.kind)?.unwrap_or_default();
    let options = MemorizeOptions {
        replaces: Some(id),
        ..MemorizeOptions::default()
    };
    let done = state
        .engine()
        .await?
        .memory
        .memorize(
            current.session.user(),
            &form.content,
            kind,
            &words(&form.tags),
            &options,
        )
        .await?;
    Ok(Redirect::to(&format!("/memory/{}", done.memory.id)))
}

/// A kind from a form; blank is none.
fn parse_kind(text: &str) -> Result<Option<MemoryKind>, WebError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    Ok(Some(text.parse::<MemoryKind>()?))
}
