//! The in-memory index a user's live memories are materialised into: exact dense search
//! and BM25, both incrementally updatable.

mod compact;
mod dense;
mod lexical;
mod parallel;
mod snapshot;
mod vectors;

use std::cmp::Ordering;
use std::sync::Arc;

use rustc_hash::FxHashMap;

pub use dense::unit_score;
pub use lexical::{BM25_B, BM25_K1, bm25_idf, bm25_term_score};
pub use parallel::PARALLEL_LISTS_FROM;
pub use snapshot::{Snapshot, SnapshotError};
pub use vectors::VectorSource;

use crate::embedding::{normalized, validate_embedding};
use crate::error::{EmbeddingProblem, StoreError};
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
    /// Fx hashing: ids are random UUIDs (or a user's own imported ones), and SipHash was a
    /// tenth of reading a snapshot back.
    rows: FxHashMap<MemoryId, usize>,
    dense: DenseMatrix,
    lexical: LexicalIndex,
    /// Every indexed memory's sequence number, ascending: a memory's neighbours are the
    /// memories written just before and just after it.
    seqs: Vec<i64>,
    /// How many indexed memories have an expiry: with none, "not expired" holds for every
    /// row and a recall needs no filter for it.
    expiring: usize,
    /// Where the full vectors are when the matrix keeps only their codes.
    source: Option<Arc<dyn VectorSource>>,
}

impl MemoryIndex {
    /// An index that keeps every unit vector in memory.
    pub fn new(dimension: usize) -> Self {
        Self::build(dimension, None)
    }

    /// An index that keeps only each vector's 8-bit codes and reads the full vectors the
    /// exact re-score needs from `source`: the same results as [`new`](Self::new)'s, in
    /// about a quarter of the vector bytes, at the cost of one read per candidate row.
    pub fn over_source(dimension: usize, source: Arc<dyn VectorSource>) -> Self {
        Self::build(dimension, Some(source))
    }

    fn build(dimension: usize, source: Option<Arc<dyn VectorSource>>) -> Self {
        Self {
            memories: Vec::new(),
            rows: FxHashMap::default(),
            dense: DenseMatrix::with_rows(dimension, source.is_none()),
            lexical: LexicalIndex::default(),
            seqs: Vec::new(),
            expiring: 0,
            source,
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
        let last = self.memories.len() - 1;
        self.lexical.swap_remove(
            row,
            &self.memories[row].content,
            &self.memories[last].content,
        );
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

    /// Gives back the room the index's vectors and lists grew into and do not use: a
    /// store calls it once a build is complete (the index is cached as built).
    pub fn shrink_to_fit(&mut self) {
        self.memories.shrink_to_fit();
        self.rows.shrink_to_fit();
        self.dense.shrink_to_fit();
        self.lexical.shrink_to_fit();
        self.seqs.shrink_to_fit();
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
    /// `query` must already be validated against the index's dimension. Fails only when
    /// the index reads its vectors from a [`VectorSource`] and the read fails.
    pub fn dense_search(&self, query: &[f32], pool: usize) -> Result<Vec<Hit>, StoreError> {
        self.dense_search_filtered(query, pool, &MemoryFilter::default())
    }

    /// The dense list and the BM25 list of one query, each as
    /// [`dense_search_filtered`](Self::dense_search_filtered) and
    /// [`lexical_search_filtered`](Self::lexical_search_filtered) give it; from
    /// [`PARALLEL_LISTS_FROM`] memories on two threads, which share the dense scan after
    /// one of them has ranked BM25.
    pub fn ranked_lists(
        &self,
        query: &[f32],
        terms: &[String],
        pool: usize,
        filter: &MemoryFilter,
    ) -> Result<(Vec<Hit>, Vec<Hit>), StoreError> {
        self.dense_beside(query, pool, filter, || {
            self.lexical_search_filtered(terms, pool, filter)
        })
    }

    /// The dense list, with `beside()` run while the scan runs.
    fn dense_beside<B>(
        &self,
        query: &[f32],
        pool: usize,
        filter: &MemoryFilter,
        beside: impl FnOnce() -> B,
    ) -> Result<(Vec<Hit>, B), StoreError> {
        let passing: Option<Vec<usize>> = (!filter.is_empty()).then(|| {
            (0..self.memories.len())
                .filter(|&row| filter.matches(&self.memories[row]))
                .collect()
        });
        let unit = normalized(query);
        let (rows, b) = self
            .dense
            .candidates_beside(&unit, pool, passing.as_deref(), beside);
        Ok((self.exact_top(&unit, &rows, pool)?, b))
    }

    /// How many rows [`dense_search`](Self::dense_search) scores in full for `query` on one
    /// thread: the rows the 8-bit bound cannot rule out (two threads keep a few more).
    /// For benchmarks; the search itself never needs the count.
    pub fn dense_rows_scored(&self, query: &[f32], pool: usize) -> usize {
        self.dense.candidates(&normalized(query), pool, None).len()
    }

    /// The best `pool` of `rows` by their exact cosine with `unit`.
    fn exact_top(&self, unit: &[f32], rows: &[usize], pool: usize) -> Result<Vec<Hit>, StoreError> {
        let hit = |(row, s): (usize, f32)| Hit {
            row,
            score: f64::from(s),
        };
        let hits = match &self.source {
            None => self.dense.scores_of_rows(unit, rows).map(hit).collect(),
            Some(source) => self
                .stored_scores(source.as_ref(), unit, rows)?
                .map(hit)
                .collect(),
        };
        Ok(self.top(hits, pool))
    }

    /// The unit vectors of `memories`, in order, as [`insert`](Self::insert) normalised
    /// them: `None` for a memory that is not indexed, or that left the store since an
    /// index over a [`VectorSource`] was built.
    pub fn unit_vectors(&self, memories: &[&Memory]) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
        let rows: Vec<Option<usize>> = memories
            .iter()
            .map(|m| self.rows.get(&m.id).copied())
            .collect();
        let Some(source) = &self.source else {
            return Ok(rows
                .iter()
                .map(|row| {
                    row.and_then(|r| self.dense.unit_row(r))
                        .map(<[f32]>::to_vec)
                })
                .collect());
        };
        let indexed: Vec<&Memory> = rows
            .iter()
            .zip(memories)
            .filter(|(row, _)| row.is_some())
            .map(|(_, m)| *m)
            .collect();
        let mut read = source.vectors(&indexed)?.into_iter();
        Ok(rows
            .iter()
            .map(|row| {
                row.and_then(|_| read.next().flatten())
                    .map(|v| crate::embedding::normalized(&v))
            })
            .collect())
    }

    /// [`DenseMatrix::scores_of_rows`] with each row read from `source` and normalised as
    /// [`insert`](Self::insert) normalised it, so the scores are bit-equal. A row whose
    /// memory left the store since the index was built is no candidate: the recall sees
    /// the store as it is after that removal.
    fn stored_scores(
        &self,
        source: &dyn VectorSource,
        unit: &[f32],
        rows: &[usize],
    ) -> Result<impl Iterator<Item = (usize, f32)>, StoreError> {
        let memories: Vec<&Memory> = rows.iter().map(|&row| &self.memories[row]).collect();
        let vectors = source.vectors(&memories)?;
        if vectors.len() != rows.len() {
            return Err(StoreError::Corrupt(format!(
                "{} vectors read back for {} memories",
                vectors.len(),
                rows.len()
            )));
        }
        let query = dense::widened(unit);
        let mut scored = Vec::with_capacity(rows.len());
        let mut row_unit = Vec::with_capacity(self.dimension());
        for ((&row, vector), memory) in rows.iter().zip(vectors).zip(&memories) {
            let Some(vector) = vector else { continue };
            validate_embedding(&vector, self.dimension())
                .map_err(|e| StoreError::Corrupt(format!("embedding of {}: {e}", memory.id)))?;
            scored.push((row, dense::unit_score_with(&vector, &query, &mut row_unit)));
        }
        Ok(scored.into_iter())
    }

    /// [`dense_search`](Self::dense_search) over only the rows whose memory passes
    /// `filter`: the others are not scored at all, so a selective filter is cheaper than
    /// none.
    pub fn dense_search_filtered(
        &self,
        query: &[f32],
        pool: usize,
        filter: &MemoryFilter,
    ) -> Result<Vec<Hit>, StoreError> {
        Ok(self.dense_beside(query, pool, filter, || ())?.0)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryKind;
    use chrono::Utc;
    use uuid::Uuid;

    fn memory(seq: i64, kind: MemoryKind) -> Memory {
        Memory {
            id: Uuid::new_v4(),
            user_id: "u".into(),
            content: format!("memory {seq}"),
            kind,
            tags: vec![],
            created_at: Utc::now(),
            seq,
            expires_at: None,
        }
    }

    /// What the search must equal: every row (or every row passing `keep`) scored in full,
    /// then the best `pool`.
    fn exhaustive(
        index: &MemoryIndex,
        query: &[f32],
        pool: usize,
        keep: impl Fn(usize) -> bool,
    ) -> Vec<Hit> {
        let hits = index
            .dense
            .scores(&normalized(query))
            .into_iter()
            .enumerate()
            .filter(|(row, _)| keep(*row))
            .map(|(row, s)| Hit {
                row,
                score: f64::from(s),
            })
            .collect();
        index.top(hits, pool)
    }

    /// Rows built to sit where an 8-bit bound is widest or a tie is closest: exact
    /// duplicates, copies one ulp apart, permutations (equal scores from different
    /// vectors), one huge component with tiny others, all-equal components, extreme
    /// input norms, plus random rows; queries that equal a row, lie between near-ties, or
    /// have one dominant component.
    fn adversarial(d: usize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 2_000_001) as f32 / 1_000_000.0 - 1.0
        };
        let mut rows: Vec<Vec<f32>> = Vec::new();
        for _ in 0..400 {
            rows.push((0..d).map(|_| next()).collect());
        }
        let base: Vec<f32> = (0..d).map(|_| next()).collect();
        for i in 0..60 {
            let mut v = base.clone();
            match i % 6 {
                0 => {}
                1 => v[i % d] = v[i % d].next_up(),
                2 => v[(i + 1) % d] = v[(i + 1) % d].next_down(),
                3 => v.rotate_left(i % d),
                4 => v.iter_mut().for_each(|x| *x *= 1e30),
                _ => v.iter_mut().for_each(|x| *x *= 1e-30),
            }
            rows.push(v);
        }
        for i in 0..d {
            let mut spike: Vec<f32> = (0..d).map(|_| next() * 1e-6).collect();
            spike[i] = 1.0;
            rows.push(spike);
            rows.push(vec![if i % 2 == 0 { 1.0 } else { -1.0 }; d]);
        }
        let mut queries = vec![base.clone(), rows[3].clone(), rows[401].clone()];
        let mut between = base.clone();
        between[0] = between[0].next_up();
        queries.push(between);
        let mut dominant: Vec<f32> = (0..d).map(|_| next() * 1e-3).collect();
        dominant[d / 2] = 1.0;
        queries.push(dominant);
        queries.push(vec![1.0; d]);
        for _ in 0..10 {
            queries.push((0..d).map(|_| next()).collect());
        }
        (rows, queries)
    }

    #[test]
    fn the_compact_scan_finds_what_the_exhaustive_scan_finds() {
        for d in [3, 16, 67] {
            let (rows, queries) = adversarial(d);
            let mut index = MemoryIndex::new(d);
            for (seq, row) in rows.iter().enumerate() {
                let kind = if seq % 3 == 0 {
                    MemoryKind::Fact
                } else {
                    MemoryKind::Note
                };
                index.insert(memory(seq as i64, kind), row).unwrap();
            }
            // Removal moves rows: the codes must move with them.
            for seq in (0..rows.len()).step_by(11) {
                let id = index
                    .memories
                    .iter()
                    .find(|m| m.seq == seq as i64)
                    .unwrap()
                    .id;
                assert!(index.remove(&id));
            }
            let facts = MemoryFilter::new(&[MemoryKind::Fact], &[], &[], None, None).unwrap();
            for (q, query) in queries.iter().enumerate() {
                for pool in [1, 2, 10, 40, index.len() - 1, index.len() + 5] {
                    let want = exhaustive(&index, query, pool, |_| true);
                    let got = index.dense_search(query, pool).unwrap();
                    assert_eq!(got, want, "d {d}, query {q}, pool {pool}");
                    let want = exhaustive(&index, query, pool, |row| {
                        index.memories[row].kind == MemoryKind::Fact
                    });
                    let got = index.dense_search_filtered(query, pool, &facts).unwrap();
                    assert_eq!(got, want, "filtered: d {d}, query {q}, pool {pool}");
                }
            }
        }
    }

    /// What a backend ranking by its own distance computes for the fusion's weights: each
    /// hit's score again from its stored embedding, bit for bit.
    #[test]
    fn unit_score_is_the_score_the_index_gives() {
        for d in [3, 16, 67] {
            let (rows, queries) = adversarial(d);
            let mut index = MemoryIndex::new(d);
            for (seq, row) in rows.iter().enumerate() {
                index
                    .insert(memory(seq as i64, MemoryKind::Note), row)
                    .unwrap();
            }
            for query in &queries {
                let unit = normalized(query);
                for hit in index.dense_search(query, 40).unwrap() {
                    let seq = usize::try_from(index.memories[hit.row].seq).unwrap();
                    let score = unit_score(&rows[seq], &unit);
                    assert_eq!(f64::from(score).to_bits(), hit.score.to_bits(), "d {d}");
                }
            }
        }
    }

    /// Past the size where two threads share the scan, each with its own threshold, the
    /// list is still the exhaustive scan's.
    #[test]
    fn the_scan_shared_by_two_threads_finds_what_the_exhaustive_scan_finds() {
        let d = 8;
        let (rows, queries) = adversarial(d);
        let mut index = MemoryIndex::new(d);
        let mut seq = 0i64;
        // The adversarial rows spread over the whole range, so that both threads meet
        // duplicates and near-ties.
        while index.len() < PARALLEL_LISTS_FROM + 500 {
            let row = &rows[(seq as usize * 7919) % rows.len()];
            let mut v = row.clone();
            if seq % 3 == 1 {
                v[seq as usize % d] += (seq % 17) as f32 * 1e-3;
            }
            let kind = [MemoryKind::Fact, MemoryKind::Note][seq as usize % 2];
            index.insert(memory(seq, kind), &v).unwrap();
            seq += 1;
        }
        let facts = MemoryFilter::new(&[MemoryKind::Fact], &[], &[], None, None).unwrap();
        let terms = crate::tokenizer::query_terms("memory 17");
        for (q, query) in queries.iter().enumerate() {
            for pool in [1, 10, 40, 300] {
                let want = exhaustive(&index, query, pool, |_| true);
                assert_eq!(
                    index.dense_search(query, pool).unwrap(),
                    want,
                    "query {q}, pool {pool}"
                );
                let want = exhaustive(&index, query, pool, |row| {
                    index.memories[row].kind == MemoryKind::Fact
                });
                let (dense, lexical) = index.ranked_lists(query, &terms, pool, &facts).unwrap();
                assert_eq!(dense, want, "filtered: query {q}, pool {pool}");
                assert_eq!(lexical, index.lexical_search_filtered(&terms, pool, &facts));
            }
        }
    }

    #[test]
    fn shrinking_gives_back_room_and_changes_no_result() {
        let (rows, queries) = adversarial(16);
        let mut index = MemoryIndex::new(16);
        for (seq, row) in rows.iter().enumerate() {
            index
                .insert(memory(seq as i64, MemoryKind::Note), row)
                .unwrap();
        }
        let terms = crate::tokenizer::query_terms("memory 17 3");
        let results = |index: &MemoryIndex| -> Vec<(Vec<Hit>, Vec<Hit>)> {
            queries
                .iter()
                .map(|q| {
                    (
                        index.dense_search(q, 10).unwrap(),
                        index.lexical_search(&terms, 10),
                    )
                })
                .collect()
        };
        let before = results(&index);
        let bytes = index.approx_bytes();
        index.shrink_to_fit();
        assert!(
            index.approx_bytes() < bytes,
            "{} of {bytes}",
            index.approx_bytes()
        );
        assert_eq!(results(&index), before);
    }

    /// The vectors as a store would hand them back, counting what is read.
    #[derive(Debug, Default)]
    struct Vectors {
        by_id: std::sync::Mutex<std::collections::HashMap<MemoryId, Vec<f32>>>,
        reads: std::sync::atomic::AtomicUsize,
        fail: std::sync::atomic::AtomicBool,
    }

    impl VectorSource for Vectors {
        fn vectors(&self, memories: &[&Memory]) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
            use std::sync::atomic::Ordering::Relaxed;
            if self.fail.load(Relaxed) {
                return Err(StoreError::Corrupt("the disk is gone".into()));
            }
            self.reads.fetch_add(memories.len(), Relaxed);
            let by_id = self.by_id.lock().unwrap();
            Ok(memories.iter().map(|m| by_id.get(&m.id).cloned()).collect())
        }
    }

    #[test]
    fn an_index_over_a_source_finds_what_a_resident_index_finds() {
        use std::sync::atomic::Ordering::Relaxed;
        for d in [3, 16, 67] {
            let (rows, queries) = adversarial(d);
            let source = Arc::new(Vectors::default());
            let mut resident = MemoryIndex::new(d);
            let mut stored = MemoryIndex::over_source(d, source.clone());
            for (seq, row) in rows.iter().enumerate() {
                let kind = [MemoryKind::Fact, MemoryKind::Note][seq % 2];
                let m = memory(seq as i64, kind);
                source.by_id.lock().unwrap().insert(m.id, row.clone());
                resident.insert(m.clone(), row).unwrap();
                stored.insert(m, row).unwrap();
            }
            for seq in (0..rows.len()).step_by(7) {
                let id = resident
                    .memories
                    .iter()
                    .find(|m| m.seq == seq as i64)
                    .unwrap()
                    .id;
                assert!(resident.remove(&id) && stored.remove(&id));
            }
            // The f32 rows are what the stored index leaves out.
            let saved = resident.approx_bytes() - stored.approx_bytes();
            assert!(saved >= stored.len() * d * 4, "{saved} bytes saved");
            let facts = MemoryFilter::new(&[MemoryKind::Fact], &[], &[], None, None).unwrap();
            for (q, query) in queries.iter().enumerate() {
                for pool in [1, 10, 40, stored.len() + 1] {
                    let what = format!("d {d}, query {q}, pool {pool}");
                    let (want, got) = (
                        resident.dense_search(query, pool),
                        stored.dense_search(query, pool),
                    );
                    assert_eq!(got.unwrap(), want.unwrap(), "{what}");
                    let want = resident.dense_search_filtered(query, pool, &facts).unwrap();
                    let got = stored.dense_search_filtered(query, pool, &facts).unwrap();
                    assert_eq!(got, want, "filtered: {what}");
                }
            }
            // Only the candidates are read, not every row.
            source.reads.store(0, Relaxed);
            stored.dense_search(&queries[6], 10).unwrap();
            let read = source.reads.load(Relaxed);
            assert!(
                read >= 10 && read < stored.len(),
                "{read} of {} read",
                stored.len()
            );
        }
    }

    #[test]
    fn a_memory_gone_from_the_source_is_no_candidate_and_a_failed_read_is_an_error() {
        let source = Arc::new(Vectors::default());
        let mut index = MemoryIndex::over_source(2, source.clone());
        let vectors = [[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]];
        let mut ids = Vec::new();
        for (seq, v) in vectors.iter().enumerate() {
            let m = memory(seq as i64, MemoryKind::Note);
            source.by_id.lock().unwrap().insert(m.id, v.to_vec());
            ids.push(m.id);
            index.insert(m, v).unwrap();
        }
        let rows = |hits: Vec<Hit>| {
            hits.iter()
                .map(|h| index.memory(h.row).id)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            rows(index.dense_search(&[1.0, 0.0], 2).unwrap()),
            [ids[0], ids[1]]
        );
        source.by_id.lock().unwrap().remove(&ids[0]);
        assert_eq!(
            rows(index.dense_search(&[1.0, 0.0], 3).unwrap()),
            [ids[1], ids[2]]
        );
        source
            .fail
            .store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(matches!(
            index.dense_search(&[1.0, 0.0], 2),
            Err(StoreError::Corrupt(_))
        ));
        let terms = crate::tokenizer::query_terms("memory");
        assert!(crate::hybrid::hybrid_retrieve(&index, &[1.0, 0.0], &terms, 2).is_err());
    }

    /// The narrowing is real: on spread-out data far fewer rows than all are scored in
    /// full (else the compact scan would be pure cost).
    #[test]
    fn the_compact_scan_scores_few_rows_in_full() {
        let d = 64;
        let (rows, queries) = adversarial(d);
        let mut index = MemoryIndex::new(d);
        for (seq, row) in rows.iter().take(400).enumerate() {
            index
                .insert(memory(seq as i64, MemoryKind::Note), row)
                .unwrap();
        }
        for query in &queries[6..] {
            let candidates = index.dense.candidates(&normalized(query), 10, None);
            assert!(candidates.len() >= 10);
            assert!(candidates.len() < 100, "{} of 400 rows", candidates.len());
        }
    }

    /// An index over a source whose memories carry every field a snapshot writes: words
    /// shared and not, tags, expiries, text beyond ASCII.
    fn varied_index(d: usize, source: &Arc<Vectors>) -> (MemoryIndex, Vec<Vec<f32>>) {
        let (rows, queries) = adversarial(d);
        let words = [
            "apple",
            "river",
            "stone",
            "Ünïcode",
            "garden",
            "apple river",
        ];
        let mut index = MemoryIndex::over_source(d, source.clone());
        for (seq, row) in rows.iter().enumerate() {
            let mut m = memory(seq as i64, MemoryKind::ALL[seq % MemoryKind::ALL.len()]);
            m.content = format!("{} {} note {seq}", words[seq % 6], words[seq % 5]);
            m.tags = (0..seq % 3).map(|t| format!("tag-{t}-ü")).collect();
            m.expires_at = (seq % 4 == 0).then(|| m.created_at + chrono::Duration::days(1));
            source.by_id.lock().unwrap().insert(m.id, row.clone());
            index.insert(m, row).unwrap();
        }
        for seq in (0..rows.len()).step_by(9) {
            let id = index
                .memories
                .iter()
                .find(|m| m.seq == seq as i64)
                .unwrap()
                .id;
            assert!(index.remove(&id));
        }
        (index, queries)
    }

    /// Every list a recall reads, for a few queries.
    fn all_results(index: &MemoryIndex, queries: &[Vec<f32>]) -> Vec<String> {
        let facts = MemoryFilter::new(&[MemoryKind::Fact], &[], &[], None, None).unwrap();
        let terms = crate::tokenizer::query_terms("apple garden unicode note 7");
        let mut out = Vec::new();
        for query in queries {
            for pool in [1, 10, 40] {
                out.push(format!(
                    "{:?}",
                    index
                        .ranked_lists(query, &terms, pool, &MemoryFilter::default())
                        .unwrap()
                ));
                out.push(format!(
                    "{:?}",
                    index.ranked_lists(query, &terms, pool, &facts).unwrap()
                ));
                out.push(format!(
                    "{:?}",
                    crate::hybrid::hybrid_retrieve(index, query, &terms, pool).unwrap()
                ));
            }
        }
        out.push(format!("{:?}", index.term_idfs(&terms)));
        out.push(format!("{:?}", index.seq_neighbours(20)));
        out
    }

    #[test]
    fn a_snapshot_reads_back_the_index_it_was_written_from() {
        for d in [3, 16, 67] {
            let source = Arc::new(Vectors::default());
            let (mut index, queries) = varied_index(d, &source);
            let bytes = index.to_snapshot(b"the key");
            let Snapshot {
                key,
                index: mut read,
            } = MemoryIndex::from_snapshot(bytes.clone(), source.clone()).unwrap();
            assert_eq!(key, b"the key");
            assert_eq!(read.memories, index.memories, "d {d}");
            // Written again, the same bytes: codes, bounds, postings in order, lengths.
            assert_eq!(read.to_snapshot(b"the key"), bytes, "d {d}");
            assert_eq!(all_results(&read, &queries), all_results(&index, &queries));
            // What is derived on reading (row map, sequence list, expiry count, each row's
            // terms) keeps the two equal through the same later changes.
            let now = Utc::now() + chrono::Duration::days(2);
            assert_eq!(read.any_expired(now), index.any_expired(now));
            for seq in (1..60).step_by(5) {
                let id = index.memories.iter().find(|m| m.seq == seq).map(|m| m.id);
                if let Some(id) = id {
                    assert!(index.remove(&id) && read.remove(&id));
                }
            }
            for (i, v) in queries.iter().take(5).enumerate() {
                let mut m = memory(10_000 + i as i64, MemoryKind::Fact);
                m.content = format!("apple stone {i}");
                source.by_id.lock().unwrap().insert(m.id, v.clone());
                index.insert(m.clone(), v).unwrap();
                read.insert(m, v).unwrap();
            }
            assert_eq!(read.to_snapshot(b""), index.to_snapshot(b""), "d {d}");
            assert_eq!(all_results(&read, &queries), all_results(&index, &queries));
        }
    }

    #[test]
    fn a_damaged_snapshot_is_refused() {
        let source: Arc<Vectors> = Arc::new(Vectors::default());
        let (index, _) = varied_index(16, &source);
        let bytes = index.to_snapshot(b"key");
        let read = |b: &[u8]| MemoryIndex::from_snapshot(b.to_vec(), source.clone()).map(|s| s.key);
        assert_eq!(read(&bytes).unwrap(), b"key");
        assert_eq!(read(&[]).unwrap_err(), SnapshotError::NotASnapshot);
        assert_eq!(read(b"CXINDEX").unwrap_err(), SnapshotError::NotASnapshot);
        // One bit flipped anywhere, or the end cut off: refused, never a different index.
        for at in (0..bytes.len()).step_by(97).chain([bytes.len() - 1]) {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(read(&damaged).is_err(), "byte {at} flipped");
        }
        for cut in [1, 4, 5, bytes.len() / 2] {
            assert!(
                read(&bytes[..bytes.len() - cut]).is_err(),
                "{cut} bytes cut"
            );
        }
        // Two memories, so the last posting (just before the memories) is known: the
        // second memory's one term, "gamma", row 1, tf 1.
        let mut small = MemoryIndex::over_source(2, source.clone());
        for (seq, text) in ["alpha beta", "gamma"].into_iter().enumerate() {
            let mut m = memory(seq as i64, MemoryKind::Note);
            m.content = text.into();
            small.insert(m, &[1.0, seq as f32]).unwrap();
        }
        let bytes = small.to_snapshot(b"key");
        let body = bytes.len() - 4;
        // The trailer: six u64, the version, the magic.
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let trailer = body - 60;
        let mut other = bytes.clone();
        other[body - 12..body - 8].copy_from_slice(&2u32.to_le_bytes());
        assert_eq!(read(&other).unwrap_err(), SnapshotError::Version(2));
        // A checksum that matches does not make inconsistent contents readable: the last
        // posting names a row the index does not have, then has a term frequency its
        // row's length does not add up to.
        let resealed = |at: usize, value: u32| {
            let mut b = bytes[..body].to_vec();
            b[at..at + 4].copy_from_slice(&value.to_le_bytes());
            let crc = crc32fast::hash(&b);
            b.extend_from_slice(&crc.to_le_bytes());
            b
        };
        let last_posting = word(trailer + 32) as usize - 8;
        assert_eq!(read(&resealed(last_posting, 1)).unwrap(), b"key");
        assert_eq!(
            read(&resealed(last_posting, 2)).unwrap_err(),
            SnapshotError::Invalid("postings")
        );
        assert_eq!(
            read(&resealed(last_posting + 4, 2)).unwrap_err(),
            SnapshotError::Invalid("postings")
        );
        // Sections that overlap: the memories said to start before the postings.
        let terms_at = word(trailer + 24) as u32;
        assert_eq!(
            read(&resealed(trailer + 32, terms_at - 1)).unwrap_err(),
            SnapshotError::Invalid("sections")
        );
    }
}
