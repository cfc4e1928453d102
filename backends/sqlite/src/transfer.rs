//! [`TransferStore`] for SQLite: paged reads of every record, id-keeping imports.

use async_trait::async_trait;
use cortex_core::records::{Entity, EntityEdge, EntityRole, Event, Supersession};
use cortex_core::{
    EmbeddingSignature, EntityLink, ImportItem, Imported, ImportedEntity, ItemImported, Memory,
    MemoryId, NewMemory, Record, RecordKind, StoreError, StoreResult, StoredMemory, Switch,
    TransferStore,
};
use rusqlite::{Connection, params};

use crate::codec::{MEMORY_COLUMNS, MemoryRow, decode_id, decode_time, decode_vector};
use crate::db_err;
use crate::store::{SqliteStore, decode_entity, read_entity};
use crate::{reembed, writes};

fn page(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

type Decode = fn(&rusqlite::Row<'_>) -> StoreResult<Record>;

fn text(r: &rusqlite::Row<'_>, i: usize) -> StoreResult<String> {
    r.get(i).map_err(db_err)
}

fn maybe(r: &rusqlite::Row<'_>, i: usize) -> StoreResult<Option<String>> {
    r.get(i).map_err(db_err)
}

fn supersession(r: &rusqlite::Row<'_>) -> StoreResult<Record> {
    Ok(Record::Supersession(Supersession {
        old_id: decode_id(&text(r, 0)?)?,
        new_id: decode_id(&text(r, 1)?)?,
        reason: text(r, 2)?,
        created_at: decode_time(&text(r, 3)?)?,
    }))
}

fn event(r: &rusqlite::Row<'_>) -> StoreResult<Record> {
    Ok(Record::Event(Event {
        memory_id: decode_id(&text(r, 0)?)?,
        event_time: decode_time(&text(r, 1)?)?,
        actor: maybe(r, 2)?,
        location: maybe(r, 3)?,
        event_type: maybe(r, 4)?,
    }))
}

fn entity(r: &rusqlite::Row<'_>) -> StoreResult<Record> {
    decode_entity(read_entity(r).map_err(db_err)?).map(Record::Entity)
}

fn edge(r: &rusqlite::Row<'_>) -> StoreResult<Record> {
    Ok(Record::Edge(EntityEdge {
        source: decode_id(&text(r, 0)?)?,
        target: decode_id(&text(r, 1)?)?,
        label: text(r, 2)?,
        memory_id: maybe(r, 3)?.as_deref().map(decode_id).transpose()?,
        created_at: decode_time(&text(r, 4)?)?,
    }))
}

fn link(r: &rusqlite::Row<'_>) -> StoreResult<Record> {
    let role = text(r, 2)?;
    Ok(Record::Link(EntityLink {
        memory_id: decode_id(&text(r, 0)?)?,
        entity_id: decode_id(&text(r, 1)?)?,
        role: EntityRole::parse(&role)
            .ok_or_else(|| StoreError::Corrupt(format!("entity role {role:?}")))?,
    }))
}

fn read_records(
    conn: &Connection,
    user: &str,
    kind: RecordKind,
    offset: i64,
    limit: i64,
) -> StoreResult<Vec<Record>> {
    // Insertion order (rowid), so an import writes them back in the order they were made.
    let (sql, decode): (&str, Decode) = match kind {
        RecordKind::Supersession => (
            "SELECT old_id, new_id, reason, created_at FROM supersessions
             WHERE user_id = ?1 ORDER BY rowid LIMIT ?2 OFFSET ?3",
            supersession,
        ),
        RecordKind::Event => (
            "SELECT memory_id, event_time, actor, location, event_type FROM events
             WHERE user_id = ?1 ORDER BY rowid LIMIT ?2 OFFSET ?3",
            event,
        ),
        RecordKind::Entity => (
            // The columns of ENTITY_COLUMNS, which `read_entity` expects.
            "SELECT id, name, normalized_name, entity_type, aliases, created_at FROM entities
             WHERE user_id = ?1 ORDER BY rowid LIMIT ?2 OFFSET ?3",
            entity,
        ),
        RecordKind::Edge => (
            "SELECT source, target, label, memory_id, created_at FROM entity_edges
             WHERE user_id = ?1 ORDER BY seq LIMIT ?2 OFFSET ?3",
            edge,
        ),
        RecordKind::Link => (
            "SELECT memory_id, entity_id, role FROM memory_entities
             WHERE user_id = ?1 ORDER BY rowid LIMIT ?2 OFFSET ?3",
            link,
        ),
    };
    let mut stmt = conn.prepare_cached(sql).map_err(db_err)?;
    let mut rows = stmt.query(params![user, limit, offset]).map_err(db_err)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(db_err)? {
        out.push(decode(r)?);
    }
    Ok(out)
}

#[async_trait]
impl TransferStore for SqliteStore {
    async fn users(&self) -> StoreResult<Vec<String>> {
        self.run(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT user_id FROM memories UNION SELECT user_id FROM entities
                     ORDER BY user_id",
                )
                .map_err(db_err)?;
            stmt.query_map([], |r| r.get::<_, String>(0))
                .map_err(db_err)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(db_err)
        })
        .await
    }

    async fn memories_after(
        &self,
        user: &str,
        after: i64,
        limit: usize,
    ) -> StoreResult<Vec<StoredMemory>> {
        let (user, limit) = (user.to_owned(), page(limit));
        self.run(move |conn| {
            let sql = format!(
                "SELECT {MEMORY_COLUMNS}, m.embedding,
                        EXISTS (SELECT 1 FROM supersessions s WHERE s.old_id = m.id)
                 FROM memories m WHERE m.user_id = ?1 AND m.seq > ?2
                 ORDER BY m.seq LIMIT ?3"
            );
            let mut stmt = conn.prepare_cached(&sql).map_err(db_err)?;
            let mut rows = stmt.query(params![user, after, limit]).map_err(db_err)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(db_err)? {
                let memory = MemoryRow::read(row, 0).map_err(db_err)?.decode()?;
                let blob = row.get_ref(7).map_err(db_err)?;
                let bytes = blob
                    .as_blob()
                    .map_err(|e| StoreError::Corrupt(format!("embedding of {}: {e}", memory.id)))?;
                out.push(StoredMemory {
                    embedding: decode_vector(bytes)?,
                    superseded: row.get(8).map_err(db_err)?,
                    memory,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn records(
        &self,
        user: &str,
        kind: RecordKind,
        offset: u64,
        limit: usize,
    ) -> StoreResult<Vec<Record>> {
        let user = user.to_owned();
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let limit = page(limit);
        self.run(move |conn| read_records(conn, &user, kind, offset, limit))
            .await
    }

    async fn import_memory(
        &self,
        memory: &NewMemory,
        embedding: &[f32],
        signature: &EmbeddingSignature,
    ) -> StoreResult<Imported> {
        let (memory, embedding) = (memory.clone(), embedding.to_vec());
        let signature = signature.clone();
        self.write(move |tx| writes::import_memory(tx, &memory, &embedding, &signature))
            .await
    }

    async fn import_event(&self, user: &str, event: &Event) -> StoreResult<Imported> {
        let (user, event) = (user.to_owned(), event.clone());
        self.write(move |tx| writes::import_event(tx, &user, &event))
            .await
    }

    async fn import_entity(&self, user: &str, entity: &Entity) -> StoreResult<ImportedEntity> {
        let (user, entity) = (user.to_owned(), entity.clone());
        self.write(move |tx| writes::import_entity(tx, &user, &entity))
            .await
    }

    async fn import_supersession(&self, user: &str, s: &Supersession) -> StoreResult<Imported> {
        let (user, s) = (user.to_owned(), s.clone());
        self.write(move |tx| writes::import_supersession(tx, &user, &s))
            .await
    }

    async fn import_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<Imported> {
        let (user, edge) = (user.to_owned(), edge.clone());
        self.write(move |tx| writes::insert_edge(tx, &user, &edge).map(writes::outcome))
            .await
    }

    async fn import_link(&self, user: &str, link: &EntityLink) -> StoreResult<Imported> {
        let (user, link) = (user.to_owned(), link.clone());
        self.write(move |tx| writes::insert_link(tx, &user, &link).map(writes::outcome))
            .await
    }

    /// The whole batch in one transaction: one fsync, and all of it or none.
    async fn import_batch(
        &self,
        items: &[ImportItem],
        signature: &EmbeddingSignature,
    ) -> StoreResult<Vec<ItemImported>> {
        let (items, signature) = (items.to_vec(), signature.clone());
        self.write(move |tx| {
            items
                .iter()
                .map(|item| {
                    let plain = |outcome| ItemImported {
                        outcome,
                        entity_id: None,
                    };
                    Ok(match item {
                        ImportItem::Memory { memory, embedding } => {
                            plain(writes::import_memory(tx, memory, embedding, &signature)?)
                        }
                        ImportItem::Record { user, record } => match record {
                            Record::Supersession(s) => {
                                plain(writes::import_supersession(tx, user, s)?)
                            }
                            Record::Event(e) => plain(writes::import_event(tx, user, e)?),
                            Record::Entity(e) => {
                                let done = writes::import_entity(tx, user, e)?;
                                ItemImported {
                                    outcome: done.outcome,
                                    entity_id: Some(done.id),
                                }
                            }
                            Record::Edge(e) => {
                                plain(writes::outcome(writes::insert_edge(tx, user, e)?))
                            }
                            Record::Link(l) => {
                                plain(writes::outcome(writes::insert_link(tx, user, l)?))
                            }
                        },
                    })
                })
                .collect()
        })
        .await
    }

    async fn unstaged(
        &self,
        signature: &EmbeddingSignature,
        after: i64,
        limit: usize,
    ) -> StoreResult<Vec<Memory>> {
        let (signature, limit) = (signature.encode(), page(limit));
        self.run(move |conn| reembed::unstaged(conn, &signature, after, limit))
            .await
    }

    async fn stage_vectors(
        &self,
        signature: &EmbeddingSignature,
        vectors: &[(MemoryId, Vec<f32>)],
    ) -> StoreResult<()> {
        let (signature, vectors) = (signature.clone(), vectors.to_vec());
        self.write(move |tx| reembed::stage(tx, &signature, &vectors))
            .await
    }

    async fn switch_vectors(&self, signature: &EmbeddingSignature) -> StoreResult<Switch> {
        let signature = signature.clone();
        self.write(move |tx| reembed::switch(tx, &signature)).await
    }
}
