//! [`TransferStore`] for SQLite: paged reads of every record, id-keeping imports.

use async_trait::async_trait;
use cortex_core::memory::Supersession;
use cortex_core::record_tx::{self, run_ready};
use cortex_core::records::{Entity, EntityEdge, Event};
use cortex_core::{
    error::StoreError, error::StoreResult, memory::Memory, memory::MemoryId, new_memory::NewMemory,
    signature::EmbeddingSignature, transfer::EntityLink, transfer::ImportItem, transfer::Imported,
    transfer::ImportedEntity, transfer::ItemImported, transfer::Record, transfer::RecordKind,
    transfer::StoredMemory, transfer::Switch, transfer::TransferStore,
};
use rusqlite::{Connection, Transaction, params};

use crate::codec::{
    EDGE_COLUMNS, ENTITY_COLUMNS, EVENT_COLUMNS, LINK_COLUMNS, MEMORY_COLUMNS, MemoryRow,
    SUPERSESSION_COLUMNS, decode_vector, edge_of, entity_of, event_of, link_of, query_rows,
    supersession_of,
};
use crate::db_err;
use crate::records::{BACKEND, SqliteRecords};
use crate::store::SqliteStore;
use crate::{reembed, writes};

fn page(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

fn read_records(
    conn: &Connection,
    user: &str,
    kind: RecordKind,
    offset: i64,
    limit: i64,
) -> StoreResult<Vec<Record>> {
    // Insertion order (rowid), so an import writes them back in the order they were made.
    let (columns, table, order) = match kind {
        RecordKind::Supersession => (SUPERSESSION_COLUMNS, "supersessions", "rowid"),
        RecordKind::Event => (EVENT_COLUMNS, "events", "rowid"),
        RecordKind::Entity => (ENTITY_COLUMNS, "entities", "rowid"),
        RecordKind::Edge => (EDGE_COLUMNS, "entity_edges", "seq"),
        RecordKind::Link => (LINK_COLUMNS, "memory_entities", "rowid"),
    };
    let sql = format!(
        "SELECT {columns} FROM {table} WHERE user_id = ?1 ORDER BY {order} LIMIT ?2 OFFSET ?3"
    );
    query_rows(conn, &sql, params![user, limit, offset], |r| {
        Ok(match kind {
            RecordKind::Supersession => Record::Supersession(supersession_of(r)?),
            RecordKind::Event => Record::Event(event_of(r)?),
            RecordKind::Entity => Record::Entity(entity_of(r)?),
            RecordKind::Edge => Record::Edge(edge_of(r)?),
            RecordKind::Link => Record::Link(link_of(r)?),
        })
    })
}

/// One item of an import batch, inside the batch's transaction.
fn import_item(
    tx: &Transaction<'_>,
    item: &ImportItem,
    signature: &EmbeddingSignature,
) -> StoreResult<ItemImported> {
    let plain = |outcome| ItemImported {
        outcome,
        entity_id: None,
    };
    let (user, record) = match item {
        ImportItem::Memory { memory, embedding } => {
            return Ok(plain(writes::import_memory(
                tx, memory, embedding, signature,
            )?));
        }
        ImportItem::Record { user, record } => (user, record),
    };
    let mut records = SqliteRecords(tx);
    let records = &mut records;
    Ok(match record {
        Record::Supersession(s) => plain(writes::import_supersession(tx, user, s)?),
        Record::Event(e) => plain(run_ready(
            BACKEND,
            record_tx::import_event(records, user, e),
        )?),
        Record::Entity(e) => {
            let done = run_ready(BACKEND, record_tx::import_entity(records, user, e))?;
            ItemImported {
                outcome: done.outcome,
                entity_id: Some(done.id),
            }
        }
        Record::Edge(e) => plain(run_ready(
            BACKEND,
            record_tx::import_edge(records, user, e),
        )?),
        Record::Link(l) => plain(run_ready(
            BACKEND,
            record_tx::import_link(records, user, l),
        )?),
    })
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
                        EXISTS (SELECT 1 FROM supersessions s WHERE s.old_id = m.id) AS superseded
                 FROM memories m WHERE m.user_id = ?1 AND m.seq > ?2
                 ORDER BY m.seq LIMIT ?3"
            );
            let mut stmt = conn.prepare_cached(&sql).map_err(db_err)?;
            let mut rows = stmt.query(params![user, after, limit]).map_err(db_err)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(db_err)? {
                let memory = MemoryRow::read(row).map_err(db_err)?.decode()?;
                let blob = row.get_ref("embedding").map_err(db_err)?;
                let bytes = blob
                    .as_blob()
                    .map_err(|e| StoreError::Corrupt(format!("embedding of {}: {e}", memory.id)))?;
                out.push(StoredMemory {
                    embedding: decode_vector(bytes)?,
                    superseded: row.get("superseded").map_err(db_err)?,
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
        self.write(move |tx| {
            let mut tx = SqliteRecords(tx);
            run_ready(BACKEND, record_tx::import_event(&mut tx, &user, &event))
        })
        .await
    }

    async fn import_entity(&self, user: &str, entity: &Entity) -> StoreResult<ImportedEntity> {
        let (user, entity) = (user.to_owned(), entity.clone());
        self.write(move |tx| {
            let mut tx = SqliteRecords(tx);
            run_ready(BACKEND, record_tx::import_entity(&mut tx, &user, &entity))
        })
        .await
    }

    async fn import_supersession(&self, user: &str, s: &Supersession) -> StoreResult<Imported> {
        let (user, s) = (user.to_owned(), s.clone());
        self.write(move |tx| writes::import_supersession(tx, &user, &s))
            .await
    }

    async fn import_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<Imported> {
        let (user, edge) = (user.to_owned(), edge.clone());
        self.write(move |tx| {
            let mut tx = SqliteRecords(tx);
            run_ready(BACKEND, record_tx::import_edge(&mut tx, &user, &edge))
        })
        .await
    }

    async fn import_link(&self, user: &str, link: &EntityLink) -> StoreResult<Imported> {
        let (user, link) = (user.to_owned(), link.clone());
        self.write(move |tx| {
            let mut tx = SqliteRecords(tx);
            run_ready(BACKEND, record_tx::import_link(&mut tx, &user, &link))
        })
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
                .map(|item| import_item(tx, item, &signature))
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

    async fn size_bytes(&self) -> StoreResult<Option<u64>> {
        self.run(|conn| size_on_disk(conn).map(Some)).await
    }
}

/// The database's pages and its WAL file. Pages committed to the WAL but not yet
/// checkpointed count in both, as they take space in both until a checkpoint.
fn size_on_disk(conn: &Connection) -> StoreResult<u64> {
    let pragma = |name: &str| {
        conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, i64>(0))
            .map_err(db_err)
    };
    let pages = u64::try_from(pragma("page_count")?.saturating_mul(pragma("page_size")?))
        .map_err(|_| StoreError::Corrupt("a negative page count or page size".into()))?;
    // SQLite's own name for the file, absolute whatever directory the process is in now;
    // empty for a temporary database, which has no WAL.
    let wal = match conn.path().filter(|p| !p.is_empty()) {
        Some(db) => match std::fs::metadata(format!("{db}-wal")) {
            Ok(meta) => meta.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(StoreError::backend(BACKEND, e)),
        },
        None => 0,
    };
    Ok(pages.saturating_add(wal))
}
