//! `retag`: a change of a memory's kind or tags, recorded as a correction so `history`
//! shows what changed and when.

use super::memorize::Tags;
use super::{CortexMemory, MemorizeOptions, Memorized};
use crate::error::{CortexError, Result};
use crate::memory::{MemoryKind, normalize_tags, validate_user};

/// A change of a memory's kind or tags (see [`CortexMemory::retag`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retag {
    /// The new kind; `None` keeps it.
    pub kind: Option<MemoryKind>,
    /// Tags to add (normalised as memorize normalises them).
    pub add: Vec<String>,
    /// Tags to remove.
    pub remove: Vec<String>,
}

impl CortexMemory {
    /// Changes a live memory's kind or tags. Recorded as a correction: a memory with the
    /// same content, date and vector-bearing text, the new kind and tags, replaces the old
    /// one in one transaction (one embed call), so `history` shows what changed and when
    /// (reason `retagged: ...`). The memory's id therefore changes; the result holds the
    /// new one. A change that changes nothing is refused.
    pub async fn retag(&self, user: &str, id_or_prefix: &str, change: &Retag) -> Result<Memorized> {
        validate_user(user)?;
        let old = self.replaceable(user, id_or_prefix).await?;
        let id = old.id;
        if old.expired_at(self.clock.now()) {
            return Err(CortexError::invalid(
                "memory_id",
                format!("memory {id} has expired; `cortex prune` deletes it"),
            ));
        }
        let add = normalize_tags(&change.add)?;
        let remove = normalize_tags(&change.remove)?;
        let mut tags: Vec<String> = old
            .tags
            .iter()
            .filter(|t| !remove.contains(t))
            .cloned()
            .collect();
        for tag in add {
            if !tags.contains(&tag) {
                tags.push(tag);
            }
        }
        let kind = change.kind.unwrap_or(old.kind);
        let same_tags = tags.len() == old.tags.len() && tags.iter().all(|t| old.tags.contains(t));
        if kind == old.kind && same_tags {
            return Err(CortexError::invalid(
                "tags",
                "the change leaves the kind and the tags as they are",
            ));
        }
        let mut what = Vec::new();
        if kind != old.kind {
            what.push(format!("kind {} -> {kind}", old.kind));
        }
        let added: Vec<&str> = tags
            .iter()
            .filter(|t| !old.tags.contains(t))
            .map(String::as_str)
            .collect();
        let removed: Vec<&str> = old
            .tags
            .iter()
            .filter(|t| !tags.contains(t))
            .map(String::as_str)
            .collect();
        if !added.is_empty() {
            what.push(format!("tags +{}", added.join(" +")));
        }
        if !removed.is_empty() {
            what.push(format!("tags -{}", removed.join(" -")));
        }
        let options = MemorizeOptions {
            created_at: Some(old.created_at),
            replaces: Some(id.to_string()),
            reason: Some(format!("retagged: {}", what.join("; "))),
            skip_extraction: true,
            expires_at: old.expires_at,
            structure: None,
        };
        // The new version keeps the old one's events, entity links and relationships,
        // written with it, so the timeline and the dossier follow the memory.
        let carried = match (&self.enrichment, self.store.capabilities().records) {
            (Some(records), true) => Some(records.memory_records(user, &id).await?),
            _ => None,
        };
        self.memorize_carrying(
            user,
            &old.content,
            kind,
            Tags::Exactly(&tags),
            &options,
            carried,
        )
        .await
    }
}
