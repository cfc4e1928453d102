//! Retrieval metrics exactly as LongMemEval's official evaluation defines them
//! (`src/retrieval/eval_utils.py` in xiaowu0162/LongMemEval, averaged over the
//! non-abstention questions as in `run_retrieval.py` / `print_retrieval_metrics.py`):
//!
//! - `recall_any@k`: 1 if any gold document is among the top k, else 0;
//! - `recall_all@k`: 1 if every gold document is (so 1 when there is no gold at all);
//! - `ndcg_any@k`: binary relevance, `DCG = rel_1 + Σ_{i=2..k} rel_i / log2(i)` — the first
//!   two ranks are both undiscounted — over the ideal DCG of the whole corpus's relevances
//!   sorted, both cut at k; 0 when the ideal is 0.
//!
//! Session-level metrics over a ranking of smaller units (turns, or chunks of a session)
//! follow `evaluate_retrieval_turn2session`: each unit maps to its session, k grows until
//! the top k units hold k distinct sessions (or the corpus is exhausted), and the plain
//! metrics are taken at that effective k. Recall is thus over the first k distinct sessions
//! (first occurrence); nDCG counts every relevant unit in the effective window.

use std::collections::{BTreeSet, HashSet};

use serde::Serialize;

/// The cut-offs reported.
pub const KS: [usize; 4] = [1, 3, 5, 10];

/// The three metrics of one ranking at one k.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Scores {
    pub recall_any: f64,
    pub recall_all: f64,
    pub ndcg_any: f64,
}

/// Discounted cumulative gain of the first `k` relevances.
pub fn dcg(relevances: &[f64], k: usize) -> f64 {
    let top = &relevances[..k.min(relevances.len())];
    match top.split_first() {
        None => 0.0,
        Some((first, rest)) => {
            first
                + rest
                    .iter()
                    .enumerate()
                    // rest[i] is at 1-based rank i + 2, discounted by log2(i + 2).
                    .map(|(i, r)| r / ((i + 2) as f64).log2())
                    .sum::<f64>()
        }
    }
}

/// nDCG@k of `ranking` (indices into the corpus) given each corpus entry's relevance.
pub fn ndcg(ranking: &[usize], relevant: &[bool], k: usize) -> f64 {
    let as_gain = |r: bool| if r { 1.0 } else { 0.0 };
    let actual: Vec<f64> = ranking
        .iter()
        .take(k)
        .map(|&i| as_gain(relevant.get(i).copied().unwrap_or(false)))
        .collect();
    let mut ideal: Vec<f64> = relevant.iter().map(|&r| as_gain(r)).collect();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let ideal_dcg = dcg(&ideal, k);
    if ideal_dcg == 0.0 {
        return 0.0;
    }
    dcg(&actual, k) / ideal_dcg
}

/// `evaluate_retrieval`: the metrics at `k` of `ranking` over a corpus whose entries have
/// the document ids `keys`, with `gold` the correct document ids.
pub fn evaluate(ranking: &[usize], keys: &[&str], gold: &BTreeSet<String>, k: usize) -> Scores {
    let recalled: HashSet<&str> = ranking
        .iter()
        .take(k)
        .filter_map(|&i| keys.get(i).copied())
        .collect();
    let relevant: Vec<bool> = keys.iter().map(|key| gold.contains(*key)).collect();
    let hit = |g: &String| recalled.contains(g.as_str());
    Scores {
        recall_any: indicator(gold.iter().any(hit)),
        recall_all: indicator(gold.iter().all(hit)),
        ndcg_any: ndcg(ranking, &relevant, k),
    }
}

/// `evaluate_retrieval_turn2session`: session-level metrics at `k` for a ranking of units
/// whose session keys are `keys`.
pub fn evaluate_sessions(
    ranking: &[usize],
    keys: &[&str],
    gold: &BTreeSet<String>,
    k: usize,
) -> Scores {
    evaluate(ranking, keys, gold, effective_k(ranking, keys, k))
}

/// The smallest k' >= k whose top k' units hold k distinct sessions; like the official
/// loop, it runs one past the corpus size when they never do.
pub fn effective_k(ranking: &[usize], keys: &[&str], k: usize) -> usize {
    if k == 0 {
        return 0;
    }
    let mut seen: HashSet<&str> = HashSet::new();
    for (position, &i) in ranking.iter().enumerate() {
        if let Some(key) = keys.get(i) {
            seen.insert(key);
        }
        if seen.len() >= k {
            return (position + 1).max(k);
        }
    }
    // The ranking never holds k distinct sessions: the official loop stops once
    // effective_k passes the corpus size (or never starts when k already does).
    k.max(keys.len() + 1)
}

/// The first `limit` distinct session keys of a ranking, in order.
pub fn distinct_sessions<'a>(ranking: &[usize], keys: &[&'a str], limit: usize) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    ranking
        .iter()
        .filter_map(|&i| keys.get(i).copied())
        .filter(|key| seen.insert(*key))
        .take(limit)
        .collect()
}

fn indicator(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

/// The metric name the official logs use, e.g. `recall_any@5`.
pub fn metric_names(k: usize) -> [String; 3] {
    [
        format!("recall_any@{k}"),
        format!("recall_all@{k}"),
        format!("ndcg_any@{k}"),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn gold(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| (*s).to_owned()).collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn dcg_leaves_the_first_two_ranks_undiscounted() {
        assert!(close(
            dcg(&[1.0, 1.0, 1.0], 3),
            1.0 + 1.0 + 1.0 / 3f64.log2()
        ));
        assert!(close(
            dcg(&[0.0, 0.0, 1.0, 1.0], 4),
            1.0 / 3f64.log2() + 0.5
        ));
        assert!(close(dcg(&[1.0, 1.0], 1), 1.0));
        assert_eq!(dcg(&[], 5), 0.0);
    }

    #[test]
    fn gold_at_rank_three_of_five_sessions() {
        let keys = ["a", "b", "gold", "c", "d"];
        let ranking = [0, 1, 2, 3, 4];
        let g = gold(&["gold"]);
        let at = |k| evaluate(&ranking, &keys, &g, k);
        assert_eq!((at(1).recall_any, at(1).recall_all), (0.0, 0.0));
        assert_eq!((at(3).recall_any, at(3).recall_all), (1.0, 1.0));
        assert_eq!(at(1).ndcg_any, 0.0);
        // DCG = 1/log2(3); the ideal puts the one relevant document first: 1.
        assert!(close(at(3).ndcg_any, 1.0 / 3f64.log2()));
        assert!(close(at(3).ndcg_any, 0.630_929_753_571_457_4));
        assert!(close(at(10).ndcg_any, at(3).ndcg_any));
    }

    #[test]
    fn two_gold_sessions_any_versus_all() {
        // Gold at ranks 2 and 4.
        let keys = ["x", "g1", "y", "g2", "z"];
        let ranking = [0, 1, 2, 3, 4];
        let g = gold(&["g1", "g2"]);
        let at = |k| evaluate(&ranking, &keys, &g, k);
        assert_eq!((at(3).recall_any, at(3).recall_all), (1.0, 0.0));
        assert_eq!((at(5).recall_any, at(5).recall_all), (1.0, 1.0));
        // k=3: DCG = 1/log2(2) = 1; ideal [1,1,0] = 2.
        assert!(close(at(3).ndcg_any, 0.5));
        // k=5: DCG = 1 + 1/log2(4) = 1.5; ideal = 2.
        assert!(close(at(5).ndcg_any, 0.75));
    }

    #[test]
    fn no_gold_scores_like_the_official_script() {
        let s = evaluate(&[0, 1], &["a", "b"], &gold(&[]), 1);
        assert_eq!((s.recall_any, s.recall_all, s.ndcg_any), (0.0, 1.0, 0.0));
    }

    #[test]
    fn turns_become_sessions_by_first_occurrence() {
        // Turn ranking: a, a, b, gold, a, c -> sessions a, b, gold, c.
        let keys = ["a", "a", "b", "gold", "a", "c", "gold"];
        let ranking = [0, 1, 2, 3, 4, 5, 6];
        let g = gold(&["gold"]);
        assert_eq!(effective_k(&ranking, &keys, 1), 1);
        assert_eq!(effective_k(&ranking, &keys, 2), 3);
        assert_eq!(effective_k(&ranking, &keys, 3), 4);
        let at = |k| evaluate_sessions(&ranking, &keys, &g, k);
        assert_eq!(at(2).recall_any, 0.0);
        assert_eq!(at(3).recall_any, 1.0);
        // Effective k = 4 for k = 3: gold turn at rank 4 -> 1/log2(4) = 0.5; the ideal has
        // both gold turns first: 2.
        assert!(close(at(3).ndcg_any, 0.25));
        assert_eq!(
            distinct_sessions(&ranking, &keys, 10),
            ["a", "b", "gold", "c"]
        );
    }

    #[test]
    fn too_few_sessions_runs_past_the_corpus_like_the_official_loop() {
        let keys = ["a", "a", "gold"];
        let g = gold(&["gold"]);
        // Only two distinct sessions exist: k=10 looks at everything.
        assert_eq!(effective_k(&[0, 1, 2], &keys, 10), 10);
        assert_eq!(effective_k(&[0, 1], &keys, 3), 4);
        let s = evaluate_sessions(&[0, 2, 1], &keys, &g, 10);
        assert_eq!((s.recall_any, s.recall_all), (1.0, 1.0));
        assert!(close(s.ndcg_any, 1.0));
        // A truncated ranking that never reaches the gold session.
        let s = evaluate_sessions(&[0, 1], &keys, &g, 5);
        assert_eq!((s.recall_any, s.ndcg_any), (0.0, 0.0));
    }

    #[test]
    fn metric_names_match_the_official_logs() {
        assert_eq!(
            metric_names(5),
            ["recall_any@5", "recall_all@5", "ndcg_any@5"]
        );
    }
}
