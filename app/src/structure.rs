//! The structure a caller gives with a memory, as text: the entities it is about, their
//! relations and the event it records. The MCP tool `memorize` takes these as arguments
//! and `cortex add --structure` as one JSON object; both read them here into the engine's
//! [`MemoryStructure`], which is written to the entity graph and the timeline in the
//! memorize transaction (no model call, whatever the layer flags).
//!
//! Each field's doc comment is its description in the MCP tool's JSON schema, which is all
//! an agent sees of it. Unknown fields are refused (`deny_unknown_fields`): a misspelt
//! `relation` or `date` would otherwise be dropped without a word.

use cortex_core::reader::extraction::parse_event_time;
use cortex_core::{
    error::CortexError, structure::MemoryStructure, structure::StructureEntity,
    structure::StructureEvent, structure::StructureRelation,
};
use schemars::JsonSchema;
use serde::Deserialize;

/// An entity the memory is about or mentions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct EntityArg {
    /// Its name, as it should be known: "Ana Silva", "Project Atlas", "Lisbon". "I",
    /// "me" and "the user" name the user.
    pub name: String,
    /// What it is: person, place, organization, project, thing, ... (stored lowercased).
    #[serde(default, rename = "type")]
    pub entity_type: Option<String>,
    /// Other names it goes by, e.g. ["Ana"]; recall_about finds it by any of them.
    #[serde(default)]
    pub aliases: Option<Vec<String>>,
}

/// A directed relationship between two entities: `from` `label` `to`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct RelationArg {
    /// The entity the relation starts at, by name or alias, e.g. "Ana Silva".
    pub from: String,
    /// A short verb phrase, e.g. "works at", "sister of", "manages".
    pub label: String,
    /// The entity it points to, e.g. "Acme"; created when no entity has that name.
    pub to: String,
}

/// The event a memory records, for the timeline.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct EventArg {
    /// When it happened (or will): an RFC 3339 datetime such as 2026-11-20T14:30:00Z, a
    /// datetime without zone (taken as UTC), a date YYYY-MM-DD or a month YYYY-MM.
    pub time: String,
    /// Where it happened, e.g. "Lisbon".
    #[serde(default)]
    pub place: Option<String>,
    /// Who did it, e.g. "Ana Silva"; "I" is the user.
    #[serde(default)]
    pub actor: Option<String>,
    /// What sort of event: meeting, trip, purchase, move, ... (stored lowercased).
    #[serde(default, rename = "type")]
    pub event_type: Option<String>,
}

/// Everything a caller may say about a memory; every part is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StructureArgs {
    /// The entity the memory is mainly about, by name ("I" for the user); created when no
    /// entity of `entities` names it.
    #[serde(default)]
    pub subject: Option<String>,
    /// The entities the memory mentions, at most 32.
    #[serde(default)]
    pub entities: Option<Vec<EntityArg>>,
    /// Relationships between entities, at most 32.
    #[serde(default)]
    pub relations: Option<Vec<RelationArg>>,
    /// The event the memory records.
    #[serde(default)]
    pub event: Option<EventArg>,
}

impl StructureArgs {
    /// The checked structure, or `None` when nothing was given. The event's time is read
    /// in the forms [`EventArg::time`] lists; the rest is checked as the engine checks it
    /// (blank or overlong names, an entity listed twice, too many items), so a mistake is
    /// reported before anything is embedded or written. A blank `subject` is absent, as
    /// agents often send `""` for an argument they mean to leave out.
    pub fn into_structure(self) -> Result<Option<MemoryStructure>, CortexError> {
        let event = self.event.map(EventArg::into_event).transpose()?;
        let structure = MemoryStructure {
            // A blank subject is refused with the other blank names (validated), not dropped.
            subject: self.subject,
            entities: self
                .entities
                .unwrap_or_default()
                .into_iter()
                .map(|e| StructureEntity {
                    name: e.name,
                    entity_type: e.entity_type,
                    aliases: e.aliases.unwrap_or_default(),
                })
                .collect(),
            relations: self
                .relations
                .unwrap_or_default()
                .into_iter()
                .map(|r| StructureRelation {
                    from: r.from,
                    label: r.label,
                    to: r.to,
                })
                .collect(),
            event,
        };
        if structure.is_empty() {
            return Ok(None);
        }
        structure.validated()?;
        Ok(Some(structure))
    }
}

impl EventArg {
    fn into_event(self) -> Result<StructureEvent, CortexError> {
        let time = parse_event_time(&self.time).ok_or_else(|| CortexError::InvalidInput {
            field: "event",
            reason: format!(
                "time {:?} is not a date or time; use an RFC 3339 datetime such as \
                 2026-11-20T14:30:00Z, a date YYYY-MM-DD or a month YYYY-MM, in the years \
                 0000-9999",
                self.time
            ),
        })?;
        Ok(StructureEvent {
            time,
            place: self.place,
            actor: self.actor,
            event_type: self.event_type,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(value: serde_json::Value) -> Result<Option<MemoryStructure>, CortexError> {
        serde_json::from_value::<StructureArgs>(value)
            .unwrap()
            .into_structure()
    }

    fn refused(value: serde_json::Value) -> (&'static str, String) {
        match parse(value) {
            Err(CortexError::InvalidInput { field, reason }) => (field, reason),
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    #[test]
    fn a_full_structure_is_read() {
        let s = parse(json!({
            "subject": "Ana Silva",
            "entities": [
                {"name": "Ana Silva", "type": "person", "aliases": ["Ana"]},
                {"name": "Acme"}
            ],
            "relations": [{"from": "Ana Silva", "label": "works at", "to": "Acme"}],
            "event": {"time": "2026-11-20", "place": "Lisbon", "actor": "I", "type": "meeting"}
        }))
        .unwrap()
        .unwrap();
        assert_eq!(s.subject.as_deref(), Some("Ana Silva"));
        assert_eq!(
            s.entities,
            [
                StructureEntity {
                    name: "Ana Silva".into(),
                    entity_type: Some("person".into()),
                    aliases: vec!["Ana".into()],
                },
                StructureEntity {
                    name: "Acme".into(),
                    entity_type: None,
                    aliases: Vec::new(),
                },
            ]
        );
        assert_eq!(
            s.relations,
            [StructureRelation {
                from: "Ana Silva".into(),
                label: "works at".into(),
                to: "Acme".into(),
            }]
        );
        let event = s.event.unwrap();
        assert_eq!(event.time.to_rfc3339(), "2026-11-20T00:00:00+00:00");
        assert_eq!(event.place.as_deref(), Some("Lisbon"));
        assert_eq!(event.actor.as_deref(), Some("I"));
        assert_eq!(event.event_type.as_deref(), Some("meeting"));
    }

    #[test]
    fn event_times_take_every_documented_form() {
        for (text, want) in [
            ("2026-11-20T14:30:00+02:00", "2026-11-20T12:30:00+00:00"),
            ("2026-11-20T14:30:00", "2026-11-20T14:30:00+00:00"),
            ("2026-11-20", "2026-11-20T00:00:00+00:00"),
            ("2026-11", "2026-11-01T00:00:00+00:00"),
        ] {
            let s = parse(json!({"event": {"time": text}})).unwrap().unwrap();
            assert_eq!(s.event.unwrap().time.to_rfc3339(), want, "{text}");
        }
    }

    #[test]
    fn nothing_given_is_no_structure() {
        assert_eq!(parse(json!({})).unwrap(), None);
        assert_eq!(
            parse(json!({"entities": [], "relations": null})).unwrap(),
            None
        );
    }

    /// The docs say blank names are refused; a blank subject was dropped silently, so a
    /// caller that meant one never learnt it was not recorded.
    #[test]
    fn a_blank_subject_is_refused_not_dropped() {
        for blank in ["", " ", "\t\n"] {
            let (field, _) = refused(json!({"subject": blank}));
            assert_eq!(field, "subject", "{blank:?}");
        }
    }

    #[test]
    fn a_bad_event_time_names_the_text() {
        for bad in [
            "next tuesday",
            "",
            "2026-13-01",
            "+10000-01-01",
            "20/11/2026",
        ] {
            let (field, reason) = refused(json!({"event": {"time": bad}}));
            assert_eq!(field, "event", "{bad}");
            assert!(reason.contains(&format!("{bad:?}")), "{reason}");
            assert!(reason.contains("YYYY-MM-DD"), "{reason}");
        }
    }

    #[test]
    fn what_the_engine_refuses_is_refused_here() {
        let (field, reason) = refused(json!({"entities": [{"name": "  "}]}));
        assert_eq!(field, "entities");
        assert!(reason.contains("name of item 0"), "{reason}");
        let (field, _) = refused(json!({"relations": [{"from": "Ana", "label": "!", "to": "Bo"}]}));
        assert_eq!(field, "relations");
        let (field, _) = refused(json!({"event": {"time": "2026-01-01", "actor": " "}}));
        assert_eq!(field, "event");
    }

    #[test]
    fn unknown_and_missing_fields_are_refused() {
        for (bad, needle) in [
            (json!({"entity": []}), "unknown field `entity`"),
            (
                json!({"entities": [{"name": "Ana", "kind": "person"}]}),
                "unknown field `kind`",
            ),
            (
                json!({"relations": [{"from": "Ana", "label": "x", "to": "Bo", "since": "2020"}]}),
                "unknown field `since`",
            ),
            (
                json!({"event": {"time": "2026-01-01", "date": "x"}}),
                "unknown field `date`",
            ),
            (
                json!({"event": {"place": "Lisbon"}}),
                "missing field `time`",
            ),
            (
                json!({"relations": [{"from": "Ana", "to": "Bo"}]}),
                "missing field `label`",
            ),
            (json!({"entities": {"name": "Ana"}}), "invalid type"),
        ] {
            let err = serde_json::from_value::<StructureArgs>(bad.clone()).unwrap_err();
            assert!(err.to_string().contains(needle), "{bad}: {err}");
        }
    }

    #[test]
    fn the_schema_uses_the_wire_names_and_inlines_the_parts() {
        let schema = serde_json::to_value(schemars::schema_for!(StructureArgs)).unwrap();
        let props = &schema["properties"];
        let entity = &props["entities"]["items"];
        assert_eq!(entity["additionalProperties"], false, "{schema}");
        assert!(
            entity["properties"]["type"]["description"].is_string(),
            "{schema}"
        );
        assert!(props["event"]["properties"]["time"].is_object(), "{schema}");
        assert!(schema.get("$defs").is_none(), "{schema}");
    }
}
