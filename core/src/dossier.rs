//! The entity dossier `recall_about` returns: an entity, its labelled relationships and the
//! memories linked to it.

use serde::{Deserialize, Serialize};

use crate::memory::Memory;
use crate::records::Entity;

/// Which way a relationship points, seen from the dossier's entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The dossier's entity is the source: "entity --label--> other".
    Out,
    /// The dossier's entity is the target: "other --label--> entity".
    In,
}

/// One relationship of the dossier's entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relationship {
    pub label: String,
    pub direction: Direction,
    pub other: Entity,
}

/// Everything the graph holds about one entity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dossier {
    pub entity: Entity,
    pub relationships: Vec<Relationship>,
    /// Live memories linked to the entity, newest first.
    pub memories: Vec<Memory>,
}
