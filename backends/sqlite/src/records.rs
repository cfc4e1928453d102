//! [`RecordTx`] on SQLite: the records' SQL, run by the core's rules (`cortex_core::record_tx`)
//! inside the caller's transaction.
//!
//! rusqlite is synchronous: every method does its I/O before it returns and never awaits,
//! so [`run_ready`](cortex_core::record_tx::run_ready) drives a core function to the end
//! on the blocking thread that holds the connection.

use cortex_core::record_tx::{LockScope, RecordTx};
use cortex_core::records::{Entity, EntityEdge, EntityId, Event};
use cortex_core::{error::StoreResult, memory::MemoryId, transfer::EntityLink};
use rusqlite::{Connection, OptionalExtension, params};

use crate::codec::{ENTITY_COLUMNS, decode_id, encode_id, encode_list, encode_time, entity_of};
use crate::db_err;

/// The name [`run_ready`](cortex_core::record_tx::run_ready) gives this store in an error.
pub(crate) const BACKEND: &str = "sqlite";

/// The records' reads and writes on a connection, inside the caller's transaction when
/// there is more than one statement to run.
pub(crate) struct SqliteRecords<'a>(pub(crate) &'a Connection);

fn owner(conn: &Connection, sql: &str, id: &uuid::Uuid) -> StoreResult<Option<String>> {
    conn.prepare_cached(sql)
        .and_then(|mut s| s.query_row(params![encode_id(id)], |r| r.get(0)).optional())
        .map_err(db_err)
}

impl RecordTx for SqliteRecords<'_> {
    async fn memory_owner(&mut self, id: &MemoryId) -> StoreResult<Option<String>> {
        owner(self.0, "SELECT user_id FROM memories WHERE id = ?1", id)
    }

    async fn entity_owner(&mut self, id: &EntityId) -> StoreResult<Option<String>> {
        owner(self.0, "SELECT user_id FROM entities WHERE id = ?1", id)
    }

    async fn lock(&mut self, _scope: LockScope<'_>) -> StoreResult<()> {
        // Writes run in IMMEDIATE transactions: one at a time per database file.
        Ok(())
    }

    async fn find_entity(&mut self, user: &str, key: &str) -> StoreResult<Option<Entity>> {
        let sql = format!(
            "SELECT {ENTITY_COLUMNS} FROM entities e
             WHERE e.user_id = ?1
               AND (e.normalized_name = ?2
                    OR EXISTS (SELECT 1 FROM json_each(e.aliases) a WHERE a.value = ?2))
             ORDER BY e.created_at, e.id
             LIMIT 1"
        );
        let mut stmt = self.0.prepare_cached(&sql).map_err(db_err)?;
        let mut rows = stmt.query(params![user, key]).map_err(db_err)?;
        rows.next().map_err(db_err)?.map(entity_of).transpose()
    }

    async fn entity_named(&mut self, user: &str, name: &str) -> StoreResult<Option<EntityId>> {
        let id: Option<String> = self
            .0
            .prepare_cached("SELECT id FROM entities WHERE user_id = ?1 AND normalized_name = ?2")
            .and_then(|mut s| s.query_row(params![user, name], |r| r.get(0)).optional())
            .map_err(db_err)?;
        id.as_deref().map(decode_id).transpose()
    }

    async fn insert_entity(&mut self, user: &str, entity: &Entity) -> StoreResult<()> {
        self.0
            .execute(
                "INSERT INTO entities
                     (id, user_id, name, normalized_name, entity_type, aliases, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    encode_id(&entity.id),
                    user,
                    entity.name,
                    entity.normalized_name,
                    entity.entity_type,
                    encode_list(&entity.aliases),
                    encode_time(&entity.created_at),
                ],
            )
            .map_err(db_err)?;
        Ok(())
    }

    async fn update_entity(&mut self, user: &str, entity: &Entity) -> StoreResult<()> {
        self.0
            .execute(
                "UPDATE entities SET entity_type = ?1, aliases = ?2
                 WHERE id = ?3 AND user_id = ?4",
                params![
                    entity.entity_type,
                    encode_list(&entity.aliases),
                    encode_id(&entity.id),
                    user,
                ],
            )
            .map_err(db_err)?;
        Ok(())
    }

    async fn has_event(&mut self, user: &str, event: &Event) -> StoreResult<bool> {
        self.0
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM events
                 WHERE memory_id = ?1 AND user_id = ?2 AND event_time = ?3
                   AND actor IS ?4 AND location IS ?5 AND event_type IS ?6)",
                event_params(user, event),
                |r| r.get(0),
            )
            .map_err(db_err)
    }

    async fn insert_event(&mut self, user: &str, event: &Event) -> StoreResult<()> {
        self.0
            .execute(
                "INSERT INTO events (memory_id, user_id, event_time, actor, location, event_type)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                event_params(user, event),
            )
            .map_err(db_err)?;
        Ok(())
    }

    async fn insert_link(&mut self, user: &str, link: &EntityLink) -> StoreResult<bool> {
        let inserted = self
            .0
            .execute(
                "INSERT INTO memory_entities (memory_id, entity_id, user_id, role)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT DO NOTHING",
                params![
                    encode_id(&link.memory_id),
                    encode_id(&link.entity_id),
                    user,
                    link.role.as_str()
                ],
            )
            .map_err(db_err)?;
        Ok(inserted > 0)
    }

    async fn insert_edge(&mut self, user: &str, edge: &EntityEdge) -> StoreResult<bool> {
        let inserted = self
            .0
            .execute(
                "INSERT INTO entity_edges (user_id, source, target, label, memory_id, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (source, target, label) DO NOTHING",
                params![
                    user,
                    encode_id(&edge.source),
                    encode_id(&edge.target),
                    edge.label,
                    edge.memory_id.as_ref().map(encode_id),
                    encode_time(&edge.created_at),
                ],
            )
            .map_err(db_err)?;
        Ok(inserted > 0)
    }
}

/// An event row's six values, in the order both the existence check and the insert bind
/// them (?1 to ?6), so the two cannot disagree on what "the same event" is.
fn event_params<'a>(user: &'a str, event: &'a Event) -> impl rusqlite::Params + 'a {
    (
        encode_id(&event.memory_id),
        user,
        encode_time(&event.event_time),
        event.actor.as_deref(),
        event.location.as_deref(),
        event.event_type.as_deref(),
    )
}
