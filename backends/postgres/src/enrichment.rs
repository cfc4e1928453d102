//! The enrichment records: events, entities, edges and memory-entity links, and the
//! [`EnrichmentStore`] over them. Supersessions
//! live in the store, since they change the live set and the BM25 statistics.

use async_trait::async_trait;
use cortex_core::StoreError;
use cortex_core::memory::now;
use cortex_core::records::{
    Entity, EntityEdge, EntityId, EntityRole, EntityUpsert, Event, Supersession, TimeRange,
    TimelineEntry, normalize_entity_name,
};
use cortex_core::{EnrichmentStore, ExtractionRecords, Memory, MemoryId, StoreResult};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, JoinType, OnConflict, Order, Query};

use crate::codec::{ENTITY_COLUMNS, entity_at, memory_at, memory_columns};
use crate::names::Names;
use crate::pg_err;
use crate::pool::Connections;
use crate::schema::lock_key;
use crate::sql::{self, build, get, is_foreign_key_violation, limit, row_opt, rows, sea_err};
use crate::store::PostgresStore;

async fn exists<C: GenericClient>(
    client: &C,
    names: &Names,
    table: &'static str,
    user: &str,
    id: &uuid::Uuid,
) -> Result<bool, StoreError> {
    let built = build(
        Query::select()
            .expr(Expr::cust("1"))
            .from(names.table(table))
            .and_where(Expr::col("id").eq(*id))
            .and_where(Expr::col("user_id").eq(user)),
    );
    Ok(row_opt(client, &built).await?.is_some())
}

pub(crate) async fn require_memory<C: GenericClient>(
    client: &C,
    names: &Names,
    user: &str,
    id: &MemoryId,
) -> Result<(), StoreError> {
    match exists(client, names, "memories", user, id).await? {
        true => Ok(()),
        false => Err(StoreError::MissingReference(format!("memory {id}"))),
    }
}

async fn require_entity<C: GenericClient>(
    client: &C,
    names: &Names,
    user: &str,
    id: &EntityId,
) -> Result<(), StoreError> {
    match exists(client, names, "entities", user, id).await? {
        true => Ok(()),
        false => Err(StoreError::MissingReference(format!("entity {id}"))),
    }
}

/// A foreign-key failure after the checks passed means the memory went away meanwhile.
fn missing_if_fk(e: StoreError, what: String) -> StoreError {
    match is_foreign_key_violation(&e) {
        true => StoreError::MissingReference(what),
        false => e,
    }
}

pub(crate) async fn add_event(
    pool: &Connections,
    names: &Names,
    user: &str,
    event: &Event,
) -> Result<(), StoreError> {
    let client = pool.get().await?;
    insert_event(&client, names, user, event).await
}

/// Writes an event of one of the user's memories.
pub(crate) async fn insert_event<C: GenericClient>(
    client: &C,
    names: &Names,
    user: &str,
    event: &Event,
) -> Result<(), StoreError> {
    require_memory(client, names, user, &event.memory_id).await?;
    let built = build(
        Query::insert()
            .into_table(names.table("events"))
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
    sql::execute(client, &built)
        .await
        .map_err(|e| missing_if_fk(e, format!("memory {}", event.memory_id)))?;
    Ok(())
}

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
        .columns([
            ("e", "event_time"),
            ("e", "actor"),
            ("e", "location"),
            ("e", "event_type"),
        ])
        .from_as(names.table("events"), "e")
        .join_as(
            JoinType::InnerJoin,
            names.table("memories"),
            "m",
            Expr::col(("m", "id")).equals(("e", "memory_id")),
        )
        .and_where(Expr::col(("e", "user_id")).eq(user));
    if let Some(since) = range.since {
        select.and_where(Expr::col(("e", "event_time")).gte(since));
    }
    if let Some(until) = range.until {
        select.and_where(Expr::col(("e", "event_time")).lt(until));
    }
    select
        .order_by(("e", "event_time"), Order::Asc)
        .order_by(("m", "seq"), Order::Asc)
        .limit(limit(max));
    let client = pool.get().await?;
    rows(&client, &build(&select))
        .await?
        .iter()
        .map(|row| {
            let memory = memory_at(row, 0)?;
            Ok(TimelineEntry {
                event: Event {
                    memory_id: memory.id,
                    event_time: get(row, 7)?,
                    actor: get(row, 8)?,
                    location: get(row, 9)?,
                    event_type: get(row, 10)?,
                },
                memory,
            })
        })
        .collect()
}

pub(crate) async fn supersessions(
    pool: &Connections,
    names: &Names,
    user: &str,
    memory_id: &MemoryId,
) -> Result<Vec<Supersession>, StoreError> {
    let built = build(
        Query::select()
            .columns(["old_id", "new_id", "reason", "created_at"])
            .from(names.table("supersessions"))
            .and_where(Expr::col("user_id").eq(user))
            .and_where(
                Expr::col("old_id")
                    .eq(*memory_id)
                    .or(Expr::col("new_id").eq(*memory_id)),
            )
            .order_by("created_at", Order::Asc)
            .order_by("seq", Order::Asc),
    );
    let client = pool.get().await?;
    rows(&client, &built)
        .await?
        .iter()
        .map(|row| {
            Ok(Supersession {
                old_id: get(row, 0)?,
                new_id: get(row, 1)?,
                reason: get(row, 2)?,
                created_at: get(row, 3)?,
            })
        })
        .collect()
}

/// The oldest entity answering to any of `keys`, tried in order.
pub(crate) async fn find_by_keys<C: GenericClient>(
    client: &C,
    names: &Names,
    user: &str,
    keys: &[String],
) -> Result<Option<Entity>, StoreError> {
    for key in keys {
        let built = build(
            Query::select()
                .columns(ENTITY_COLUMNS)
                .from(names.table("entities"))
                .and_where(Expr::col("user_id").eq(user))
                .and_where(Expr::cust_with_values(
                    "normalized_name = $1 OR aliases @> ARRAY[$2::text]",
                    [key.clone(), key.clone()],
                ))
                .order_by("created_at", Order::Asc)
                .order_by("id", Order::Asc)
                .limit(1),
        );
        if let Some(row) = row_opt(client, &built).await? {
            return entity_at(&row, 0).map(Some);
        }
    }
    Ok(None)
}

/// Writes an entity as it is, id and timestamp included.
pub(crate) async fn insert_entity<C: GenericClient>(
    client: &C,
    names: &Names,
    user: &str,
    entity: &Entity,
) -> Result<(), StoreError> {
    let built = build(
        Query::insert()
            .into_table(names.table("entities"))
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
    sql::execute(client, &built).await?;
    Ok(())
}

pub(crate) async fn upsert_entity(
    pool: &Connections,
    names: &Names,
    user: &str,
    upsert: &EntityUpsert,
) -> Result<Entity, StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await.map_err(pg_err)?;
    lock_entities(&tx, names, user).await?;
    let entity = upsert_locked(&tx, names, user, upsert).await?;
    tx.commit().await.map_err(pg_err)?;
    Ok(entity)
}

/// Find-then-create must not race another upsert of the same user: this transaction-level
/// lock serialises them.
async fn lock_entities<C: GenericClient>(
    client: &C,
    names: &Names,
    user: &str,
) -> Result<(), StoreError> {
    client
        .execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&lock_key(&["cortex-entity", names.schema(), user])],
        )
        .await
        .map_err(pg_err)?;
    Ok(())
}

/// The upsert, inside a transaction that holds [`lock_entities`].
async fn upsert_locked<C: GenericClient>(
    client: &C,
    names: &Names,
    user: &str,
    upsert: &EntityUpsert,
) -> Result<Entity, StoreError> {
    match find_by_keys(client, names, user, &upsert.keys()).await? {
        Some(mut existing) => {
            if existing.merge(upsert) {
                let built = build(
                    Query::update()
                        .table(names.table("entities"))
                        .value("entity_type", existing.entity_type.clone())
                        .value("aliases", existing.aliases.clone())
                        .and_where(Expr::col("id").eq(existing.id)),
                );
                sql::execute(client, &built).await?;
            }
            Ok(existing)
        }
        None => {
            let created = Entity::create(upsert, now());
            insert_entity(client, names, user, &created).await?;
            Ok(created)
        }
    }
}

/// One extraction's event, entities, links and edges in one transaction.
pub(crate) async fn record_extraction(
    pool: &Connections,
    names: &Names,
    user: &str,
    records: &ExtractionRecords,
) -> Result<Vec<Entity>, StoreError> {
    records.check()?;
    let mut client = pool.get().await?;
    let tx = client.transaction().await.map_err(pg_err)?;
    require_memory(&tx, names, user, &records.memory_id).await?;
    if let Some(event) = &records.event {
        insert_event(&tx, names, user, event).await?;
    }
    let mut entities = Vec::with_capacity(records.entities.len());
    if !records.entities.is_empty() {
        lock_entities(&tx, names, user).await?;
    }
    for upsert in &records.entities {
        entities.push(upsert_locked(&tx, names, user, upsert).await?);
    }
    let ids: Vec<EntityId> = entities.iter().map(|e| e.id).collect();
    let resolved = records.resolve(&ids)?;
    // The memory was checked above and every entity comes from this transaction: the
    // per-record checks would be a round trip each for nothing.
    for (entity, role) in resolved.links {
        write_link(&tx, names, user, &records.memory_id, &entity, role).await?;
    }
    for edge in &resolved.edges {
        write_edge(&tx, names, user, edge).await?;
    }
    tx.commit().await.map_err(pg_err)?;
    Ok(entities)
}

pub(crate) async fn find_entity(
    pool: &Connections,
    names: &Names,
    user: &str,
    name: &str,
) -> Result<Option<Entity>, StoreError> {
    let client = pool.get().await?;
    find_by_keys(&client, names, user, &[normalize_entity_name(name)]).await
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
            .from(names.table("entities"))
            .and_where(Expr::col("id").eq(*id))
            .and_where(Expr::col("user_id").eq(user)),
    );
    let client = pool.get().await?;
    row_opt(&client, &built)
        .await?
        .map(|row| entity_at(&row, 0))
        .transpose()
}

pub(crate) async fn add_edge(
    pool: &Connections,
    names: &Names,
    user: &str,
    edge: &EntityEdge,
) -> Result<(), StoreError> {
    let client = pool.get().await?;
    insert_edge(&client, names, user, edge).await
}

/// Writes an edge between two of the user's entities (a no-op when it is there).
async fn insert_edge<C: GenericClient>(
    client: &C,
    names: &Names,
    user: &str,
    edge: &EntityEdge,
) -> Result<(), StoreError> {
    require_entity(client, names, user, &edge.source).await?;
    require_entity(client, names, user, &edge.target).await?;
    if let Some(m) = &edge.memory_id {
        require_memory(client, names, user, m).await?;
    }
    write_edge(client, names, user, edge).await
}

/// The edge's INSERT alone, for a caller that has checked its ends (an extraction, whose
/// memory was checked and whose entities were upserted in the same transaction).
async fn write_edge<C: GenericClient>(
    client: &C,
    names: &Names,
    user: &str,
    edge: &EntityEdge,
) -> Result<(), StoreError> {
    let built = build(
        Query::insert()
            .into_table(names.table("entity_edges"))
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
    sql::execute(client, &built)
        .await
        .map_err(|e| missing_if_fk(e, format!("memory {}", edge.memory_id.unwrap_or_default())))?;
    Ok(())
}

pub(crate) async fn edges(
    pool: &Connections,
    names: &Names,
    user: &str,
    entity: &EntityId,
) -> Result<Vec<EntityEdge>, StoreError> {
    let built = build(
        Query::select()
            .columns(["source", "target", "label", "memory_id", "created_at"])
            .from(names.table("entity_edges"))
            .and_where(Expr::col("user_id").eq(user))
            .and_where(
                Expr::col("source")
                    .eq(*entity)
                    .or(Expr::col("target").eq(*entity)),
            )
            .order_by("seq", Order::Asc),
    );
    let client = pool.get().await?;
    rows(&client, &built)
        .await?
        .iter()
        .map(|row| {
            Ok(EntityEdge {
                source: get(row, 0)?,
                target: get(row, 1)?,
                label: get(row, 2)?,
                memory_id: get(row, 3)?,
                created_at: get(row, 4)?,
            })
        })
        .collect()
}

pub(crate) async fn link_entity(
    pool: &Connections,
    names: &Names,
    user: &str,
    memory_id: &MemoryId,
    entity: &EntityId,
    role: EntityRole,
) -> Result<bool, StoreError> {
    let client = pool.get().await?;
    insert_link(&client, names, user, memory_id, entity, role).await
}

/// Links one of the user's memories to one of their entities; `false` when it was there.
pub(crate) async fn insert_link<C: GenericClient>(
    client: &C,
    names: &Names,
    user: &str,
    memory_id: &MemoryId,
    entity: &EntityId,
    role: EntityRole,
) -> Result<bool, StoreError> {
    require_memory(client, names, user, memory_id).await?;
    require_entity(client, names, user, entity).await?;
    write_link(client, names, user, memory_id, entity, role).await
}

/// The link's INSERT alone, for a caller that has checked both ends.
async fn write_link<C: GenericClient>(
    client: &C,
    names: &Names,
    user: &str,
    memory_id: &MemoryId,
    entity: &EntityId,
    role: EntityRole,
) -> Result<bool, StoreError> {
    let built = build(
        Query::insert()
            .into_table(names.table("memory_entities"))
            .columns(["memory_id", "entity_id", "user_id", "role"])
            .values([
                (*memory_id).into(),
                (*entity).into(),
                user.into(),
                role.as_str().into(),
            ])
            .map_err(sea_err)?
            .on_conflict(
                OnConflict::columns(["memory_id", "entity_id", "role"])
                    .do_nothing()
                    .to_owned(),
            ),
    );
    let inserted = sql::execute(client, &built)
        .await
        .map_err(|e| missing_if_fk(e, format!("memory {memory_id}")))?;
    Ok(inserted > 0)
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
            .from_as(names.table("memories"), "m")
            .and_where(Expr::col(("m", "user_id")).eq(user))
            .and_where(Expr::cust("NOT m.superseded"))
            .and_where(Expr::cust_with_values(
                format!(
                    "EXISTS (SELECT 1 FROM {} l WHERE l.memory_id = m.id AND l.entity_id = $1)",
                    names.q("memory_entities")
                ),
                [*entity],
            ))
            .order_by(("m", "seq"), Order::Desc)
            .limit(limit(max)),
    );
    let client = pool.get().await?;
    rows(&client, &built)
        .await?
        .iter()
        .map(|row| memory_at(row, 0))
        .collect()
}

#[async_trait]
impl EnrichmentStore for PostgresStore {
    async fn record_extraction(
        &self,
        user: &str,
        records: &ExtractionRecords,
    ) -> StoreResult<Vec<Entity>> {
        record_extraction(self.connections(), self.names(), user, records).await
    }

    async fn add_event(&self, user: &str, event: &Event) -> StoreResult<()> {
        add_event(self.connections(), self.names(), user, event).await
    }

    async fn timeline(
        &self,
        user: &str,
        range: &TimeRange,
        max: usize,
    ) -> StoreResult<Vec<TimelineEntry>> {
        timeline(self.connections(), self.names(), user, range, max).await
    }

    async fn upsert_entity(&self, user: &str, entity: &EntityUpsert) -> StoreResult<Entity> {
        upsert_entity(self.connections(), self.names(), user, entity).await
    }

    async fn find_entity(&self, user: &str, name: &str) -> StoreResult<Option<Entity>> {
        find_entity(self.connections(), self.names(), user, name).await
    }

    async fn entity(&self, user: &str, id: &EntityId) -> StoreResult<Option<Entity>> {
        entity(self.connections(), self.names(), user, id).await
    }

    async fn add_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<()> {
        add_edge(self.connections(), self.names(), user, edge).await
    }

    async fn edges(&self, user: &str, entity: &EntityId) -> StoreResult<Vec<EntityEdge>> {
        edges(self.connections(), self.names(), user, entity).await
    }

    async fn link_entity(
        &self,
        user: &str,
        memory_id: &MemoryId,
        entity: &EntityId,
        role: EntityRole,
    ) -> StoreResult<()> {
        link_entity(
            self.connections(),
            self.names(),
            user,
            memory_id,
            entity,
            role,
        )
        .await
        .map(|_| ())
    }

    async fn entity_memories(
        &self,
        user: &str,
        entity: &EntityId,
        max: usize,
    ) -> StoreResult<Vec<Memory>> {
        entity_memories(self.connections(), self.names(), user, entity, max).await
    }
}
