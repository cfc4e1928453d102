//! Rows to records: the columns each record is read from, and its one decoder.

use cortex_core::records::{Entity, EntityEdge, EntityRole, Event, Supersession};
use cortex_core::{EntityLink, Memory, MemoryKind, StoreError};
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

/// `columns` qualified by a table alias.
pub(crate) fn qualified(alias: &'static str, columns: &[&'static str]) -> Vec<ColumnRef> {
    columns
        .iter()
        .map(|c| (alias, *c).into_column_ref())
        .collect()
}

/// [`MEMORY_COLUMNS`] qualified by a table alias.
pub(crate) fn memory_columns(alias: &'static str) -> Vec<ColumnRef> {
    qualified(alias, &MEMORY_COLUMNS)
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

pub(crate) const SUPERSESSION_COLUMNS: [&str; 4] = ["old_id", "new_id", "reason", "created_at"];

pub(crate) fn supersession_at(row: &Row, at: usize) -> Result<Supersession, StoreError> {
    Ok(Supersession {
        old_id: get(row, at)?,
        new_id: get(row, at + 1)?,
        reason: get(row, at + 2)?,
        created_at: get(row, at + 3)?,
    })
}

pub(crate) const EVENT_COLUMNS: [&str; 5] =
    ["memory_id", "event_time", "actor", "location", "event_type"];

pub(crate) fn event_at(row: &Row, at: usize) -> Result<Event, StoreError> {
    Ok(Event {
        memory_id: get(row, at)?,
        event_time: get(row, at + 1)?,
        actor: get(row, at + 2)?,
        location: get(row, at + 3)?,
        event_type: get(row, at + 4)?,
    })
}

pub(crate) const EDGE_COLUMNS: [&str; 5] = ["source", "target", "label", "memory_id", "created_at"];

pub(crate) fn edge_at(row: &Row, at: usize) -> Result<EntityEdge, StoreError> {
    Ok(EntityEdge {
        source: get(row, at)?,
        target: get(row, at + 1)?,
        label: get(row, at + 2)?,
        memory_id: get(row, at + 3)?,
        created_at: get(row, at + 4)?,
    })
}

pub(crate) const LINK_COLUMNS: [&str; 3] = ["memory_id", "entity_id", "role"];

pub(crate) fn link_at(row: &Row, at: usize) -> Result<EntityLink, StoreError> {
    let role: String = get(row, at + 2)?;
    Ok(EntityLink {
        memory_id: get(row, at)?,
        entity_id: get(row, at + 1)?,
        role: EntityRole::parse(&role)
            .ok_or_else(|| StoreError::Corrupt(format!("entity role {role:?}")))?,
    })
}
