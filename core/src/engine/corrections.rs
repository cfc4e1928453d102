//! Deleting, resolving ids and prefixes, pruning the expired, and finding the memory a
//! correction replaces.

use uuid::Uuid;

use crate::error::{CortexError, Result};
use crate::filter::MemoryFilter;
use crate::listing::MAX_LIMIT;
use crate::memory::{Memory, MemoryId, validate_user};
use crate::store::MemoryStore;

use super::{CortexMemory, MIN_PREFIX_HEX};

impl CortexMemory {
    /// Deletes one memory by full id or by a prefix of at least four hex characters that
    /// matches exactly one memory; returns its full id.
    pub async fn forget(&self, user: &str, id_or_prefix: &str) -> Result<MemoryId> {
        validate_user(user)?;
        let id = self.resolve(user, id_or_prefix).await?;
        let deleted = self
            .store
            .delete(user, &id)
            .await?
            .ok_or_else(|| CortexError::NotFound {
                id: id_or_prefix.trim().to_owned(),
            })?;
        // Memories the deleted one had superseded are live again; the cache cannot add
        // them without their vectors, so it rebuilds on the next recall instead.
        let in_place = deleted.restored.is_empty();
        self.update_cached(user, deleted.generation, move |index| {
            // A forgotten memory the index lacks was superseded, not live: still in place.
            index.remove(&id);
            in_place
        })
        .await;
        Ok(id)
    }

    /// The full id a caller's id or prefix names.
    pub async fn resolve(&self, user: &str, id_or_prefix: &str) -> Result<MemoryId> {
        let wanted = id_or_prefix.trim().to_lowercase();
        if let Ok(id) = Uuid::parse_str(&wanted) {
            return Ok(id);
        }
        let hex = wanted.chars().filter(char::is_ascii_hexdigit).count();
        let well_formed =
            wanted.len() <= 36 && wanted.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
        if !well_formed || hex < MIN_PREFIX_HEX {
            return Err(CortexError::invalid(
                "memory_id",
                format!(
                    "{id_or_prefix:?} is neither a memory id nor a prefix of at least \
                     {MIN_PREFIX_HEX} hex characters"
                ),
            ));
        }
        let matches = self.store.find_by_prefix(user, &wanted).await?;
        match matches.as_slice() {
            [] => Err(CortexError::NotFound { id: wanted }),
            [id] => Ok(*id),
            many => Err(CortexError::AmbiguousPrefix {
                prefix: wanted,
                count: many.len(),
            }),
        }
    }

    /// The user's live memories that have expired by now, each deleted for good unless
    /// `dry_run` (as `forget` deletes: a memory it had superseded is live again).
    pub async fn prune_expired(&self, user: &str, dry_run: bool) -> Result<Vec<Memory>> {
        validate_user(user)?;
        let now = self.clock.now();
        let every = MemoryFilter {
            include_expired: true,
            ..MemoryFilter::default()
        };
        let mut expired = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self
                .list_page(user, &every, MAX_LIMIT, cursor.as_deref())
                .await?;
            expired.extend(page.memories.into_iter().filter(|m| m.expired_at(now)));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        if !dry_run {
            for m in &expired {
                self.forget(user, &m.id.to_string()).await?;
            }
        }
        Ok(expired)
    }

    /// The live memory a correction names: it must exist and not be superseded already
    /// (correct the memory that replaced it instead).
    pub(super) async fn replaceable(&self, user: &str, id_or_prefix: &str) -> Result<Memory> {
        let id = self
            .resolve(user, id_or_prefix)
            .await
            .map_err(|e| match e {
                CortexError::InvalidInput { reason, .. } => {
                    CortexError::invalid("replaces", reason)
                }
                other => other,
            })?;
        let Some(old) = self.store.get(user, &id).await? else {
            return Err(CortexError::NotFound {
                id: id_or_prefix.trim().to_owned(),
            });
        };
        let newer: Vec<MemoryId> = self
            .store
            .supersessions(user, &id)
            .await?
            .into_iter()
            .filter(|s| s.old_id == id)
            .map(|s| s.new_id)
            .collect();
        if let Some(newer) = newer.first() {
            return Err(CortexError::invalid(
                "replaces",
                format!("memory {id} was already replaced by {newer}; replace that one instead"),
            ));
        }
        Ok(old)
    }
}
