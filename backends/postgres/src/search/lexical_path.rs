//! Which way each search's BM25 side went, counted per store handle: the pruning is
//! invisible in the results (they are the same either way), so tests and the bench read
//! these counts to know which path they exercised.

use std::sync::atomic::{AtomicU64, Ordering};

use cortex_core::error::StoreError;

/// One search's BM25 path (see the pruning in the search statement).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LexicalPath {
    /// Every posting of every query term was scored.
    Full,
    /// Every query term was within the prune budget: scored once, nothing to prune.
    Once,
    /// The commonest terms' postings were skipped; the essential terms were within the
    /// budget.
    Pruned,
    /// As `Pruned`, with essential terms beyond the budget scanned too.
    PrunedExtended,
    /// A single query term, read in impact order: only the postings that can reach the
    /// pool, not all of them.
    Impact,
    /// The rarest term carried the pool: only its postings that could reach it were read,
    /// in impact order, and the other terms looked up for those.
    RarestFirst,
}

impl LexicalPath {
    /// The code the statement's `lexical_path` column holds for this path.
    pub(crate) fn code(self) -> i32 {
        self as i32
    }

    /// The code the statement's `lexical_path` column holds.
    pub(crate) fn from_code(code: i32) -> Result<Self, StoreError> {
        match code {
            0 => Ok(Self::Full),
            1 => Ok(Self::Once),
            2 => Ok(Self::Pruned),
            3 => Ok(Self::PrunedExtended),
            4 => Ok(Self::Impact),
            5 => Ok(Self::RarestFirst),
            other => Err(StoreError::Corrupt(format!("lexical path {other}"))),
        }
    }
}

/// How many searches took each [`LexicalPath`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LexicalPaths {
    pub full: u64,
    pub once: u64,
    pub pruned: u64,
    pub pruned_extended: u64,
    pub impact: u64,
    pub rarest_first: u64,
}

impl LexicalPaths {
    /// Searches that skipped some term's postings.
    pub fn pruned_total(&self) -> u64 {
        self.pruned + self.pruned_extended + self.rarest_first
    }

    /// Every search counted.
    pub fn total(&self) -> u64 {
        self.full + self.once + self.pruned_total() + self.impact
    }
}

/// The rarest-first path's work, summed over its searches: the candidates the rare term
/// alone left, and how many of them were looked up once the staged floors (each stage's
/// full scores) had dropped the ones that could no longer reach the pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RarestFirstLookups {
    pub candidates: u64,
    pub looked_up: u64,
}

#[derive(Debug, Default)]
pub(crate) struct PathCounters {
    paths: [AtomicU64; 6],
    candidates: AtomicU64,
    looked_up: AtomicU64,
}

impl PathCounters {
    pub(crate) fn record(&self, path: LexicalPath, lookups: RarestFirstLookups) {
        self.paths[path as usize].fetch_add(1, Ordering::Relaxed);
        self.candidates
            .fetch_add(lookups.candidates, Ordering::Relaxed);
        self.looked_up
            .fetch_add(lookups.looked_up, Ordering::Relaxed);
    }

    pub(crate) fn lookups(&self) -> RarestFirstLookups {
        RarestFirstLookups {
            candidates: self.candidates.load(Ordering::Relaxed),
            looked_up: self.looked_up.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn snapshot(&self) -> LexicalPaths {
        let at = |i: usize| self.paths[i].load(Ordering::Relaxed);
        LexicalPaths {
            full: at(LexicalPath::Full as usize),
            once: at(LexicalPath::Once as usize),
            pruned: at(LexicalPath::Pruned as usize),
            pruned_extended: at(LexicalPath::PrunedExtended as usize),
            impact: at(LexicalPath::Impact as usize),
            rarest_first: at(LexicalPath::RarestFirst as usize),
        }
    }
}
