//! Structure a caller gives with a memory: the entities it is about, their relations and
//! the event it records. The agent calling memorize is itself a model and often knows
//! these already; checked here as strictly as any argument, they become exactly the
//! records the extraction layer writes, with no model call on the server.

use std::collections::HashMap;

use chrono::{DateTime, Datelike, SubsecRound, Utc};

use crate::error::CortexError;
use crate::reader::extraction::{
    ExtractedEntity, ExtractedEvent, ExtractedRelationship, Extraction, SELF_ENTITY,
    canonical_entity_name, normalize_label,
};
use crate::records::normalize_entity_name;

/// Most entities, and most relations, one memory may carry.
pub const MAX_STRUCTURE_ITEMS: usize = 32;
/// Most aliases of one entity.
pub const MAX_ALIASES: usize = 16;
/// Longest entity name, alias, place or actor, in characters after trimming.
pub const MAX_NAME_CHARS: usize = 200;
/// Longest entity type, relation label or event type, in characters after trimming.
pub const MAX_LABEL_CHARS: usize = 64;

/// What the caller knows about a memory. Empty parts write nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryStructure {
    /// The entity the memory is mainly about; linked as its subject, and created when no
    /// entity of `entities` names it. "I", "me" and "the user" name the user's own node.
    pub subject: Option<String>,
    /// The entities the memory mentions, each linked to it.
    pub entities: Vec<StructureEntity>,
    /// Directed relationships between entities; an end no entity names is created.
    pub relations: Vec<StructureRelation>,
    /// The event the memory records, for the timeline.
    pub event: Option<StructureEvent>,
}

/// An entity of [`MemoryStructure::entities`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StructureEntity {
    pub name: String,
    /// person, place, organization, project, thing, ... (stored lowercased).
    pub entity_type: Option<String>,
    /// Other names it goes by; any of them finds it later.
    pub aliases: Vec<String>,
}

/// A relation of [`MemoryStructure::relations`]: `from` `label` `to`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StructureRelation {
    pub from: String,
    /// A short verb phrase; stored as the extraction stores labels (`Works At` ->
    /// `works_at`).
    pub label: String,
    pub to: String,
}

/// The event of [`MemoryStructure::event`].
#[derive(Debug, Clone, PartialEq)]
pub struct StructureEvent {
    /// When it happened (or will); kept to the microsecond, in the years 0000-9999.
    pub time: DateTime<Utc>,
    pub place: Option<String>,
    /// Who did it ("I" is the user).
    pub actor: Option<String>,
    /// A short label such as meeting, trip, purchase (stored lowercased).
    pub event_type: Option<String>,
}

impl MemoryStructure {
    /// Whether there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.subject.is_none()
            && self.entities.is_empty()
            && self.relations.is_empty()
            && self.event.is_none()
    }

    /// The structure as an extraction the model could have answered, after refusing
    /// anything the extraction parser would have had to drop or cut: a blank or overlong
    /// name, an entity listed twice, a label with no word in it, too many items. Each error
    /// names the field and its position.
    pub fn validated(&self) -> Result<Extraction, CortexError> {
        let subject = self
            .subject
            .as_deref()
            .map(|s| name("subject", s))
            .transpose()?;
        check_count("entities", self.entities.len())?;
        check_count("relations", self.relations.len())?;
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut entities = Vec::with_capacity(self.entities.len());
        for (i, e) in self.entities.iter().enumerate() {
            let entity = validated_entity(i, e)?;
            let keys = std::iter::once(&entity.name)
                .chain(&entity.aliases)
                .map(|n| normalize_entity_name(n));
            for key in keys {
                if let Some(first) = seen.insert(key.clone(), i)
                    && first != i
                {
                    return Err(invalid(
                        "entities",
                        format!("entities {first} and {i} both name {key:?}; list it once"),
                    ));
                }
            }
            entities.push(entity);
        }
        let relationships = self
            .relations
            .iter()
            .enumerate()
            .map(|(i, r)| {
                Ok(ExtractedRelationship {
                    source: name("relations", &r.from).map_err(|e| at(e, "from", i))?,
                    label: label(&r.label).map_err(|e| at(e, "label", i))?,
                    target: name("relations", &r.to).map_err(|e| at(e, "to", i))?,
                })
            })
            .collect::<Result<Vec<_>, CortexError>>()?;
        let event = self.event.as_ref().map(validated_event).transpose()?;
        Ok(Extraction {
            event,
            subject,
            entities,
            relationships,
        })
    }
}

fn validated_entity(i: usize, e: &StructureEntity) -> Result<ExtractedEntity, CortexError> {
    let name = name("entities", &e.name).map_err(|err| at(err, "name", i))?;
    if e.aliases.len() > MAX_ALIASES {
        return Err(invalid(
            "entities",
            format!(
                "entity {i} has {} aliases; at most {MAX_ALIASES}",
                e.aliases.len()
            ),
        ));
    }
    let aliases = e
        .aliases
        .iter()
        .map(|a| plain("entities", a, MAX_NAME_CHARS).map_err(|err| at(err, "alias", i)))
        .collect::<Result<Vec<_>, _>>()?;
    let entity_type = optional("entities", e.entity_type.as_deref(), MAX_LABEL_CHARS)
        .map_err(|err| at(err, "type", i))?
        .map(|t| t.to_lowercase());
    Ok(ExtractedEntity {
        // The user's own node is typed as extraction types it.
        entity_type: match name.as_str() {
            SELF_ENTITY => Some(SELF_ENTITY.to_owned()),
            _ => entity_type,
        },
        name,
        aliases,
    })
}

fn validated_event(e: &StructureEvent) -> Result<ExtractedEvent, CortexError> {
    if !(0..=9999).contains(&e.time.year()) {
        return Err(invalid("event", "time must be in the years 0000-9999"));
    }
    Ok(ExtractedEvent {
        event_time: e.time.trunc_subsecs(6),
        location: optional("event", e.place.as_deref(), MAX_NAME_CHARS)
            .map_err(|err| at(err, "place", 0))?,
        actor: e
            .actor
            .as_deref()
            .map(|a| name("event", a))
            .transpose()
            .map_err(|err| at(err, "actor", 0))?,
        event_type: optional("event", e.event_type.as_deref(), MAX_LABEL_CHARS)
            .map_err(|err| at(err, "type", 0))?
            .map(|t| t.to_lowercase()),
    })
}

fn check_count(field: &'static str, count: usize) -> Result<(), CortexError> {
    match count > MAX_STRUCTURE_ITEMS {
        true => Err(invalid(
            field,
            format!("{count} given; at most {MAX_STRUCTURE_ITEMS}"),
        )),
        false => Ok(()),
    }
}

/// An entity name as extraction keeps it: trimmed, the user's ways of naming themself
/// mapped to the `self` node.
fn name(field: &'static str, text: &str) -> Result<String, CortexError> {
    plain(field, text, MAX_NAME_CHARS)?;
    Ok(canonical_entity_name(text))
}

fn label(text: &str) -> Result<String, CortexError> {
    plain("relations", text, MAX_LABEL_CHARS)?;
    normalize_label(text)
        .ok_or_else(|| invalid("relations", format!("{text:?} has no letter or digit")))
}

/// Trimmed text: not blank, no control character, at most `max` characters.
fn plain(field: &'static str, text: &str, max: usize) -> Result<String, CortexError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(invalid(field, "must not be blank"));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(invalid(
            field,
            format!("{trimmed:?} contains a control character"),
        ));
    }
    let chars = trimmed.chars().count();
    if chars > max {
        return Err(invalid(
            field,
            format!("is {chars} characters; at most {max}"),
        ));
    }
    Ok(trimmed.to_owned())
}

/// An optional text: absent and blank are both none.
fn optional(
    field: &'static str,
    text: Option<&str>,
    max: usize,
) -> Result<Option<String>, CortexError> {
    match text {
        Some(t) if !t.trim().is_empty() => plain(field, t, max).map(Some),
        _ => Ok(None),
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> CortexError {
    CortexError::InvalidInput {
        field,
        reason: reason.into(),
    }
}

/// Says which part and which position an error is about.
fn at(error: CortexError, part: &str, position: usize) -> CortexError {
    match error {
        CortexError::InvalidInput { field, reason } => CortexError::InvalidInput {
            field,
            reason: match field {
                "event" => format!("{part} {reason}"),
                _ => format!("{part} of item {position} {reason}"),
            },
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(name: &str, aliases: &[&str]) -> StructureEntity {
        StructureEntity {
            name: name.into(),
            entity_type: Some(" Person ".into()),
            aliases: aliases.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    fn reason(result: Result<Extraction, CortexError>) -> (&'static str, String) {
        match result {
            Err(CortexError::InvalidInput { field, reason }) => (field, reason),
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    #[test]
    fn a_full_structure_becomes_an_extraction() {
        let s = MemoryStructure {
            subject: Some("me".into()),
            entities: vec![entity(" Ana  Silva ", &["Ana"]), entity("I", &[])],
            relations: vec![StructureRelation {
                from: "my".into(),
                label: "Works With".into(),
                to: "Ana Silva".into(),
            }],
            event: Some(StructureEvent {
                time: "2024-05-01T10:00:00.1234567Z".parse().unwrap(),
                place: Some(" Lisbon ".into()),
                actor: Some("I".into()),
                event_type: Some("Meeting".into()),
            }),
        };
        let x = s.validated().unwrap();
        assert_eq!(x.subject.as_deref(), Some("self"));
        assert_eq!(x.entities[0].name, "Ana  Silva");
        assert_eq!(x.entities[0].entity_type.as_deref(), Some("person"));
        assert_eq!(x.entities[0].aliases, ["Ana"]);
        assert_eq!(x.entities[1].name, "self");
        assert_eq!(x.entities[1].entity_type.as_deref(), Some("self"));
        assert_eq!(
            x.relationships,
            [ExtractedRelationship {
                source: "self".into(),
                label: "works_with".into(),
                target: "Ana Silva".into(),
            }]
        );
        let event = x.event.unwrap();
        assert_eq!(event.event_time.timestamp_subsec_micros(), 123_456);
        assert_eq!(event.location.as_deref(), Some("Lisbon"));
        assert_eq!(event.actor.as_deref(), Some("self"));
        assert_eq!(event.event_type.as_deref(), Some("meeting"));
    }

    #[test]
    fn what_extraction_would_drop_is_refused_with_its_position() {
        let with = |f: &dyn Fn(&mut MemoryStructure)| {
            let mut s = MemoryStructure {
                entities: vec![entity("Ana", &[]), entity("Bo", &[])],
                ..MemoryStructure::default()
            };
            f(&mut s);
            reason(s.validated())
        };
        let (field, why) = with(&|s| s.entities[1].name = "  ".into());
        assert_eq!(field, "entities");
        assert!(why.contains("name of item 1"), "{why}");
        let (_, why) = with(&|s| s.entities[1].aliases = vec!["ANA".into()]);
        assert!(why.contains("entities 0 and 1"), "{why}");
        let (_, why) = with(&|s| s.entities[0].name = "x".repeat(MAX_NAME_CHARS + 1));
        assert!(why.contains("at most 200"), "{why}");
        let (_, why) = with(&|s| s.entities[0].aliases = vec!["a\u{7}".into()]);
        assert!(why.contains("control character"), "{why}");
        let (field, _) = with(&|s| {
            s.entities = (0..=MAX_STRUCTURE_ITEMS)
                .map(|i| entity(&format!("e{i}"), &[]))
                .collect()
        });
        assert_eq!(field, "entities");
        let (field, why) = with(&|s| {
            s.relations = vec![StructureRelation {
                from: "Ana".into(),
                label: "!!".into(),
                to: "Bo".into(),
            }]
        });
        assert_eq!(field, "relations");
        assert!(why.contains("label of item 0"), "{why}");
        let (field, why) = with(&|s| {
            s.event = Some(StructureEvent {
                time: "2024-05-01T00:00:00Z".parse().unwrap(),
                place: Some("p\u{0}".into()),
                actor: None,
                event_type: None,
            })
        });
        assert_eq!(field, "event");
        assert!(why.starts_with("place"), "{why}");
        let (field, _) = with(&|s| s.subject = Some(String::new()));
        assert_eq!(field, "subject");
    }

    #[test]
    fn blank_optional_parts_are_absent_and_unlisted_ends_are_kept() {
        let s = MemoryStructure {
            entities: vec![StructureEntity {
                name: "Ana".into(),
                entity_type: Some("  ".into()),
                aliases: Vec::new(),
            }],
            relations: vec![StructureRelation {
                from: "Ana".into(),
                label: "founded".into(),
                to: "Acme".into(),
            }],
            ..MemoryStructure::default()
        };
        let x = s.validated().unwrap();
        assert_eq!(x.entities[0].entity_type, None);
        assert_eq!(x.relationships[0].target, "Acme");
        assert!(MemoryStructure::default().is_empty());
        assert!(!s.is_empty());
    }
}
