//! The layers' reads: the episodic timeline and the entity dossier. Keyed reads over the
//! enrichment store; no embed and no model call.

use super::{CortexMemory, check_limit};
use crate::dossier::{Direction, Dossier, Relationship};
use crate::enrichment_store::EnrichmentStore;
use crate::error::{CortexError, Result, StoreError};
use crate::memory::validate_user;
use crate::reader::extraction::canonical_entity_name;
use crate::records::{TimeRange, TimelineEntry, normalize_entity_name};

impl CortexMemory {
    /// Dated events in `range`, oldest first, with their memories: those the caller gave
    /// with memorize and those the episodic layer extracted.
    pub async fn timeline(
        &self,
        user: &str,
        range: &TimeRange,
        limit: usize,
    ) -> Result<Vec<TimelineEntry>> {
        validate_user(user)?;
        check_limit("limit", limit)?;
        if let (Some(since), Some(until)) = (range.since, range.until)
            && since > until
        {
            return Err(CortexError::invalid("since", "must not be after until"));
        }
        Ok(self.records()?.timeline(user, range, limit).await?)
    }

    /// What the entity graph holds about `entity` (found by name or alias): its
    /// relationships both ways and its linked memories, newest first, at most `limit`.
    /// A keyed read: no embed and no model call. The graph holds what callers gave with
    /// memorize and what the graph layer extracted.
    pub async fn recall_about(&self, user: &str, entity: &str, limit: usize) -> Result<Dossier> {
        validate_user(user)?;
        check_limit("limit", limit)?;
        if normalize_entity_name(entity).is_empty() {
            return Err(CortexError::invalid("entity", "must not be empty"));
        }
        // "I", "me", "my" name the user's own node, as extraction records it.
        let name = canonical_entity_name(entity);
        let store = self.records()?;
        let found = store
            .find_entity(user, &name)
            .await?
            .ok_or_else(|| CortexError::NotFound {
                id: entity.trim().to_owned(),
            })?;
        let mut relationships = Vec::new();
        for edge in store.edges(user, &found.id).await? {
            let (direction, other_id) = if edge.source == found.id {
                (Direction::Out, edge.target)
            } else {
                (Direction::In, edge.source)
            };
            // An edge's endpoints belong to the user; a missing one was deleted under us.
            if let Some(other) = store.entity(user, &other_id).await? {
                relationships.push(Relationship {
                    label: edge.label,
                    direction,
                    other,
                });
            }
        }
        let memories = store.entity_memories(user, &found.id, limit).await?;
        Ok(Dossier {
            entity: found,
            relationships,
            memories,
        })
    }

    pub(super) fn records(&self) -> Result<&dyn EnrichmentStore> {
        match &self.enrichment {
            Some(store) => Ok(store.as_ref()),
            None => Err(StoreError::Unsupported("enrichment records").into()),
        }
    }
}
