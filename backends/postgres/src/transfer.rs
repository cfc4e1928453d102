//! [`TransferStore`] for PostgreSQL: paged reads of every record, id-keeping imports.

use async_trait::async_trait;
use cortex_core::records::{Entity, EntityRole, Event, Supersession};
use cortex_core::{
    EmbeddingSignature, EntityLink, Imported, ImportedEntity, Memory, MemoryId, Record, RecordKind,
    StoreError, StoreResult, StoredMemory, Switch, TransferStore,
};
use pgvector::Vector;
use sea_query::{Expr, ExprTrait, Order, Query};
use tokio_postgres::Row;

use crate::codec::{ENTITY_COLUMNS, entity_at, memory_at, memory_columns};
use crate::enrichment;
use crate::schema::lock_key;
use crate::sql::{build, get, limit, row_opt, rows};
use crate::store::PostgresStore;
use crate::{pg_err, reembed};

fn supersession(r: &Row) -> StoreResult<Record> {
    Ok(Record::Supersession(Supersession {
        old_id: get(r, 0)?,
        new_id: get(r, 1)?,
        reason: get(r, 2)?,
        created_at: get(r, 3)?,
    }))
}

fn event(r: &Row) -> StoreResult<Record> {
    Ok(Record::Event(Event {
        memory_id: get(r, 0)?,
        event_time: get(r, 1)?,
        actor: get(r, 2)?,
        location: get(r, 3)?,
        event_type: get(r, 4)?,
    }))
}

fn edge(r: &Row) -> StoreResult<Record> {
    Ok(Record::Edge(cortex_core::records::EntityEdge {
        source: get(r, 0)?,
        target: get(r, 1)?,
        label: get(r, 2)?,
        memory_id: get(r, 3)?,
        created_at: get(r, 4)?,
    }))
}

fn link(r: &Row) -> StoreResult<Record> {
    let role: String = get(r, 2)?;
    Ok(Record::Link(EntityLink {
        memory_id: get(r, 0)?,
        entity_id: get(r, 1)?,
        role: EntityRole::parse(&role)
            .ok_or_else(|| StoreError::Corrupt(format!("entity role {role:?}")))?,
    }))
}

fn entity(r: &Row) -> StoreResult<Record> {
    entity_at(r, 0).map(Record::Entity)
}

#[async_trait]
impl TransferStore for PostgresStore {
    async fn users(&self) -> StoreResult<Vec<String>> {
        // Entities too: a user whose memories were all forgotten can still have a graph.
        let sql = format!(
            "SELECT user_id FROM (SELECT user_id FROM {} UNION SELECT user_id FROM {}) u
             ORDER BY user_id COLLATE \"C\"",
            self.names().q("memories"),
            self.names().q("entities")
        );
        let client = self.client().await?;
        let rows = client.query(&sql, &[]).await.map_err(pg_err)?;
        rows.iter().map(|r| get(r, 0)).collect()
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
                .columns([("m", "superseded"), ("m", "embedding")])
                .from_as(self.names().table("memories"), "m")
                .and_where(Expr::col(("m", "user_id")).eq(user))
                .and_where(Expr::col(("m", "seq")).gt(after))
                .order_by(("m", "seq"), Order::Asc)
                .limit(limit(max)),
        );
        let client = self.client().await?;
        rows(&client, &built)
            .await?
            .iter()
            .map(|r| {
                let vector: Vector = get(r, 8)?;
                Ok(StoredMemory {
                    memory: memory_at(r, 0)?,
                    superseded: get(r, 7)?,
                    embedding: vector.to_vec(),
                })
            })
            .collect()
    }

    async fn records(
        &self,
        user: &str,
        kind: RecordKind,
        offset: u64,
        max: usize,
    ) -> StoreResult<Vec<Record>> {
        let names = self.names();
        let mut select = Query::select();
        // Insertion order where the table keeps one, else the key: fixed while nothing is
        // written, which is all paging needs.
        let decode: fn(&Row) -> StoreResult<Record> = match kind {
            RecordKind::Supersession => {
                select
                    .columns(["old_id", "new_id", "reason", "created_at"])
                    .from(names.table("supersessions"))
                    .order_by("seq", Order::Asc);
                supersession
            }
            RecordKind::Event => {
                select
                    .columns(["memory_id", "event_time", "actor", "location", "event_type"])
                    .from(names.table("events"))
                    .order_by("seq", Order::Asc);
                event
            }
            RecordKind::Entity => {
                select
                    .columns(ENTITY_COLUMNS)
                    .from(names.table("entities"))
                    .order_by("created_at", Order::Asc)
                    .order_by("id", Order::Asc);
                entity
            }
            RecordKind::Edge => {
                select
                    .columns(["source", "target", "label", "memory_id", "created_at"])
                    .from(names.table("entity_edges"))
                    .order_by("seq", Order::Asc);
                edge
            }
            RecordKind::Link => {
                select
                    .columns(["memory_id", "entity_id", "role"])
                    .from(names.table("memory_entities"))
                    .order_by("memory_id", Order::Asc)
                    .order_by("entity_id", Order::Asc)
                    .order_by("role", Order::Asc);
                link
            }
        };
        select
            .and_where(Expr::col("user_id").eq(user))
            .offset(offset)
            .limit(limit(max));
        let client = self.client().await?;
        rows(&client, &build(&select))
            .await?
            .iter()
            .map(decode)
            .collect()
    }

    async fn import_event(&self, user: &str, event: &Event) -> StoreResult<Imported> {
        let names = self.names();
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_err)?;
        // Check-then-insert must not race another import of the same memory's events.
        tx.execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&lock_key(&[
                "cortex-import-event",
                names.schema(),
                &event.memory_id.to_string(),
            ])],
        )
        .await
        .map_err(pg_err)?;
        let present = build(
            Query::select()
                .expr(Expr::cust("1"))
                .from(names.table("events"))
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
        if row_opt(&tx, &present).await?.is_some() {
            return Ok(Imported::Present);
        }
        enrichment::insert_event(&tx, names, user, event).await?;
        tx.commit().await.map_err(pg_err)?;
        Ok(Imported::Written)
    }

    async fn import_entity(&self, user: &str, entity: &Entity) -> StoreResult<ImportedEntity> {
        let names = self.names();
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_err)?;
        // The same lock as upsert_entity: find-then-create is one step per user.
        tx.execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&lock_key(&["cortex-entity", names.schema(), user])],
        )
        .await
        .map_err(pg_err)?;
        let owner = build(
            Query::select()
                .column("user_id")
                .from(names.table("entities"))
                .and_where(Expr::col("id").eq(entity.id)),
        );
        if let Some(row) = row_opt(&tx, &owner).await? {
            let owner: String = get(&row, 0)?;
            return match owner == user {
                true => Ok(ImportedEntity {
                    outcome: Imported::Present,
                    id: entity.id,
                }),
                false => Err(StoreError::ForeignId(format!("entity {}", entity.id))),
            };
        }
        // By name only, the store's unique key: an alias can be shared by two entities.
        let by_name = build(
            Query::select()
                .column("id")
                .from(names.table("entities"))
                .and_where(Expr::col("user_id").eq(user))
                .and_where(Expr::col("normalized_name").eq(entity.normalized_name.clone())),
        );
        if let Some(row) = row_opt(&tx, &by_name).await? {
            return Ok(ImportedEntity {
                outcome: Imported::Present,
                id: get(&row, 0)?,
            });
        }
        enrichment::insert_entity(&tx, names, user, entity).await?;
        tx.commit().await.map_err(pg_err)?;
        Ok(ImportedEntity {
            outcome: Imported::Written,
            id: entity.id,
        })
    }

    async fn import_link(&self, user: &str, link: &EntityLink) -> StoreResult<Imported> {
        let inserted = enrichment::link_entity(
            self.connections(),
            self.names(),
            user,
            &link.memory_id,
            &link.entity_id,
            link.role,
        )
        .await?;
        Ok(match inserted {
            true => Imported::Written,
            false => Imported::Present,
        })
    }

    async fn unstaged(
        &self,
        signature: &EmbeddingSignature,
        after: i64,
        max: usize,
    ) -> StoreResult<Vec<Memory>> {
        let client = self.client().await?;
        reembed::unstaged(&client, self.names(), signature, after, max).await
    }

    async fn stage_vectors(
        &self,
        signature: &EmbeddingSignature,
        vectors: &[(MemoryId, Vec<f32>)],
    ) -> StoreResult<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_err)?;
        reembed::stage(&tx, self.names(), signature, vectors).await?;
        tx.commit().await.map_err(pg_err)
    }

    async fn switch_vectors(&self, signature: &EmbeddingSignature) -> StoreResult<Switch> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(pg_err)?;
        let outcome = reembed::switch(&tx, self.names(), signature).await?;
        tx.commit().await.map_err(pg_err)?;
        if let Switch::Switched { .. } = outcome {
            self.remember_signature(signature.clone());
        }
        Ok(outcome)
    }
}
