//! The resources: what `resources/list` and `resources/templates/list` publish, and
//! `resources/read` of each, always as the calling user (see `CortexServer::reader`).
//!
//! `resources/list` names the graph and the timeline only, not one resource per memory or
//! entity: a store holds up to hundreds of thousands of memories, a host may load the
//! whole list into its interface or its model's context, and the list would change with
//! every write. Single memories and dossiers are reached through their templates, with
//! ids from the tools (`recall`, `list_memories`) and names from the graph.

use std::collections::{BTreeMap, BTreeSet};

use cortex_core::records::{Entity, EntityEdge, TimeRange};
use cortex_core::transfer::{Record, RecordKind};
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use serde::Serialize;

use crate::args::clamp_limit;
use crate::dates::parse_instant;
use crate::engine::Engine;
use crate::error::Tool;
use crate::output::{
    DossierOutput, EntityView, GraphOutput, MemoryResource, MemoryView, RelationView,
    TimelineEventView, TimelineOutput,
};
use crate::read_error::ReadError;
use crate::resource_uri::{
    ENTITY_TEMPLATE, GRAPH, MEMORY_TEMPLATE, ResourceUri, TIMELINE, TIMELINE_TEMPLATE, UriError,
};

/// Every resource is JSON text.
pub const MIME_TYPE: &str = "application/json";
/// Records of one kind the graph reads at most; past it the graph says it is truncated.
const MAX_GRAPH_RECORDS: u64 = 10_000;
/// Records read per store call.
const PAGE: usize = 500;

/// The concrete resources.
pub fn list() -> ListResourcesResult {
    ListResourcesResult::with_all_items(vec![
        Resource::new(GRAPH, "graph")
            .with_title("Entity graph")
            .with_description(
                "Your entities (people, projects, places, organisations) and the relations \
                 between them: {entities: [{id, name, entity_type, aliases}], relations: \
                 [{from, label, to}], truncated}. Read an entity's dossier at \
                 cortex://entity/{name}.",
            )
            .with_mime_type(MIME_TYPE),
        Resource::new(TIMELINE, "timeline")
            .with_title("Timeline")
            .with_description(
                "Dated events from memory, oldest first, each with the memory it came from, \
                 as recall_timeline returns them: {events: [{event_time, actor, location, \
                 event_type, memory}]}. For a period, read \
                 cortex://timeline?since=YYYY-MM-DD&until=YYYY-MM-DD.",
            )
            .with_mime_type(MIME_TYPE),
    ])
}

/// The resource templates.
pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(MEMORY_TEMPLATE, "memory")
            .with_title("Memory")
            .with_description(
                "One memory by its full id (from recall or list_memories): {memory: {id, \
                 content, kind, tags, created_at, expires_at?}, state, superseded_by}; state \
                 is live, expired or superseded.",
            )
            .with_mime_type(MIME_TYPE),
        ResourceTemplate::new(ENTITY_TEMPLATE, "entity")
            .with_title("Entity dossier")
            .with_description(
                "Everything the memory graph holds about one entity, by name or alias, as \
                 recall_about returns it: {entity, relationships, memories}, memories newest \
                 first, at most limit (default CORTEX_TOP_K, 1-1000).",
            )
            .with_mime_type(MIME_TYPE),
        ResourceTemplate::new(TIMELINE_TEMPLATE, "timeline-range")
            .with_title("Timeline of a period")
            .with_description(
                "Dated events between since and until (YYYY-MM-DD or RFC 3339; until \
                 exclusive), oldest first, at most limit (default CORTEX_TOP_K, 1-1000), as \
                 recall_timeline returns them.",
            )
            .with_mime_type(MIME_TYPE),
    ])
}

/// Reads `uri` as `user`. The URI was parsed by the caller (`parsed`), before the engine
/// was built, so a malformed one is the caller's to fix even on an unset-up server.
pub async fn read(
    engine: &Engine,
    user: &str,
    uri: &str,
    parsed: ResourceUri,
) -> Result<ReadResourceResult, ReadError> {
    let text = match parsed {
        ResourceUri::Memory(id) => json(&memory(engine, user, uri, &id).await?)?,
        ResourceUri::Graph => json(&graph(engine, user, uri).await?)?,
        ResourceUri::Entity { name, limit } => {
            let limit = clamp_limit(limit, engine.top_k);
            let dossier = engine
                .memory
                .recall_about(user, &name, limit)
                .await
                .map_err(|e| ReadError::engine(Tool::RecallAbout, uri, e))?;
            json(&DossierOutput::from(&dossier))?
        }
        ResourceUri::Timeline {
            since,
            until,
            limit,
        } => {
            let invalid = |e: crate::dates::DateError| ReadError::Invalid(e.to_string());
            let range = TimeRange {
                since: parse_instant("since", since.as_deref()).map_err(invalid)?,
                until: parse_instant("until", until.as_deref()).map_err(invalid)?,
            };
            let limit = clamp_limit(limit, engine.top_k);
            let entries = engine
                .memory
                .timeline(user, &range, limit)
                .await
                .map_err(|e| ReadError::engine(Tool::RecallTimeline, uri, e))?;
            json(&TimelineOutput {
                events: entries.iter().map(TimelineEventView::from).collect(),
            })?
        }
    };
    // No cache hints of our own: rmcp marks the result private and stale at once for peers
    // that read them, which is right for one user's memories that any write changes.
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text, uri).with_mime_type(MIME_TYPE),
    ]))
}

/// The URI's own failure, as a read error.
pub fn uri_error(uri: &str, error: UriError) -> ReadError {
    match error {
        UriError::Parameter(message) => ReadError::Invalid(message),
        _ => ReadError::NotFound {
            uri: uri.to_owned(),
        },
    }
}

async fn memory(
    engine: &Engine,
    user: &str,
    uri: &str,
    id: &str,
) -> Result<MemoryResource, ReadError> {
    // The chain, not the row alone: it says whether a correction replaced the memory.
    let chain = engine
        .memory
        .history(user, id)
        .await
        .map_err(|e| ReadError::engine(Tool::ListMemories, uri, e))?;
    let entry = chain
        .into_iter()
        .find(|e| e.memory.id.to_string() == id)
        .ok_or_else(|| ReadError::NotFound {
            uri: uri.to_owned(),
        })?;
    let now = engine.memory.now();
    Ok(MemoryResource {
        state: entry.memory.state_at(entry.valid_until.is_some(), now),
        memory: MemoryView::from(&entry.memory),
        superseded_by: entry
            .superseded_by
            .iter()
            .map(ToString::to_string)
            .collect(),
    })
}

async fn graph(engine: &Engine, user: &str, uri: &str) -> Result<GraphOutput, ReadError> {
    let store = engine.store.as_ref();
    let mut entities: Vec<Entity> = Vec::new();
    let mut edges: Vec<EntityEdge> = Vec::new();
    let mut truncated = false;
    for kind in [RecordKind::Entity, RecordKind::Edge] {
        let mut offset = 0u64;
        loop {
            let page = store
                .records(user, kind, offset, PAGE)
                .await
                .map_err(|e| ReadError::engine(Tool::RecallAbout, uri, e.into()))?;
            if page.is_empty() {
                break;
            }
            offset += page.len() as u64;
            for record in page {
                match record {
                    Record::Entity(e) => entities.push(e),
                    Record::Edge(e) => edges.push(e),
                    _ => {}
                }
            }
            if offset >= MAX_GRAPH_RECORDS {
                truncated = true;
                break;
            }
        }
    }
    let names: BTreeMap<_, &str> = entities.iter().map(|e| (e.id, e.name.as_str())).collect();
    // The same relation read from two memories is one edge of the graph.
    let relations: BTreeSet<RelationView> = edges
        .iter()
        .filter_map(|edge| {
            Some(RelationView {
                from: (*names.get(&edge.source)?).to_owned(),
                label: edge.label.clone(),
                to: (*names.get(&edge.target)?).to_owned(),
            })
        })
        .collect();
    let mut entities: Vec<EntityView> = entities.iter().map(EntityView::from).collect();
    entities.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.id.cmp(&b.id)));
    Ok(GraphOutput {
        entities,
        relations: relations.into_iter().collect(),
        truncated,
    })
}

fn json(value: &impl Serialize) -> Result<String, ReadError> {
    Ok(serde_json::to_string(value)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_name_what_the_uris_parse() {
        let listed = list();
        assert_eq!(listed.resources.len(), 2);
        for resource in &listed.resources {
            assert!(
                ResourceUri::parse(&resource.uri).is_ok(),
                "{}",
                resource.uri
            );
            assert_eq!(resource.mime_type.as_deref(), Some(MIME_TYPE));
        }
        let templates = templates();
        assert_eq!(templates.resource_templates.len(), 3);
        for template in &templates.resource_templates {
            assert_eq!(template.mime_type.as_deref(), Some(MIME_TYPE));
            let filled = template
                .uri_template
                .replace("{id}", "3f2a9c1e-0b4d-4e8f-9a7b-1c2d3e4f5a6b")
                .replace("{name}", "Ana")
                .replace("{?limit}", "?limit=3")
                .replace("{?since,until,limit}", "?since=2026-01-01");
            assert!(ResourceUri::parse(&filled).is_ok(), "{filled}");
        }
    }
}
