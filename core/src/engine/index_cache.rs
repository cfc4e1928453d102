//! The per-user index cache: each user's index behind a lock of its own, so one user's
//! rebuild never blocks another's recall; optionally bounded in bytes, the least recently
//! used users' indexes evicted first, so a server with many users stays within its
//! memory. An evicted index is rebuilt from the store on its user's next recall.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use lru::LruCache;
use tokio::sync::RwLock;

use crate::store::BuiltIndex;

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
