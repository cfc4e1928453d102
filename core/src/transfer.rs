//! The seam for moving a store's contents out and back in: export, import, migrate.
//!
//! A backend reads its records out page by page and writes them back keeping their ids and
//! timestamps. Every write here is idempotent (a record that is already there is left
//! alone and reported as such), so an import or a migration interrupted at any point is
//! finished by running it again: nothing lost, nothing doubled.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::enrichment_store::EnrichmentStore;
use crate::error::StoreResult;
use crate::memory::Supersession;
use crate::memory::{Memory, MemoryId};
use crate::new_memory::NewMemory;
use crate::records::{Entity, EntityEdge, EntityId, EntityRole, Event};
use crate::signature::EmbeddingSignature;
use crate::store::MemoryStore;

/// A memory as stored: the record, whether a later memory supersedes it, and its vector.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMemory {
    pub memory: Memory,
    pub superseded: bool,
    pub embedding: Vec<f32>,
}

/// A memory tied to an entity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityLink {
    pub memory_id: MemoryId,
    pub entity_id: EntityId,
    pub role: EntityRole,
}

/// The records besides memories, in the order an import must meet them: each kind refers
/// only to memories and to kinds before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordKind {
    Supersession,
    Event,
    Entity,
    Edge,
    Link,
}

impl RecordKind {
    pub const ALL: [RecordKind; 5] = [
        RecordKind::Supersession,
        RecordKind::Event,
        RecordKind::Entity,
        RecordKind::Edge,
        RecordKind::Link,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::Supersession => "supersession",
            RecordKind::Event => "event",
            RecordKind::Entity => "entity",
            RecordKind::Edge => "edge",
            RecordKind::Link => "link",
        }
    }
}

/// One record of a user's besides a memory.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Supersession(Supersession),
    Event(Event),
    Entity(Entity),
    Edge(EntityEdge),
    Link(EntityLink),
}

impl Record {
    pub fn kind(&self) -> RecordKind {
        match self {
            Record::Supersession(_) => RecordKind::Supersession,
            Record::Event(_) => RecordKind::Event,
            Record::Entity(_) => RecordKind::Entity,
            Record::Edge(_) => RecordKind::Edge,
            Record::Link(_) => RecordKind::Link,
        }
    }
}

/// What an idempotent write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    Written,
    /// The record was already there; nothing changed.
    Present,
}

impl Imported {
    /// The outcome of an insert that reports whether it wrote a row.
    pub fn from_inserted(inserted: bool) -> Self {
        match inserted {
            true => Imported::Written,
            false => Imported::Present,
        }
    }
}

/// An entity's import: what happened, and the id the entity has in this store. The id
/// differs from the imported one when the store already knew the entity by name under
/// another id; edges and links that name it are then written against the store's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportedEntity {
    pub outcome: Imported,
    pub id: EntityId,
}

/// One write of an import batch.
#[derive(Debug, Clone, PartialEq)]
pub enum ImportItem {
    /// A memory with its own id and timestamp, and its vector.
    Memory {
        memory: NewMemory,
        embedding: Vec<f32>,
    },
    /// A record of `user`'s.
    Record { user: String, record: Record },
}

/// What one item of a batch did; for an entity, also the id it has in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemImported {
    pub outcome: Imported,
    pub entity_id: Option<EntityId>,
}

/// Where a re-embedding stands after [`TransferStore::switch_vectors`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// Every memory now has its staged vector, and the signature is the new one.
    Switched { memories: u64 },
    /// Nothing changed: this many memories (written meanwhile) have no staged vector yet.
    Missing { memories: u64 },
}

/// Reading a store out and writing records back with their ids. Every method is scoped to
/// one user except [`users`](Self::users).
#[async_trait]
pub trait TransferStore: MemoryStore + EnrichmentStore {
    /// Every user with at least one memory, in byte order.
    async fn users(&self) -> StoreResult<Vec<String>>;

    /// Up to `limit` of the user's memories, live and superseded, in insertion order,
    /// starting after insertion sequence `after` (0 for the first page).
    async fn memories_after(
        &self,
        user: &str,
        after: i64,
        limit: usize,
    ) -> StoreResult<Vec<StoredMemory>>;

    /// Up to `limit` of the user's records of `kind`, after skipping `offset`, in an order
    /// that is fixed while nothing is written.
    async fn records(
        &self,
        user: &str,
        kind: RecordKind,
        offset: u64,
        limit: usize,
    ) -> StoreResult<Vec<Record>>;

    /// Stores `memory` with its own id and timestamp unless the user already has a memory
    /// with that id. It is written as [`MemoryStore::add`] writes it (its signature rules,
    /// its supersessions and its records, in one transaction).
    async fn import_memory(
        &self,
        memory: &NewMemory,
        embedding: &[f32],
        signature: &EmbeddingSignature,
    ) -> StoreResult<Imported> {
        if self.get(&memory.user_id, &memory.id).await?.is_some() {
            return Ok(Imported::Present);
        }
        self.add(memory, embedding, signature).await?;
        Ok(Imported::Written)
    }

    /// Stores an event unless an identical one (same memory, time, actor, location and
    /// type) is there.
    async fn import_event(&self, user: &str, event: &Event) -> StoreResult<Imported>;

    /// Stores an entity with its id, name, aliases and timestamp, unless the user already
    /// has it by id, or by name (then that entity's id is returned).
    async fn import_entity(&self, user: &str, entity: &Entity) -> StoreResult<ImportedEntity>;

    /// Stores a supersession unless it is there.
    async fn import_supersession(
        &self,
        user: &str,
        supersession: &Supersession,
    ) -> StoreResult<Imported> {
        let known = self.supersessions(user, &supersession.old_id).await?;
        if known.iter().any(|s| s.new_id == supersession.new_id) {
            return Ok(Imported::Present);
        }
        self.supersede(user, supersession).await?;
        Ok(Imported::Written)
    }

    /// Stores an edge unless one with its (source, target, label) is there. Its entities,
    /// and its memory when it names one, must be the user's, even when it is there.
    async fn import_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<Imported> {
        let known = self.edges(user, &edge.source).await?;
        if known
            .iter()
            .any(|e| e.source == edge.source && e.target == edge.target && e.label == edge.label)
        {
            // Its entities are the user's (an edge between them is); its memory need not be.
            if let Some(memory) = &edge.memory_id
                && self.get(user, memory).await?.is_none()
            {
                return Err(crate::error::StoreError::MissingReference(format!(
                    "memory {memory}"
                )));
            }
            return Ok(Imported::Present);
        }
        self.add_edge(user, edge).await?;
        Ok(Imported::Written)
    }

    /// Writes `items` in order, each by the rules of its single-record method above. A
    /// backend that can runs the whole batch in one transaction (nothing of it is written
    /// when one item fails); this default writes them one by one. `signature` is the
    /// vectors' model, checked as by [`MemoryStore::add`].
    async fn import_batch(
        &self,
        items: &[ImportItem],
        signature: &EmbeddingSignature,
    ) -> StoreResult<Vec<ItemImported>> {
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let (outcome, entity_id) = match item {
                ImportItem::Memory { memory, embedding } => (
                    self.import_memory(memory, embedding, signature).await?,
                    None,
                ),
                ImportItem::Record { user, record } => match record {
                    Record::Supersession(s) => (self.import_supersession(user, s).await?, None),
                    Record::Event(e) => (self.import_event(user, e).await?, None),
                    Record::Entity(e) => {
                        let done = self.import_entity(user, e).await?;
                        (done.outcome, Some(done.id))
                    }
                    Record::Edge(e) => (self.import_edge(user, e).await?, None),
                    Record::Link(l) => (self.import_link(user, l).await?, None),
                },
            };
            out.push(ItemImported { outcome, entity_id });
        }
        Ok(out)
    }

    /// Up to `limit` memories of any user, live or superseded, after store-wide insertion
    /// sequence `after`, that have no staged vector of `signature`, in sequence order:
    /// what a re-embedding still has to do.
    async fn unstaged(
        &self,
        signature: &EmbeddingSignature,
        after: i64,
        limit: usize,
    ) -> StoreResult<Vec<Memory>> {
        let _ = (signature, after, limit);
        Err(crate::error::StoreError::Unsupported("re-embedding"))
    }

    /// Keeps `vectors` of `signature` beside the memories' current ones, where recall does
    /// not see them; staged vectors of any other signature are dropped first. Staging the
    /// same memory again replaces its vector.
    async fn stage_vectors(
        &self,
        signature: &EmbeddingSignature,
        vectors: &[(MemoryId, Vec<f32>)],
    ) -> StoreResult<()> {
        let _ = (signature, vectors);
        Err(crate::error::StoreError::Unsupported("re-embedding"))
    }

    /// In one transaction: when every memory has a staged vector of `signature`, those
    /// replace the current vectors, `signature` becomes the store's and every user's
    /// generation moves on; otherwise nothing changes.
    async fn switch_vectors(&self, signature: &EmbeddingSignature) -> StoreResult<Switch> {
        let _ = signature;
        Err(crate::error::StoreError::Unsupported("re-embedding"))
    }

    /// Links a memory to an entity (linking again is a no-op).
    async fn import_link(&self, user: &str, link: &EntityLink) -> StoreResult<Imported> {
        self.link_entity(user, &link.memory_id, &link.entity_id, link.role)
            .await?;
        Ok(Imported::Written)
    }

    /// Bytes the store takes on disk for every user (a SQLite file with its WAL; the
    /// Postgres schema's tables and indexes), or `None` when the store cannot tell (the
    /// in-memory store).
    async fn size_bytes(&self) -> StoreResult<Option<u64>> {
        Ok(None)
    }
}

// Forward every method, including the defaulted ones, so a wrapped store keeps its own.
macro_rules! forward_transfer {
    ($($ptr:ident),*) => {$(
        #[async_trait]
        impl<S: TransferStore + ?Sized> TransferStore for $ptr<S> {
            async fn users(&self) -> StoreResult<Vec<String>> {
                (**self).users().await
            }
            async fn memories_after(
                &self,
                user: &str,
                after: i64,
                limit: usize,
            ) -> StoreResult<Vec<StoredMemory>> {
                (**self).memories_after(user, after, limit).await
            }
            async fn records(
                &self,
                user: &str,
                kind: RecordKind,
                offset: u64,
                limit: usize,
            ) -> StoreResult<Vec<Record>> {
                (**self).records(user, kind, offset, limit).await
            }
            async fn import_memory(
                &self,
                memory: &NewMemory,
                embedding: &[f32],
                signature: &EmbeddingSignature,
            ) -> StoreResult<Imported> {
                (**self).import_memory(memory, embedding, signature).await
            }
            async fn import_event(&self, user: &str, event: &Event) -> StoreResult<Imported> {
                (**self).import_event(user, event).await
            }
            async fn import_entity(
                &self,
                user: &str,
                entity: &Entity,
            ) -> StoreResult<ImportedEntity> {
                (**self).import_entity(user, entity).await
            }
            async fn import_supersession(
                &self,
                user: &str,
                supersession: &Supersession,
            ) -> StoreResult<Imported> {
                (**self).import_supersession(user, supersession).await
            }
            async fn import_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<Imported> {
                (**self).import_edge(user, edge).await
            }
            async fn import_link(&self, user: &str, link: &EntityLink) -> StoreResult<Imported> {
                (**self).import_link(user, link).await
            }
            async fn import_batch(
                &self,
                items: &[ImportItem],
                signature: &EmbeddingSignature,
            ) -> StoreResult<Vec<ItemImported>> {
                (**self).import_batch(items, signature).await
            }
            async fn unstaged(
                &self,
                signature: &EmbeddingSignature,
                after: i64,
                limit: usize,
            ) -> StoreResult<Vec<Memory>> {
                (**self).unstaged(signature, after, limit).await
            }
            async fn stage_vectors(
                &self,
                signature: &EmbeddingSignature,
                vectors: &[(MemoryId, Vec<f32>)],
            ) -> StoreResult<()> {
                (**self).stage_vectors(signature, vectors).await
            }
            async fn switch_vectors(&self, signature: &EmbeddingSignature) -> StoreResult<Switch> {
                (**self).switch_vectors(signature).await
            }
            async fn size_bytes(&self) -> StoreResult<Option<u64>> {
                (**self).size_bytes().await
            }
        }
    )*};
}

forward_transfer!(Arc, Box);
