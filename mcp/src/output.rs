//! The tools' results: the JSON an agent reads, also published as each tool's output
//! schema; and the resources' JSON, built from the same views. These are views, not the
//! core types: they leave out what an agent has no use for (user id, insertion sequence,
//! normalised names) and give ids and times as strings.

use cortex_core::records::{Entity, TimelineEntry};
use cortex_core::{
    dossier::Direction, dossier::Dossier, engine::Memorized, hybrid::ScoredMemory, memory::Memory,
    memory::MemoryState,
};
use rmcp::schemars;
use serde::Serialize;

use crate::dates::format_instant;

/// One stored memory.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MemoryView {
    /// The memory's id; `forget` takes it (or a unique prefix of it).
    pub id: String,
    pub content: String,
    /// fact, preference, event, decision, instruction or note.
    pub kind: String,
    pub tags: Vec<String>,
    /// When it was stored, RFC 3339 in UTC.
    pub created_at: String,
    /// When it expires, if it does (RFC 3339 in UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

impl From<&Memory> for MemoryView {
    fn from(m: &Memory) -> Self {
        Self {
            id: m.id.to_string(),
            content: m.content.clone(),
            kind: m.kind.as_str().to_owned(),
            tags: m.tags.clone(),
            created_at: format_instant(m.created_at),
            expires_at: m.expires_at.map(format_instant),
        }
    }
}

/// What `memorize` did.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MemorizeOutput {
    /// The id of the memory now holding the content.
    pub id: String,
    /// stored (a new memory), duplicate (an equivalent memory already existed) or
    /// superseded (it replaced an older, now stale memory).
    pub status: String,
    pub kind: String,
    pub tags: Vec<String>,
    pub created_at: String,
    /// Ids of older memories this one made stale (status "superseded"); recall no longer
    /// returns them.
    pub superseded: Vec<String>,
}

impl From<&Memorized> for MemorizeOutput {
    fn from(m: &Memorized) -> Self {
        let view = MemoryView::from(&m.memory);
        Self {
            id: view.id,
            status: m.status.as_str().to_owned(),
            kind: view.kind,
            tags: view.tags,
            created_at: view.created_at,
            superseded: m.superseded.iter().map(ToString::to_string).collect(),
        }
    }
}

/// A recalled memory with how it ranked.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ScoredMemoryView {
    pub id: String,
    pub content: String,
    pub kind: String,
    pub tags: Vec<String>,
    pub created_at: String,
    /// Reciprocal-rank-fusion score; higher is more relevant.
    pub score: f64,
    /// Rank by meaning (embedding similarity), 1 = best; null if not a dense candidate.
    pub dense_rank: Option<u32>,
    /// Rank by keywords (BM25), 1 = best; null if no query word occurs in it.
    pub lexical_rank: Option<u32>,
}

impl From<&ScoredMemory> for ScoredMemoryView {
    fn from(s: &ScoredMemory) -> Self {
        let m = MemoryView::from(&s.memory);
        Self {
            id: m.id,
            content: m.content,
            kind: m.kind,
            tags: m.tags,
            created_at: m.created_at,
            score: s.score,
            dense_rank: s.dense_rank,
            lexical_rank: s.lexical_rank,
        }
    }
}

/// `recall`'s result.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RecallOutput {
    /// Most relevant first.
    pub memories: Vec<ScoredMemoryView>,
}

/// `list_memories`' result.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MemoriesOutput {
    /// Newest first.
    pub memories: Vec<MemoryView>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `forget`'s result.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ForgetOutput {
    /// The full id of the deleted memory.
    pub forgotten: String,
}

/// A node of the entity graph.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct EntityView {
    pub id: String,
    pub name: String,
    /// person, project, place, ... when known.
    pub entity_type: Option<String>,
    /// Other names the entity answers to.
    pub aliases: Vec<String>,
}

impl From<&Entity> for EntityView {
    fn from(e: &Entity) -> Self {
        Self {
            id: e.id.to_string(),
            name: e.name.clone(),
            entity_type: e.entity_type.clone(),
            aliases: e.aliases.clone(),
        }
    }
}

/// One relationship of the dossier's entity.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RelationshipView {
    /// What the relationship is, e.g. "works_at".
    pub label: String,
    /// out: "entity --label--> other"; in: "other --label--> entity".
    pub direction: String,
    pub other: EntityView,
}

/// `recall_about`'s result: everything the graph holds about one entity.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DossierOutput {
    pub entity: EntityView,
    pub relationships: Vec<RelationshipView>,
    /// Memories linked to the entity, newest first.
    pub memories: Vec<MemoryView>,
}

impl From<&Dossier> for DossierOutput {
    fn from(d: &Dossier) -> Self {
        Self {
            entity: EntityView::from(&d.entity),
            relationships: d
                .relationships
                .iter()
                .map(|r| RelationshipView {
                    label: r.label.clone(),
                    direction: match r.direction {
                        Direction::Out => "out",
                        Direction::In => "in",
                    }
                    .to_owned(),
                    other: EntityView::from(&r.other),
                })
                .collect(),
            memories: d.memories.iter().map(MemoryView::from).collect(),
        }
    }
}

/// One dated event and the memory it came from.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TimelineEventView {
    /// When the event happened (not when it was memorized), RFC 3339 in UTC.
    pub event_time: String,
    pub actor: Option<String>,
    pub location: Option<String>,
    pub event_type: Option<String>,
    pub memory: MemoryView,
}

impl From<&TimelineEntry> for TimelineEventView {
    fn from(t: &TimelineEntry) -> Self {
        Self {
            event_time: format_instant(t.event.event_time),
            actor: t.event.actor.clone(),
            location: t.event.location.clone(),
            event_type: t.event.event_type.clone(),
            memory: MemoryView::from(&t.memory),
        }
    }
}

/// `recall_timeline`'s result.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TimelineOutput {
    /// Oldest first.
    pub events: Vec<TimelineEventView>,
}

/// The resource `cortex://memory/{id}`: one memory and where it stands.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryResource {
    pub memory: MemoryView,
    /// live, expired or superseded: a URI keeps naming a memory after a correction, so the
    /// reader is told whether recall still returns it.
    pub state: MemoryState,
    /// Ids of the memories that corrected this one (state "superseded").
    pub superseded_by: Vec<String>,
}

/// One edge of the graph, its ends by name, as memorize's `relations` are given.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct RelationView {
    pub from: String,
    pub label: String,
    pub to: String,
}

/// The resource `cortex://graph`: the caller's entities (by name) and relations.
#[derive(Debug, Clone, Serialize)]
pub struct GraphOutput {
    pub entities: Vec<EntityView>,
    pub relations: Vec<RelationView>,
    /// More records than one read returns: the lists hold the first of them.
    pub truncated: bool,
}
