//! `/entity?name=...`: an entity's dossier: its type and other names, its relationships
//! both ways (each a link to the other's dossier) and the live memories behind it.

use axum::extract::{RawQuery, State};
use axum::response::Html;
use cortex_core::dossier::Direction;
use maud::html;

use crate::error::WebError;
use crate::html::{content_link, entity_href, label, layout, tags, when};
use crate::security::CurrentSession;
use crate::state::WebState;

/// Memories a dossier shows at most.
const MEMORIES: usize = 100;

pub async fn page(
    State(state): State<WebState>,
    current: CurrentSession,
    RawQuery(query): RawQuery,
) -> Result<Html<String>, WebError> {
    let name = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(k, _)| k == "name")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let dossier = state
        .engine()
        .await?
        .memory
        .recall_about(current.session.user(), &name, MEMORIES)
        .await?;
    let entity = &dossier.entity;
    let body = html! {
        dl.memory {
            dt { "Type" } dd { (entity.entity_type.as_deref().unwrap_or("—")) }
            dt { "Also called" } dd { @if entity.aliases.is_empty() { "—" } @else { (entity.aliases.join(", ")) } }
            dt { "First seen" } dd { (when(entity.created_at)) }
        }
        section.relationships {
            h2 { "Relationships" }
            @if dossier.relationships.is_empty() {
                p.empty { "None recorded." }
            } @else {
                ul.relationships {
                    @for r in &dossier.relationships {
                        li {
                            @match r.direction {
                                Direction::Out => {
                                    (entity.name) " " span.label { (label(&r.label)) } " "
                                    a href=(entity_href(&r.other.name)) { (r.other.name) }
                                }
                                Direction::In => {
                                    a href=(entity_href(&r.other.name)) { (r.other.name) }
                                    " " span.label { (label(&r.label)) } " " (entity.name)
                                }
                            }
                        }
                    }
                }
            }
        }
        section.behind {
            h2 { "Memories behind it" }
            @if dossier.memories.is_empty() {
                p.empty { "No live memory is linked to it." }
            } @else {
                table.memories {
                    thead { tr { th { "Memory" } th { "Kind" } th { "Tags" } th { "Created" } } }
                    tbody {
                        @for m in &dossier.memories {
                            tr {
                                td { (content_link(m)) }
                                td.kind { (m.kind.as_str()) }
                                td { (tags(m)) }
                                td.date { (when(m.created_at)) }
                            }
                        }
                    }
                }
            }
        }
        p { a href="/graph" { "Back to the graph" } }
    };
    Ok(Html(
        layout(&entity.name, Some(&current.session), body).into_string(),
    ))
}
