//! Hybrid retrieval: dense and BM25 candidate lists fused (see [`crate::fusion`]).

use crate::fusion::NEIGHBOUR_WEIGHT;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::filter::MemoryFilter;
use crate::fusion::{ListWeights, lexical_bound, lexical_share, lexical_term};
use crate::index::{Hit, MemoryIndex};
use crate::memory::Memory;

/// The smallest candidate pool per retriever: the pool of the default limit (10) before
/// pools stopped depending on the limit.
pub const MIN_POOL: usize = 40;

/// Each retriever's candidate pool for a final `top_k`: [`MIN_POOL`], or `top_k` when
/// more are asked for. Not a multiple of `top_k`: for every `top_k` up to the minimum the
/// fused list is the same, so a smaller recall returns a prefix of a larger one.
pub fn candidate_pool(top_k: usize) -> usize {
    top_k.max(MIN_POOL)
}

/// A recalled memory with its fused score and each retriever's 1-based rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredMemory {
    pub memory: Memory,
    /// Its fused score (see [`crate::fusion`]): the dense term, plus the lexical term,
    /// plus [`NEIGHBOUR_WEIGHT`] times the better of its neighbours' sums.
    pub score: f64,
    pub dense_rank: Option<u32>,
    pub lexical_rank: Option<u32>,
    /// The reranker's relevance, when a reranker ordered the results.
    pub rerank_score: Option<f64>,
}

/// Ranks a user's index for one query: each retriever's pool, fused (see
/// [`crate::fusion`]), best `top_k` first; ties by earlier insertion. `query_terms` are
/// the distinct byte-ordered terms. Fails only when the index reads its vectors from a
/// [`VectorSource`](crate::index::VectorSource) and the read fails.
pub fn hybrid_retrieve(
    index: &MemoryIndex,
    query_embedding: &[f32],
    query_terms: &[String],
    top_k: usize,
) -> Result<Vec<ScoredMemory>, StoreError> {
    hybrid_retrieve_filtered(
        index,
        query_embedding,
        query_terms,
        top_k,
        &MemoryFilter::default(),
    )
}

/// [`hybrid_retrieve`] with only the memories that pass `filter` as candidates of either
/// list. The statistics, the bound and the neighbours are those of the whole index, so a
/// memory that passes keeps its BM25 score; its ranks are among the memories that pass.
pub fn hybrid_retrieve_filtered(
    index: &MemoryIndex,
    query_embedding: &[f32],
    query_terms: &[String],
    top_k: usize,
    filter: &MemoryFilter,
) -> Result<Vec<ScoredMemory>, StoreError> {
    let pool = candidate_pool(top_k);
    let (dense, lexical) = index.ranked_lists(query_embedding, query_terms, pool, filter)?;
    let bound = lexical_bound(index.term_idfs(query_terms));
    Ok(fuse(index, &dense, &lexical, bound, top_k))
}

fn fuse(
    index: &MemoryIndex,
    dense: &[Hit],
    lexical: &[Hit],
    bound: f64,
    top_k: usize,
) -> Vec<ScoredMemory> {
    let weights = ListWeights::of_lists(
        dense.iter().map(|h| h.score),
        lexical.iter().map(|h| h.score),
        bound,
    );
    // Per row: its dense rank, and its lexical rank with its weighted share; the score is
    // summed dense-then-lexical on every path so equal inputs give bit-equal scores.
    type Lexical = Option<(u32, f64)>;
    let mut ranks: HashMap<usize, (Option<u32>, Lexical)> = HashMap::new();
    for (i, hit) in dense.iter().enumerate() {
        ranks.entry(hit.row).or_default().0 = Some(i as u32 + 1);
    }
    for (i, hit) in lexical.iter().enumerate() {
        let numerator = weights.lexical_numerator(lexical_share(hit.score, bound));
        ranks.entry(hit.row).or_default().1 = Some((i as u32 + 1, numerator));
    }
    let mut fused: Vec<(usize, f64, Option<u32>, Option<u32>)> = ranks
        .into_iter()
        .map(|(row, (d, l))| {
            let score = d.map_or(0.0, |r| weights.dense_term(r))
                + l.map_or(0.0, |(r, numerator)| lexical_term(numerator, r));
            (row, score, d, l.map(|(r, _)| r))
        })
        .collect();
    // Each candidate adds a share of the better of its two neighbours' fused scores (zero
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
    use crate::fusion::RRF_K;
    use crate::index::PARALLEL_LISTS_FROM;
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
            expires_at: None,
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
        let full = hybrid_retrieve(&index, &[0.3, 0.7], &terms, MIN_POOL).unwrap();
        for top_k in [1, 5, 10, 33] {
            let got = hybrid_retrieve(&index, &[0.3, 0.7], &terms, top_k).unwrap();
            assert_eq!(got[..], full[..top_k], "top_k {top_k}");
        }
    }

    /// Past the size where the lists are ranked on two threads, recall is what ranking
    /// them one after the other gives.
    #[test]
    fn lists_ranked_on_two_threads_fuse_as_one_after_the_other() {
        let mut index = MemoryIndex::new(3);
        let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"];
        for seq in 0..PARALLEL_LISTS_FROM as i64 + 10 {
            let x = (seq as f32 * 0.37).sin();
            let y = (seq as f32 * 0.11).cos();
            let text = format!("{} {}", words[seq as usize % 7], words[seq as usize % 5]);
            index.insert(memory(seq, &text), &[x, y, 0.5]).unwrap();
        }
        let terms = query_terms("alpha gamma zeta");
        let query = [0.3, -0.7, 0.2];
        for top_k in [1, 10, 60] {
            let pool = candidate_pool(top_k);
            let dense = index.dense_search(&query, pool).unwrap();
            let lexical = index.lexical_search(&terms, pool);
            let bound = lexical_bound(index.term_idfs(&terms));
            let one_after_the_other = fuse(&index, &dense, &lexical, bound, top_k);
            assert_eq!(
                hybrid_retrieve(&index, &query, &terms, top_k).unwrap(),
                one_after_the_other
            );
        }
    }

    /// The fused terms of one query, from its lists as the index gives them: what each
    /// dense rank and each lexical rank adds.
    struct Terms {
        weights: ListWeights,
        dense: Vec<(i64, f64)>,
        lexical: Vec<(i64, f64)>,
    }

    impl Terms {
        fn of(index: &MemoryIndex, query: &[f32], text: &str) -> Self {
            let terms = query_terms(text);
            let dense = index.dense_search(query, MIN_POOL).unwrap();
            let lexical = index.lexical_search(&terms, MIN_POOL);
            let bound = lexical_bound(index.term_idfs(&terms));
            let scores = |h: &[Hit]| h.iter().map(|h| h.score).collect::<Vec<_>>();
            let weights = ListWeights::of_lists(scores(&dense), scores(&lexical), bound);
            Terms {
                weights,
                dense: dense
                    .iter()
                    .enumerate()
                    .map(|(i, h)| (index.memory(h.row).seq, weights.dense_term(i as u32 + 1)))
                    .collect(),
                lexical: lexical
                    .iter()
                    .enumerate()
                    .map(|(i, h)| {
                        let numerator = weights.lexical_numerator(lexical_share(h.score, bound));
                        (
                            index.memory(h.row).seq,
                            lexical_term(numerator, i as u32 + 1),
                        )
                    })
                    .collect(),
            }
        }

        /// The dense-then-lexical sum of a memory, before its neighbours'.
        fn fused(&self, seq: i64) -> f64 {
            let of = |list: &[(i64, f64)]| {
                list.iter()
                    .find(|(s, _)| *s == seq)
                    .map_or(0.0, |(_, t)| *t)
            };
            of(&self.dense) + of(&self.lexical)
        }
    }

    #[test]
    fn a_memory_both_lists_rank_high_beats_one_list_alone_when_neither_is_sure() {
        let mut index = MemoryIndex::new(2);
        // seq 1: dense rank 1, no term; seq 2: lexical rank 1 on one of the query's three
        // words, dense last; seq 3: second in both lists, which fusion puts first.
        index.insert(memory(1, "unrelated"), &[1.0, 0.0]).unwrap();
        index.insert(memory(2, "zebra"), &[0.0, 1.0]).unwrap();
        index
            .insert(
                memory(3, "zebra crossing and many other words"),
                &[0.9, 0.2],
            )
            .unwrap();
        // Dense-only fillers between seq 3 and seq 2 in the dense list.
        for seq in 4..9 {
            index.insert(memory(seq, "filler"), &[0.5, 0.5]).unwrap();
        }
        let query = "zebra crossing lights";
        let got = hybrid_retrieve(&index, &[1.0, 0.0], &query_terms(query), 3).unwrap();
        let seqs: Vec<i64> = got.iter().map(|s| s.memory.seq).collect();
        assert_eq!(seqs[0], 3, "{got:?}");
        assert_eq!((got[0].dense_rank, got[0].lexical_rank), (Some(2), Some(1)));
        // Its better neighbour is seq 2 (dense rank 8, lexical rank 2), not filler seq 4.
        let terms = Terms::of(&index, &[1.0, 0.0], query);
        assert!(terms.fused(2) > terms.fused(4));
        assert_eq!(
            got[0].score,
            terms.fused(3) + NEIGHBOUR_WEIGHT * terms.fused(2)
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
        let got = hybrid_retrieve(&index, &[1.0, 0.0], &query_terms("alpha"), 3).unwrap();
        let seqs: Vec<i64> = got.iter().map(|s| s.memory.seq).collect();
        // By the lists alone seq 6 (dense rank 2) would come before seq 4 (dense rank 3).
        assert_eq!(seqs, [3, 4, 6], "{got:?}");
        let terms = Terms::of(&index, &[1.0, 0.0], "alpha");
        assert!(terms.fused(6) > terms.fused(4));
        assert_eq!(
            got[1].score,
            terms.fused(4) + NEIGHBOUR_WEIGHT * terms.fused(3)
        );
        // Removing seq 3 takes the boost away with it.
        index.remove(&got[0].memory.id);
        let got = hybrid_retrieve(&index, &[1.0, 0.0], &query_terms("alpha"), 2).unwrap();
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
        let got = hybrid_retrieve(&index, &[0.9, 0.1], &query_terms("zebra"), 3).unwrap();
        let seqs: Vec<i64> = got.iter().map(|s| s.memory.seq).collect();
        // Dense's first two nearly tie (cosines 1.0 and 0.994) and BM25's first holds the
        // whole query: the lexical list leads. seq 2 (lexical rank 1, dense rank 3), then
        // seq 3 (dense rank 1, lexical rank 2), then seq 1 (dense rank 2 alone).
        assert_eq!(seqs, [2, 3, 1]);
        assert_eq!((got[0].dense_rank, got[0].lexical_rank), (Some(3), Some(1)));
        assert_eq!((got[1].dense_rank, got[1].lexical_rank), (Some(1), Some(2)));
        assert_eq!((got[2].dense_rank, got[2].lexical_rank), (Some(2), None));
        let terms = Terms::of(&index, &[0.9, 0.1], "zebra");
        assert!(terms.weights.lexical > terms.weights.dense);
        // Each adds a share of its better neighbour's fused score.
        assert_eq!(
            got[1].score,
            terms.fused(3) + NEIGHBOUR_WEIGHT * terms.fused(2)
        );
    }

    #[test]
    fn an_incidental_word_does_not_outvote_a_clear_dense_first() {
        // The case fusion by ranks alone loses: the query shares one common word with a
        // memory that means something else, and none with the one that answers it.
        let mut index = MemoryIndex::new(2);
        index
            .insert(memory(1, "Hannah's manager is Dev Raman"), &[1.0, 0.05])
            .unwrap();
        index
            .insert(
                memory(2, "The boss fight in the game took an hour"),
                &[0.3, 1.0],
            )
            .unwrap();
        for seq in 3..8 {
            index
                .insert(memory(seq, "unrelated filler"), &[0.5, 0.8])
                .unwrap();
        }
        let query = query_terms("who is my boss at work");
        // Every memory, so that the incidental match is in the list wherever it ranks.
        let got = hybrid_retrieve(&index, &[1.0, 0.0], &query, 7).unwrap();
        assert_eq!(got[0].memory.seq, 1, "{got:?}");
        assert_eq!(got[0].lexical_rank, None);
        // Plain RRF (equal weights, no share) would have put seq 2 first: lexical rank 1
        // plus its dense rank beats dense rank 1 alone.
        let plain = |d: Option<u32>, l: Option<u32>| {
            d.map_or(0.0, |r| 1.0 / (RRF_K + f64::from(r)))
                + l.map_or(0.0, |r| 1.0 / (RRF_K + f64::from(r)))
        };
        let second = got.iter().find(|s| s.memory.seq == 2).unwrap();
        assert!(plain(second.dense_rank, second.lexical_rank) > plain(Some(1), None));
    }

    #[test]
    fn a_full_lexical_match_still_wins_over_a_vague_dense_first() {
        // A rare exact token (an id) that one memory holds: BM25 is sure, dense is not.
        let mut index = MemoryIndex::new(2);
        index
            .insert(
                memory(1, "The sandbox key is named ACME-SBX-7731"),
                &[0.6, 0.8],
            )
            .unwrap();
        for seq in 2..8 {
            let x = 0.9 - seq as f32 * 0.01;
            index
                .insert(memory(seq, "notes about keys and sandboxes"), &[x, 0.4])
                .unwrap();
        }
        let got = hybrid_retrieve(&index, &[1.0, 0.0], &query_terms("what is 7731"), 3).unwrap();
        assert_eq!(got[0].memory.seq, 1, "{got:?}");
        assert_eq!(got[0].lexical_rank, Some(1));
        assert_ne!(got[0].dense_rank, Some(1));
    }

    #[test]
    fn equal_scores_rank_by_insertion() {
        let mut index = MemoryIndex::new(2);
        for seq in [5, 2, 9] {
            index
                .insert(memory(seq, "same words"), &[1.0, 1.0])
                .unwrap();
        }
        let got = hybrid_retrieve(&index, &[1.0, 1.0], &query_terms("same"), 3).unwrap();
        let seqs: Vec<i64> = got.iter().map(|s| s.memory.seq).collect();
        assert_eq!(seqs, [2, 5, 9]);
    }
}
