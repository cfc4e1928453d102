//! The second storage seam: the records the write-time layers keep beside the memories
//! (events, entities, edges, links) and the reads the timeline and the dossier make.
//!
//! Recall never touches them: the engine reaches this trait only through a handle it is
//! given when a layer needs it, and the recall path has no such handle. A backend ships
//! [`MemoryStore`](crate::store::MemoryStore) first, passes the core suite, and adds this later.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::StoreError;
use crate::error::StoreResult;
use crate::memory::{Memory, MemoryId};
use crate::records::{
    Entity, EntityEdge, EntityId, EntityRole, EntityUpsert, Event, TimeRange, TimelineEntry,
};

/// Everything one extraction read from one memory, written by
/// [`EnrichmentStore::record_extraction`] in one transaction: all of it or nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractionRecords {
    /// The memory the records were read from; it must exist for the user.
    pub memory_id: MemoryId,
    /// The memory's dated events (each `memory_id` must be the one above); extraction
    /// reads at most one.
    pub events: Vec<Event>,
    /// Upserted in order, each as [`EnrichmentStore::upsert_entity`] would, seeing the
    /// ones before it; links and edges name them by position.
    pub entities: Vec<EntityUpsert>,
    /// The memory's links. An entity this write already linked is not linked again, so
    /// the first role given for it wins (two names can resolve to one entity).
    pub links: Vec<ExtractedLink>,
    /// Relationships read from the memory.
    pub edges: Vec<ExtractedEdge>,
}

/// A link from the extraction's memory to one of its entities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtractedLink {
    /// Position in [`ExtractionRecords::entities`].
    pub entity: usize,
    pub role: EntityRole,
}

/// A relationship between two of the extraction's entities, read from its memory.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractedEdge {
    /// Position in [`ExtractionRecords::entities`].
    pub source: usize,
    /// Position in [`ExtractionRecords::entities`].
    pub target: usize,
    pub label: String,
    pub created_at: DateTime<Utc>,
}

impl ExtractionRecords {
    /// Records for `memory_id` with nothing in them yet.
    pub fn new(memory_id: MemoryId) -> Self {
        Self {
            memory_id,
            events: Vec::new(),
            entities: Vec::new(),
            links: Vec::new(),
            edges: Vec::new(),
        }
    }

    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.entities.is_empty()
    }

    /// Refuses records that contradict themselves, before a store writes any of them.
    pub fn check(&self) -> StoreResult<()> {
        if let Some(event) = self.events.iter().find(|e| e.memory_id != self.memory_id) {
            return Err(StoreError::InvalidRecord(format!(
                "the event names memory {}, the extraction memory {}",
                event.memory_id, self.memory_id
            )));
        }
        for entity in &self.entities {
            entity.check()?;
        }
        let count = self.entities.len();
        let positions = self
            .links
            .iter()
            .map(|l| l.entity)
            .chain(self.edges.iter().flat_map(|e| [e.source, e.target]));
        for position in positions {
            if position >= count {
                return Err(StoreError::InvalidRecord(format!(
                    "entity #{position} does not exist: the extraction has {count}"
                )));
            }
        }
        Ok(())
    }

    /// The links and edges to write once the entities are stored as `ids` (one per
    /// entity, in order): each distinct entity linked once, with its first role.
    pub fn resolve(&self, ids: &[EntityId]) -> StoreResult<Resolved> {
        let id = |position: usize| {
            ids.get(position).copied().ok_or_else(|| {
                StoreError::InvalidRecord(format!(
                    "entity #{position} does not exist: the extraction has {}",
                    ids.len()
                ))
            })
        };
        let mut links: Vec<(EntityId, EntityRole)> = Vec::with_capacity(self.links.len());
        for link in &self.links {
            let entity = id(link.entity)?;
            if !links.iter().any(|(seen, _)| *seen == entity) {
                links.push((entity, link.role));
            }
        }
        let edges = self
            .edges
            .iter()
            .map(|e| {
                Ok(EntityEdge {
                    source: id(e.source)?,
                    target: id(e.target)?,
                    label: e.label.clone(),
                    memory_id: Some(self.memory_id),
                    created_at: e.created_at,
                })
            })
            .collect::<StoreResult<_>>()?;
        Ok(Resolved { links, edges })
    }
}

/// Every record written for one memory: what [`EnrichmentStore::memory_records`] reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryRecords {
    /// Its events, in the order written.
    pub events: Vec<Event>,
    /// The entities it is linked to, with the link's role, in the order linked.
    pub links: Vec<(EntityId, EntityRole)>,
    /// The relationships read from it, in the order written.
    pub edges: Vec<EntityEdge>,
    /// Every entity a link or an edge names, once each.
    pub entities: Vec<Entity>,
}

impl MemoryRecords {
    /// Whether the memory has no record at all.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.links.is_empty() && self.edges.is_empty()
    }

    /// The same records for memory `memory_id` (a new version of the memory they were read
    /// from), as one extraction: each entity upserted by its name, type and aliases, which
    /// finds the entity they came from.
    pub fn for_memory(&self, memory_id: MemoryId) -> ExtractionRecords {
        let position = |id: &EntityId| self.entities.iter().position(|e| &e.id == id);
        let mut records = ExtractionRecords::new(memory_id);
        records.events = self
            .events
            .iter()
            .map(|e| Event {
                memory_id,
                ..e.clone()
            })
            .collect();
        records.entities = self
            .entities
            .iter()
            .map(|e| EntityUpsert {
                name: e.name.clone(),
                entity_type: e.entity_type.clone(),
                aliases: e.aliases.clone(),
            })
            .collect();
        records.links = self
            .links
            .iter()
            .filter_map(|(id, role)| {
                position(id).map(|entity| ExtractedLink {
                    entity,
                    role: *role,
                })
            })
            .collect();
        records.edges = self
            .edges
            .iter()
            .filter_map(|e| {
                Some(ExtractedEdge {
                    source: position(&e.source)?,
                    target: position(&e.target)?,
                    label: e.label.clone(),
                    created_at: e.created_at,
                })
            })
            .collect();
        records
    }
}

/// An extraction's links and edges with their entities' ids.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub links: Vec<(EntityId, EntityRole)>,
    pub edges: Vec<EntityEdge>,
}

/// Events, entities, edges and links, and the reads over them. Every method is scoped to
/// one user.
#[async_trait]
pub trait EnrichmentStore: Send + Sync + fmt::Debug {
    /// Writes one extraction's event, entities, links and edges in one transaction and
    /// returns the entities as stored, in the order given. Records that fail
    /// [`ExtractionRecords::check`] or name a memory the user does not have write nothing.
    async fn record_extraction(
        &self,
        user: &str,
        records: &ExtractionRecords,
    ) -> StoreResult<Vec<Entity>>;

    /// Stores one event (its memory must exist for the user).
    async fn add_event(&self, user: &str, event: &Event) -> StoreResult<()>;

    /// Events in `range`, oldest first, each with its memory.
    async fn timeline(
        &self,
        user: &str,
        range: &TimeRange,
        limit: usize,
    ) -> StoreResult<Vec<TimelineEntry>>;

    /// Finds the entity by normalised name or alias, merging the new name and aliases into
    /// it, or creates it.
    async fn upsert_entity(&self, user: &str, entity: &EntityUpsert) -> StoreResult<Entity>;

    /// The entity whose normalised name or alias equals `name` normalised.
    async fn find_entity(&self, user: &str, name: &str) -> StoreResult<Option<Entity>>;

    /// The entity with this id, if it belongs to the user.
    async fn entity(&self, user: &str, id: &EntityId) -> StoreResult<Option<Entity>>;

    /// Adds a directed labelled edge; adding the same (source, target, label) again is a
    /// no-op.
    async fn add_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<()>;

    /// Edges into and out of `entity`, oldest first.
    async fn edges(&self, user: &str, entity: &EntityId) -> StoreResult<Vec<EntityEdge>>;

    /// Links a memory to an entity; linking again is a no-op.
    async fn link_entity(
        &self,
        user: &str,
        memory_id: &MemoryId,
        entity: &EntityId,
        role: EntityRole,
    ) -> StoreResult<()>;

    /// Live memories linked to `entity`, newest first.
    async fn entity_memories(
        &self,
        user: &str,
        entity: &EntityId,
        limit: usize,
    ) -> StoreResult<Vec<Memory>>;

    /// Every record written for the user's memory `memory_id` (live or not): its events,
    /// links and the edges read from it, with the entities they name. Empty for a memory
    /// the user does not have.
    async fn memory_records(&self, user: &str, memory_id: &MemoryId) -> StoreResult<MemoryRecords>;
}

// Forward every method so a wrapped store keeps its own.
macro_rules! forward_enrichment {
    ($($ptr:ident),*) => {$(
        #[async_trait]
        impl<S: EnrichmentStore + ?Sized> EnrichmentStore for $ptr<S> {
            async fn record_extraction(
                &self,
                user: &str,
                records: &ExtractionRecords,
            ) -> StoreResult<Vec<Entity>> {
                (**self).record_extraction(user, records).await
            }
            async fn add_event(&self, user: &str, event: &Event) -> StoreResult<()> {
                (**self).add_event(user, event).await
            }
            async fn timeline(
                &self,
                user: &str,
                range: &TimeRange,
                limit: usize,
            ) -> StoreResult<Vec<TimelineEntry>> {
                (**self).timeline(user, range, limit).await
            }
            async fn upsert_entity(&self, user: &str, entity: &EntityUpsert) -> StoreResult<Entity> {
                (**self).upsert_entity(user, entity).await
            }
            async fn find_entity(&self, user: &str, name: &str) -> StoreResult<Option<Entity>> {
                (**self).find_entity(user, name).await
            }
            async fn entity(&self, user: &str, id: &EntityId) -> StoreResult<Option<Entity>> {
                (**self).entity(user, id).await
            }
            async fn add_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<()> {
                (**self).add_edge(user, edge).await
            }
            async fn edges(&self, user: &str, entity: &EntityId) -> StoreResult<Vec<EntityEdge>> {
                (**self).edges(user, entity).await
            }
            async fn link_entity(
                &self,
                user: &str,
                memory_id: &MemoryId,
                entity: &EntityId,
                role: EntityRole,
            ) -> StoreResult<()> {
                (**self).link_entity(user, memory_id, entity, role).await
            }
            async fn entity_memories(
                &self,
                user: &str,
                entity: &EntityId,
                limit: usize,
            ) -> StoreResult<Vec<Memory>> {
                (**self).entity_memories(user, entity, limit).await
            }
            async fn memory_records(
                &self,
                user: &str,
                memory_id: &MemoryId,
            ) -> StoreResult<MemoryRecords> {
                (**self).memory_records(user, memory_id).await
            }
        }
    )*};
}

forward_enrichment!(Arc, Box);
