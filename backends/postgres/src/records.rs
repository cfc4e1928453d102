//! [`RecordTx`] on PostgreSQL: the records' SQL, run by the core's rules
//! (`cortex_core::record_tx`) inside one of the pool's transactions, or on a plain
//! connection where a write is checked and made without one.

use cortex_core::record_tx::{LockScope, RecordTx};
use cortex_core::records::{Entity, EntityEdge, EntityId, Event};
use cortex_core::{EntityLink, MemoryId, StoreError, StoreResult};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, OnConflict, Order, Query};

use crate::codec::{ENTITY_COLUMNS, entity_at};
use crate::names::Names;
use crate::pg_err;
use crate::schema::lock_key;
use crate::sql::{self, build, get, is_foreign_key_violation, row_opt, sea_err};

/// The records' reads and writes on `client`: a transaction, or a pooled connection.
pub(crate) struct PgRecords<'a, C> {
    client: &'a C,
    names: &'a Names,
}

impl<'a, C: GenericClient> PgRecords<'a, C> {
    pub(crate) fn new(client: &'a C, names: &'a Names) -> Self {
        Self { client, names }
    }

    /// The `user_id` of the row of `table` whose id is `id`.
    async fn owner(&self, table: &'static str, id: &uuid::Uuid) -> StoreResult<Option<String>> {
        let built = build(
            Query::select()
                .column("user_id")
                .from(self.names.table(table))
                .and_where(Expr::col("id").eq(*id)),
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
        self.owner("memories", id).await
    }

    async fn entity_owner(&mut self, id: &EntityId) -> StoreResult<Option<String>> {
        self.owner("entities", id).await
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
                .from(self.names.table("entities"))
                .and_where(Expr::col("user_id").eq(user))
                .and_where(Expr::cust_with_values(
                    "normalized_name = $1 OR aliases @> ARRAY[$2::text]",
                    [key, key],
                ))
                .order_by("created_at", Order::Asc)
                .order_by("id", Order::Asc)
                .limit(1),
        );
        row_opt(self.client, &built)
            .await?
            .map(|row| entity_at(&row, 0))
            .transpose()
    }

    async fn entity_named(&mut self, user: &str, name: &str) -> StoreResult<Option<EntityId>> {
        let built = build(
            Query::select()
                .column("id")
                .from(self.names.table("entities"))
                .and_where(Expr::col("user_id").eq(user))
                .and_where(Expr::col("normalized_name").eq(name)),
        );
        row_opt(self.client, &built)
            .await?
            .map(|row| get(&row, 0))
            .transpose()
    }

    async fn insert_entity(&mut self, user: &str, entity: &Entity) -> StoreResult<()> {
        let built = build(
            Query::insert()
                .into_table(self.names.table("entities"))
                .columns([
                    "id",
                    "user_id",
                    "name",
                    "normalized_name",
                    "entity_type",
                    "aliases",
                    "created_at",
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
                .table(self.names.table("entities"))
                .value("entity_type", entity.entity_type.clone())
                .value("aliases", entity.aliases.clone())
                .and_where(Expr::col("id").eq(entity.id))
                .and_where(Expr::col("user_id").eq(user)),
        );
        sql::execute(self.client, &built).await?;
        Ok(())
    }

    async fn has_event(&mut self, user: &str, event: &Event) -> StoreResult<bool> {
        let built = build(
            Query::select()
                .expr(Expr::cust("1"))
                .from(self.names.table("events"))
                .and_where(Expr::col("memory_id").eq(event.memory_id))
                .and_where(Expr::col("user_id").eq(user))
                .and_where(Expr::col("event_time").eq(event.event_time))
                .and_where(Expr::cust_with_values(
                    "actor IS NOT DISTINCT FROM $1 AND location IS NOT DISTINCT FROM $2 \
                     AND event_type IS NOT DISTINCT FROM $3",
                    [
                        event.actor.clone(),
                        event.location.clone(),
                        event.event_type.clone(),
                    ],
                ))
                .limit(1),
        );
        Ok(row_opt(self.client, &built).await?.is_some())
    }

    async fn insert_event(&mut self, user: &str, event: &Event) -> StoreResult<()> {
        let built = build(
            Query::insert()
                .into_table(self.names.table("events"))
                .columns([
                    "memory_id",
                    "user_id",
                    "event_time",
                    "actor",
                    "location",
                    "event_type",
                ])
                .values([
                    event.memory_id.into(),
                    user.into(),
                    event.event_time.into(),
                    event.actor.clone().into(),
                    event.location.clone().into(),
                    event.event_type.clone().into(),
                ])
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
                .into_table(self.names.table("memory_entities"))
                .columns(["memory_id", "entity_id", "user_id", "role"])
                .values([
                    link.memory_id.into(),
                    link.entity_id.into(),
                    user.into(),
                    link.role.as_str().into(),
                ])
                .map_err(sea_err)?
                .on_conflict(
                    OnConflict::columns(["memory_id", "entity_id", "role"])
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
                .into_table(self.names.table("entity_edges"))
                .columns([
                    "user_id",
                    "source",
                    "target",
                    "label",
                    "memory_id",
                    "created_at",
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
                    OnConflict::columns(["source", "target", "label"])
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
