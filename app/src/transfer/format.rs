//! The export format: JSON Lines, one record a line, documented in docs/FORMAT.md.
//!
//! The first line is a [`Header`]. Then, user by user: memories in insertion order, then
//! supersessions, events, entities, edges and links, so every line refers only to lines
//! before it and an import can write the file front to back.

use chrono::{DateTime, Utc};
use cortex_core::memory::Supersession;
use cortex_core::records::{Entity, EntityEdge, Event};
use cortex_core::{
    memory::MemoryKind, signature::EmbeddingSignature, transfer::EntityLink, transfer::Record,
    transfer::StoredMemory,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The `format` value of every export's header.
pub const FORMAT_NAME: &str = "cortex-export";
/// The format version this build writes; it reads this version and older.
pub const FORMAT_VERSION: u32 = 1;
/// The first line of a markdown export, by which `cortex import` knows one and refuses it.
pub const MARKDOWN_TITLE: &str = "# Cortex memories";

/// The first line of an export.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    pub version: u32,
    pub exported_at: DateTime<Utc>,
    /// The model and dimension that wrote the vectors; absent for an empty store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<EmbeddingSignature>,
    /// Whether memory lines carry their `embedding`.
    pub vectors: bool,
    /// The users in the file, in the order they appear.
    pub users: Vec<String>,
}

/// One memory, live or superseded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryLine {
    pub id: Uuid,
    pub user_id: String,
    pub content: String,
    pub kind: MemoryKind,
    #[serde(default)]
    pub tags: Vec<String>,
    pub created_at: DateTime<Utc>,
    /// When it expires, if it does (kept by import, even when already past).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Informational: whether a later memory supersedes it. Import derives it from the
    /// supersession lines.
    #[serde(default)]
    pub superseded: bool,
    /// The vector, with `--with-vectors`: it belongs to the header's signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Vec<f32>>,
}

impl MemoryLine {
    pub fn of(stored: StoredMemory, with_vector: bool) -> Self {
        let m = stored.memory;
        Self {
            id: m.id,
            user_id: m.user_id,
            content: m.content,
            kind: m.kind,
            tags: m.tags,
            created_at: m.created_at,
            expires_at: m.expires_at,
            superseded: stored.superseded,
            embedding: with_vector.then_some(stored.embedding),
        }
    }
}

/// A record besides a memory, with its user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Owned<T> {
    pub user_id: String,
    #[serde(flatten)]
    pub record: T,
}

/// Any line of an export, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    Header(Header),
    Memory(MemoryLine),
    Supersession(Owned<Supersession>),
    Event(Owned<Event>),
    Entity(Owned<Entity>),
    Edge(Owned<EntityEdge>),
    Link(Owned<EntityLink>),
}

impl Line {
    /// A store record as a line of `user`'s.
    pub fn of_record(user: &str, record: Record) -> Self {
        let user_id = user.to_owned();
        match record {
            Record::Supersession(record) => Line::Supersession(Owned { user_id, record }),
            Record::Event(record) => Line::Event(Owned { user_id, record }),
            Record::Entity(record) => Line::Entity(Owned { user_id, record }),
            Record::Edge(record) => Line::Edge(Owned { user_id, record }),
            Record::Link(record) => Line::Link(Owned { user_id, record }),
        }
    }

    /// The name of the line's `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Line::Header(_) => "header",
            Line::Memory(_) => "memory",
            Line::Supersession(_) => "supersession",
            Line::Event(_) => "event",
            Line::Entity(_) => "entity",
            Line::Edge(_) => "edge",
            Line::Link(_) => "link",
        }
    }

    /// The user a record line belongs to (`None` for the header).
    pub fn user(&self) -> Option<&str> {
        match self {
            Line::Header(_) => None,
            Line::Memory(m) => Some(&m.user_id),
            Line::Supersession(o) => Some(&o.user_id),
            Line::Event(o) => Some(&o.user_id),
            Line::Entity(o) => Some(&o.user_id),
            Line::Edge(o) => Some(&o.user_id),
            Line::Link(o) => Some(&o.user_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_carry_their_type() {
        let event = Line::Event(Owned {
            user_id: "ada".into(),
            record: Event {
                memory_id: Uuid::nil(),
                event_time: "2024-05-01T00:00:00Z".parse().unwrap(),
                actor: Some("Ada".into()),
                location: None,
                event_type: None,
            },
        });
        let text = serde_json::to_string(&event).unwrap();
        assert!(
            text.starts_with(r#"{"type":"event","user_id":"ada""#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Line>(&text).unwrap(), event);
    }

    #[test]
    fn vectors_survive_json_bit_for_bit() {
        let v = vec![
            0.1f32,
            -1.0e-7,
            3.4028235e38,
            f32::MIN_POSITIVE,
            0.333_333_34,
        ];
        let line = MemoryLine {
            id: Uuid::nil(),
            user_id: "u".into(),
            content: "c".into(),
            kind: MemoryKind::Fact,
            tags: vec![],
            created_at: "2024-05-01T00:00:00Z".parse().unwrap(),
            expires_at: None,
            superseded: false,
            embedding: Some(v.clone()),
        };
        let back: MemoryLine =
            serde_json::from_str(&serde_json::to_string(&line).unwrap()).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back.embedding.unwrap()), bits(&v));
    }

    #[test]
    fn an_unknown_type_is_an_error() {
        assert!(serde_json::from_str::<Line>(r#"{"type":"bogus"}"#).is_err());
    }
}
