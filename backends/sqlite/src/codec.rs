//! How values are laid out in SQLite columns, and the one decoder of each record's row.

use chrono::{DateTime, SecondsFormat, Utc};
use cortex_core::memory::Supersession;
use cortex_core::records::{Entity, EntityEdge, EntityRole, Event};
use cortex_core::{
    error::StoreError, error::StoreResult, memory::Memory, memory::MemoryKind, transfer::EntityLink,
};
use rusqlite::{Connection, Row};
use uuid::Uuid;

use crate::db_err;

/// Vectors are stored as little-endian f32, 4 bytes a component.
pub(crate) fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn decode_vector(bytes: &[u8]) -> Result<Vec<f32>, StoreError> {
    if !bytes.len().is_multiple_of(4) {
        return Err(StoreError::Corrupt(format!(
            "embedding blob of {} bytes is not a whole number of f32",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Fixed-width UTC timestamps, so text order is time order in indexes and ranges.
pub(crate) fn encode_time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

pub(crate) fn decode_time(text: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("timestamp {text:?}: {e}")))
}

pub(crate) fn encode_id(id: &Uuid) -> String {
    id.hyphenated().to_string()
}

pub(crate) fn decode_id(text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(|e| StoreError::Corrupt(format!("id {text:?}: {e}")))
}

pub(crate) fn encode_list(items: &[String]) -> String {
    serde_json::Value::from(items).to_string()
}

pub(crate) fn decode_list(text: &str) -> Result<Vec<String>, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("list {text:?}: {e}")))
}

/// The memory columns [`MEMORY_COLUMNS`] selects, as stored.
pub(crate) struct MemoryRow {
    pub seq: i64,
    pub id: String,
    pub user_id: String,
    pub content: String,
    pub kind: String,
    pub tags: String,
    pub created_at: String,
    pub expires_at: Option<String>,
}

pub(crate) const MEMORY_COLUMNS: &str =
    "m.seq, m.id, m.user_id, m.content, m.kind, m.tags, m.created_at, m.expires_at";

impl MemoryRow {
    /// Reads the columns by name, wherever the select puts them.
    pub(crate) fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            seq: row.get("seq")?,
            id: row.get("id")?,
            user_id: row.get("user_id")?,
            content: row.get("content")?,
            kind: row.get("kind")?,
            tags: row.get("tags")?,
            created_at: row.get("created_at")?,
            expires_at: row.get("expires_at")?,
        })
    }

    pub(crate) fn decode(self) -> Result<Memory, StoreError> {
        Ok(Memory {
            id: decode_id(&self.id)?,
            user_id: self.user_id,
            content: self.content,
            kind: self
                .kind
                .parse::<MemoryKind>()
                .map_err(|e| StoreError::Corrupt(e.to_string()))?,
            tags: decode_list(&self.tags)?,
            created_at: decode_time(&self.created_at)?,
            seq: self.seq,
            expires_at: self.expires_at.as_deref().map(decode_time).transpose()?,
        })
    }
}

/// A text column the schema declares NOT NULL.
fn text(r: &Row<'_>, column: &str) -> StoreResult<String> {
    let value: Option<String> = r.get(column).map_err(db_err)?;
    value.ok_or_else(|| StoreError::Corrupt(format!("column {column} is NULL")))
}

fn maybe(r: &Row<'_>, column: &str) -> StoreResult<Option<String>> {
    r.get(column).map_err(db_err)
}

/// The columns [`supersession_of`] reads.
pub(crate) const SUPERSESSION_COLUMNS: &str = "old_id, new_id, reason, created_at";

pub(crate) fn supersession_of(r: &Row<'_>) -> StoreResult<Supersession> {
    Ok(Supersession {
        old_id: decode_id(&text(r, "old_id")?)?,
        new_id: decode_id(&text(r, "new_id")?)?,
        reason: text(r, "reason")?,
        created_at: decode_time(&text(r, "created_at")?)?,
    })
}

/// The columns [`event_of`] reads; none shares a name with a memory column.
pub(crate) const EVENT_COLUMNS: &str = "memory_id, event_time, actor, location, event_type";

pub(crate) fn event_of(r: &Row<'_>) -> StoreResult<Event> {
    Ok(Event {
        memory_id: decode_id(&text(r, "memory_id")?)?,
        event_time: decode_time(&text(r, "event_time")?)?,
        actor: maybe(r, "actor")?,
        location: maybe(r, "location")?,
        event_type: maybe(r, "event_type")?,
    })
}

/// The columns [`entity_of`] reads.
pub(crate) const ENTITY_COLUMNS: &str =
    "id, name, normalized_name, entity_type, aliases, created_at";

pub(crate) fn entity_of(r: &Row<'_>) -> StoreResult<Entity> {
    Ok(Entity {
        id: decode_id(&text(r, "id")?)?,
        name: text(r, "name")?,
        normalized_name: text(r, "normalized_name")?,
        entity_type: maybe(r, "entity_type")?,
        aliases: decode_list(&text(r, "aliases")?)?,
        created_at: decode_time(&text(r, "created_at")?)?,
    })
}

/// The columns [`edge_of`] reads.
pub(crate) const EDGE_COLUMNS: &str = "source, target, label, memory_id, created_at";

pub(crate) fn edge_of(r: &Row<'_>) -> StoreResult<EntityEdge> {
    Ok(EntityEdge {
        source: decode_id(&text(r, "source")?)?,
        target: decode_id(&text(r, "target")?)?,
        label: text(r, "label")?,
        memory_id: maybe(r, "memory_id")?
            .as_deref()
            .map(decode_id)
            .transpose()?,
        created_at: decode_time(&text(r, "created_at")?)?,
    })
}

/// The columns [`link_of`] reads.
pub(crate) const LINK_COLUMNS: &str = "memory_id, entity_id, role";

pub(crate) fn link_of(r: &Row<'_>) -> StoreResult<EntityLink> {
    let role = text(r, "role")?;
    Ok(EntityLink {
        memory_id: decode_id(&text(r, "memory_id")?)?,
        entity_id: decode_id(&text(r, "entity_id")?)?,
        role: EntityRole::parse(&role)
            .ok_or_else(|| StoreError::Corrupt(format!("entity role {role:?}")))?,
    })
}

/// Every row of `sql`, each through `decode`.
pub(crate) fn query_rows<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    decode: impl Fn(&Row<'_>) -> StoreResult<T>,
) -> StoreResult<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql).map_err(db_err)?;
    let mut rows = stmt.query(params).map_err(db_err)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(db_err)? {
        out.push(decode(row)?);
    }
    Ok(out)
}

/// The predicate a live memory `m` satisfies: nothing supersedes it.
pub(crate) const LIVE: &str = "NOT EXISTS (SELECT 1 FROM supersessions s WHERE s.old_id = m.id)";

/// Runs `sql` (selecting [`MEMORY_COLUMNS`]) and decodes each row.
pub(crate) fn query_memories(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> StoreResult<Vec<Memory>> {
    let mut stmt = conn.prepare_cached(sql).map_err(db_err)?;
    let rows = stmt
        .query_map(params, MemoryRow::read)
        .map_err(db_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(db_err)?;
    rows.into_iter().map(MemoryRow::decode).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_bit_exactly() {
        let v = vec![0.1f32, -2.5, f32::MIN_POSITIVE, 1e30];
        assert_eq!(decode_vector(&encode_vector(&v)).unwrap(), v);
        assert!(decode_vector(&[0, 0, 0]).is_err());
    }

    #[test]
    fn times_sort_as_text() {
        let a = encode_time(&"2024-01-02T03:04:05Z".parse().unwrap());
        let b = encode_time(&"2024-01-02T03:04:05.000001Z".parse().unwrap());
        assert_eq!(a, "2024-01-02T03:04:05.000000Z");
        assert!(a < b);
        assert_eq!(
            decode_time(&a).unwrap(),
            "2024-01-02T03:04:05Z".parse::<DateTime<Utc>>().unwrap()
        );
    }
}
