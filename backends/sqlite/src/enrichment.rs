//! The enrichment records on SQLite: events, entities, edges and links. The writes are the
//! core's (`cortex_core::record_tx`) over [`SqliteRecords`], each in one transaction.

use async_trait::async_trait;
use cortex_core::record_tx::{self, RecordTx, run_ready};
use cortex_core::records::{
    Entity, EntityEdge, EntityId, EntityRole, EntityUpsert, Event, TimeRange, TimelineEntry,
    normalize_entity_name,
};
use cortex_core::{
    enrichment_store::EnrichmentStore, enrichment_store::ExtractionRecords,
    enrichment_store::MemoryRecords, error::StoreResult, memory::Memory, memory::MemoryId,
    transfer::EntityLink,
};
use rusqlite::params;

use crate::codec::{
    EDGE_COLUMNS, ENTITY_COLUMNS, EVENT_COLUMNS, LINK_COLUMNS, MEMORY_COLUMNS, MemoryRow, edge_of,
    encode_id, encode_time, entity_of, event_of, link_of, query_rows,
};
use crate::codec::{LIVE, query_memories};
use crate::db_err;
use crate::records::{BACKEND, SqliteRecords};
use crate::store::SqliteStore;

#[async_trait]
impl EnrichmentStore for SqliteStore {
    async fn record_extraction(
        &self,
        user: &str,
        records: &ExtractionRecords,
    ) -> StoreResult<Vec<Entity>> {
        let (user, records) = (user.to_owned(), records.clone());
        self.write(move |tx| {
            let mut tx = SqliteRecords(tx);
            run_ready(
                BACKEND,
                record_tx::record_extraction(&mut tx, &user, &records),
            )
        })
        .await
    }

    async fn add_event(&self, user: &str, event: &Event) -> StoreResult<()> {
        let (user, event) = (user.to_owned(), event.clone());
        self.write(move |tx| {
            let mut tx = SqliteRecords(tx);
            run_ready(BACKEND, record_tx::add_event(&mut tx, &user, &event))
        })
        .await
    }

    async fn timeline(
        &self,
        user: &str,
        range: &TimeRange,
        limit: usize,
    ) -> StoreResult<Vec<TimelineEntry>> {
        let user = user.to_owned();
        let since = range.since.as_ref().map(encode_time);
        let until = range.until.as_ref().map(encode_time);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(move |conn| {
            let sql = format!(
                "SELECT {MEMORY_COLUMNS}, {EVENT_COLUMNS}
                 FROM events e JOIN memories m ON m.id = e.memory_id
                 WHERE e.user_id = ?1
                   AND (?2 IS NULL OR e.event_time >= ?2)
                   AND (?3 IS NULL OR e.event_time < ?3)
                 ORDER BY e.event_time, m.seq
                 LIMIT ?4"
            );
            query_rows(conn, &sql, params![user, since, until, limit], |r| {
                Ok(TimelineEntry {
                    memory: MemoryRow::read(r).map_err(db_err)?.decode()?,
                    event: event_of(r)?,
                })
            })
        })
        .await
    }

    async fn upsert_entity(&self, user: &str, entity: &EntityUpsert) -> StoreResult<Entity> {
        let (user, upsert) = (user.to_owned(), entity.clone());
        self.write(move |tx| {
            let mut tx = SqliteRecords(tx);
            run_ready(BACKEND, record_tx::upsert_entity(&mut tx, &user, &upsert))
        })
        .await
    }

    async fn find_entity(&self, user: &str, name: &str) -> StoreResult<Option<Entity>> {
        let (user, key) = (user.to_owned(), normalize_entity_name(name));
        self.run(move |conn| run_ready(BACKEND, SqliteRecords(conn).find_entity(&user, &key)))
            .await
    }

    async fn entity(&self, user: &str, id: &EntityId) -> StoreResult<Option<Entity>> {
        let (user, id) = (user.to_owned(), encode_id(id));
        self.run(move |conn| {
            let sql =
                format!("SELECT {ENTITY_COLUMNS} FROM entities WHERE id = ?1 AND user_id = ?2");
            Ok(query_rows(conn, &sql, params![id, user], entity_of)?.pop())
        })
        .await
    }

    async fn add_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<()> {
        let (user, edge) = (user.to_owned(), edge.clone());
        self.write(move |tx| {
            let mut tx = SqliteRecords(tx);
            run_ready(BACKEND, record_tx::add_edge(&mut tx, &user, &edge)).map(|_| ())
        })
        .await
    }

    async fn edges(&self, user: &str, entity: &EntityId) -> StoreResult<Vec<EntityEdge>> {
        let (user, id) = (user.to_owned(), encode_id(entity));
        self.run(move |conn| {
            let sql = format!(
                "SELECT {EDGE_COLUMNS} FROM entity_edges
                 WHERE user_id = ?1 AND (source = ?2 OR target = ?2)
                 ORDER BY seq"
            );
            query_rows(conn, &sql, params![user, id], edge_of)
        })
        .await
    }

    async fn link_entity(
        &self,
        user: &str,
        memory_id: &MemoryId,
        entity: &EntityId,
        role: EntityRole,
    ) -> StoreResult<()> {
        let user = user.to_owned();
        let link = EntityLink {
            memory_id: *memory_id,
            entity_id: *entity,
            role,
        };
        self.write(move |tx| {
            let mut tx = SqliteRecords(tx);
            run_ready(BACKEND, record_tx::link_entity(&mut tx, &user, &link)).map(|_| ())
        })
        .await
    }

    async fn entity_memories(
        &self,
        user: &str,
        entity: &EntityId,
        limit: usize,
    ) -> StoreResult<Vec<Memory>> {
        let (user, entity) = (user.to_owned(), encode_id(entity));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(move |conn| {
            let sql = format!(
                "SELECT {MEMORY_COLUMNS} FROM memories m
                 WHERE m.user_id = ?1 AND {LIVE}
                   AND EXISTS (SELECT 1 FROM memory_entities l
                               WHERE l.memory_id = m.id AND l.entity_id = ?2)
                 ORDER BY m.seq DESC LIMIT ?3"
            );
            query_memories(conn, &sql, params![user, entity, limit])
        })
        .await
    }

    async fn memory_records(&self, user: &str, memory_id: &MemoryId) -> StoreResult<MemoryRecords> {
        let (user, id) = (user.to_owned(), encode_id(memory_id));
        self.run(move |conn| {
            let of_memory = |columns: &str, table: &str, order: &str| {
                format!(
                    "SELECT {columns} FROM {table}
                     WHERE user_id = ?1 AND memory_id = ?2 ORDER BY {order}"
                )
            };
            let args = params![user, id];
            let events = query_rows(
                conn,
                &of_memory(EVENT_COLUMNS, "events", "rowid"),
                args,
                event_of,
            )?;
            let links = query_rows(
                conn,
                &of_memory(LINK_COLUMNS, "memory_entities", "rowid"),
                args,
                link_of,
            )?;
            let edges = query_rows(
                conn,
                &of_memory(EDGE_COLUMNS, "entity_edges", "seq"),
                args,
                edge_of,
            )?;
            let sql = format!(
                "SELECT {ENTITY_COLUMNS} FROM entities
                 WHERE user_id = ?1 AND id IN (
                     SELECT entity_id FROM memory_entities WHERE user_id = ?1 AND memory_id = ?2
                     UNION SELECT source FROM entity_edges WHERE user_id = ?1 AND memory_id = ?2
                     UNION SELECT target FROM entity_edges WHERE user_id = ?1 AND memory_id = ?2)
                 ORDER BY rowid"
            );
            let entities = query_rows(conn, &sql, args, entity_of)?;
            Ok(MemoryRecords {
                events,
                links: links.into_iter().map(|l| (l.entity_id, l.role)).collect(),
                edges,
                entities,
            })
        })
        .await
    }
}
