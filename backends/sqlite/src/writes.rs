//! The writes, each inside a caller's transaction: the store methods run one per
//! transaction, an extraction or an import batch runs many in one.

use cortex_core::memory::now;
use cortex_core::records::{Entity, EntityEdge, EntityUpsert, Event, Supersession};
use cortex_core::{
    EmbeddingSignature, EntityLink, ExtractionRecords, Imported, ImportedEntity, NewMemory,
    StoreError, StoreResult,
};
use rusqlite::{OptionalExtension, Transaction, params};

use crate::codec::{decode_id, encode_id, encode_list, encode_time, encode_vector};
use crate::db_err;
use crate::store::{
    SIGNATURE_KEY, bump_generation, find_entity_by_keys, read_signature, require_entity,
    require_memory,
};

/// Refuses a signature other than the store's; the first write records its own.
pub(crate) fn check_signature(
    tx: &Transaction<'_>,
    signature: &EmbeddingSignature,
) -> StoreResult<()> {
    match read_signature(tx)? {
        Some(stored) if &stored != signature => Err(StoreError::SignatureMismatch {
            stored,
            got: signature.clone(),
        }),
        Some(_) => Ok(()),
        None => {
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2)",
                params![SIGNATURE_KEY, signature.encode()],
            )
            .map_err(db_err)?;
            Ok(())
        }
    }
}

/// Inserts a memory (signature already checked) and returns its sequence.
pub(crate) fn insert_memory(
    tx: &Transaction<'_>,
    memory: &NewMemory,
    embedding: &[f32],
) -> StoreResult<i64> {
    tx.query_row(
        "INSERT INTO memories (id, user_id, content, kind, tags, created_at, embedding)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         RETURNING seq",
        params![
            encode_id(&memory.id),
            memory.user_id,
            memory.content,
            memory.kind.as_str(),
            encode_list(&memory.tags),
            encode_time(&memory.created_at),
            encode_vector(embedding),
        ],
        |r| r.get(0),
    )
    .map_err(db_err)
}

/// A memory with its own id, unless that id is already the user's (or another user's:
/// refused).
pub(crate) fn import_memory(
    tx: &Transaction<'_>,
    memory: &NewMemory,
    embedding: &[f32],
    signature: &EmbeddingSignature,
) -> StoreResult<Imported> {
    let owner: Option<String> = tx
        .query_row(
            "SELECT user_id FROM memories WHERE id = ?1",
            params![encode_id(&memory.id)],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err)?;
    match owner {
        Some(owner) if owner == memory.user_id => return Ok(Imported::Present),
        Some(_) => return Err(StoreError::ForeignId(format!("memory {}", memory.id))),
        None => {}
    }
    check_signature(tx, signature)?;
    insert_memory(tx, memory, embedding)?;
    bump_generation(tx, &memory.user_id)?;
    Ok(Imported::Written)
}

/// Records a supersession; `false` when the pair was there already.
pub(crate) fn insert_supersession(
    tx: &Transaction<'_>,
    user: &str,
    s: &Supersession,
) -> StoreResult<bool> {
    require_memory(tx, user, &s.old_id)?;
    require_memory(tx, user, &s.new_id)?;
    let inserted = tx
        .execute(
            "INSERT INTO supersessions (old_id, new_id, user_id, reason, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (old_id, new_id) DO NOTHING",
            params![
                encode_id(&s.old_id),
                encode_id(&s.new_id),
                user,
                s.reason,
                encode_time(&s.created_at),
            ],
        )
        .map_err(db_err)?;
    Ok(inserted > 0)
}

pub(crate) fn import_supersession(
    tx: &Transaction<'_>,
    user: &str,
    s: &Supersession,
) -> StoreResult<Imported> {
    match insert_supersession(tx, user, s)? {
        true => {
            bump_generation(tx, user)?;
            Ok(Imported::Written)
        }
        false => Ok(Imported::Present),
    }
}

pub(crate) fn insert_event(tx: &Transaction<'_>, user: &str, event: &Event) -> StoreResult<()> {
    require_memory(tx, user, &event.memory_id)?;
    tx.execute(
        "INSERT INTO events (memory_id, user_id, event_time, actor, location, event_type)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            encode_id(&event.memory_id),
            user,
            encode_time(&event.event_time),
            event.actor,
            event.location,
            event.event_type,
        ],
    )
    .map_err(db_err)?;
    Ok(())
}

/// An event unless an identical one (same memory, time, actor, location, type) is there.
pub(crate) fn import_event(
    tx: &Transaction<'_>,
    user: &str,
    event: &Event,
) -> StoreResult<Imported> {
    let present: bool = tx
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM events
             WHERE memory_id = ?1 AND user_id = ?2 AND event_time = ?3
               AND actor IS ?4 AND location IS ?5 AND event_type IS ?6)",
            params![
                encode_id(&event.memory_id),
                user,
                encode_time(&event.event_time),
                event.actor,
                event.location,
                event.event_type,
            ],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    if present {
        return Ok(Imported::Present);
    }
    insert_event(tx, user, event)?;
    Ok(Imported::Written)
}

pub(crate) fn insert_entity(tx: &Transaction<'_>, user: &str, entity: &Entity) -> StoreResult<()> {
    tx.execute(
        "INSERT INTO entities
             (id, user_id, name, normalized_name, entity_type, aliases, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            encode_id(&entity.id),
            user,
            entity.name,
            entity.normalized_name,
            entity.entity_type,
            encode_list(&entity.aliases),
            encode_time(&entity.created_at),
        ],
    )
    .map_err(db_err)?;
    Ok(())
}

/// An entity with its id, unless the user has it by id, or by name (then that id).
pub(crate) fn import_entity(
    tx: &Transaction<'_>,
    user: &str,
    entity: &Entity,
) -> StoreResult<ImportedEntity> {
    let owner: Option<String> = tx
        .query_row(
            "SELECT user_id FROM entities WHERE id = ?1",
            params![encode_id(&entity.id)],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err)?;
    let present = |id| ImportedEntity {
        outcome: Imported::Present,
        id,
    };
    match owner {
        Some(owner) if owner == user => return Ok(present(entity.id)),
        Some(_) => return Err(StoreError::ForeignId(format!("entity {}", entity.id))),
        None => {}
    }
    // By name only, the store's unique key: an alias can be shared by two entities.
    let known: Option<String> = tx
        .query_row(
            "SELECT id FROM entities WHERE user_id = ?1 AND normalized_name = ?2",
            params![user, entity.normalized_name],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err)?;
    if let Some(known) = known {
        return Ok(present(decode_id(&known)?));
    }
    insert_entity(tx, user, entity)?;
    Ok(ImportedEntity {
        outcome: Imported::Written,
        id: entity.id,
    })
}

/// The entity an upsert names (by normalised name or alias), with the upsert merged into
/// it, or a new one.
pub(crate) fn upsert_entity(
    tx: &Transaction<'_>,
    user: &str,
    upsert: &EntityUpsert,
) -> StoreResult<Entity> {
    match find_entity_by_keys(tx, user, &upsert.keys())? {
        Some(mut existing) => {
            if existing.merge(upsert) {
                tx.execute(
                    "UPDATE entities SET entity_type = ?1, aliases = ?2 WHERE id = ?3",
                    params![
                        existing.entity_type,
                        encode_list(&existing.aliases),
                        encode_id(&existing.id),
                    ],
                )
                .map_err(db_err)?;
            }
            Ok(existing)
        }
        None => {
            let created = Entity::create(upsert, now());
            insert_entity(tx, user, &created)?;
            Ok(created)
        }
    }
}

/// One extraction's event, entities, links and edges, inside the caller's transaction.
pub(crate) fn record_extraction(
    tx: &Transaction<'_>,
    user: &str,
    records: &ExtractionRecords,
) -> StoreResult<Vec<Entity>> {
    records.check()?;
    require_memory(tx, user, &records.memory_id)?;
    if let Some(event) = &records.event {
        insert_event(tx, user, event)?;
    }
    let entities = records
        .entities
        .iter()
        .map(|e| upsert_entity(tx, user, e))
        .collect::<StoreResult<Vec<Entity>>>()?;
    let ids: Vec<_> = entities.iter().map(|e| e.id).collect();
    let resolved = records.resolve(&ids)?;
    for (entity_id, role) in resolved.links {
        let link = EntityLink {
            memory_id: records.memory_id,
            entity_id,
            role,
        };
        insert_link(tx, user, &link)?;
    }
    for edge in &resolved.edges {
        insert_edge(tx, user, edge)?;
    }
    Ok(entities)
}

/// An edge; `false` when its (source, target, label) was there already.
pub(crate) fn insert_edge(
    tx: &Transaction<'_>,
    user: &str,
    edge: &EntityEdge,
) -> StoreResult<bool> {
    require_entity(tx, user, &edge.source)?;
    require_entity(tx, user, &edge.target)?;
    if let Some(m) = &edge.memory_id {
        require_memory(tx, user, m)?;
    }
    let inserted = tx
        .execute(
            "INSERT INTO entity_edges (user_id, source, target, label, memory_id, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (source, target, label) DO NOTHING",
            params![
                user,
                encode_id(&edge.source),
                encode_id(&edge.target),
                edge.label,
                edge.memory_id.as_ref().map(encode_id),
                encode_time(&edge.created_at),
            ],
        )
        .map_err(db_err)?;
    Ok(inserted > 0)
}

/// A link; `false` when it was there already.
pub(crate) fn insert_link(
    tx: &Transaction<'_>,
    user: &str,
    link: &EntityLink,
) -> StoreResult<bool> {
    require_memory(tx, user, &link.memory_id)?;
    require_entity(tx, user, &link.entity_id)?;
    let inserted = tx
        .execute(
            "INSERT INTO memory_entities (memory_id, entity_id, user_id, role)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT DO NOTHING",
            params![
                encode_id(&link.memory_id),
                encode_id(&link.entity_id),
                user,
                link.role.as_str()
            ],
        )
        .map_err(db_err)?;
    Ok(inserted > 0)
}

pub(crate) fn outcome(inserted: bool) -> Imported {
    match inserted {
        true => Imported::Written,
        false => Imported::Present,
    }
}
