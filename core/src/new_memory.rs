//! A validated request to store a memory, and everything written with it in its one
//! transaction: its supersessions (a correction) and the caller's structure.

use chrono::{DateTime, SubsecRound, Utc};
use uuid::Uuid;

use crate::enrichment_store::ExtractionRecords;
use crate::error::{CortexError, StoreError, StoreResult};
use crate::memory::{
    FUTURE_GRACE_MINUTES, Memory, MemoryId, MemoryKind, Supersession, normalize_tags, now,
    validate_content, validate_user,
};

/// A validated request to store a memory: what the engine hands a store, minus the vector.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    pub id: MemoryId,
    pub user_id: String,
    pub content: String,
    pub kind: MemoryKind,
    pub tags: Vec<String>,
    pub created_at: DateTime<Utc>,
    /// Memories this one supersedes, written in the same transaction as the memory (a
    /// caller's correction: `memorize(replaces)`); each names this memory as `new_id`.
    /// Every old memory must exist for the user, or nothing is written.
    pub supersedes: Vec<Supersession>,
    /// When it expires (see [`Memory::expires_at`]).
    pub expires_at: Option<DateTime<Utc>>,
    /// The caller's structure (entities, relations, an event) as the records the
    /// extraction layer writes, written in the same transaction as the memory; `None`
    /// writes none. Stores that do not claim
    /// [`Capabilities::records`](crate::store::Capabilities::records) refuse it.
    pub records: Option<Box<ExtractionRecords>>,
}

impl NewMemory {
    /// Validates content and tags and gives the memory a fresh id and timestamp.
    pub fn new(
        user_id: &str,
        content: &str,
        kind: MemoryKind,
        tags: &[String],
        max_content_bytes: usize,
    ) -> Result<Self, CortexError> {
        validate_user(user_id)?;
        validate_content("content", content, max_content_bytes)?;
        Ok(Self {
            id: Uuid::new_v4(),
            user_id: user_id.to_owned(),
            content: content.to_owned(),
            kind,
            tags: normalize_tags(tags)?,
            created_at: now(),
            supersedes: Vec::new(),
            expires_at: None,
            records: None,
        })
    }

    /// The same memory expiring at `at`, which must be after `now` (the engine's clock):
    /// a memory that would be born expired is refused. The store keeps microseconds.
    pub fn expiring(mut self, at: DateTime<Utc>, now: DateTime<Utc>) -> Result<Self, CortexError> {
        let at = at.trunc_subsecs(6);
        if at <= now {
            return Err(CortexError::invalid(
                "expires_at",
                format!("{} is not in the future", at.to_rfc3339()),
            ));
        }
        self.expires_at = Some(at);
        Ok(self)
    }

    /// The same memory superseding `old` in its own transaction, for `reason`.
    pub fn replacing(mut self, old: MemoryId, reason: &str) -> Self {
        self.supersedes.push(Supersession {
            old_id: old,
            new_id: self.id,
            reason: reason.to_owned(),
            created_at: now(),
        });
        self
    }

    /// The same memory written with `records` (which must name this memory) in its
    /// transaction.
    pub fn with_records(mut self, records: ExtractionRecords) -> Self {
        self.records = Some(Box::new(records));
        self
    }

    /// Refuses records that name another memory or contradict themselves, before a store
    /// writes anything of this memory.
    pub fn check_records(&self) -> StoreResult<()> {
        let Some(records) = &self.records else {
            return Ok(());
        };
        if records.memory_id != self.id {
            return Err(StoreError::InvalidRecord(format!(
                "the records name memory {}, the new memory is {}",
                records.memory_id, self.id
            )));
        }
        records.check()
    }

    /// The same memory dated `at` instead of now: for facts learned earlier and for
    /// imports. A time in the future is refused, past a few minutes' grace for the clock
    /// of the machine a record comes from; the store keeps microseconds.
    pub fn dated(mut self, at: DateTime<Utc>) -> Result<Self, CortexError> {
        let at = at.trunc_subsecs(6);
        if at > now() + chrono::Duration::minutes(FUTURE_GRACE_MINUTES) {
            return Err(CortexError::invalid(
                "created_at",
                format!("{} is in the future", at.to_rfc3339()),
            ));
        }
        self.created_at = at;
        Ok(self)
    }

    /// The stored form, once the store has assigned the insertion sequence.
    pub fn into_memory(self, seq: i64) -> Memory {
        Memory {
            id: self.id,
            user_id: self.user_id,
            content: self.content,
            kind: self.kind,
            tags: self.tags,
            created_at: self.created_at,
            seq,
            expires_at: self.expires_at,
        }
    }
}
