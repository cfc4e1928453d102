//! The write-time extraction call: one prompt that yields the episodic event and the graph
//! facts together, and the parser for what models really answer.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, SecondsFormat, Utc};
use serde_json::Value;

use super::ParseError;
use super::json::{array_field, find_json_object, string_field};

/// The synthetic node that stands for the user.
pub const SELF_ENTITY: &str = "self";

const MAX_NAME_CHARS: usize = 200;
const MAX_LABEL_CHARS: usize = 64;
const MAX_ITEMS: usize = 32;

/// What one extraction call found in one memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extraction {
    pub event: Option<ExtractedEvent>,
    /// The entity the memory is mainly about.
    pub subject: Option<String>,
    pub entities: Vec<ExtractedEntity>,
    pub relationships: Vec<ExtractedRelationship>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExtractedEvent {
    pub event_time: DateTime<Utc>,
    pub actor: Option<String>,
    pub location: Option<String>,
    pub event_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExtractedEntity {
    pub name: String,
    pub entity_type: Option<String>,
    pub aliases: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExtractedRelationship {
    pub source: String,
    pub label: String,
    pub target: String,
}

/// The prompt for one memory. `saved_at` lets the model resolve "yesterday" and "last
/// week"; only the asked-for parts are requested.
pub fn build_extraction_prompt(
    content: &str,
    saved_at: DateTime<Utc>,
    want_event: bool,
    want_graph: bool,
) -> String {
    let mut fields = Vec::new();
    if want_event {
        fields.push(
            r#"  "event": null, or {"event_time": "ISO-8601 date or date-time when it happened; resolve relative dates such as 'yesterday' against the save time", "actor": "who did it, or null", "location": "where, or null", "event_type": "a short lowercase label such as meeting, trip, purchase, or null"}"#,
        );
    }
    if want_graph {
        fields.push(
            r#"  "subject": "the entity the memory is mainly about; \"self\" for the user (I, me, my, the user)","#,
        );
        fields.push(
            r#"  "entities": [{"name": "canonical name", "type": "person | place | organization | project | thing | other", "aliases": ["other names used"]}],"#,
        );
        fields.push(
            r#"  "relationships": [{"source": "entity name", "label": "short_snake_case_verb", "target": "entity name"}]"#,
        );
    }
    let saved = saved_at.to_rfc3339_opts(SecondsFormat::Secs, true);
    format!(
        "You extract structured metadata from one memory a user saved. The memory was saved at \
         {saved} (UTC).\n\nMemory:\n\"\"\"\n{content}\n\"\"\"\n\nAnswer with ONLY a JSON object \
         with these fields:\n{{\n{}\n}}\nUse \"self\" for the user. Use null or [] when nothing \
         applies; never invent facts that are not in the memory.",
        fields.join("\n")
    )
}

/// Parses an extraction answer. Tolerates code fences, prose, missing fields and wrong
/// types (skipping what cannot be used); fails only when there is no JSON object at all.
pub fn parse_extraction(text: &str) -> Result<Extraction, ParseError> {
    let obj = find_json_object(text).ok_or(ParseError::NoJson)?;
    let event = match obj.get("event") {
        Some(Value::Object(e)) => string_field(e, "event_time", 64)
            .and_then(|t| parse_event_time(&t))
            .map(|event_time| ExtractedEvent {
                event_time,
                actor: string_field(e, "actor", MAX_NAME_CHARS).map(|a| canonical_entity_name(&a)),
                location: string_field(e, "location", MAX_NAME_CHARS),
                event_type: string_field(e, "event_type", MAX_LABEL_CHARS)
                    .map(|t| t.to_lowercase()),
            }),
        _ => None,
    };
    let subject = string_field(&obj, "subject", MAX_NAME_CHARS).map(|s| canonical_entity_name(&s));
    let entities = array_field(&obj, "entities")
        .iter()
        .take(MAX_ITEMS)
        .filter_map(|item| match item {
            Value::String(name) => entity(name, None, Vec::new()),
            Value::Object(e) => entity(
                &string_field(e, "name", MAX_NAME_CHARS)?,
                string_field(e, "type", MAX_LABEL_CHARS).map(|t| t.to_lowercase()),
                array_field(e, "aliases")
                    .iter()
                    .filter_map(|a| a.as_str().map(str::trim))
                    .filter(|a| !a.is_empty())
                    .map(|a| a.chars().take(MAX_NAME_CHARS).collect())
                    .take(MAX_ITEMS)
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    let relationships = array_field(&obj, "relationships")
        .iter()
        .take(MAX_ITEMS)
        .filter_map(|item| {
            let r = item.as_object()?;
            let label = normalize_label(&string_field(r, "label", MAX_LABEL_CHARS)?)?;
            Some(ExtractedRelationship {
                source: canonical_entity_name(&string_field(r, "source", MAX_NAME_CHARS)?),
                label,
                target: canonical_entity_name(&string_field(r, "target", MAX_NAME_CHARS)?),
            })
        })
        .collect();
    Ok(Extraction {
        event,
        subject,
        entities,
        relationships,
    })
}

fn entity(
    name: &str,
    entity_type: Option<String>,
    aliases: Vec<String>,
) -> Option<ExtractedEntity> {
    let name = canonical_entity_name(name);
    (!name.is_empty()).then_some(ExtractedEntity {
        name,
        entity_type,
        aliases,
    })
}

/// Maps the ways a user refers to themself to the synthetic `self` node.
pub fn canonical_entity_name(name: &str) -> String {
    let trimmed = name.trim();
    match trimmed.to_lowercase().as_str() {
        "i" | "me" | "my" | "mine" | "myself" | "self" | "user" | "the user" => {
            SELF_ENTITY.to_owned()
        }
        _ => trimmed.chars().take(MAX_NAME_CHARS).collect(),
    }
}

/// `Works With` -> `works_with`; empty after cleaning -> None.
pub fn normalize_label(label: &str) -> Option<String> {
    let words: Vec<String> = label
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    (!words.is_empty()).then(|| words.join("_"))
}

/// Accepts RFC 3339, a date-time without zone (taken as UTC), a date, or a year-month,
/// in the years 0000-9999 (UTC) that RFC 3339 can write: the SQLite backend stores
/// event times as RFC 3339 text and could not read `-0002-01-01` (from "-02-01") back.
pub fn parse_event_time(text: &str) -> Option<DateTime<Utc>> {
    parse_any_event_time(text.trim()).filter(|t| (0..=9999).contains(&t.year()))
}

fn parse_any_event_time(t: &str) -> Option<DateTime<Utc>> {
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Some(dt.with_timezone(&Utc));
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(naive) = NaiveDateTime::parse_from_str(t, format) {
            return Some(naive.and_utc());
        }
    }
    if let Ok(date) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return date.and_hms_opt(0, 0, 0).map(|d| d.and_utc());
    }
    NaiveDate::parse_from_str(&format!("{t}-01"), "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_carries_the_save_time_and_only_the_asked_parts() {
        let at = "2024-05-02T10:00:00Z".parse().unwrap();
        let both = build_extraction_prompt("met Ana yesterday", at, true, true);
        assert!(both.contains("2024-05-02T10:00:00Z"));
        assert!(both.contains("\"event\"") && both.contains("\"relationships\""));
        let event_only = build_extraction_prompt("x", at, true, false);
        assert!(!event_only.contains("relationships"));
        let graph_only = build_extraction_prompt("x", at, false, true);
        assert!(!graph_only.contains("event_time"));
    }

    #[test]
    fn parses_a_full_fenced_answer() {
        let answer = r#"Here is the extraction:
```json
{"event": {"event_time": "2024-05-01", "actor": "I", "location": "Lisbon", "event_type": "Meeting"},
 "subject": "me",
 "entities": [{"name": "Ana Silva", "type": "Person", "aliases": ["Ana", ""]}, "Lisbon", 42],
 "relationships": [{"source": "my", "label": "Met With", "target": "Ana Silva"}, {"source": "x"}]}
```"#;
        let e = parse_extraction(answer).unwrap();
        let event = e.event.unwrap();
        assert_eq!(
            event.event_time,
            "2024-05-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(event.actor.as_deref(), Some("self"));
        assert_eq!(event.event_type.as_deref(), Some("meeting"));
        assert_eq!(e.subject.as_deref(), Some("self"));
        assert_eq!(e.entities.len(), 2);
        assert_eq!(e.entities[0].aliases, ["Ana"]);
        assert_eq!(e.entities[0].entity_type.as_deref(), Some("person"));
        assert_eq!(
            e.relationships,
            [ExtractedRelationship {
                source: "self".into(),
                label: "met_with".into(),
                target: "Ana Silva".into()
            }]
        );
    }

    #[test]
    fn missing_and_wrong_fields_degrade_to_nothing() {
        let e = parse_extraction(r#"{"event": {"event_time": "sometime"}, "entities": "Ana"}"#)
            .unwrap();
        assert_eq!(e, Extraction::default());
        let e = parse_extraction(r#"{"event": null, "relationships": [1, "x", {"label": "!!"}]}"#)
            .unwrap();
        assert_eq!(e, Extraction::default());
        assert_eq!(parse_extraction(""), Err(ParseError::NoJson));
        assert_eq!(
            parse_extraction("I could not find anything."),
            Err(ParseError::NoJson)
        );
    }

    #[test]
    fn event_times_in_the_shapes_models_use() {
        let utc = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        assert_eq!(
            parse_event_time("2024-05-01T10:30:00+02:00"),
            Some(utc("2024-05-01T08:30:00Z"))
        );
        assert_eq!(
            parse_event_time("2024-05-01T10:30:00"),
            Some(utc("2024-05-01T10:30:00Z"))
        );
        assert_eq!(
            parse_event_time("2024-05-01 10:30"),
            Some(utc("2024-05-01T10:30:00Z"))
        );
        assert_eq!(
            parse_event_time(" 2024-05-01 "),
            Some(utc("2024-05-01T00:00:00Z"))
        );
        assert_eq!(
            parse_event_time("2024-05"),
            Some(utc("2024-05-01T00:00:00Z"))
        );
        assert_eq!(parse_event_time("2024-13-01"), None);
        assert_eq!(parse_event_time("yesterday"), None);
        // Years RFC 3339 cannot write (found by `cargo fuzz run dates`).
        assert_eq!(parse_event_time("-02-01"), None);
        assert_eq!(parse_event_time("+10000-01-01"), None);
        assert_eq!(parse_event_time("0000-01-01T00:00:00+01:00"), None);
        assert_eq!(
            parse_event_time("0000-01-01"),
            Some(utc("0000-01-01T00:00:00Z"))
        );
    }
}
