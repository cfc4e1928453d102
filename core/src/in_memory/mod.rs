//! The reference backend: everything in process memory, nothing persisted.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use crate::error::StoreError;
use crate::error::StoreResult;
use crate::index::MemoryIndex;
use crate::memory::Supersession;
use crate::memory::{Memory, MemoryId};
use crate::new_memory::NewMemory;
use crate::record_tx::{self, run_ready};
use crate::records::{Entity, EntityEdge, EntityId, EntityRole, Event};
use crate::signature::EmbeddingSignature;
use crate::store::{
    Added, BuiltIndex, Capabilities, Deleted, Generation, ListKey, ListQuery, MemoryStore,
};

mod enrichment;
mod keys;
mod records;
mod transfer;

use records::Tx;

/// A [`MemoryStore`] held in a mutex: the behaviour every other backend is held to.
#[derive(Debug, Default)]
pub struct InMemoryStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    signature: Option<EmbeddingSignature>,
    last_seq: i64,
    users: HashMap<String, UserData>,
    /// A re-embedding in progress: its signature and the vectors staged so far.
    staged: Option<(EmbeddingSignature, HashMap<MemoryId, Vec<f32>>)>,
    /// API keys, in insertion order (see `keys`).
    keys: Vec<crate::keys::StoredKey>,
}

#[derive(Debug, Default)]
struct UserData {
    /// Keyed by insertion sequence, so iteration is insertion order.
    memories: BTreeMap<i64, (Memory, Vec<f32>)>,
    seq_of: HashMap<MemoryId, i64>,
    generation: u64,
    events: Vec<Event>,
    supersessions: Vec<Supersession>,
    entities: Vec<Entity>,
    edges: Vec<EntityEdge>,
    links: Vec<(MemoryId, EntityId, EntityRole)>,
}

impl UserData {
    fn memory(&self, id: &MemoryId) -> Option<&Memory> {
        let seq = self.seq_of.get(id)?;
        self.memories.get(seq).map(|(m, _)| m)
    }

    fn is_live(&self, id: &MemoryId) -> bool {
        !self.supersessions.iter().any(|s| &s.old_id == id)
    }

    fn live(&self) -> impl DoubleEndedIterator<Item = &(Memory, Vec<f32>)> {
        self.memories.values().filter(|(m, _)| self.is_live(&m.id))
    }

    fn require_memory(&self, id: &MemoryId) -> StoreResult<()> {
        match self.seq_of.contains_key(id) {
            true => Ok(()),
            false => Err(StoreError::MissingReference(format!("memory {id}"))),
        }
    }

    fn bump(&mut self) -> Generation {
        self.generation += 1;
        Generation(self.generation)
    }
}

impl State {
    fn memory_owner(&self, id: &MemoryId) -> Option<&str> {
        self.users
            .iter()
            .find(|(_, d)| d.seq_of.contains_key(id))
            .map(|(user, _)| user.as_str())
    }

    fn entity_owner(&self, id: &EntityId) -> Option<&str> {
        self.users
            .iter()
            .find(|(_, d)| d.entities.iter().any(|e| &e.id == id))
            .map(|(user, _)| user.as_str())
    }

    /// [`MemoryStore::add`], under the caller's lock.
    fn add(
        &mut self,
        memory: &NewMemory,
        embedding: &[f32],
        signature: &EmbeddingSignature,
    ) -> StoreResult<Added> {
        // Every check before any change: a refused add changes nothing.
        if let Some(stored) = &self.signature
            && stored != signature
        {
            return Err(StoreError::SignatureMismatch {
                stored: stored.clone(),
                got: signature.clone(),
            });
        }
        for s in &memory.supersedes {
            let Some(data) = self.users.get(&memory.user_id) else {
                return Err(StoreError::MissingReference(format!("memory {}", s.old_id)));
            };
            data.require_memory(&s.old_id)?;
            if !data.is_live(&s.old_id) {
                return Err(StoreError::AlreadySuperseded(s.old_id));
            }
        }
        memory.check_records()?;
        let first_signature = self.signature.is_none();
        if first_signature {
            self.signature = Some(signature.clone());
        }
        self.last_seq += 1;
        let seq = self.last_seq;
        let stored = memory.clone().into_memory(seq);
        let data = self.users.entry(memory.user_id.clone()).or_default();
        let kept_supersessions = data.supersessions.len();
        data.seq_of.insert(stored.id, seq);
        data.supersessions.extend(memory.supersedes.iter().cloned());
        data.memories
            .insert(seq, (stored.clone(), embedding.to_vec()));
        if let Some(records) = &memory.records {
            let mut tx = Tx::new(self);
            let written = run_ready(
                records::BACKEND,
                record_tx::record_extraction(&mut tx, &memory.user_id, records),
            );
            match written {
                Ok(_) => tx.commit(),
                // The records' own writes are undone as `tx` drops; the memory's here.
                Err(e) => {
                    drop(tx);
                    if let Some(data) = self.users.get_mut(&memory.user_id) {
                        data.seq_of.remove(&stored.id);
                        data.memories.remove(&seq);
                        data.supersessions.truncate(kept_supersessions);
                    }
                    if first_signature {
                        self.signature = None;
                    }
                    return Err(e);
                }
            }
        }
        let Some(data) = self.users.get_mut(&memory.user_id) else {
            return Err(StoreError::Corrupt("the user written to is gone".into()));
        };
        let generation = data.bump();
        Ok(Added {
            memory: stored,
            generation,
        })
    }
}

impl InMemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied write: every method
        // validates before it mutates, and a record transaction (`Tx`) undoes its writes
        // when dropped uncommitted. So a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn with_user<T>(&self, user: &str, f: impl FnOnce(&UserData) -> T) -> T {
        let state = self.state();
        match state.users.get(user) {
            Some(data) => f(data),
            None => f(&UserData::default()),
        }
    }

    fn with_user_mut<T>(&self, user: &str, f: impl FnOnce(&mut UserData) -> T) -> T {
        let mut state = self.state();
        f(state.users.entry(user.to_owned()).or_default())
    }

    /// Runs `write` over the locked state as one transaction: kept when it succeeds,
    /// undone when it fails.
    fn transact<T>(&self, write: impl FnOnce(&mut Tx<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let mut state = self.state();
        let mut tx = Tx::new(&mut state);
        let out = write(&mut tx)?;
        tx.commit();
        Ok(out)
    }
}

#[async_trait]
impl MemoryStore for InMemoryStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            records: true,
            ..Capabilities::default()
        }
    }

    async fn signature(&self) -> StoreResult<Option<EmbeddingSignature>> {
        Ok(self.state().signature.clone())
    }

    async fn add(
        &self,
        memory: &NewMemory,
        embedding: &[f32],
        signature: &EmbeddingSignature,
    ) -> StoreResult<Added> {
        self.state().add(memory, embedding, signature)
    }

    async fn get(&self, user: &str, id: &MemoryId) -> StoreResult<Option<Memory>> {
        Ok(self.with_user(user, |d| d.memory(id).cloned()))
    }

    async fn find_by_prefix(&self, user: &str, prefix: &str) -> StoreResult<Vec<MemoryId>> {
        Ok(self.with_user(user, |d| {
            d.memories
                .values()
                .map(|(m, _)| m.id)
                .filter(|id| id.hyphenated().to_string().starts_with(prefix))
                .collect()
        }))
    }

    async fn delete(&self, user: &str, id: &MemoryId) -> StoreResult<Option<Deleted>> {
        Ok(self.with_user_mut(user, |d| {
            let seq = d.seq_of.remove(id)?;
            d.memories.remove(&seq);
            d.events.retain(|e| &e.memory_id != id);
            d.links.retain(|(m, _, _)| m != id);
            let superseded: Vec<MemoryId> = d
                .supersessions
                .iter()
                .filter(|s| &s.new_id == id)
                .map(|s| s.old_id)
                .collect();
            d.supersessions
                .retain(|s| &s.old_id != id && &s.new_id != id);
            d.edges.retain(|e| e.memory_id.as_ref() != Some(id));
            let restored = superseded.into_iter().filter(|m| d.is_live(m)).collect();
            Some(Deleted {
                generation: d.bump(),
                restored,
            })
        }))
    }

    async fn list(&self, user: &str, query: &ListQuery) -> StoreResult<Vec<Memory>> {
        Ok(self.with_user(user, |d| {
            let mut page: Vec<Memory> = d
                .live()
                .filter(|(m, _)| query.admits(m))
                .map(|(m, _)| m.clone())
                .collect();
            page.sort_unstable_by_key(|m| std::cmp::Reverse(ListKey::of(m)));
            page.truncate(query.limit);
            page
        }))
    }

    async fn count(&self, user: &str) -> StoreResult<u64> {
        Ok(self.with_user(user, |d| d.live().count() as u64))
    }

    async fn generation(&self, user: &str) -> StoreResult<Generation> {
        Ok(self.with_user(user, |d| Generation(d.generation)))
    }

    async fn build_index(&self, user: &str, dimension: usize) -> StoreResult<BuiltIndex> {
        self.with_user(user, |d| {
            let mut index = MemoryIndex::new(dimension);
            for (memory, vector) in d.live() {
                index
                    .insert(memory.clone(), vector)
                    .map_err(|e| StoreError::Corrupt(format!("memory {}: {e}", memory.id)))?;
            }
            index.shrink_to_fit();
            Ok(BuiltIndex {
                index,
                generation: Generation(d.generation),
            })
        })
    }

    async fn supersede(&self, user: &str, supersession: &Supersession) -> StoreResult<Generation> {
        self.with_user_mut(user, |d| {
            d.require_memory(&supersession.old_id)?;
            d.require_memory(&supersession.new_id)?;
            d.supersessions.push(supersession.clone());
            Ok(d.bump())
        })
    }

    async fn supersessions(
        &self,
        user: &str,
        memory_id: &MemoryId,
    ) -> StoreResult<Vec<Supersession>> {
        Ok(self.with_user(user, |d| {
            d.supersessions
                .iter()
                .filter(|s| &s.old_id == memory_id || &s.new_id == memory_id)
                .cloned()
                .collect()
        }))
    }
}
