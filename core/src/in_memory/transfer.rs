//! [`TransferStore`] for the reference store.

use async_trait::async_trait;

use super::InMemoryStore;
use super::records::BACKEND;
use crate::error::StoreError;
use crate::error::StoreResult;
use crate::memory::{Memory, MemoryId};
use crate::new_memory::NewMemory;
use crate::record_tx::{self, existing_id, run_ready};
use crate::records::{Entity, EntityEdge, Event};
use crate::signature::EmbeddingSignature;
use crate::transfer::{
    EntityLink, Imported, ImportedEntity, Record, RecordKind, StoredMemory, Switch, TransferStore,
};

#[async_trait]
impl TransferStore for InMemoryStore {
    async fn users(&self) -> StoreResult<Vec<String>> {
        let state = self.state();
        let mut users: Vec<String> = state
            .users
            .iter()
            .filter(|(_, d)| !d.memories.is_empty() || !d.entities.is_empty())
            .map(|(u, _)| u.clone())
            .collect();
        users.sort();
        Ok(users)
    }

    async fn memories_after(
        &self,
        user: &str,
        after: i64,
        limit: usize,
    ) -> StoreResult<Vec<StoredMemory>> {
        Ok(self.with_user(user, |d| {
            d.memories
                .range(after.saturating_add(1)..)
                .take(limit)
                .map(|(_, (m, v))| StoredMemory {
                    memory: m.clone(),
                    superseded: !d.is_live(&m.id),
                    embedding: v.clone(),
                })
                .collect()
        }))
    }

    async fn records(
        &self,
        user: &str,
        kind: RecordKind,
        offset: u64,
        limit: usize,
    ) -> StoreResult<Vec<Record>> {
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        Ok(self.with_user(user, |d| {
            let all: Vec<Record> = match kind {
                RecordKind::Supersession => d
                    .supersessions
                    .iter()
                    .cloned()
                    .map(Record::Supersession)
                    .collect(),
                RecordKind::Event => d.events.iter().cloned().map(Record::Event).collect(),
                RecordKind::Entity => d.entities.iter().cloned().map(Record::Entity).collect(),
                RecordKind::Edge => d.edges.iter().cloned().map(Record::Edge).collect(),
                RecordKind::Link => d
                    .links
                    .iter()
                    .map(|&(memory_id, entity_id, role)| {
                        Record::Link(EntityLink {
                            memory_id,
                            entity_id,
                            role,
                        })
                    })
                    .collect(),
            };
            all.into_iter().skip(skip).take(limit).collect()
        }))
    }

    async fn import_memory(
        &self,
        memory: &NewMemory,
        embedding: &[f32],
        signature: &EmbeddingSignature,
    ) -> StoreResult<Imported> {
        let mut state = self.state();
        let owner = state.memory_owner(&memory.id);
        if let Some(done) = existing_id("memory", &memory.id, owner, &memory.user_id)? {
            return Ok(done);
        }
        state.add(memory, embedding, signature)?;
        Ok(Imported::Written)
    }

    async fn import_event(&self, user: &str, event: &Event) -> StoreResult<Imported> {
        self.transact(|tx| run_ready(BACKEND, record_tx::import_event(tx, user, event)))
    }

    async fn import_entity(&self, user: &str, entity: &Entity) -> StoreResult<ImportedEntity> {
        self.transact(|tx| run_ready(BACKEND, record_tx::import_entity(tx, user, entity)))
    }

    async fn import_edge(&self, user: &str, edge: &EntityEdge) -> StoreResult<Imported> {
        self.transact(|tx| run_ready(BACKEND, record_tx::import_edge(tx, user, edge)))
    }

    async fn import_link(&self, user: &str, link: &EntityLink) -> StoreResult<Imported> {
        self.transact(|tx| run_ready(BACKEND, record_tx::import_link(tx, user, link)))
    }

    async fn unstaged(
        &self,
        signature: &EmbeddingSignature,
        after: i64,
        limit: usize,
    ) -> StoreResult<Vec<Memory>> {
        let state = self.state();
        let staged = match &state.staged {
            Some((s, staged)) if s == signature => Some(staged),
            _ => None,
        };
        let mut out: Vec<Memory> = state
            .users
            .values()
            .flat_map(|d| d.memories.range(after.saturating_add(1)..))
            .map(|(_, (m, _))| m)
            .filter(|m| staged.is_none_or(|s| !s.contains_key(&m.id)))
            .cloned()
            .collect();
        out.sort_by_key(|m| m.seq);
        out.truncate(limit);
        Ok(out)
    }

    async fn stage_vectors(
        &self,
        signature: &EmbeddingSignature,
        vectors: &[(MemoryId, Vec<f32>)],
    ) -> StoreResult<()> {
        let mut state = self.state();
        // Everything is checked before anything is staged, as one transaction would.
        for (id, vector) in vectors {
            if vector.len() != signature.dimension {
                return Err(StoreError::Config(format!(
                    "a staged vector of {id} has {} dimensions; {signature} has {}",
                    vector.len(),
                    signature.dimension
                )));
            }
        }
        // A memory forgotten since it was read needs no vector: skipped.
        let vectors: Vec<(MemoryId, Vec<f32>)> = vectors
            .iter()
            .filter(|(id, _)| state.users.values().any(|d| d.seq_of.contains_key(id)))
            .cloned()
            .collect();
        if state.staged.as_ref().is_none_or(|(s, _)| s != signature) {
            state.staged = Some((signature.clone(), Default::default()));
        }
        if let Some((_, staged)) = state.staged.as_mut() {
            staged.extend(vectors);
        }
        Ok(())
    }

    async fn switch_vectors(&self, signature: &EmbeddingSignature) -> StoreResult<Switch> {
        let mut state = self.state();
        let mut staged = match state.staged.take() {
            Some((s, staged)) if &s == signature => staged,
            other => {
                state.staged = other;
                Default::default()
            }
        };
        let missing = state
            .users
            .values()
            .flat_map(|d| d.seq_of.keys())
            .filter(|id| !staged.contains_key(id))
            .count() as u64;
        if missing > 0 {
            if !staged.is_empty() {
                state.staged = Some((signature.clone(), staged));
            }
            return Ok(Switch::Missing { memories: missing });
        }
        let mut memories = 0;
        for d in state.users.values_mut() {
            for (m, vector) in d.memories.values_mut() {
                if let Some(new) = staged.remove(&m.id) {
                    *vector = new;
                    memories += 1;
                }
            }
            if !d.memories.is_empty() {
                d.bump();
            }
        }
        state.signature = Some(signature.clone());
        Ok(Switch::Switched { memories })
    }
}
