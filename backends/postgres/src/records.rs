//! [`RecordTx`] on PostgreSQL: the records' SQL, run by the core's rules
//! (`cortex_core::record_tx`) inside one of the pool's transactions, or on a plain
//! connection where a write is checked and made without one.

use cortex_core::record_tx::{LockScope, RecordTx};
use cortex_core::records::{Entity, EntityEdge, EntityId, Event};
use cortex_core::{error::StoreError, error::StoreResult, memory::MemoryId, transfer::EntityLink};
use deadpool_postgres::GenericClient;
use sea_query::{BinOper, Expr, ExprTrait, IdenStatic, OnConflict, Order, Query, Value};

use crate::codec::{ENTITY_COLUMNS, entity_of};
use crate::names::Names;
use crate::pg_err;
use crate::schema::lock_key;
use crate::sql::{self, build, get, is_foreign_key_violation, row_opt, sea_err};
use crate::tables::{Entities, EntityEdges, Events, Memories, MemoryEntities};

/// The records' reads and writes on `client`: a transaction, or a pooled connection.
pub(crate) struct PgRecords<'a, C> {
    client: &'a C,
    names: &'a Names,
}

impl<'a, C: GenericClient> PgRecords<'a, C> {
    pub(crate) fn new(client: &'a C, names: &'a Names) -> Self {
        Self { client, names }
    }

    /// The owner (`user_id`) of the row of `table` whose `key` is `id`.
    async fn owner<T: IdenStatic>(
        &self,
        [table, owner, key]: [T; 3],
        id: &uuid::Uuid,
    ) -> StoreResult<Option<String>> {
        let built = build(
            Query::select()
                .column(owner)
                .from(self.names.table(table))
                .and_where(Expr::col(key).eq(*id)),
        );
        row_opt(self.client, &built)
            .await?
            .map(|row| get(&row, 0))
            .transpose()
    }
}

/// A foreign-key failure after the checks passed means the memory went away meanwhile.
fn missing_if_fk(e: StoreError, what: String) -> StoreError {
    match is_foreign_key_violation(&e) {
        true => StoreError::MissingReference(what),
        false => e,
    }
}

impl<C: GenericClient> RecordTx for PgRecords<'_, C> {
    async fn memory_owner(&mut self, id: &MemoryId) -> StoreResult<Option<String>> {
        self.owner([Memories::Table, Memories::UserId, Memories::Id], id)
            .await
    }

    async fn entity_owner(&mut self, id: &EntityId) -> StoreResult<Option<String>> {
        self.owner([Entities::Table, Entities::UserId, Entities::Id], id)
            .await
    }

    /// A transaction-level advisory lock: held to the commit or rollback.
    async fn lock(&mut self, scope: LockScope<'_>) -> StoreResult<()> {
        let key = match scope {
            LockScope::Entities { user } => lock_key(&["cortex-entity", self.names.schema(), user]),
            LockScope::Events { memory } => lock_key(&[
                "cortex-import-event",
                self.names.schema(),
                &memory.to_string(),
            ]),
        };
        self.client
            .execute("SELECT pg_advisory_xact_lock($1)", &[&key])
            .await
            .map_err(pg_err)?;
        Ok(())
    }

    async fn find_entity(&mut self, user: &str, key: &str) -> StoreResult<Option<Entity>> {
        let built = build(
            Query::select()
                .columns(ENTITY_COLUMNS)
                .from(self.names.table(Entities::Table))
                .and_where(Expr::col(Entities::UserId).eq(user))
                .and_where(Expr::cust_with_values(
                    "normalized_name = $1 OR aliases @> ARRAY[$2::text]",
                    [key, key],
                ))
                .order_by(Entities::CreatedAt, Order::Asc)
                .order_by(Entities::Id, Order::Asc)
                .limit(1),
        );
        row_opt(self.client, &built)
            .await?
            .map(|row| entity_of(&row))
            .transpose()
    }

    async fn entity_named(&mut self, user: &str, name: &str) -> StoreResult<Option<EntityId>> {
        let built = build(
            Query::select()
                .column(Entities::Id)
                .from(self.names.table(Entities::Table))
                .and_where(Expr::col(Entities::UserId).eq(user))
                .and_where(Expr::col(Entities::NormalizedName).eq(name)),
        );
        row_opt(self.client, &built)
            .await?
            .map(|row| get(&row, 0))
            .transpose()
    }

    async fn insert_entity(&mut self, user: &str, entity: &Entity) -> StoreResult<()> {
        let built = build(
            Query::insert()
                .into_table(self.names.table(Entities::Table))
                .columns([
                    Entities::Id,
                    Entities::UserId,
                    Entities::Name,
                    Entities::NormalizedName,
                    Entities::EntityType,
                    Entities::Aliases,
                    Entities::CreatedAt,
                ])
                .values([
                    entity.id.into(),
                    user.into(),
                    entity.name.clone().into(),
                    entity.normalized_name.clone().into(),
                    entity.entity_type.clone().into(),
                    entity.aliases.clone().into(),
                    entity.created_at.into(),
                ])
                .map_err(sea_err)?,
        );
        sql::execute(self.client, &built).await?;
        Ok(())
    }

    async fn update_entity(&mut self, user: &str, entity: &Entity) -> StoreResult<()> {
        let built = build(
            Query::update()
                .table(self.names.table(Entities::Table))
                .value(Entities::EntityType, entity.entity_type.clone())
                .value(Entities::Aliases, entity.aliases.clone())
                .and_where(Expr::col(Entities::Id).eq(entity.id))
                .and_where(Expr::col(Entities::UserId).eq(user)),
        );
        sql::execute(self.client, &built).await?;
        Ok(())
    }

    async fn has_event(&mut self, user: &str, event: &Event) -> StoreResult<bool> {
        // NULL is a value here: an event without an actor is the same event again.
        let same = BinOper::Custom("IS NOT DISTINCT FROM");
        let mut query = Query::select();
        query
            .expr(Expr::cust("1"))
            .from(self.names.table(Events::Table))
            .limit(1);
        for (column, value) in event_values(user, event) {
            query.and_where(Expr::col(column).binary(same, value));
        }
        Ok(row_opt(self.client, &build(&query)).await?.is_some())
    }

    async fn insert_event(&mut self, user: &str, event: &Event) -> StoreResult<()> {
        let (columns, values): (Vec<Events>, Vec<Expr>) = event_values(user, event)
            .into_iter()
            .map(|(column, value)| (column, value.into()))
            .unzip();
        let built = build(
            Query::insert()
                .into_table(self.names.table(Events::Table))
                .columns(columns)
                .values(values)
                .map_err(sea_err)?,
        );
        sql::execute(self.client, &built)
            .await
            .map_err(|e| missing_if_fk(e, format!("memory {}", event.memory_id)))?;
        Ok(())
    }

    async fn insert_link(&mut self, user: &str, link: &EntityLink) -> StoreResult<bool> {
        let built = build(
            Query::insert()
                .into_table(self.names.table(MemoryEntities::Table))
                .columns([
                    MemoryEntities::MemoryId,
                    MemoryEntities::EntityId,
                    MemoryEntities::UserId,
                    MemoryEntities::Role,
                ])
                .values([
                    link.memory_id.into(),
                    link.entity_id.into(),
                    user.into(),
                    link.role.as_str().into(),
                ])
                .map_err(sea_err)?
                .on_conflict(
                    OnConflict::columns([
                        MemoryEntities::MemoryId,
                        MemoryEntities::EntityId,
                        MemoryEntities::Role,
                    ])
                    .do_nothing()
                    .to_owned(),
                ),
        );
        let inserted = sql::execute(self.client, &built)
            .await
            .map_err(|e| missing_if_fk(e, format!("memory {}", link.memory_id)))?;
        Ok(inserted > 0)
    }

    async fn insert_edge(&mut self, user: &str, edge: &EntityEdge) -> StoreResult<bool> {
        let built = build(
            Query::insert()
                .into_table(self.names.table(EntityEdges::Table))
                .columns([
                    EntityEdges::UserId,
                    EntityEdges::Source,
                    EntityEdges::Target,
                    EntityEdges::Label,
                    EntityEdges::MemoryId,
                    EntityEdges::CreatedAt,
                ])
                .values([
                    user.into(),
                    edge.source.into(),
                    edge.target.into(),
                    edge.label.clone().into(),
                    edge.memory_id.into(),
                    edge.created_at.into(),
                ])
                .map_err(sea_err)?
                .on_conflict(
                    OnConflict::columns([
                        EntityEdges::Source,
                        EntityEdges::Target,
                        EntityEdges::Label,
                    ])
                    .do_nothing()
                    .to_owned(),
                ),
        );
        let inserted = sql::execute(self.client, &built).await.map_err(|e| {
            missing_if_fk(e, format!("memory {}", edge.memory_id.unwrap_or_default()))
        })?;
        Ok(inserted > 0)
    }
}

/// An event row's columns and values, shared by the existence check and the insert so the
/// two cannot disagree on what "the same event" is.
fn event_values(user: &str, event: &Event) -> [(Events, Value); 6] {
    [
        (Events::MemoryId, event.memory_id.into()),
        (Events::UserId, user.into()),
        (Events::EventTime, event.event_time.into()),
        (Events::Actor, event.actor.clone().into()),
        (Events::Location, event.location.clone().into()),
        (Events::EventType, event.event_type.clone().into()),
    ]
}
