//! One user's memories counted by state ([`MemoryState`]: live, expired, superseded), the
//! live ones by kind and tag, and their text: the one summary `cortex stats`, the web
//! page's Browse header and its Stats page all print, so no two of them disagree.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use cortex_core::{error::StoreError, memory::MemoryState, transfer::TransferStore};
use serde::Serialize;

/// Memories read per store call.
const PAGE: usize = 1000;

/// What a user's store holds, as it stands at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MemoryStats {
    /// Neither superseded nor expired: what recall and the lists return.
    pub live: u64,
    /// Expired and not yet pruned.
    pub expired: u64,
    /// Replaced by a correction, kept for history.
    pub superseded: u64,
    /// The live memories by kind.
    pub by_kind: BTreeMap<String, u64>,
    /// The live memories by tag.
    pub by_tag: BTreeMap<String, u64>,
    /// The text of every stored memory, whatever its state: what a re-embed reads.
    pub content_bytes: u64,
    /// What embedding this user's memories again would send a provider, estimated at four
    /// characters a token (the figure `cortex reembed` prints before it starts).
    pub content_tokens_estimate: u64,
}

/// `user`'s memories counted as they stand at `now` (one read of every memory).
pub async fn memory_stats(
    store: &dyn TransferStore,
    user: &str,
    now: DateTime<Utc>,
) -> Result<MemoryStats, StoreError> {
    let mut stats = MemoryStats::default();
    let mut after = 0;
    loop {
        let page = store.memories_after(user, after, PAGE).await?;
        let Some(last) = page.last() else {
            return Ok(stats);
        };
        after = last.memory.seq;
        for stored in &page {
            let m = &stored.memory;
            match m.state_at(stored.superseded, now) {
                MemoryState::Superseded => stats.superseded += 1,
                MemoryState::Expired => stats.expired += 1,
                MemoryState::Live => {
                    stats.live += 1;
                    *stats.by_kind.entry(m.kind.as_str().to_owned()).or_default() += 1;
                    for tag in &m.tags {
                        *stats.by_tag.entry(tag.clone()).or_default() += 1;
                    }
                }
            }
            stats.content_bytes += m.content.len() as u64;
            stats.content_tokens_estimate += (m.content.chars().count() as u64).div_ceil(4);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::Duration;
    use cortex_core::{
        engine::CortexMemory, engine::MemorizeOptions, in_memory::InMemoryStore, memory::MemoryKind,
    };
    use cortex_providers::FakeProvider;

    use super::*;

    #[tokio::test]
    async fn each_memory_is_counted_once_in_its_state() {
        let store = Arc::new(InMemoryStore::new());
        let engine = CortexMemory::new(store.clone(), Arc::new(FakeProvider::new(8)));
        let tags = ["home".to_owned()];
        engine
            .memorize(
                "u",
                "Ada keeps bees",
                MemoryKind::Fact,
                &tags,
                &Default::default(),
            )
            .await
            .unwrap();
        let soon = MemorizeOptions {
            expires_at: Some(Utc::now() + Duration::hours(1)),
            ..MemorizeOptions::default()
        };
        engine
            .memorize("u", "The office is closed", MemoryKind::Note, &[], &soon)
            .await
            .unwrap();
        let old = engine
            .memorize(
                "u",
                "Ada drinks tea",
                MemoryKind::Preference,
                &[],
                &Default::default(),
            )
            .await
            .unwrap()
            .memory;
        let fix = MemorizeOptions {
            replaces: Some(old.id.to_string()),
            ..MemorizeOptions::default()
        };
        engine
            .memorize("u", "Ada drinks coffee", MemoryKind::Preference, &[], &fix)
            .await
            .unwrap();

        let now = memory_stats(store.as_ref(), "u", Utc::now()).await.unwrap();
        assert_eq!((now.live, now.expired, now.superseded), (3, 0, 1));
        let later = Utc::now() + Duration::hours(2);
        let later = memory_stats(store.as_ref(), "u", later).await.unwrap();
        assert_eq!((later.live, later.expired, later.superseded), (2, 1, 1));
        assert_eq!(
            later.by_kind,
            BTreeMap::from([("fact".to_owned(), 1), ("preference".to_owned(), 1)])
        );
        assert_eq!(later.by_tag, BTreeMap::from([("home".to_owned(), 1)]));
        assert_eq!(later.content_bytes, now.content_bytes);
    }
}
