//! The per-user index cache: each user's index behind a lock of its own, so one user's
//! rebuild never blocks another's recall; optionally bounded in bytes, the least recently
//! used users' indexes evicted first, so a server with many users stays within its
//! memory. An evicted index is rebuilt from the store on its user's next recall.

use std::sync::{Mutex, MutexGuard, PoisonError};

use lru::LruCache;
use tokio::sync::RwLock;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::OwnedRwLockReadGuard;

use crate::error::Result;
use crate::index::MemoryIndex;
use crate::store::{BuiltIndex, Generation, MemoryStore};

use super::CortexMemory;

/// One user's cached index, if built.
pub(crate) type IndexSlot = Arc<RwLock<Option<BuiltIndex>>>;

/// What the cache did since the engine started, and what it holds now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    /// Recalls that found their user's index current.
    pub hits: u64,
    /// Recalls that built (or rebuilt) it.
    pub misses: u64,
    /// Indexes dropped to stay within the bound.
    pub evictions: u64,
    /// Approximate heap bytes of the indexes held.
    pub bytes: u64,
    /// Users with a slot.
    pub users: u64,
}

#[derive(Debug)]
struct Entry {
    slot: IndexSlot,
    /// The index's approximate size as last recorded (0 before its first build).
    bytes: usize,
}

#[derive(Debug)]
struct Held {
    lru: LruCache<String, Entry>,
    bytes: usize,
}

#[derive(Debug)]
pub(crate) struct IndexCache {
    max_bytes: Option<usize>,
    held: Mutex<Held>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl IndexCache {
    /// A cache holding at most `max_bytes` of indexes (`None`: no bound).
    pub(crate) fn new(max_bytes: Option<usize>) -> Self {
        Self {
            max_bytes,
            held: Mutex::new(Held {
                lru: LruCache::unbounded(),
                bytes: 0,
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The user's slot, created empty if there is none; it becomes the most recently used.
    pub(crate) fn slot(&self, user: &str) -> IndexSlot {
        let mut held = self.held();
        // Look up before inserting: an insert would allocate the key on every recall.
        if let Some(entry) = held.lru.get(user) {
            return Arc::clone(&entry.slot);
        }
        let slot = IndexSlot::default();
        held.lru.put(
            user.to_owned(),
            Entry {
                slot: Arc::clone(&slot),
                bytes: 0,
            },
        );
        slot
    }

    /// The user's slot if there is one, without making it recently used: a write updates
    /// a cached index but is no reason to keep it.
    pub(crate) fn existing(&self, user: &str) -> Option<IndexSlot> {
        self.held().lru.peek(user).map(|e| Arc::clone(&e.slot))
    }

    /// Every user's slot, most recently used first, without making any recently used.
    pub(crate) fn slots(&self) -> Vec<(String, IndexSlot)> {
        self.held()
            .lru
            .iter()
            .map(|(user, e)| (user.clone(), Arc::clone(&e.slot)))
            .collect()
    }

    pub(crate) fn hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// Records the size of `user`'s index, then drops the least recently used other
    /// users' indexes until the total is within the bound. The user just served is never
    /// dropped, so one index larger than the whole bound still serves its user.
    pub(crate) fn resized(&self, user: &str, bytes: usize) {
        self.resized_from(user, |_| bytes);
    }

    /// As [`resized`](Self::resized), with the new size computed from the size last
    /// recorded, under the same lock.
    pub(crate) fn resized_from(&self, user: &str, size: impl FnOnce(usize) -> usize) {
        let mut held = self.held();
        let Some(entry) = held.lru.peek_mut(user) else {
            return; // evicted meanwhile: nothing is held for it
        };
        let bytes = size(entry.bytes);
        let before = std::mem::replace(&mut entry.bytes, bytes);
        held.bytes = held.bytes - before + bytes;
        let Some(max) = self.max_bytes else {
            return;
        };
        while held.bytes > max {
            let Some((oldest, _)) = held.lru.peek_lru() else {
                break;
            };
            if oldest == user {
                // Everyone else is gone: the user's own index is what exceeds the bound.
                break;
            }
            if let Some((_, evicted)) = held.lru.pop_lru() {
                held.bytes -= evicted.bytes;
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn stats(&self) -> CacheStats {
        let held = self.held();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            bytes: held.bytes as u64,
            users: held.lru.len() as u64,
        }
    }
}

impl CortexMemory {
    /// What the per-user index cache did and holds (for metrics).
    pub fn cache_stats(&self) -> CacheStats {
        self.indexes.stats()
    }

    /// Hands each cached index to the store to keep for the next opening
    /// ([`MemoryStore::keep_index`]): for a server stopping. The indexes stay cached. A
    /// store that cannot keep one logs why and the rest are still offered: the only cost
    /// of a lost one is a slower first recall next time. How many indexes were offered.
    pub async fn keep_indexes(&self) -> usize {
        let mut offered = 0;
        for (user, slot) in self.indexes.slots() {
            let held = slot.read().await;
            let Some(built) = held.as_ref() else {
                continue;
            };
            offered += 1;
            if let Err(e) = self.store.keep_index(&user, built).await {
                tracing::warn!(error = %e, "an index was not kept for the next opening");
            }
        }
        offered
    }

    /// The user's cached index, rebuilt from the store only when its generation moved.
    pub(super) async fn current_index(
        &self,
        user: &str,
        dimension: usize,
    ) -> Result<OwnedRwLockReadGuard<Option<BuiltIndex>>> {
        let slot = self.indexes.slot(user);
        let current = self.store.generation(user).await?;
        let fresh = |b: &Option<BuiltIndex>| {
            b.as_ref()
                .is_some_and(|b| b.generation == current && b.index.dimension() == dimension)
        };
        let read = slot.clone().read_owned().await;
        if fresh(&read) {
            self.indexes.hit();
            return Ok(read);
        }
        drop(read);
        let mut write = slot.write_owned().await;
        if !fresh(&write) {
            self.indexes.miss();
            let built = self.store.build_index(user, dimension).await?;
            self.indexes.resized(user, built.index.approx_bytes());
            *write = Some(built);
        } else {
            self.indexes.hit();
        }
        Ok(write.downgrade())
    }

    /// Applies this process's own write to the cached index when it is the only change
    /// since the cache was built; otherwise drops the cache so the next recall rebuilds.
    pub(super) async fn update_cached(
        &self,
        user: &str,
        generation: Generation,
        apply: impl FnOnce(&mut MemoryIndex) -> bool,
    ) {
        // Only a cache that exists is updated; a write must not create one.
        let Some(slot) = self.indexes.existing(user) else {
            return;
        };
        let mut cached = slot.write().await;
        let Some(built) = cached.as_mut() else {
            return;
        };
        if built.generation >= generation {
            return; // a rebuild already saw this write
        }
        let before = built.index.len();
        if built.generation.0 + 1 == generation.0 && apply(&mut built.index) {
            built.generation = generation;
            // Proportional to the memories held: exact enough for a bound, and O(1) where
            // measuring again would walk every memory on every write.
            let after = built.index.len();
            let fresh = (before == 0).then(|| built.index.approx_bytes());
            self.indexes.resized_from(user, |held| match fresh {
                Some(bytes) => bytes,
                None => held.saturating_mul(after) / before,
            });
        } else {
            *cached = None;
            self.indexes.resized(user, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_go_first_and_the_current_user_stays() {
        let cache = IndexCache::new(Some(1_000));
        for user in ["a", "b", "c"] {
            cache.slot(user);
            cache.resized(user, 400);
        }
        // a (400) + b (400) + c (400) > 1000: a, the least recently used, went.
        let stats = cache.stats();
        assert_eq!((stats.users, stats.bytes, stats.evictions), (2, 800, 1));
        assert!(cache.existing("a").is_none());
        // Using b makes c the oldest.
        cache.slot("b");
        cache.slot("d");
        cache.resized("d", 400);
        assert!(cache.existing("c").is_none() && cache.existing("b").is_some());
        // One index over the whole bound still serves its user; the others go.
        cache.slot("e");
        cache.resized("e", 5_000);
        let stats = cache.stats();
        assert_eq!((stats.users, stats.bytes), (1, 5_000));
        assert!(cache.existing("e").is_some());
    }

    #[test]
    fn without_a_bound_nothing_is_evicted() {
        let cache = IndexCache::new(None);
        for n in 0..100 {
            let user = format!("u{n}");
            cache.slot(&user);
            cache.resized(&user, 1 << 20);
        }
        let stats = cache.stats();
        assert_eq!((stats.users, stats.evictions), (100, 0));
        assert_eq!(stats.bytes, 100 << 20);
    }
}
