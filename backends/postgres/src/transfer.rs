//! [`TransferStore`] for PostgreSQL: paged reads of every record, id-keeping imports.

use async_trait::async_trait;
use cortex_core::record_tx::{self, RecordTx, existing_id};
use cortex_core::records::{Entity, EntityEdge, Event};
use cortex_core::{
    error::StoreError, error::StoreResult, memory::Memory, memory::MemoryId, new_memory::NewMemory,
    signature::EmbeddingSignature, store::MemoryStore, transfer::EntityLink, transfer::Imported,
    transfer::ImportedEntity, transfer::Record, transfer::RecordKind, transfer::StoredMemory,
    transfer::Switch, transfer::TransferStore,
};
use pgvector::Vector;
use sea_query::{ColumnRef, Expr, ExprTrait, IdenStatic, IntoColumnRef, Order, Query, TableRef};
use tokio_postgres::Row;

use crate::codec::{
    EDGE_COLUMNS, ENTITY_COLUMNS, EVENT_COLUMNS, LINK_COLUMNS, SUPERSESSION_COLUMNS, edge_of,
    entity_of, event_of, link_of, memory_columns, memory_of, supersession_of,
};
use crate::names::Names;
use crate::sql::{build, get, get_named, limit, rows};
use crate::store::PostgresStore;
use crate::tables::{Entities, EntityEdges, Events, Memories, MemoryEntities, Supersessions};
use crate::{pg_err, reembed};

/// Where a kind of record is kept and how its rows are read.
struct Layout {
    table: TableRef,
    columns: Vec<ColumnRef>,
    /// Insertion order where the table keeps one, else the key: fixed while nothing is
    /// written, which is all paging needs.
    order: Vec<ColumnRef>,
    /// The column holding the record's user.
    owner: ColumnRef,
    decode: fn(&Row) -> StoreResult<Record>,
}

impl Layout {
    fn of<T: IdenStatic>(
        names: &Names,
        [table, owner]: [T; 2],
        columns: &[T],
        order: &[T],
        decode: fn(&Row) -> StoreResult<Record>,
    ) -> Self {
        let refs = |columns: &[T]| columns.iter().map(|c| c.into_column_ref()).collect();
        Self {
            table: names.table(table),
            columns: refs(columns),
            order: refs(order),
            owner: owner.into_column_ref(),
            decode,
        }
    }
}

fn layout(kind: RecordKind, names: &Names) -> Layout {
    match kind {
        RecordKind::Supersession => Layout::of(
            names,
            [Supersessions::Table, Supersessions::UserId],
            &SUPERSESSION_COLUMNS,
            &[Supersessions::Seq],
            |r| supersession_of(r).map(Record::Supersession),
        ),
        RecordKind::Event => Layout::of(
            names,
            [Events::Table, Events::UserId],
            &EVENT_COLUMNS,
            &[Events::Seq],
            |r| event_of(r).map(Record::Event),
        ),
        RecordKind::Entity => Layout::of(
            names,
            [Entities::Table, Entities::UserId],
            &ENTITY_COLUMNS,
            &[Entities::CreatedAt, Entities::Id],
            |r| entity_of(r).map(Record::Entity),
        ),
        RecordKind::Edge => Layout::of(
            names,
            [EntityEdges::Table, EntityEdges::UserId],
            &EDGE_COLUMNS,
            &[EntityEdges::Seq],
            |r| edge_of(r).map(Record::Edge),
        ),
        RecordKind::Link => Layout::of(
            names,
            [MemoryEntities::Table, MemoryEntities::UserId],
            &LINK_COLUMNS,
            &[
                MemoryEntities::MemoryId,
                MemoryEntities::EntityId,
                MemoryEntities::Role,
            ],
            |r| link_of(r).map(Record::Link),
        ),
    }
}

#[async_trait]
impl TransferStore for PostgresStore {
    async fn users(&self) -> StoreResult<Vec<String>> {
        self.bounded(async {
            // Entities too: a user whose memories were all forgotten can still have a graph.
            let sql = format!(
                "SELECT user_id FROM (SELECT user_id FROM {} UNION SELECT user_id FROM {}) u
             ORDER BY user_id COLLATE \"C\"",
                self.names().q(Memories::Table),
                self.names().q(Entities::Table)
            );
            let client = self.client().await?;
            let rows = client.query(&sql, &[]).await.map_err(pg_err)?;
            rows.iter().map(|r| get(r, 0)).collect()
        })
        .await
    }

    async fn memories_after(
        &self,
        user: &str,
        after: i64,
        max: usize,
    ) -> StoreResult<Vec<StoredMemory>> {
        let built = build(
            Query::select()
                .columns(memory_columns("m"))
                .columns([("m", Memories::Superseded), ("m", Memories::Embedding)])
                .from_as(self.names().table(Memories::Table), "m")
                .and_where(Expr::col(("m", Memories::UserId)).eq(user))
                .and_where(Expr::col(("m", Memories::Seq)).gt(after))
                .order_by(("m", Memories::Seq), Order::Asc)
                .limit(limit(max)),
        );
        let built = &built;
        self.read(user, move |on| async move {
            let client = on.get().await?;
            rows(&client, built)
                .await?
                .iter()
                .map(|r| {
                    let vector: Vector = get_named(r, Memories::Embedding)?;
                    Ok(StoredMemory {
                        memory: memory_of(r)?,
                        superseded: get_named(r, Memories::Superseded)?,
                        embedding: vector.to_vec(),
                    })
                })
                .collect()
        })
        .await
    }

    async fn records(
        &self,
        user: &str,
        kind: RecordKind,
        offset: u64,
        max: usize,
    ) -> StoreResult<Vec<Record>> {
        let layout = layout(kind, self.names());
        let mut select = Query::select();
        select
            .columns(layout.columns)
            .from(layout.table)
            .and_where(Expr::col(layout.owner).eq(user))
            .offset(offset)
            .limit(limit(max));
        for column in layout.order {
            select.order_by(column, Order::Asc);
        }
        let (built, decode) = (build(&select), layout.decode);
        let built = &built;
        self.read(user, move |on| async move {
            let client = on.get().await?;
            rows(&client, built).await?.iter().map(decode).collect()
        })
        .await
    }

    /// The id checked against every user's memories first: an id of another user's is
    /// refused, not left to the insert's unique key.
    async fn import_memory(
        &self,
        memory: &NewMemory,
        embedding: &[f32],
        signature: &EmbeddingSignature,
    ) -> StoreResult<Imported> {
        self.bounded(async {
            let owner = self
                .plain_records(None, async |tx| tx.memory_owner(&memory.id).await)
                .await?;
            if let Some(done) =
                existing_id("memory", &memory.id, owner.as_deref(), &memory.user_id)?
            {
                return Ok(done);
            }
            self.add(memory, embedding, signature).await?;
            Ok(Imported::Written)
        })
        .await
    }

    async fn import_event(&self, user: &str, event: &Event) -> StoreResult<Imported> {
        self.bounded(self.records_in_transaction(user, async |tx| {
            record_tx::import_event(tx, user, event).await
        }))
        .await
    }

    async fn import_entity(&self, user: &str, entity: &Entity) -> StoreResult<ImportedEntity> {
        self.bounded(self.records_in_transaction(user, async |tx| {
            record_tx::import_entity(tx, user, entity).await
        }))
        .await
    }

    async fn import_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<Imported> {
        self.bounded(self.plain_records(Some(user), async |tx| {
            record_tx::import_edge(tx, user, edge).await
        }))
        .await
    }

    async fn import_link(&self, user: &str, link: &EntityLink) -> StoreResult<Imported> {
        self.bounded(self.plain_records(Some(user), async |tx| {
            record_tx::import_link(tx, user, link).await
        }))
        .await
    }

    async fn unstaged(
        &self,
        signature: &EmbeddingSignature,
        after: i64,
        max: usize,
    ) -> StoreResult<Vec<Memory>> {
        self.bounded(async {
            let client = self.client().await?;
            reembed::unstaged(&client, self.names(), signature, after, max).await
        })
        .await
    }

    async fn stage_vectors(
        &self,
        signature: &EmbeddingSignature,
        vectors: &[(MemoryId, Vec<f32>)],
    ) -> StoreResult<()> {
        self.bounded(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(pg_err)?;
            reembed::stage(&tx, self.names(), signature, vectors).await?;
            tx.commit().await.map_err(pg_err)
        })
        .await
    }

    /// Not under the call deadline, nor the statement timeout: the switch rewrites every
    /// memory's vector in one transaction, which on a large store rightly takes minutes. On
    /// a dead link the keepalives and `TCP_USER_TIMEOUT` end it.
    async fn switch_vectors(&self, signature: &EmbeddingSignature) -> StoreResult<Switch> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_err)?;
        tx.batch_execute("SET LOCAL statement_timeout = 0")
            .await
            .map_err(pg_err)?;
        let outcome = reembed::switch(&tx, self.names(), signature).await?;
        tx.commit().await.map_err(pg_err)?;
        self.note_write_for_everyone(&client).await;
        if let Switch::Switched { .. } = outcome {
            self.remember_signature(signature.clone());
        }
        Ok(outcome)
    }

    async fn size_bytes(&self) -> StoreResult<Option<u64>> {
        self.bounded(async {
            // Tables only: pg_total_relation_size already counts each one's indexes and
            // TOAST, so adding the schema's indexes again would count them twice.
            let sql = "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint
                       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'm')";
            let client = self.client().await?;
            let row = client
                .query_one(sql, &[&self.names().schema()])
                .await
                .map_err(pg_err)?;
            let bytes: i64 = get(&row, 0)?;
            u64::try_from(bytes)
                .map(Some)
                .map_err(|_| StoreError::Corrupt(format!("a schema of {bytes} bytes")))
        })
        .await
    }
}
