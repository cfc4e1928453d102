//! Memories with caller structure, as export lines: what `memorize` writes when the caller
//! gives `subject`, `entities` and `relations` (docs/ARCHITECTURE.md, "memorize", step 5),
//! for the sources that are a graph already (the MCP memory server's entities and
//! relations, basic-memory's notes with their observations and relations).
//!
//! The structure is checked by the same `MemoryStructure::validated` memorize uses, and the
//! records made as the engine makes them (entities, the subject's link first, then the
//! mentions, then the relations as edges read from the memory), so `recall_about` finds
//! an imported entity exactly as one given to memorize. Entity ids are derived from the
//! user and the normalised name, so an import run again finds them already there.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use cortex_app::transfer::format::{Line, Owned};
use cortex_core::records::{Entity, EntityEdge, EntityId, EntityRole, EntityUpsert};
use cortex_core::structure::{MemoryStructure, StructureEntity};
use cortex_core::transfer::EntityLink;

use crate::admin::import::source::{Draft, Scope, Unit, entity_id};

/// The entities a run has written so far, so each is written once however many records
/// name it.
#[derive(Debug, Default)]
pub struct Graph {
    written: HashSet<EntityId>,
}

impl Graph {
    /// An entity on its own, with no memory: a node the source has with nothing said about
    /// it yet still answers `recall_about`. Written unless `--since` is after `at`.
    pub fn entity(
        &mut self,
        unit: &mut Unit,
        scope: &Scope,
        user: &str,
        entity: &StructureEntity,
        at: DateTime<Utc>,
    ) -> Result<(), String> {
        if !scope.selects(at) {
            return Ok(());
        }
        let structure = MemoryStructure {
            entities: vec![entity.clone()],
            ..MemoryStructure::default()
        };
        let x = structure.validated().map_err(|e| e.to_string())?;
        for e in &x.entities {
            self.node(
                unit,
                user,
                &e.name,
                e.entity_type.clone(),
                e.aliases.clone(),
                at,
            );
        }
        Ok(())
    }

    /// A memory with its structure, as memorize writes a caller's: nothing when the memory
    /// is not written (empty, or before `--since`).
    pub fn memory(
        &mut self,
        unit: &mut Unit,
        scope: &Scope,
        draft: Draft,
        structure: &MemoryStructure,
    ) -> Result<(), String> {
        let x = structure.validated().map_err(|e| e.to_string())?;
        let (user, at) = (draft.user.clone(), draft.created_at);
        let Some(memory_id) = unit.memory(scope, draft) else {
            return Ok(());
        };
        // The nodes the engine makes: the listed entities, then the subject and the
        // relations' ends not listed, each name once.
        let mut nodes: Vec<(String, Option<String>, Vec<String>)> = x
            .entities
            .iter()
            .map(|e| (e.name.clone(), e.entity_type.clone(), e.aliases.clone()))
            .collect();
        let named = x
            .subject
            .iter()
            .chain(x.relationships.iter().flat_map(|r| [&r.source, &r.target]));
        for name in named {
            nodes.push((name.clone(), None, Vec::new()));
        }
        let mut ids: Vec<(String, EntityId)> = Vec::new();
        for (name, kind, aliases) in nodes {
            if ids.iter().any(|(n, _)| *n == name) {
                continue;
            }
            let id = self.node(unit, &user, &name, kind, aliases, at);
            ids.push((name, id));
        }
        let id_of = |name: &str| ids.iter().find(|(n, _)| n == name).map(|(_, id)| *id);
        let subject = x.subject.as_deref().and_then(id_of);
        let mut linked: Vec<EntityId> = Vec::new();
        let roles = subject
            .map(|id| (id, EntityRole::Subject))
            .into_iter()
            .chain(ids.iter().map(|(_, id)| (*id, EntityRole::Mention)));
        for (entity_id, role) in roles {
            // Two names of one entity (an alias) link it once, as its first role.
            if linked.contains(&entity_id) {
                continue;
            }
            linked.push(entity_id);
            unit.lines.push(Line::Link(Owned {
                user_id: user.clone(),
                record: EntityLink {
                    memory_id,
                    entity_id,
                    role,
                },
            }));
        }
        for r in &x.relationships {
            let (Some(source), Some(target)) = (id_of(&r.source), id_of(&r.target)) else {
                continue;
            };
            unit.lines.push(Line::Edge(Owned {
                user_id: user.clone(),
                record: EntityEdge {
                    source,
                    target,
                    label: r.label.clone(),
                    memory_id: Some(memory_id),
                    created_at: at,
                },
            }));
        }
        Ok(())
    }

    /// The entity line for `name`, written the first time the run meets it; its id.
    fn node(
        &mut self,
        unit: &mut Unit,
        user: &str,
        name: &str,
        entity_type: Option<String>,
        aliases: Vec<String>,
        at: DateTime<Utc>,
    ) -> EntityId {
        let upsert = EntityUpsert {
            name: name.to_owned(),
            entity_type,
            aliases,
        };
        let mut entity = Entity::create(&upsert, at);
        entity.id = entity_id(user, &entity.normalized_name);
        let id = entity.id;
        if self.written.insert(id) {
            unit.lines.push(Line::Entity(Owned {
                user_id: user.to_owned(),
                record: entity,
            }));
        }
        id
    }
}

/// `works_at` -> `works at`: a relation label as words, for a memory's text.
pub fn label_words(label: &str) -> String {
    label
        .split(|c: char| c == '_' || c == '-' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
