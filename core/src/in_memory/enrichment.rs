//! The in-memory enrichment records: the writes are the core's ([`record_tx`]), each run
//! as one transaction over the locked state ([`InMemoryStore::transact`]).

use async_trait::async_trait;

use super::InMemoryStore;
use super::records::BACKEND;
use crate::enrichment_store::{EnrichmentStore, ExtractionRecords, MemoryRecords};
use crate::error::StoreResult;
use crate::memory::{Memory, MemoryId};
use crate::record_tx::{self, RecordTx, run_ready};
use crate::records::{
    Entity, EntityEdge, EntityId, EntityRole, EntityUpsert, Event, TimeRange, TimelineEntry,
    normalize_entity_name,
};
use crate::transfer::EntityLink;

#[async_trait]
impl EnrichmentStore for InMemoryStore {
    async fn record_extraction(
        &self,
        user: &str,
        records: &ExtractionRecords,
    ) -> StoreResult<Vec<Entity>> {
        self.transact(|tx| run_ready(BACKEND, record_tx::record_extraction(tx, user, records)))
    }

    async fn add_event(&self, user: &str, event: &Event) -> StoreResult<()> {
        self.transact(|tx| run_ready(BACKEND, record_tx::add_event(tx, user, event)))
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
        self.transact(|tx| run_ready(BACKEND, record_tx::upsert_entity(tx, user, entity)))
    }

    async fn find_entity(&self, user: &str, name: &str) -> StoreResult<Option<Entity>> {
        let key = normalize_entity_name(name);
        self.transact(|tx| run_ready(BACKEND, tx.find_entity(user, &key)))
    }

    async fn entity(&self, user: &str, id: &EntityId) -> StoreResult<Option<Entity>> {
        Ok(self.with_user(user, |d| d.entities.iter().find(|e| &e.id == id).cloned()))
    }

    async fn add_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<()> {
        self.transact(|tx| run_ready(BACKEND, record_tx::add_edge(tx, user, edge)))
            .map(|_| ())
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
        let link = EntityLink {
            memory_id: *memory_id,
            entity_id: *entity,
            role,
        };
        self.transact(|tx| run_ready(BACKEND, record_tx::link_entity(tx, user, &link)))
            .map(|_| ())
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

    async fn memory_records(&self, user: &str, memory_id: &MemoryId) -> StoreResult<MemoryRecords> {
        Ok(self.with_user(user, |d| {
            let mut records = MemoryRecords {
                events: d
                    .events
                    .iter()
                    .filter(|e| &e.memory_id == memory_id)
                    .cloned()
                    .collect(),
                links: d
                    .links
                    .iter()
                    .filter(|(m, _, _)| m == memory_id)
                    .map(|(_, e, role)| (*e, *role))
                    .collect(),
                edges: d
                    .edges
                    .iter()
                    .filter(|e| e.memory_id.as_ref() == Some(memory_id))
                    .cloned()
                    .collect(),
                entities: Vec::new(),
            };
            let named: Vec<EntityId> = records
                .links
                .iter()
                .map(|(e, _)| *e)
                .chain(records.edges.iter().flat_map(|e| [e.source, e.target]))
                .collect();
            records.entities = d
                .entities
                .iter()
                .filter(|e| named.contains(&e.id))
                .cloned()
                .collect();
            records
        }))
    }
}
