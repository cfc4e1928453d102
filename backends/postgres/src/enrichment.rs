//! The enrichment records: events, entities, edges and memory-entity links, and the
//! [`EnrichmentStore`] over them. The reads are here; the writes are the core's
//! (`cortex_core::record_tx`) over [`PgRecords`]. Supersessions are written by the store,
//! since they change the live set and the BM25 statistics; their read is here.

use async_trait::async_trait;
use cortex_core::record_tx::{self, RecordTx};
use cortex_core::records::{
    Entity, EntityEdge, EntityId, EntityRole, EntityUpsert, Event, TimeRange, TimelineEntry,
    normalize_entity_name,
};
use cortex_core::{
    enrichment_store::EnrichmentStore, enrichment_store::ExtractionRecords,
    enrichment_store::MemoryRecords, error::StoreError, error::StoreResult, memory::Memory,
    memory::MemoryId, transfer::EntityLink,
};
use deadpool_postgres::{Object, Transaction};
use sea_query::{Expr, ExprTrait, JoinType, Order, Query};
use tokio_postgres::IsolationLevel;

use crate::codec::{
    EDGE_COLUMNS, ENTITY_COLUMNS, EVENT_COLUMNS, LINK_COLUMNS, edge_of, entity_of, event_of,
    link_of, memory_columns, memory_of, qualified,
};
use crate::names::Names;
use crate::pg_err;
use crate::pool::Connections;
use crate::records::PgRecords;
use crate::sql::{build, limit, row_opt, rows};
use crate::store::PostgresStore;
use crate::tables::{Entities, EntityEdges, Events, Memories, MemoryEntities};

pub(crate) async fn timeline(
    pool: &Connections,
    names: &Names,
    user: &str,
    range: &TimeRange,
    max: usize,
) -> Result<Vec<TimelineEntry>, StoreError> {
    let mut select = Query::select();
    select
        .columns(memory_columns("m"))
        .columns(qualified("e", &EVENT_COLUMNS))
        .from_as(names.table(Events::Table), "e")
        .join_as(
            JoinType::InnerJoin,
            names.table(Memories::Table),
            "m",
            Expr::col(("m", Memories::Id)).equals(("e", Events::MemoryId)),
        )
        .and_where(Expr::col(("e", Events::UserId)).eq(user));
    if let Some(since) = range.since {
        select.and_where(Expr::col(("e", Events::EventTime)).gte(since));
    }
    if let Some(until) = range.until {
        select.and_where(Expr::col(("e", Events::EventTime)).lt(until));
    }
    select
        .order_by(("e", Events::EventTime), Order::Asc)
        .order_by(("m", Memories::Seq), Order::Asc)
        .limit(limit(max));
    let client = pool.get().await?;
    rows(&client, &build(&select))
        .await?
        .iter()
        .map(|row| {
            // The memory's and the event's columns share no name.
            Ok(TimelineEntry {
                memory: memory_of(row)?,
                event: event_of(row)?,
            })
        })
        .collect()
}

pub(crate) async fn entity(
    pool: &Connections,
    names: &Names,
    user: &str,
    id: &EntityId,
) -> Result<Option<Entity>, StoreError> {
    let built = build(
        Query::select()
            .columns(ENTITY_COLUMNS)
            .from(names.table(Entities::Table))
            .and_where(Expr::col(Entities::Id).eq(*id))
            .and_where(Expr::col(Entities::UserId).eq(user)),
    );
    let client = pool.get().await?;
    row_opt(&client, &built)
        .await?
        .map(|row| entity_of(&row))
        .transpose()
}

pub(crate) async fn edges(
    pool: &Connections,
    names: &Names,
    user: &str,
    entity: &EntityId,
) -> Result<Vec<EntityEdge>, StoreError> {
    let built = build(
        Query::select()
            .columns(EDGE_COLUMNS)
            .from(names.table(EntityEdges::Table))
            .and_where(Expr::col(EntityEdges::UserId).eq(user))
            .and_where(
                Expr::col(EntityEdges::Source)
                    .eq(*entity)
                    .or(Expr::col(EntityEdges::Target).eq(*entity)),
            )
            .order_by(EntityEdges::Seq, Order::Asc),
    );
    let client = pool.get().await?;
    rows(&client, &built).await?.iter().map(edge_of).collect()
}

pub(crate) async fn entity_memories(
    pool: &Connections,
    names: &Names,
    user: &str,
    entity: &EntityId,
    max: usize,
) -> Result<Vec<Memory>, StoreError> {
    let built = build(
        Query::select()
            .columns(memory_columns("m"))
            .from_as(names.table(Memories::Table), "m")
            .and_where(Expr::col(("m", Memories::UserId)).eq(user))
            .and_where(Expr::cust("NOT m.superseded"))
            .and_where(Expr::cust_with_values(
                format!(
                    "EXISTS (SELECT 1 FROM {} l WHERE l.memory_id = m.id AND l.entity_id = $1)",
                    names.q(MemoryEntities::Table)
                ),
                [*entity],
            ))
            .order_by(("m", Memories::Seq), Order::Desc)
            .limit(limit(max)),
    );
    let client = pool.get().await?;
    rows(&client, &built).await?.iter().map(memory_of).collect()
}

/// Every record of one memory, in one snapshot (a read-only repeatable-read transaction).
pub(crate) async fn memory_records(
    pool: &Connections,
    names: &Names,
    user: &str,
    memory: &MemoryId,
) -> Result<MemoryRecords, StoreError> {
    let events = build(
        Query::select()
            .columns(EVENT_COLUMNS)
            .from(names.table(Events::Table))
            .and_where(Expr::col(Events::UserId).eq(user))
            .and_where(Expr::col(Events::MemoryId).eq(*memory))
            .order_by(Events::Seq, Order::Asc),
    );
    let links = build(
        Query::select()
            .columns(LINK_COLUMNS)
            .from(names.table(MemoryEntities::Table))
            .and_where(Expr::col(MemoryEntities::UserId).eq(user))
            .and_where(Expr::col(MemoryEntities::MemoryId).eq(*memory))
            .order_by(MemoryEntities::EntityId, Order::Asc),
    );
    let edges = build(
        Query::select()
            .columns(EDGE_COLUMNS)
            .from(names.table(EntityEdges::Table))
            .and_where(Expr::col(EntityEdges::UserId).eq(user))
            .and_where(Expr::col(EntityEdges::MemoryId).eq(*memory))
            .order_by(EntityEdges::Seq, Order::Asc),
    );
    let mut client = pool.get().await?;
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(pg_err)?;
    let events = rows(&tx, &events)
        .await?
        .iter()
        .map(event_of)
        .collect::<Result<Vec<_>, _>>()?;
    let links = rows(&tx, &links)
        .await?
        .iter()
        .map(link_of)
        .collect::<Result<Vec<_>, _>>()?;
    let edges = rows(&tx, &edges)
        .await?
        .iter()
        .map(edge_of)
        .collect::<Result<Vec<_>, _>>()?;
    let mut ids: Vec<EntityId> = links
        .iter()
        .map(|l| l.entity_id)
        .chain(edges.iter().flat_map(|e| [e.source, e.target]))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    // sea-query writes an empty IN list as a constant; there is nothing to read anyway.
    let entities = match ids.is_empty() {
        true => Vec::new(),
        false => {
            let entities = build(
                Query::select()
                    .columns(ENTITY_COLUMNS)
                    .from(names.table(Entities::Table))
                    .and_where(Expr::col(Entities::UserId).eq(user))
                    .and_where(Expr::col(Entities::Id).is_in(ids))
                    .order_by(Entities::CreatedAt, Order::Asc)
                    .order_by(Entities::Id, Order::Asc),
            );
            rows(&tx, &entities)
                .await?
                .iter()
                .map(entity_of)
                .collect::<Result<Vec<_>, _>>()?
        }
    };
    tx.commit().await.map_err(pg_err)?;
    Ok(MemoryRecords {
        events,
        links: links.into_iter().map(|l| (l.entity_id, l.role)).collect(),
        edges,
        entities,
    })
}

impl PostgresStore {
    /// The records on one of the primary's pooled connections, without a transaction: for
    /// a single-record write, whose one row needs no transaction, of `wrote`'s records
    /// (recorded for their reads to wait for; `None` for a look-up on the primary). A
    /// memory forgotten between its check and the write fails the write's foreign key,
    /// reported as a missing reference.
    pub(crate) async fn plain_records<T>(
        &self,
        wrote: Option<&str>,
        write: impl AsyncFnOnce(&mut PgRecords<'_, Object>) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let client = self.client().await?;
        let out = write(&mut PgRecords::new(&client, self.names())).await?;
        if let Some(user) = wrote {
            self.note_write(&client, user).await;
        }
        Ok(out)
    }

    /// `user`'s records in one transaction, committed when `write` succeeds and rolled
    /// back (dropped) when it fails.
    pub(crate) async fn records_in_transaction<T>(
        &self,
        user: &str,
        write: impl AsyncFnOnce(&mut PgRecords<'_, Transaction<'_>>) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_err)?;
        let out = write(&mut PgRecords::new(&tx, self.names())).await?;
        tx.commit().await.map_err(pg_err)?;
        self.note_write(&client, user).await;
        Ok(out)
    }
}

#[async_trait]
impl EnrichmentStore for PostgresStore {
    async fn record_extraction(
        &self,
        user: &str,
        records: &ExtractionRecords,
    ) -> StoreResult<Vec<Entity>> {
        self.bounded(self.records_in_transaction(user, async |tx| {
            record_tx::record_extraction(tx, user, records).await
        }))
        .await
    }

    async fn add_event(&self, user: &str, event: &Event) -> StoreResult<()> {
        self.bounded(self.plain_records(Some(user), async |tx| {
            record_tx::add_event(tx, user, event).await
        }))
        .await
    }

    async fn timeline(
        &self,
        user: &str,
        range: &TimeRange,
        max: usize,
    ) -> StoreResult<Vec<TimelineEntry>> {
        self.read(user, move |on| async move {
            timeline(on, self.names(), user, range, max).await
        })
        .await
    }

    async fn upsert_entity(&self, user: &str, entity: &EntityUpsert) -> StoreResult<Entity> {
        self.bounded(self.records_in_transaction(user, async |tx| {
            record_tx::upsert_entity(tx, user, entity).await
        }))
        .await
    }

    async fn find_entity(&self, user: &str, name: &str) -> StoreResult<Option<Entity>> {
        let key = normalize_entity_name(name);
        let key = &key;
        self.read(user, move |on| async move {
            let client = on.get().await?;
            PgRecords::new(&client, self.names())
                .find_entity(user, key)
                .await
        })
        .await
    }

    async fn entity(&self, user: &str, id: &EntityId) -> StoreResult<Option<Entity>> {
        self.read(user, move |on| async move {
            entity(on, self.names(), user, id).await
        })
        .await
    }

    async fn add_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<()> {
        self.bounded(async {
            self.plain_records(Some(user), async |tx| {
                record_tx::add_edge(tx, user, edge).await
            })
            .await
            .map(|_| ())
        })
        .await
    }

    async fn edges(&self, user: &str, entity: &EntityId) -> StoreResult<Vec<EntityEdge>> {
        self.read(user, move |on| async move {
            edges(on, self.names(), user, entity).await
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
        self.bounded(async {
            let link = EntityLink {
                memory_id: *memory_id,
                entity_id: *entity,
                role,
            };
            self.plain_records(Some(user), async |tx| {
                record_tx::link_entity(tx, user, &link).await
            })
            .await
            .map(|_| ())
        })
        .await
    }

    async fn entity_memories(
        &self,
        user: &str,
        entity: &EntityId,
        max: usize,
    ) -> StoreResult<Vec<Memory>> {
        self.read(user, move |on| async move {
            entity_memories(on, self.names(), user, entity, max).await
        })
        .await
    }

    async fn memory_records(&self, user: &str, memory_id: &MemoryId) -> StoreResult<MemoryRecords> {
        self.read(user, move |on| async move {
            memory_records(on, self.names(), user, memory_id).await
        })
        .await
    }
}
