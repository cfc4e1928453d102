//! `history`: a memory's supersession chain with validity intervals, so the past stays
//! answerable after a soft update.

use std::collections::{BTreeMap, VecDeque};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::CortexMemory;
use crate::error::{CortexError, Result};
use crate::memory::{Memory, MemoryId, validate_user};

/// One version in a chain: valid from its creation until it was superseded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub memory: Memory,
    pub valid_from: DateTime<Utc>,
    /// When a newer memory made this one stale; `None` while it is live.
    pub valid_until: Option<DateTime<Utc>>,
    pub superseded_by: Vec<MemoryId>,
    /// Why it was superseded, as the arbiter said.
    pub reason: Option<String>,
}

impl CortexMemory {
    /// Every memory connected to `id_or_prefix` by supersessions, oldest first.
    pub async fn history(&self, user: &str, id_or_prefix: &str) -> Result<Vec<HistoryEntry>> {
        validate_user(user)?;
        let start = self.resolve(user, id_or_prefix).await?;
        let mut entries: BTreeMap<MemoryId, HistoryEntry> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(id) = queue.pop_front() {
            if entries.contains_key(&id) {
                continue;
            }
            let Some(memory) = self.store.get(user, &id).await? else {
                if id == start {
                    return Err(CortexError::NotFound {
                        id: id_or_prefix.trim().to_owned(),
                    });
                }
                continue;
            };
            let mut entry = HistoryEntry {
                valid_from: memory.created_at,
                memory,
                valid_until: None,
                superseded_by: Vec::new(),
                reason: None,
            };
            for s in self.store.supersessions(user, &id).await? {
                if s.old_id == id {
                    entry.superseded_by.push(s.new_id);
                    if entry.valid_until.is_none_or(|t| s.created_at < t) {
                        entry.valid_until = Some(s.created_at);
                        entry.reason = Some(s.reason.clone());
                    }
                    queue.push_back(s.new_id);
                } else {
                    queue.push_back(s.old_id);
                }
            }
            entries.insert(id, entry);
        }
        let mut chain: Vec<HistoryEntry> = entries.into_values().collect();
        chain.sort_by_key(|e| e.memory.seq);
        Ok(chain)
    }
}
