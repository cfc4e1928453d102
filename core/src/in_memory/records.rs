//! [`RecordTx`] over the in-memory store's locked state: the records' rules run on it as
//! they run on a database transaction, and what they wrote is undone unless committed.

use super::{State, UserData};
use crate::error::StoreError;
use crate::error::StoreResult;
use crate::memory::MemoryId;
use crate::record_tx::{LockScope, RecordTx};
use crate::records::{Entity, EntityEdge, EntityId, Event};
use crate::transfer::EntityLink;

/// The name [`run_ready`](crate::record_tx::run_ready) gives this store in an error.
pub(super) const BACKEND: &str = "in-memory";

/// The state, locked by the caller for the whole transaction, and how to undo each write
/// made through it.
pub(super) struct Tx<'a> {
    state: &'a mut State,
    undo: Vec<Undo>,
}

enum Undo {
    Pushed { user: String, table: Table },
    Replaced { user: String, entity: Entity },
}

#[derive(Clone, Copy)]
enum Table {
    Events,
    Entities,
    Edges,
    Links,
}

impl<'a> Tx<'a> {
    pub(super) fn new(state: &'a mut State) -> Self {
        Self {
            state,
            undo: Vec::new(),
        }
    }

    /// Keeps every write.
    pub(super) fn commit(mut self) {
        self.undo.clear();
    }

    fn data(&self, user: &str) -> Option<&UserData> {
        self.state.users.get(user)
    }

    fn push(&mut self, user: &str, table: Table) -> &mut UserData {
        self.undo.push(Undo::Pushed {
            user: user.to_owned(),
            table,
        });
        self.state.users.entry(user.to_owned()).or_default()
    }
}

impl Drop for Tx<'_> {
    /// Undoes, newest first, whatever was not committed: a failed or panicking write
    /// leaves the state as it found it, so a poisoned lock still guards consistent data.
    fn drop(&mut self) {
        while let Some(undo) = self.undo.pop() {
            match undo {
                Undo::Pushed { user, table } => {
                    let Some(d) = self.state.users.get_mut(&user) else {
                        continue;
                    };
                    match table {
                        Table::Events => drop(d.events.pop()),
                        Table::Entities => drop(d.entities.pop()),
                        Table::Edges => drop(d.edges.pop()),
                        Table::Links => drop(d.links.pop()),
                    }
                }
                Undo::Replaced { user, entity } => {
                    let stored = self
                        .state
                        .users
                        .get_mut(&user)
                        .and_then(|d| d.entities.iter_mut().find(|e| e.id == entity.id));
                    if let Some(stored) = stored {
                        *stored = entity;
                    }
                }
            }
        }
    }
}

impl RecordTx for Tx<'_> {
    async fn memory_owner(&mut self, id: &MemoryId) -> StoreResult<Option<String>> {
        Ok(self.state.memory_owner(id).map(str::to_owned))
    }

    async fn entity_owner(&mut self, id: &EntityId) -> StoreResult<Option<String>> {
        Ok(self.state.entity_owner(id).map(str::to_owned))
    }

    async fn lock(&mut self, _scope: LockScope<'_>) -> StoreResult<()> {
        // The caller holds the state's one lock for the whole transaction.
        Ok(())
    }

    async fn find_entity(&mut self, user: &str, key: &str) -> StoreResult<Option<Entity>> {
        Ok(self.data(user).and_then(|d| {
            d.entities
                .iter()
                .filter(|e| e.answers_to(key))
                .min_by_key(|e| (e.created_at, e.id))
                .cloned()
        }))
    }

    async fn entity_named(&mut self, user: &str, name: &str) -> StoreResult<Option<EntityId>> {
        Ok(self.data(user).and_then(|d| {
            d.entities
                .iter()
                .find(|e| e.normalized_name == name)
                .map(|e| e.id)
        }))
    }

    async fn insert_entity(&mut self, user: &str, entity: &Entity) -> StoreResult<()> {
        self.push(user, Table::Entities)
            .entities
            .push(entity.clone());
        Ok(())
    }

    async fn update_entity(&mut self, user: &str, entity: &Entity) -> StoreResult<()> {
        let stored = self
            .state
            .users
            .get_mut(user)
            .and_then(|d| d.entities.iter_mut().find(|e| e.id == entity.id))
            .ok_or_else(|| StoreError::MissingReference(format!("entity {}", entity.id)))?;
        let before = std::mem::replace(stored, entity.clone());
        self.undo.push(Undo::Replaced {
            user: user.to_owned(),
            entity: before,
        });
        Ok(())
    }

    async fn has_event(&mut self, user: &str, event: &Event) -> StoreResult<bool> {
        Ok(self.data(user).is_some_and(|d| d.events.contains(event)))
    }

    async fn insert_event(&mut self, user: &str, event: &Event) -> StoreResult<()> {
        self.push(user, Table::Events).events.push(event.clone());
        Ok(())
    }

    async fn insert_link(&mut self, user: &str, link: &EntityLink) -> StoreResult<bool> {
        let row = (link.memory_id, link.entity_id, link.role);
        if self.data(user).is_some_and(|d| d.links.contains(&row)) {
            return Ok(false);
        }
        self.push(user, Table::Links).links.push(row);
        Ok(true)
    }

    async fn insert_edge(&mut self, user: &str, edge: &EntityEdge) -> StoreResult<bool> {
        let there = self.data(user).is_some_and(|d| {
            d.edges.iter().any(|e| {
                e.source == edge.source && e.target == edge.target && e.label == edge.label
            })
        });
        if there {
            return Ok(false);
        }
        self.push(user, Table::Edges).edges.push(edge.clone());
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::now;
    use crate::record_tx::run_ready;
    use crate::records::{EntityRole, EntityUpsert};

    #[test]
    fn writes_not_committed_are_undone() {
        let mut state = State::default();
        let ada = Entity::create(
            &EntityUpsert {
                name: "Ada".into(),
                ..EntityUpsert::default()
            },
            now(),
        );
        let mut tx = Tx::new(&mut state);
        run_ready(BACKEND, tx.insert_entity("u", &ada)).unwrap();
        tx.commit();

        let memory = uuid::Uuid::new_v4();
        let mut tx = Tx::new(&mut state);
        let renamed = Entity {
            aliases: vec!["countess".into()],
            ..ada.clone()
        };
        run_ready(BACKEND, tx.update_entity("u", &renamed)).unwrap();
        let event = Event {
            memory_id: memory,
            event_time: now(),
            actor: None,
            location: None,
            event_type: None,
        };
        run_ready(BACKEND, tx.insert_event("u", &event)).unwrap();
        let link = EntityLink {
            memory_id: memory,
            entity_id: ada.id,
            role: EntityRole::Subject,
        };
        assert!(run_ready(BACKEND, tx.insert_link("u", &link)).unwrap());
        let edge = EntityEdge {
            source: ada.id,
            target: ada.id,
            label: "is".into(),
            memory_id: None,
            created_at: now(),
        };
        assert!(run_ready(BACKEND, tx.insert_edge("u", &edge)).unwrap());
        run_ready(BACKEND, tx.insert_entity("v", &ada)).unwrap();
        drop(tx);

        let d = &state.users["u"];
        assert_eq!(d.entities, [ada]);
        assert!(d.events.is_empty() && d.links.is_empty() && d.edges.is_empty());
        assert!(state.users["v"].entities.is_empty());
    }
}
