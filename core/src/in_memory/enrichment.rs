//! The in-memory enrichment records. Every write validates before it mutates, under the
//! one lock, so an extraction is written whole or not at all.

use async_trait::async_trait;

use super::{InMemoryStore, UserData};
use crate::enrichment_store::{EnrichmentStore, ExtractionRecords};
use crate::memory::{Memory, MemoryId, now};
use crate::records::{
    Entity, EntityEdge, EntityId, EntityRole, EntityUpsert, Event, TimeRange, TimelineEntry,
    normalize_entity_name,
};
use crate::store::StoreResult;

impl UserData {
    fn upsert_entity(&mut self, entity: &EntityUpsert) -> Entity {
        // Keys in order (name first, then aliases), oldest entity first within a key, as
        // the SQL backends resolve them.
        let keys = entity.keys();
        let position = keys
            .iter()
            .find_map(|k| self.entities.iter().position(|e| e.answers_to(k)));
        match position.and_then(|i| self.entities.get_mut(i)) {
            Some(existing) => {
                existing.merge(entity);
                existing.clone()
            }
            None => {
                let created = Entity::create(entity, now());
                self.entities.push(created.clone());
                created
            }
        }
    }

    fn add_edge(&mut self, edge: &EntityEdge) {
        let exists = self
            .edges
            .iter()
            .any(|e| e.source == edge.source && e.target == edge.target && e.label == edge.label);
        if !exists {
            self.edges.push(edge.clone());
        }
    }

    fn link(&mut self, memory_id: MemoryId, entity: EntityId, role: EntityRole) {
        let link = (memory_id, entity, role);
        if !self.links.contains(&link) {
            self.links.push(link);
        }
    }
}

#[async_trait]
impl EnrichmentStore for InMemoryStore {
    async fn record_extraction(
        &self,
        user: &str,
        records: &ExtractionRecords,
    ) -> StoreResult<Vec<Entity>> {
        records.check()?;
        self.with_user_mut(user, |d| {
            d.require_memory(&records.memory_id)?;
            if let Some(event) = &records.event {
                d.events.push(event.clone());
            }
            let entities: Vec<Entity> = records
                .entities
                .iter()
                .map(|e| d.upsert_entity(e))
                .collect();
            let ids: Vec<EntityId> = entities.iter().map(|e| e.id).collect();
            let resolved = records.resolve(&ids)?;
            for (entity, role) in resolved.links {
                d.link(records.memory_id, entity, role);
            }
            for edge in &resolved.edges {
                d.add_edge(edge);
            }
            Ok(entities)
        })
    }

    async fn add_event(&self, user: &str, event: &Event) -> StoreResult<()> {
        self.with_user_mut(user, |d| {
            d.require_memory(&event.memory_id)?;
            d.events.push(event.clone());
            Ok(())
        })
    }

    async fn timeline(
        &self,
        user: &str,
        range: &TimeRange,
        limit: usize,
    ) -> StoreResult<Vec<TimelineEntry>> {
        Ok(self.with_user(user, |d| {
            let mut entries: Vec<TimelineEntry> = d
                .events
                .iter()
                .filter(|e| range.contains(e.event_time))
                .filter_map(|e| {
                    Some(TimelineEntry {
                        event: e.clone(),
                        memory: d.memory(&e.memory_id)?.clone(),
                    })
                })
                .collect();
            entries.sort_by_key(|t| (t.event.event_time, t.memory.seq));
            entries.truncate(limit);
            entries
        }))
    }

    async fn upsert_entity(&self, user: &str, entity: &EntityUpsert) -> StoreResult<Entity> {
        Ok(self.with_user_mut(user, |d| d.upsert_entity(entity)))
    }

    async fn find_entity(&self, user: &str, name: &str) -> StoreResult<Option<Entity>> {
        let key = normalize_entity_name(name);
        Ok(self.with_user(user, |d| {
            d.entities.iter().find(|e| e.answers_to(&key)).cloned()
        }))
    }

    async fn entity(&self, user: &str, id: &EntityId) -> StoreResult<Option<Entity>> {
        Ok(self.with_user(user, |d| d.entities.iter().find(|e| &e.id == id).cloned()))
    }

    async fn add_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<()> {
        self.with_user_mut(user, |d| {
            d.require_entity(&edge.source)?;
            d.require_entity(&edge.target)?;
            if let Some(m) = &edge.memory_id {
                d.require_memory(m)?;
            }
            d.add_edge(edge);
            Ok(())
        })
    }

    async fn edges(&self, user: &str, entity: &EntityId) -> StoreResult<Vec<EntityEdge>> {
        Ok(self.with_user(user, |d| {
            d.edges
                .iter()
                .filter(|e| &e.source == entity || &e.target == entity)
                .cloned()
                .collect()
        }))
    }

    async fn link_entity(
        &self,
        user: &str,
        memory_id: &MemoryId,
        entity: &EntityId,
        role: EntityRole,
    ) -> StoreResult<()> {
        self.with_user_mut(user, |d| {
            d.require_memory(memory_id)?;
            d.require_entity(entity)?;
            d.link(*memory_id, *entity, role);
            Ok(())
        })
    }

    async fn entity_memories(
        &self,
        user: &str,
        entity: &EntityId,
        limit: usize,
    ) -> StoreResult<Vec<Memory>> {
        Ok(self.with_user(user, |d| {
            d.live()
                .rev()
                .filter(|(m, _)| {
                    d.links
                        .iter()
                        .any(|(mid, eid, _)| mid == &m.id && eid == entity)
                })
                .take(limit)
                .map(|(m, _)| m.clone())
                .collect()
        }))
    }
}
