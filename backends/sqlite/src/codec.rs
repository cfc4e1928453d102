//! How values are laid out in SQLite columns.

use chrono::{DateTime, SecondsFormat, Utc};
use cortex_core::{Memory, MemoryKind, StoreError};
use uuid::Uuid;

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

/// The memory columns, in the order [`MEMORY_COLUMNS`] selects them.
pub(crate) struct MemoryRow {
    pub seq: i64,
    pub id: String,
    pub user_id: String,
    pub content: String,
    pub kind: String,
    pub tags: String,
    pub created_at: String,
}

pub(crate) const MEMORY_COLUMNS: &str =
    "m.seq, m.id, m.user_id, m.content, m.kind, m.tags, m.created_at";

impl MemoryRow {
    /// Reads the columns starting at `at`.
    pub(crate) fn read(row: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Self> {
        Ok(Self {
            seq: row.get(at)?,
            id: row.get(at + 1)?,
            user_id: row.get(at + 2)?,
            content: row.get(at + 3)?,
            kind: row.get(at + 4)?,
            tags: row.get(at + 5)?,
            created_at: row.get(at + 6)?,
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
        })
    }
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
