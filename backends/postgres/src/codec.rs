//! Rows to records.

use cortex_core::records::Entity;
use cortex_core::{Memory, MemoryKind, StoreError};
use sea_query::{ColumnRef, IntoColumnRef};
use tokio_postgres::Row;

use crate::sql::get;

/// The memory columns every memory read selects, in [`memory_at`]'s order.
pub(crate) const MEMORY_COLUMNS: [&str; 7] = [
    "seq",
    "id",
    "user_id",
    "content",
    "kind",
    "tags",
    "created_at",
];

/// [`MEMORY_COLUMNS`] qualified by a table alias.
pub(crate) fn memory_columns(alias: &'static str) -> Vec<ColumnRef> {
    MEMORY_COLUMNS
        .iter()
        .map(|c| (alias, *c).into_column_ref())
        .collect()
}

/// The memory whose columns start at `at`.
pub(crate) fn memory_at(row: &Row, at: usize) -> Result<Memory, StoreError> {
    let kind: String = get(row, at + 4)?;
    Ok(Memory {
        seq: get(row, at)?,
        id: get(row, at + 1)?,
        user_id: get(row, at + 2)?,
        content: get(row, at + 3)?,
        kind: kind
            .parse::<MemoryKind>()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        tags: get(row, at + 5)?,
        created_at: get(row, at + 6)?,
    })
}

pub(crate) const ENTITY_COLUMNS: [&str; 6] = [
    "id",
    "name",
    "normalized_name",
    "entity_type",
    "aliases",
    "created_at",
];

pub(crate) fn entity_at(row: &Row, at: usize) -> Result<Entity, StoreError> {
    Ok(Entity {
        id: get(row, at)?,
        name: get(row, at + 1)?,
        normalized_name: get(row, at + 2)?,
        entity_type: get(row, at + 3)?,
        aliases: get(row, at + 4)?,
        created_at: get(row, at + 5)?,
    })
}
