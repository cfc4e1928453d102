//! The enrichment records the write-time layers keep: events, supersessions, entities,
//! edges and memory-entity links.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::StoreError;
use crate::memory::{Memory, MemoryId};

/// A dated event extracted from a memory (the episodic layer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub memory_id: MemoryId,
    pub event_time: DateTime<Utc>,
    pub actor: Option<String>,
    pub location: Option<String>,
    pub event_type: Option<String>,
}

/// An event with the memory it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub event: Event,
    pub memory: Memory,
}

/// A closed-open time window; `None` leaves that side unbounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeRange {
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

impl TimeRange {
    pub fn contains(&self, t: DateTime<Utc>) -> bool {
        self.since.is_none_or(|s| t >= s) && self.until.is_none_or(|u| t < u)
    }
}

// Defined beside the memory: a correction carries its supersession into the write.

pub type EntityId = Uuid;

/// A node of the user's entity graph, keyed by its normalised name and aliases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entity {
    pub id: EntityId,
    pub name: String,
    pub normalized_name: String,
    pub entity_type: Option<String>,
    /// Normalised alternative names that resolve to this entity.
    pub aliases: Vec<String>,
    pub created_at: DateTime<Utc>,
}

/// What to upsert: found by normalised name or alias, else created.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EntityUpsert {
    pub name: String,
    pub entity_type: Option<String>,
    pub aliases: Vec<String>,
}

impl EntityUpsert {
    /// The normalised names this upsert may match: its name, then its aliases.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::with_capacity(1 + self.aliases.len());
        for key in std::iter::once(&self.name)
            .chain(&self.aliases)
            .map(|n| normalize_entity_name(n))
        {
            if !key.is_empty() && !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }

    /// Refuses an upsert with no usable name: an entity is found and kept by its
    /// normalised name, and a blank one would key nothing.
    pub fn check(&self) -> Result<(), StoreError> {
        match self.keys().is_empty() {
            true => Err(StoreError::InvalidRecord(format!(
                "entity {:?} has no usable name",
                self.name
            ))),
            false => Ok(()),
        }
    }
}

impl Entity {
    /// A new entity from an upsert that matched nothing.
    pub fn create(upsert: &EntityUpsert, created_at: DateTime<Utc>) -> Self {
        let mut keys = upsert.keys().into_iter();
        let normalized_name = keys.next().unwrap_or_default();
        Self {
            id: Uuid::new_v4(),
            name: upsert.name.trim().to_owned(),
            normalized_name,
            entity_type: upsert.entity_type.clone(),
            aliases: keys.collect(),
            created_at,
        }
    }

    /// Whether `key` (normalised) names this entity.
    pub fn answers_to(&self, key: &str) -> bool {
        self.normalized_name == key || self.aliases.iter().any(|a| a == key)
    }

    /// Folds an upsert that matched this entity into it: new names become aliases, and a
    /// type is filled in when none was known. Returns whether anything changed.
    pub fn merge(&mut self, upsert: &EntityUpsert) -> bool {
        let mut changed = false;
        for key in upsert.keys() {
            if !self.answers_to(&key) {
                self.aliases.push(key);
                changed = true;
            }
        }
        if self.entity_type.is_none() && upsert.entity_type.is_some() {
            self.entity_type.clone_from(&upsert.entity_type);
            changed = true;
        }
        changed
    }
}

/// A directed, labelled relationship between two entities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityEdge {
    pub source: EntityId,
    pub target: EntityId,
    pub label: String,
    /// The memory the relationship was read from, when known.
    pub memory_id: Option<MemoryId>,
    pub created_at: DateTime<Utc>,
}

/// How a memory relates to an entity it is linked to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntityRole {
    Subject,
    Mention,
}

impl EntityRole {
    pub fn as_str(self) -> &'static str {
        match self {
            EntityRole::Subject => "subject",
            EntityRole::Mention => "mention",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "subject" => Some(EntityRole::Subject),
            "mention" => Some(EntityRole::Mention),
            _ => None,
        }
    }
}

impl fmt::Display for EntityRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Case- and whitespace-insensitive key of an entity name.
pub fn normalize_entity_name(name: &str) -> String {
    name.split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_names_normalise_case_and_whitespace() {
        assert_eq!(normalize_entity_name("  Ada   LOVELACE\t"), "ada lovelace");
        assert_eq!(normalize_entity_name(""), "");
    }

    #[test]
    fn upserts_merge_names_into_aliases() {
        let up = |name: &str, aliases: &[&str]| EntityUpsert {
            name: name.into(),
            entity_type: None,
            aliases: aliases.iter().map(|a| (*a).to_owned()).collect(),
        };
        let mut e = Entity::create(&up(" Robert  Smith ", &["bob", "BOB"]), Utc::now());
        assert_eq!(e.normalized_name, "robert smith");
        assert_eq!(e.aliases, ["bob"]);
        assert!(e.answers_to("bob"));
        assert!(!e.merge(&up("ROBERT SMITH", &[])));
        assert!(e.merge(&EntityUpsert {
            entity_type: Some("person".into()),
            ..up("Bob", &["Rob"])
        }));
        assert_eq!(e.aliases, ["bob", "rob"]);
        assert_eq!(e.entity_type.as_deref(), Some("person"));
    }

    #[test]
    fn time_range_is_closed_open() {
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let r = TimeRange {
            since: Some(t("2024-01-01T00:00:00Z")),
            until: Some(t("2024-02-01T00:00:00Z")),
        };
        assert!(r.contains(t("2024-01-01T00:00:00Z")));
        assert!(!r.contains(t("2024-02-01T00:00:00Z")));
        assert!(TimeRange::default().contains(t("1970-01-01T00:00:00Z")));
    }
}
