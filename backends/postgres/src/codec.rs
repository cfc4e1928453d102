//! Rows to records: the columns each record is read from, and its one decoder. A decoder
//! reads its columns by name, so it reads them wherever a statement puts them (beside
//! another record's, or after some other columns).

use cortex_core::memory::Supersession;
use cortex_core::records::{Entity, EntityEdge, EntityRole, Event};
use cortex_core::{error::StoreError, memory::Memory, memory::MemoryKind, transfer::EntityLink};
use sea_query::{ColumnRef, IntoColumnRef, IntoIden};
use tokio_postgres::Row;

use crate::sql::get_named;
use crate::tables::{Entities, EntityEdges, Events, Memories, MemoryEntities, Supersessions};

/// The memory columns every memory read selects, which [`memory_of`] reads.
pub(crate) const MEMORY_COLUMNS: [Memories; 8] = [
    Memories::Seq,
    Memories::Id,
    Memories::UserId,
    Memories::Content,
    Memories::Kind,
    Memories::Tags,
    Memories::CreatedAt,
    Memories::ExpiresAt,
];

/// `columns` qualified by a table alias.
pub(crate) fn qualified<A, C>(alias: A, columns: &[C]) -> Vec<ColumnRef>
where
    A: IntoIden + Copy,
    C: IntoIden + Copy,
{
    columns
        .iter()
        .map(|c| (alias, *c).into_column_ref())
        .collect()
}

/// [`MEMORY_COLUMNS`] qualified by a table alias.
pub(crate) fn memory_columns(alias: impl IntoIden + Copy) -> Vec<ColumnRef> {
    qualified(alias, &MEMORY_COLUMNS)
}

/// The memory in a row holding [`MEMORY_COLUMNS`].
pub(crate) fn memory_of(row: &Row) -> Result<Memory, StoreError> {
    let kind: String = get_named(row, Memories::Kind)?;
    Ok(Memory {
        seq: get_named(row, Memories::Seq)?,
        id: get_named(row, Memories::Id)?,
        user_id: get_named(row, Memories::UserId)?,
        content: get_named(row, Memories::Content)?,
        kind: kind
            .parse::<MemoryKind>()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?,
        tags: get_named(row, Memories::Tags)?,
        created_at: get_named(row, Memories::CreatedAt)?,
        expires_at: get_named(row, Memories::ExpiresAt)?,
    })
}

pub(crate) const ENTITY_COLUMNS: [Entities; 6] = [
    Entities::Id,
    Entities::Name,
    Entities::NormalizedName,
    Entities::EntityType,
    Entities::Aliases,
    Entities::CreatedAt,
];

pub(crate) fn entity_of(row: &Row) -> Result<Entity, StoreError> {
    Ok(Entity {
        id: get_named(row, Entities::Id)?,
        name: get_named(row, Entities::Name)?,
        normalized_name: get_named(row, Entities::NormalizedName)?,
        entity_type: get_named(row, Entities::EntityType)?,
        aliases: get_named(row, Entities::Aliases)?,
        created_at: get_named(row, Entities::CreatedAt)?,
    })
}

pub(crate) const SUPERSESSION_COLUMNS: [Supersessions; 4] = [
    Supersessions::OldId,
    Supersessions::NewId,
    Supersessions::Reason,
    Supersessions::CreatedAt,
];

pub(crate) fn supersession_of(row: &Row) -> Result<Supersession, StoreError> {
    Ok(Supersession {
        old_id: get_named(row, Supersessions::OldId)?,
        new_id: get_named(row, Supersessions::NewId)?,
        reason: get_named(row, Supersessions::Reason)?,
        created_at: get_named(row, Supersessions::CreatedAt)?,
    })
}

pub(crate) const EVENT_COLUMNS: [Events; 5] = [
    Events::MemoryId,
    Events::EventTime,
    Events::Actor,
    Events::Location,
    Events::EventType,
];

pub(crate) fn event_of(row: &Row) -> Result<Event, StoreError> {
    Ok(Event {
        memory_id: get_named(row, Events::MemoryId)?,
        event_time: get_named(row, Events::EventTime)?,
        actor: get_named(row, Events::Actor)?,
        location: get_named(row, Events::Location)?,
        event_type: get_named(row, Events::EventType)?,
    })
}

pub(crate) const EDGE_COLUMNS: [EntityEdges; 5] = [
    EntityEdges::Source,
    EntityEdges::Target,
    EntityEdges::Label,
    EntityEdges::MemoryId,
    EntityEdges::CreatedAt,
];

pub(crate) fn edge_of(row: &Row) -> Result<EntityEdge, StoreError> {
    Ok(EntityEdge {
        source: get_named(row, EntityEdges::Source)?,
        target: get_named(row, EntityEdges::Target)?,
        label: get_named(row, EntityEdges::Label)?,
        memory_id: get_named(row, EntityEdges::MemoryId)?,
        created_at: get_named(row, EntityEdges::CreatedAt)?,
    })
}

pub(crate) const LINK_COLUMNS: [MemoryEntities; 3] = [
    MemoryEntities::MemoryId,
    MemoryEntities::EntityId,
    MemoryEntities::Role,
];

pub(crate) fn link_of(row: &Row) -> Result<EntityLink, StoreError> {
    let role: String = get_named(row, MemoryEntities::Role)?;
    Ok(EntityLink {
        memory_id: get_named(row, MemoryEntities::MemoryId)?,
        entity_id: get_named(row, MemoryEntities::EntityId)?,
        role: EntityRole::parse(&role)
            .ok_or_else(|| StoreError::Corrupt(format!("entity role {role:?}")))?,
    })
}
