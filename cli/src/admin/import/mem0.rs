//! `--from mem0`: memories exported from mem0, as its `get_all` returns them: records
//! `{"id","memory","user_id","agent_id","run_id","metadata","categories","created_at",
//! "updated_at","expiration_date"}`, in any of the three shapes people save them in: a
//! JSON array, the `{"results": [...]}` object of mem0's own API, or JSON Lines.
//!
//! Each record is one memory with its text as it is (mem0 already wrote it as a fact),
//! for the Cortex user of the same name as its `user_id` (docs/FORMAT.md).

use std::io::{BufRead, Cursor, Read};

use cortex_core::memory::MemoryKind;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::admin::error::{AdminError, RecordName};
use crate::admin::import::source::{Draft, Scope, Source, Unit, parse_time, tag, tag_with};
use crate::admin::import::stream::{read_array, read_lines, skip_bom};

const EXPECTING: &str = "a JSON array of mem0 memories, or an object with their `results`";
/// The keys of mem0's answer object that hold the memories.
const KEYS: &[&str] = &["results", "memories"];
/// How much of a first line is read to tell JSON Lines from one JSON document.
const FIRST_LINE: u64 = 1 << 20;

#[derive(Debug, Deserialize)]
struct Record {
    #[serde(default)]
    id: Option<String>,
    #[serde(alias = "text")]
    memory: String,
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
    #[serde(default)]
    app_id: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    categories: Option<Vec<String>>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    updated_at: Option<String>,
    #[serde(default)]
    expiration_date: Option<String>,
}

/// The export, read from `reader`.
#[derive(Debug)]
pub struct Mem0<R> {
    pub reader: R,
}

impl<R: BufRead + Send> Source for Mem0<R> {
    fn read(
        self: Box<Self>,
        scope: &Scope,
        each: &mut dyn FnMut(Unit) -> bool,
    ) -> Result<(), AdminError> {
        let io = |e| AdminError::io(&scope.input, e);
        let mut reader = self.reader;
        skip_bom(&mut reader).map_err(io)?;
        // The first line tells the shapes apart: a whole record on it is JSON Lines.
        let mut first = Vec::new();
        (&mut reader)
            .take(FIRST_LINE)
            .read_until(b'\n', &mut first)
            .map_err(io)?;
        let lines = is_a_record(&first);
        let reader = Cursor::new(first).chain(reader);
        match lines {
            true => {
                let mut convert =
                    |line: usize, r: Record| unit_of(scope, format!("line {line}"), r);
                read_lines(reader, scope, &mut convert, each)
            }
            false => {
                let mut convert = |n: usize, r: Record| unit_of(scope, format!("memory {n}"), r);
                read_array(reader, scope, "memory", EXPECTING, KEYS, &mut convert, each)
            }
        }
    }
}

/// Whether a first line is one whole JSON object that is a record, not mem0's answer
/// object (which holds its records under `results`).
fn is_a_record(line: &[u8]) -> bool {
    match serde_json::from_slice::<Map<String, Value>>(line) {
        Ok(object) => !KEYS.iter().any(|k| object.contains_key(*k)),
        Err(_) => false,
    }
}

fn unit_of(scope: &Scope, place: String, r: Record) -> Result<Unit, String> {
    let mut unit = Unit::new(RecordName {
        place,
        title: Some(r.memory.clone()),
        id: r.id.clone(),
    });
    unit.count("mem0 memory read");
    let user = scope.user_for(r.user_id.as_deref());
    let time = |field: &str, text: &Option<String>| match text.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(t) => parse_time(t)
            .map(Some)
            .ok_or_else(|| format!("its {field} {t:?} is not a date")),
    };
    let created_at = time("created_at", &r.created_at)?
        .or(time("updated_at", &r.updated_at)?)
        .unwrap_or(scope.undated);
    let expires_at = time("expiration_date", &r.expiration_date)?;
    let mut tags: Vec<String> = tag("mem0").into_iter().collect();
    tags.extend(r.categories.iter().flatten().filter_map(|c| tag(c)));
    for (prefix, value) in [
        ("agent", &r.agent_id),
        ("run", &r.run_id),
        ("app", &r.app_id),
    ] {
        tags.extend(value.as_deref().and_then(|v| tag_with(prefix, v)));
    }
    for (key, value) in r.metadata.iter().flatten() {
        // Short plain values only: a tag is one label, not a document.
        let value = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => continue,
        };
        tags.extend(tag_with(key, &value));
    }
    // mem0's id names the memory; one without is named by its text.
    let key = r.id.clone().unwrap_or_else(|| r.memory.clone());
    unit.memory(
        scope,
        Draft {
            id: scope.id(&user, &[&key]),
            user,
            text: r.memory,
            kind: MemoryKind::Fact,
            tags,
            created_at,
            expires_at,
        },
    );
    Ok(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_line_tells_json_lines_from_a_document() {
        assert!(is_a_record(br#"{"id":"1","memory":"Likes tea"}"#));
        assert!(is_a_record(b"{\"memory\":\"x\"}\n"));
        assert!(!is_a_record(b"{\n"));
        assert!(!is_a_record(br#"{"results":[{"memory":"x"}]}"#));
        assert!(!is_a_record(b"[{\"memory\":\"x\"}]"));
    }
}
