//! The enrichment records' writes, written once over a backend's transaction.
//!
//! A backend implements [`RecordTx`] over one of its open transactions with its own SQL
//! (or over its locked state): lookups by id, owner and key, and single-row inserts. The
//! rules live here, once: which checks a record passes and when, how an upsert finds and
//! merges an entity, when an id-keeping import is already done or refused. Every backend
//! therefore answers the same records the same way.
//!
//! Each function makes the checks a write depends on before that write, and neither
//! commits nor rolls back: its caller runs it in one transaction, committed when it
//! returns `Ok` and rolled back otherwise, so an extraction is written whole or not at all.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use uuid::Uuid;

use crate::enrichment_store::ExtractionRecords;
use crate::error::StoreError;
use crate::error::StoreResult;
use crate::memory::{MemoryId, now};
use crate::records::{Entity, EntityEdge, EntityId, EntityUpsert, Event};
use crate::transfer::{EntityLink, Imported, ImportedEntity};

/// A check-then-write sequence that must not interleave with another transaction's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockScope<'a> {
    /// Finding the user's entity by a name and creating it when none answers.
    Entities { user: &'a str },
    /// Looking for an identical event of the memory and inserting it when there is none.
    Events { memory: &'a MemoryId },
}

/// The reads and writes the records need, inside one open transaction of a backend (or,
/// for a single statement, on a plain connection). Every method is one lookup or one
/// write and checks nothing: the functions of this module decide what to check, and when.
///
/// A backend whose I/O is synchronous implements the methods without awaiting and drives
/// a function of this module with [`run_ready`] inside its own blocking section.
// Native async methods, not `#[async_trait]`: that would demand `Send` futures of every
// implementation, and SQLite's transaction is not `Send`. Each implementation's futures
// are `Send` exactly when it is, which is what its caller needs.
#[allow(async_fn_in_trait)]
pub trait RecordTx {
    /// The user whose memory `id` is, when it exists.
    async fn memory_owner(&mut self, id: &MemoryId) -> StoreResult<Option<String>>;

    /// The user whose entity `id` is, when it exists.
    async fn entity_owner(&mut self, id: &EntityId) -> StoreResult<Option<String>>;

    /// Until the transaction ends, no other transaction runs a sequence over `scope`. A
    /// store whose write transactions already exclude each other has nothing to do.
    async fn lock(&mut self, scope: LockScope<'_>) -> StoreResult<()>;

    /// The user's entity whose normalised name, or one of whose aliases, is `key`: the
    /// oldest (by creation time, then id) when several are.
    async fn find_entity(&mut self, user: &str, key: &str) -> StoreResult<Option<Entity>>;

    /// The user's entity whose normalised name (aliases aside) is `name`.
    async fn entity_named(&mut self, user: &str, name: &str) -> StoreResult<Option<EntityId>>;

    /// Writes a new entity as it is, id and timestamp included.
    async fn insert_entity(&mut self, user: &str, entity: &Entity) -> StoreResult<()>;

    /// Writes the type and aliases of the user's entity `entity.id`.
    async fn update_entity(&mut self, user: &str, entity: &Entity) -> StoreResult<()>;

    /// Whether the user has an event identical to `event`: same memory, time, actor,
    /// location and type.
    async fn has_event(&mut self, user: &str, event: &Event) -> StoreResult<bool>;

    /// Writes an event.
    async fn insert_event(&mut self, user: &str, event: &Event) -> StoreResult<()>;

    /// Writes a link; `false` when it was there already.
    async fn insert_link(&mut self, user: &str, link: &EntityLink) -> StoreResult<bool>;

    /// Writes an edge; `false` when one with its (source, target, label) was there.
    async fn insert_edge(&mut self, user: &str, edge: &EntityEdge) -> StoreResult<bool>;
}

/// Runs to completion a future that never waits: a function of this module over a
/// [`RecordTx`] whose methods do their I/O synchronously.
pub fn run_ready<T>(
    backend: &'static str,
    future: impl Future<Output = StoreResult<T>>,
) -> StoreResult<T> {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(out) => out,
        // Nothing would ever wake it: a bug in the store's RecordTx, reported, not hung on.
        Poll::Pending => Err(StoreError::backend(
            backend,
            "a synchronous record write waited for I/O",
        )),
    }
}

/// Refuses a memory the user does not have. Another user's memory is as missing as none:
/// the error does not tell that the id exists.
pub async fn require_memory<T: RecordTx>(tx: &mut T, user: &str, id: &MemoryId) -> StoreResult<()> {
    match tx.memory_owner(id).await?.as_deref() == Some(user) {
        true => Ok(()),
        false => Err(StoreError::MissingReference(format!("memory {id}"))),
    }
}

/// Refuses an entity the user does not have, as [`require_memory`] a memory.
pub async fn require_entity<T: RecordTx>(tx: &mut T, user: &str, id: &EntityId) -> StoreResult<()> {
    match tx.entity_owner(id).await?.as_deref() == Some(user) {
        true => Ok(()),
        false => Err(StoreError::MissingReference(format!("entity {id}"))),
    }
}

/// One extraction's event, entities, links and edges (see
/// [`EnrichmentStore::record_extraction`](crate::enrichment_store::EnrichmentStore::record_extraction)): the
/// records and the memory are checked once, before the first write, and the entities
/// stored are returned in the order given.
pub async fn record_extraction<T: RecordTx>(
    tx: &mut T,
    user: &str,
    records: &ExtractionRecords,
) -> StoreResult<Vec<Entity>> {
    records.check()?;
    require_memory(tx, user, &records.memory_id).await?;
    // No write below needs a check of its own: the event's memory is the extraction's
    // (checked above), and the links and edges name that memory and entities this
    // transaction upserts for the user.
    for event in &records.events {
        tx.insert_event(user, event).await?;
    }
    let mut entities = Vec::with_capacity(records.entities.len());
    if !records.entities.is_empty() {
        tx.lock(LockScope::Entities { user }).await?;
    }
    for upsert in &records.entities {
        entities.push(upsert_locked(tx, user, upsert).await?);
    }
    let ids: Vec<EntityId> = entities.iter().map(|e| e.id).collect();
    let resolved = records.resolve(&ids)?;
    for (entity_id, role) in resolved.links {
        let link = EntityLink {
            memory_id: records.memory_id,
            entity_id,
            role,
        };
        tx.insert_link(user, &link).await?;
    }
    for edge in &resolved.edges {
        tx.insert_edge(user, edge).await?;
    }
    Ok(entities)
}

/// Finds the user's entity by the upsert's name, else by its aliases, and merges the
/// upsert into it (see [`Entity::merge`]); creates it when none answers.
pub async fn upsert_entity<T: RecordTx>(
    tx: &mut T,
    user: &str,
    upsert: &EntityUpsert,
) -> StoreResult<Entity> {
    upsert.check()?;
    tx.lock(LockScope::Entities { user }).await?;
    upsert_locked(tx, user, upsert).await
}

/// [`upsert_entity`] once the upsert is checked and the user's entities are locked.
async fn upsert_locked<T: RecordTx>(
    tx: &mut T,
    user: &str,
    upsert: &EntityUpsert,
) -> StoreResult<Entity> {
    // Keys in order, the name first: an alias decides only when the name is unknown.
    for key in upsert.keys() {
        if let Some(mut existing) = tx.find_entity(user, &key).await? {
            if existing.merge(upsert) {
                tx.update_entity(user, &existing).await?;
            }
            return Ok(existing);
        }
    }
    let created = Entity::create(upsert, now());
    tx.insert_entity(user, &created).await?;
    Ok(created)
}

/// Stores an event of one of the user's memories.
pub async fn add_event<T: RecordTx>(tx: &mut T, user: &str, event: &Event) -> StoreResult<()> {
    require_memory(tx, user, &event.memory_id).await?;
    tx.insert_event(user, event).await
}

/// Stores an edge between two of the user's entities, read from one of their memories
/// when it names one; `false` when its (source, target, label) was there.
pub async fn add_edge<T: RecordTx>(tx: &mut T, user: &str, edge: &EntityEdge) -> StoreResult<bool> {
    require_entity(tx, user, &edge.source).await?;
    require_entity(tx, user, &edge.target).await?;
    if let Some(memory) = &edge.memory_id {
        require_memory(tx, user, memory).await?;
    }
    tx.insert_edge(user, edge).await
}

/// Links one of the user's memories to one of their entities; `false` when it was there.
pub async fn link_entity<T: RecordTx>(
    tx: &mut T,
    user: &str,
    link: &EntityLink,
) -> StoreResult<bool> {
    require_memory(tx, user, &link.memory_id).await?;
    require_entity(tx, user, &link.entity_id).await?;
    tx.insert_link(user, link).await
}

/// What an id-keeping import does with an id the store may hold already (`owner` is its
/// owner): nothing when it is the user's record, a refusal when it is another user's,
/// and `None` when the id is free to write.
pub fn existing_id(
    what: &str,
    id: &Uuid,
    owner: Option<&str>,
    user: &str,
) -> StoreResult<Option<Imported>> {
    match owner {
        Some(owner) if owner == user => Ok(Some(Imported::Present)),
        Some(_) => Err(StoreError::ForeignId(format!("{what} {id}"))),
        None => Ok(None),
    }
}

/// [`TransferStore::import_event`](crate::transfer::TransferStore::import_event): the memory must be
/// the user's; an identical event is left alone.
pub async fn import_event<T: RecordTx>(
    tx: &mut T,
    user: &str,
    event: &Event,
) -> StoreResult<Imported> {
    tx.lock(LockScope::Events {
        memory: &event.memory_id,
    })
    .await?;
    require_memory(tx, user, &event.memory_id).await?;
    if tx.has_event(user, event).await? {
        return Ok(Imported::Present);
    }
    tx.insert_event(user, event).await?;
    Ok(Imported::Written)
}

/// [`TransferStore::import_entity`](crate::transfer::TransferStore::import_entity): an id of another
/// user's is refused; the user's entity by that id, or else by that normalised name, is
/// kept, and its id returned.
pub async fn import_entity<T: RecordTx>(
    tx: &mut T,
    user: &str,
    entity: &Entity,
) -> StoreResult<ImportedEntity> {
    tx.lock(LockScope::Entities { user }).await?;
    let owner = tx.entity_owner(&entity.id).await?;
    if let Some(outcome) = existing_id("entity", &entity.id, owner.as_deref(), user)? {
        return Ok(ImportedEntity {
            outcome,
            id: entity.id,
        });
    }
    // By name only, the store's unique key: an alias can be shared by two entities.
    if let Some(id) = tx.entity_named(user, &entity.normalized_name).await? {
        return Ok(ImportedEntity {
            outcome: Imported::Present,
            id,
        });
    }
    tx.insert_entity(user, entity).await?;
    Ok(ImportedEntity {
        outcome: Imported::Written,
        id: entity.id,
    })
}

/// [`TransferStore::import_edge`](crate::transfer::TransferStore::import_edge): checked as
/// [`add_edge`] checks, before the store looks for the edge.
pub async fn import_edge<T: RecordTx>(
    tx: &mut T,
    user: &str,
    edge: &EntityEdge,
) -> StoreResult<Imported> {
    add_edge(tx, user, edge).await.map(Imported::from_inserted)
}

/// [`TransferStore::import_link`](crate::transfer::TransferStore::import_link): checked as
/// [`link_entity`] checks.
pub async fn import_link<T: RecordTx>(
    tx: &mut T,
    user: &str,
    link: &EntityLink,
) -> StoreResult<Imported> {
    link_entity(tx, user, link)
        .await
        .map(Imported::from_inserted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_that_waits_is_an_error_not_a_hang() {
        assert_eq!(run_ready("test", async { Ok(7) }).unwrap(), 7);
        let waits = std::future::pending::<StoreResult<()>>();
        assert!(matches!(
            run_ready("test", waits),
            Err(StoreError::Backend {
                backend: "test",
                ..
            })
        ));
    }

    #[test]
    fn an_id_of_anothers_is_refused_and_ones_own_is_present() {
        let id = Uuid::new_v4();
        assert_eq!(existing_id("memory", &id, None, "a").unwrap(), None);
        assert_eq!(
            existing_id("memory", &id, Some("a"), "a").unwrap(),
            Some(Imported::Present)
        );
        assert!(matches!(
            existing_id("memory", &id, Some("b"), "a"),
            Err(StoreError::ForeignId(_))
        ));
    }
}
