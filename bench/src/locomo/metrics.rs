//! LoCoMo retrieval metrics, scored by the questions' evidence turns.
//!
//! - turn level: `turn_any@k` is 1 when an evidence turn is among the top k memories,
//!   `turn_all@k` when every evidence turn is;
//! - session level: the same over the sessions of the evidence turns, a session counting
//!   as found when any of its turns is among the top k (`session_any@5`: a turn of an
//!   evidence session among the top 5).
//!
//! Unlike LongMemEval's turn-to-session metrics, k counts memories, never distinct
//! sessions: these say what the top k of one recall hold.

use std::collections::BTreeSet;

use crate::report::MetricMap;

/// The metrics reported, in order: (name, level, all?, k).
pub const METRICS: [(&str, Level, bool, usize); 8] = [
    ("turn_any@1", Level::Turn, false, 1),
    ("turn_any@5", Level::Turn, false, 5),
    ("turn_any@10", Level::Turn, false, 10),
    ("turn_all@5", Level::Turn, true, 5),
    ("session_any@1", Level::Session, false, 1),
    ("session_any@5", Level::Session, false, 5),
    ("session_any@10", Level::Session, false, 10),
    ("session_all@5", Level::Session, true, 5),
];

/// What a metric counts as found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Turn,
    Session,
}

/// One ranking's metrics. `ranking` holds positions in the conversation's memories,
/// `session_of` maps a position to its session, `gold` holds the evidence positions
/// (not empty).
pub fn score(ranking: &[usize], session_of: &[usize], gold: &BTreeSet<usize>) -> MetricMap {
    let gold_sessions: BTreeSet<usize> = gold
        .iter()
        .filter_map(|&g| session_of.get(g).copied())
        .collect();
    let values = METRICS
        .iter()
        .map(|&(name, level, all, k)| {
            let top = &ranking[..k.min(ranking.len())];
            let found: BTreeSet<usize> = match level {
                Level::Turn => top.iter().copied().filter(|i| gold.contains(i)).collect(),
                Level::Session => top
                    .iter()
                    .filter_map(|&i| session_of.get(i).copied())
                    .filter(|s| gold_sessions.contains(s))
                    .collect(),
            };
            let wanted = match level {
                Level::Turn => gold.len(),
                Level::Session => gold_sessions.len(),
            };
            let hit = if all {
                found.len() == wanted
            } else {
                !found.is_empty()
            };
            (name.to_owned(), if hit { 1.0 } else { 0.0 })
        })
        .collect();
    MetricMap(values)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn turn_and_session_levels_count_the_top_k_memories() {
        // Eight memories in three sessions: 0-2 in session 0, 3-5 in 1, 6-7 in 2.
        let session_of = [0, 0, 0, 1, 1, 1, 2, 2];
        let gold: BTreeSet<usize> = [4, 7].into();
        // Evidence 4 at rank 2, a turn of session 2 (6, not evidence) at rank 3, evidence 7
        // at rank 6.
        let m = score(&[0, 4, 6, 1, 2, 7], &session_of, &gold);
        assert_eq!(m.get("turn_any@1"), Some(0.0));
        assert_eq!(m.get("turn_any@5"), Some(1.0));
        assert_eq!(m.get("turn_all@5"), Some(0.0), "7 is at rank 6");
        assert_eq!(m.get("turn_any@10"), Some(1.0));
        assert_eq!(m.get("session_any@1"), Some(0.0));
        assert_eq!(m.get("session_any@5"), Some(1.0));
        assert_eq!(
            m.get("session_all@5"),
            Some(1.0),
            "turn 6 stands for session 2"
        );
        let names: Vec<&str> = m.0.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, METRICS.map(|m| m.0));
    }

    #[test]
    fn short_rankings_score_what_they_hold() {
        let session_of = [0, 1];
        let gold: BTreeSet<usize> = [1].into();
        let m = score(&[1], &session_of, &gold);
        assert_eq!(m.get("turn_any@1"), Some(1.0));
        assert_eq!(m.get("turn_all@5"), Some(1.0));
        let m = score(&[], &session_of, &gold);
        assert!(m.0.iter().all(|(_, v)| *v == 0.0));
    }
}
