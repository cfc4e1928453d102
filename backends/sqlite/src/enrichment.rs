//! The enrichment records on SQLite: events, entities, edges and links.

use async_trait::async_trait;
use cortex_core::records::{
    Entity, EntityEdge, EntityId, EntityRole, EntityUpsert, Event, TimeRange, TimelineEntry,
    normalize_entity_name,
};
use cortex_core::{EnrichmentStore, EntityLink, ExtractionRecords, Memory, MemoryId, StoreResult};
use rusqlite::{OptionalExtension, params};

use crate::codec::{MEMORY_COLUMNS, MemoryRow, decode_id, decode_time, encode_id, encode_time};
use crate::db_err;
use crate::store::{
    ENTITY_COLUMNS, LIVE, SqliteStore, decode_entity, find_entity_by_keys, query_memories,
    read_entity,
};
use crate::writes::{insert_edge, insert_event, insert_link, record_extraction, upsert_entity};

#[async_trait]
impl EnrichmentStore for SqliteStore {
    async fn record_extraction(
        &self,
        user: &str,
        records: &ExtractionRecords,
    ) -> StoreResult<Vec<Entity>> {
        let (user, records) = (user.to_owned(), records.clone());
        self.write(move |tx| record_extraction(tx, &user, &records))
            .await
    }

    async fn add_event(&self, user: &str, event: &Event) -> StoreResult<()> {
        let (user, event) = (user.to_owned(), event.clone());
        self.write(move |tx| insert_event(tx, &user, &event)).await
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
                "SELECT {MEMORY_COLUMNS}, e.event_time, e.actor, e.location, e.event_type
                 FROM events e JOIN memories m ON m.id = e.memory_id
                 WHERE e.user_id = ?1
                   AND (?2 IS NULL OR e.event_time >= ?2)
                   AND (?3 IS NULL OR e.event_time < ?3)
                 ORDER BY e.event_time, m.seq
                 LIMIT ?4"
            );
            let mut stmt = conn.prepare_cached(&sql).map_err(db_err)?;
            let rows = stmt
                .query_map(params![user, since, until, limit], |r| {
                    Ok((
                        MemoryRow::read(r, 0)?,
                        r.get::<_, String>(7)?,
                        r.get::<_, Option<String>>(8)?,
                        r.get::<_, Option<String>>(9)?,
                        r.get::<_, Option<String>>(10)?,
                    ))
                })
                .map_err(db_err)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(db_err)?;
            rows.into_iter()
                .map(|(m, time, actor, location, event_type)| {
                    let memory = m.decode()?;
                    Ok(TimelineEntry {
                        event: Event {
                            memory_id: memory.id,
                            event_time: decode_time(&time)?,
                            actor,
                            location,
                            event_type,
                        },
                        memory,
                    })
                })
                .collect()
        })
        .await
    }

    async fn upsert_entity(&self, user: &str, entity: &EntityUpsert) -> StoreResult<Entity> {
        let (user, upsert) = (user.to_owned(), entity.clone());
        self.write(move |tx| upsert_entity(tx, &user, &upsert))
            .await
    }

    async fn find_entity(&self, user: &str, name: &str) -> StoreResult<Option<Entity>> {
        let (user, key) = (user.to_owned(), normalize_entity_name(name));
        self.run(move |conn| find_entity_by_keys(conn, &user, &[key]))
            .await
    }

    async fn entity(&self, user: &str, id: &EntityId) -> StoreResult<Option<Entity>> {
        let (user, id) = (user.to_owned(), encode_id(id));
        self.run(move |conn| {
            let sql =
                format!("SELECT {ENTITY_COLUMNS} FROM entities WHERE id = ?1 AND user_id = ?2");
            conn.query_row(&sql, params![id, user], read_entity)
                .optional()
                .map_err(db_err)?
                .map(decode_entity)
                .transpose()
        })
        .await
    }

    async fn add_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<()> {
        let (user, edge) = (user.to_owned(), edge.clone());
        self.write(move |tx| insert_edge(tx, &user, &edge).map(|_| ()))
            .await
    }

    async fn edges(&self, user: &str, entity: &EntityId) -> StoreResult<Vec<EntityEdge>> {
        let (user, id) = (user.to_owned(), encode_id(entity));
        self.run(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT source, target, label, memory_id, created_at FROM entity_edges
                     WHERE user_id = ?1 AND (source = ?2 OR target = ?2)
                     ORDER BY seq",
                )
                .map_err(db_err)?;
            let rows = stmt
                .query_map(params![user, id], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, Option<String>>(3)?,
                        r.get::<_, String>(4)?,
                    ))
                })
                .map_err(db_err)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(db_err)?;
            rows.into_iter()
                .map(|(source, target, label, memory, at)| {
                    Ok(EntityEdge {
                        source: decode_id(&source)?,
                        target: decode_id(&target)?,
                        label,
                        memory_id: memory.as_deref().map(decode_id).transpose()?,
                        created_at: decode_time(&at)?,
                    })
                })
                .collect()
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
        self.write(move |tx| insert_link(tx, &user, &link).map(|_| ()))
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
}
