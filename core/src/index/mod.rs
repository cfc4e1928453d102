//! The in-memory index a user's live memories are materialised into: exact dense search
//! and BM25, both incrementally updatable.

mod dense;
mod lexical;

use std::cmp::Ordering;
use std::collections::HashMap;

pub use lexical::{BM25_B, BM25_K1, bm25_idf, bm25_term_score};

use crate::embedding::{normalized, validate_embedding};
use crate::error::EmbeddingProblem;
use crate::filter::MemoryFilter;
use crate::memory::{Memory, MemoryId};
use dense::DenseMatrix;
use lexical::LexicalIndex;

/// One retriever's hit: an index row and its score (cosine or BM25).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub row: usize,
    pub score: f64,
}

/// A user's live memories with their unit vectors and postings. Rows are dense
/// (`0..len`); removal moves the last row into the gap.
#[derive(Debug, Clone)]
pub struct MemoryIndex {
    memories: Vec<Memory>,
    rows: HashMap<MemoryId, usize>,
    dense: DenseMatrix,
    lexical: LexicalIndex,
    /// Every indexed memory's sequence number, ascending: a memory's neighbours are the
    /// memories written just before and just after it.
    seqs: Vec<i64>,
    /// How many indexed memories have an expiry: with none, "not expired" holds for every
    /// row and a recall needs no filter for it.
    expiring: usize,
}

impl MemoryIndex {
    pub fn new(dimension: usize) -> Self {
        Self {
            memories: Vec::new(),
            rows: HashMap::new(),
            dense: DenseMatrix::new(dimension),
            lexical: LexicalIndex::default(),
            seqs: Vec::new(),
            expiring: 0,
        }
    }

    pub fn dimension(&self) -> usize {
        self.dense.dimension()
    }

    pub fn len(&self) -> usize {
        self.memories.len()
    }

    pub fn is_empty(&self) -> bool {
        self.memories.is_empty()
    }

    pub fn contains(&self, id: &MemoryId) -> bool {
        self.rows.contains_key(id)
    }

    pub fn memory(&self, row: usize) -> &Memory {
        &self.memories[row]
    }

    /// Adds a memory (replacing one with the same id). The vector is validated here, so an
    /// index never holds a vector a search could not use.
    pub fn insert(&mut self, memory: Memory, embedding: &[f32]) -> Result<(), EmbeddingProblem> {
        validate_embedding(embedding, self.dimension())?;
        self.remove(&memory.id);
        self.dense.push_normalized(embedding);
        self.lexical.push(&memory.content);
        // Writes come in sequence order, so this is almost always a push.
        let at = self.seqs.partition_point(|s| *s <= memory.seq);
        self.seqs.insert(at, memory.seq);
        self.expiring += usize::from(memory.expires_at.is_some());
        self.rows.insert(memory.id, self.memories.len());
        self.memories.push(memory);
        Ok(())
    }

    /// Removes a memory; false when it was not indexed.
    pub fn remove(&mut self, id: &MemoryId) -> bool {
        let Some(row) = self.rows.remove(id) else {
            return false;
        };
        self.dense.swap_remove(row);
        self.lexical.swap_remove(row);
        let seq = self.memories[row].seq;
        self.expiring -= usize::from(self.memories[row].expires_at.is_some());
        let at = self.seqs.partition_point(|s| *s < seq);
        if self.seqs.get(at) == Some(&seq) {
            self.seqs.remove(at);
        }
        self.memories.swap_remove(row);
        if let Some(moved) = self.memories.get(row) {
            self.rows.insert(moved.id, row);
        }
        true
    }

    /// The sequence numbers of the indexed memories written just before and just after
    /// the one at `seq` (memories sharing its number are neither).
    pub fn seq_neighbours(&self, seq: i64) -> (Option<i64>, Option<i64>) {
        let before = self.seqs.partition_point(|s| *s < seq);
        let after = self.seqs.partition_point(|s| *s <= seq);
        let previous = before.checked_sub(1).map(|i| self.seqs[i]);
        (previous, self.seqs.get(after).copied())
    }

    /// Whether any indexed memory has expired at `now`.
    pub fn any_expired(&self, now: chrono::DateTime<chrono::Utc>) -> bool {
        self.expiring > 0 && self.memories.iter().any(|m| m.expired_at(now))
    }

    /// Approximate heap bytes held (vectors, postings, memory records).
    pub fn approx_bytes(&self) -> usize {
        let records: usize = self
            .memories
            .iter()
            .map(|m| {
                std::mem::size_of::<Memory>()
                    + m.content.capacity()
                    + m.user_id.capacity()
                    + m.tags.iter().map(|t| t.capacity() + 24).sum::<usize>()
            })
            .sum();
        self.dense.bytes()
            + self.lexical.bytes()
            + records
            + self.rows.capacity() * 24
            + self.seqs.capacity() * 8
    }

    /// The `pool` rows most similar to `query` by cosine, best first, ties by insertion.
    /// `query` must already be validated against the index's dimension.
    pub fn dense_search(&self, query: &[f32], pool: usize) -> Vec<Hit> {
        let unit = normalized(query);
        let hits = self
            .dense
            .scores(&unit)
            .into_iter()
            .enumerate()
            .map(|(row, s)| Hit {
                row,
                score: f64::from(s),
            })
            .collect();
        self.top(hits, pool)
    }

    /// [`dense_search`](Self::dense_search) over only the rows whose memory passes
    /// `filter`: the others are not scored at all, so a selective filter is cheaper than
    /// none.
    pub fn dense_search_filtered(
        &self,
        query: &[f32],
        pool: usize,
        filter: &MemoryFilter,
    ) -> Vec<Hit> {
        if filter.is_empty() {
            return self.dense_search(query, pool);
        }
        let rows: Vec<usize> = (0..self.memories.len())
            .filter(|&row| filter.matches(&self.memories[row]))
            .collect();
        let unit = normalized(query);
        let hits = self
            .dense
            .scores_of_rows(&unit, &rows)
            .map(|(row, s)| Hit {
                row,
                score: f64::from(s),
            })
            .collect();
        self.top(hits, pool)
    }

    /// [`lexical_search`](Self::lexical_search) over only the rows whose memory passes
    /// `filter`; their scores are the unfiltered ones (statistics over every row).
    pub fn lexical_search_filtered(
        &self,
        terms: &[String],
        pool: usize,
        filter: &MemoryFilter,
    ) -> Vec<Hit> {
        if filter.is_empty() {
            return self.lexical_search(terms, pool);
        }
        let hits = self
            .lexical
            .scores(terms)
            .into_iter()
            .filter(|&(row, _)| filter.matches(&self.memories[row]))
            .map(|(row, score)| Hit { row, score })
            .collect();
        self.top(hits, pool)
    }

    /// The `pool` rows with the highest BM25 score for `terms` (distinct, byte-ordered, as
    /// [`query_terms`](crate::tokenizer::query_terms) gives them); rows with no query term
    /// are not candidates.
    pub fn lexical_search(&self, terms: &[String], pool: usize) -> Vec<Hit> {
        let hits = self
            .lexical
            .scores(terms)
            .into_iter()
            .map(|(row, score)| Hit { row, score })
            .collect();
        self.top(hits, pool)
    }

    /// The idf of each query term over the live memories (0 live memories: empty).
    pub fn term_idfs(&self, terms: &[String]) -> Vec<f64> {
        if self.memories.is_empty() {
            return Vec::new();
        }
        self.lexical.idfs(terms)
    }

    /// Partial selection of the best `k`, then a sort of just those.
    fn top(&self, mut hits: Vec<Hit>, k: usize) -> Vec<Hit> {
        let order = |a: &Hit, b: &Hit| self.rank_order(a, b);
        if k == 0 {
            return Vec::new();
        }
        if hits.len() > k {
            hits.select_nth_unstable_by(k - 1, order);
            hits.truncate(k);
        }
        hits.sort_unstable_by(order);
        hits
    }

    /// Higher score first, then earlier insertion.
    fn rank_order(&self, a: &Hit, b: &Hit) -> Ordering {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| self.memories[a.row].seq.cmp(&self.memories[b.row].seq))
    }
}
