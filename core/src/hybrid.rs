//! Hybrid retrieval: dense and BM25 candidate lists fused by Reciprocal Rank Fusion.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::index::{Hit, MemoryIndex};
use crate::memory::Memory;

/// The RRF constant. Cormack et al. (2009) tuned 60 for fusing many deep TREC runs; for
/// these two lists a small constant lets a memory that either list ranks near the top
/// stay there, and makes the fused order insensitive to the pool's depth (docs/RETRIEVAL.md
/// has the sweep).
pub const RRF_K: f64 = 3.0;

/// The share of its best neighbour's fused score a candidate adds to its own. Memories
/// written one after another belong together (the turns of one conversation): a candidate
/// next to a strong one moves up among the candidates. Only candidates move; a memory
/// neither list ranked is never added. docs/RETRIEVAL.md has the sweep.
pub const NEIGHBOUR_WEIGHT: f64 = 0.2;

/// The smallest candidate pool per retriever: the pool of the default limit (10) before
/// pools stopped depending on the limit.
pub const MIN_POOL: usize = 40;

/// Each retriever's candidate pool for a final `top_k`: [`MIN_POOL`], or `top_k` when
/// more are asked for. Not a multiple of `top_k`: for every `top_k` up to the minimum the
/// fused list is the same, so a smaller recall returns a prefix of a larger one.
pub fn candidate_pool(top_k: usize) -> usize {
    top_k.max(MIN_POOL)
}

/// One list's RRF contribution for a 1-based rank.
pub fn rrf_term(rank: u32) -> f64 {
    1.0 / (RRF_K + f64::from(rank))
}

/// A recalled memory with its fused score and each retriever's 1-based rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredMemory {
    pub memory: Memory,
    /// Sum of `1 / (RRF_K + rank)` over the lists the memory appears in, plus
    /// [`NEIGHBOUR_WEIGHT`] times the better of its neighbours' sums.
    pub score: f64,
    pub dense_rank: Option<u32>,
    pub lexical_rank: Option<u32>,
    /// The reranker's relevance, when a reranker ordered the results.
    pub rerank_score: Option<f64>,
}

/// Ranks a user's index for one query: each retriever's pool, fused by RRF, best `top_k`
/// first; ties by earlier insertion. `query_terms` are the distinct byte-ordered terms.
pub fn hybrid_retrieve(
    index: &MemoryIndex,
    query_embedding: &[f32],
    query_terms: &[String],
    top_k: usize,
) -> Vec<ScoredMemory> {
    let pool = candidate_pool(top_k);
    let dense = index.dense_search(query_embedding, pool);
    let lexical = index.lexical_search(query_terms, pool);
    fuse(index, &dense, &lexical, top_k)
}

fn fuse(index: &MemoryIndex, dense: &[Hit], lexical: &[Hit], top_k: usize) -> Vec<ScoredMemory> {
    // (dense rank, lexical rank) per row; the score is summed dense-then-lexical on every
    // path so equal rank pairs give bit-equal scores.
    let mut ranks: HashMap<usize, (Option<u32>, Option<u32>)> = HashMap::new();
    for (i, hit) in dense.iter().enumerate() {
        ranks.entry(hit.row).or_default().0 = Some(i as u32 + 1);
    }
    for (i, hit) in lexical.iter().enumerate() {
        ranks.entry(hit.row).or_default().1 = Some(i as u32 + 1);
    }
    let mut fused: Vec<(usize, f64, Option<u32>, Option<u32>)> = ranks
        .into_iter()
        .map(|(row, (d, l))| {
            let score = d.map_or(0.0, rrf_term) + l.map_or(0.0, rrf_term);
            (row, score, d, l)
        })
        .collect();
    // Each candidate adds a share of the better of its two neighbours' RRF scores (zero
    // for a neighbour that is no candidate), read before any is changed.
    let rrf: HashMap<i64, f64> = fused
        .iter()
        .map(|(row, score, ..)| (index.memory(*row).seq, *score))
        .collect();
    let of = |seq: Option<i64>| seq.and_then(|s| rrf.get(&s).copied()).unwrap_or(0.0);
    for (row, score, ..) in &mut fused {
        let (previous, next) = index.seq_neighbours(index.memory(*row).seq);
        *score += NEIGHBOUR_WEIGHT * of(previous).max(of(next));
    }
    fused.sort_unstable_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then_with(|| index.memory(a.0).seq.cmp(&index.memory(b.0).seq))
    });
    fused.truncate(top_k);
    fused
        .into_iter()
        .map(|(row, score, dense_rank, lexical_rank)| ScoredMemory {
            memory: index.memory(row).clone(),
            score,
            dense_rank,
            lexical_rank,
            rerank_score: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryKind;
    use crate::tokenizer::query_terms;
    use chrono::Utc;
    use uuid::Uuid;

    fn memory(seq: i64, content: &str) -> Memory {
        Memory {
            id: Uuid::new_v4(),
            user_id: "u".into(),
            content: content.into(),
            kind: MemoryKind::Note,
            tags: vec![],
            created_at: Utc::now(),
            seq,
        }
    }

    #[test]
    fn pool_is_at_least_the_minimum_and_never_below_top_k() {
        assert_eq!(candidate_pool(1), MIN_POOL);
        assert_eq!(candidate_pool(10), MIN_POOL);
        assert_eq!(candidate_pool(MIN_POOL + 1), MIN_POOL + 1);
        assert_eq!(candidate_pool(usize::MAX), usize::MAX);
    }

    #[test]
    fn a_smaller_recall_is_a_prefix_of_a_larger_one() {
        let mut index = MemoryIndex::new(2);
        let words = ["alpha", "beta", "gamma", "delta", "epsilon"];
        for seq in 0..120i64 {
            let x = (seq as f32 * 0.37).sin();
            let text = format!("{} {}", words[seq as usize % 5], words[seq as usize % 3]);
            index
                .insert(memory(seq, &text), &[x, 1.0 - x.abs()])
                .unwrap();
        }
        let terms = query_terms("alpha gamma");
        let full = hybrid_retrieve(&index, &[0.3, 0.7], &terms, MIN_POOL);
        for top_k in [1, 5, 10, 33] {
            let got = hybrid_retrieve(&index, &[0.3, 0.7], &terms, top_k);
            assert_eq!(got[..], full[..top_k], "top_k {top_k}");
        }
    }

    #[test]
    fn a_memory_both_lists_rank_high_beats_one_list_alone() {
        let mut index = MemoryIndex::new(2);
        // seq 1: dense rank 1, no term; seq 2: lexical rank 1, dense last; seq 3: second
        // in both lists, which RRF puts first.
        index.insert(memory(1, "unrelated"), &[1.0, 0.0]).unwrap();
        index.insert(memory(2, "zebra zebra"), &[0.0, 1.0]).unwrap();
        index
            .insert(memory(3, "zebra and many other words"), &[0.9, 0.2])
            .unwrap();
        // Dense-only fillers between seq 3 and seq 2 in the dense list.
        for seq in 4..9 {
            index.insert(memory(seq, "filler"), &[0.5, 0.5]).unwrap();
        }
        let got = hybrid_retrieve(&index, &[1.0, 0.0], &query_terms("zebra"), 3);
        let seqs: Vec<i64> = got.iter().map(|s| s.memory.seq).collect();
        assert_eq!(seqs[0], 3, "{got:?}");
        // Its better neighbour is seq 2 (dense rank 8, lexical rank 1), not filler seq 4.
        let neighbour = rrf_term(8) + rrf_term(1);
        assert_eq!(
            got[0].score,
            rrf_term(2) + rrf_term(2) + NEIGHBOUR_WEIGHT * neighbour
        );
    }

    #[test]
    fn a_candidate_next_to_a_strong_one_moves_up() {
        let mut index = MemoryIndex::new(2);
        let vectors = [
            [0.0, 1.0],
            [0.1, 1.0],
            [1.0, 0.0], // seq 3: both lists' first
            [0.8, 0.2], // seq 4: dense rank 3, next to seq 3
            [0.2, 1.0],
            [0.9, 0.1], // seq 6: dense rank 2, next to nothing strong
        ];
        for (i, v) in vectors.iter().enumerate() {
            let text = if i == 2 { "alpha" } else { "other" };
            index.insert(memory(i as i64 + 1, text), v).unwrap();
        }
        let got = hybrid_retrieve(&index, &[1.0, 0.0], &query_terms("alpha"), 3);
        let seqs: Vec<i64> = got.iter().map(|s| s.memory.seq).collect();
        // By RRF alone seq 6 (dense rank 2) would come before seq 4 (dense rank 3).
        assert_eq!(seqs, [3, 4, 6], "{got:?}");
        assert_eq!(
            got[1].score,
            rrf_term(3) + NEIGHBOUR_WEIGHT * (rrf_term(1) + rrf_term(1))
        );
        // Removing seq 3 takes the boost away with it.
        index.remove(&got[0].memory.id);
        let got = hybrid_retrieve(&index, &[1.0, 0.0], &query_terms("alpha"), 2);
        let seqs: Vec<i64> = got.iter().map(|s| s.memory.seq).collect();
        assert_eq!(seqs, [6, 4]);
        assert_eq!(index.seq_neighbours(4), (Some(2), Some(5)));
        assert_eq!(index.seq_neighbours(1), (None, Some(2)));
        assert_eq!(index.seq_neighbours(6), (Some(5), None));
    }

    #[test]
    fn both_lists_beat_one_and_ties_go_to_earlier_insertion() {
        let mut index = MemoryIndex::new(2);
        // seq 1: dense-only match; seq 2: lexical-only; seq 3: both.
        index
            .insert(memory(1, "nothing here"), &[1.0, 0.0])
            .unwrap();
        index.insert(memory(2, "zebra"), &[0.0, 1.0]).unwrap();
        index
            .insert(memory(3, "zebra stripes"), &[0.9, 0.1])
            .unwrap();
        let got = hybrid_retrieve(&index, &[0.9, 0.1], &query_terms("zebra"), 3);
        let seqs: Vec<i64> = got.iter().map(|s| s.memory.seq).collect();
        // seq 3: dense rank 1 + lexical rank 2 (BM25 favours the shorter "zebra").
        assert_eq!(seqs, [3, 2, 1]);
        assert_eq!((got[0].dense_rank, got[0].lexical_rank), (Some(1), Some(2)));
        // Its neighbour seq 2 adds a fifth of its RRF score.
        assert_eq!(
            got[0].score,
            rrf_term(1) + rrf_term(2) + NEIGHBOUR_WEIGHT * (rrf_term(3) + rrf_term(1))
        );
        // seq 2: lexical rank 1 and dense rank 3 beats seq 1's dense rank 2 alone.
        assert_eq!((got[1].dense_rank, got[1].lexical_rank), (Some(3), Some(1)));
        assert_eq!((got[2].dense_rank, got[2].lexical_rank), (Some(2), None));
    }

    #[test]
    fn equal_scores_rank_by_insertion() {
        let mut index = MemoryIndex::new(2);
        for seq in [5, 2, 9] {
            index
                .insert(memory(seq, "same words"), &[1.0, 1.0])
                .unwrap();
        }
        let got = hybrid_retrieve(&index, &[1.0, 1.0], &query_terms("same"), 3);
        let seqs: Vec<i64> = got.iter().map(|s| s.memory.seq).collect();
        assert_eq!(seqs, [2, 5, 9]);
    }
}
