//! The current over the stale: among the first fused candidates, a memory that a
//! later-written candidate on the same topic follows goes just below that candidate.
//!
//! Agents rarely correct a memory through `replaces`: they write the new fact beside the
//! old one ("tests now run with nextest" a month after "run the tests with make test").
//! Both match the question alike, so fusion puts whichever reads closer first, and that is
//! the stale one about as often as not. Two memories are on one topic when their own
//! embeddings are close ([`SAME_TOPIC`], cosine of unit vectors); of two such candidates
//! the later-written (higher `seq`) is the current one. A question that asks for the old
//! value ("what did we use before nextest?") names it with a past cue
//! ([`asks_for_the_past`]), and then nothing moves.
//!
//! Only the first [`HEAD`] candidates are compared and only they move, so a smaller recall
//! is still a prefix of a larger one, and where no two of them are on one topic the
//! ranking is exactly fusion's. The measurements are in docs/RETRIEVAL.md.

use crate::hybrid::ScoredMemory;
use crate::memory::{Memory, MemoryKind};

/// How many of the fused first candidates are compared (and may move).
pub const HEAD: usize = 10;

/// The cosine between two memories' unit vectors from which they are taken to be on one
/// topic (the engine's default; `EngineConfig::same_topic`).
pub const SAME_TOPIC: f32 = 0.75;

/// Words that ask for an earlier value; a query holding one is answered in fusion's order.
pub const PAST_CUES: [&str; 12] = [
    "before",
    "previously",
    "previous",
    "originally",
    "original",
    "old",
    "older",
    "earlier",
    "initially",
    "formerly",
    "prior",
    "used",
];

/// Whether `query` asks for an earlier value ("before", "originally", "used to", ...).
pub fn asks_for_the_past(query: &str) -> bool {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .any(|w| {
            let w = w.to_lowercase();
            PAST_CUES.contains(&w.as_str())
        })
}

/// Reorders the first [`HEAD`] of `candidates` (fused order, best first): each memory
/// that later-written candidates of the head are close to (`units[i]` is candidate `i`'s
/// unit vector; the head's at least) takes a score just below the lowest of them, when
/// it was above it. Returns whether anything moved. The rest keeps its place.
pub fn prefer_current(
    candidates: &mut [ScoredMemory],
    units: &[Vec<f32>],
    same_topic: f32,
) -> bool {
    let n = candidates.len().min(HEAD).min(units.len());
    let head = &mut candidates[..n];
    // Newest first, so a memory's successor already has its final score (chains of
    // three updates put each below the next).
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_unstable_by(|&a, &b| head[b].memory.seq.cmp(&head[a].memory.seq));
    let mut moved = false;
    for (at, &i) in order.iter().enumerate() {
        // The lowest-placed of its later-written relatives: it goes below all of them.
        let successor = order[..at]
            .iter()
            .copied()
            .filter(|&j| head[j].memory.seq > head[i].memory.seq)
            .filter(|&j| succeeds(&head[i].memory, &head[j].memory))
            .filter(|&j| cosine(&units[i], &units[j]) >= same_topic)
            .min_by(|&a, &b| head[a].score.total_cmp(&head[b].score));
        if let Some(j) = successor
            && head[i].score >= head[j].score
        {
            head[i].score = next_below(head[j].score);
            moved = true;
        }
    }
    if moved {
        head.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.memory.seq.cmp(&b.memory.seq))
        });
    }
    moved
}

/// Whether `newer` can make `older` stale by kind: both state a value that holds until
/// replaced (a fact, a preference, a decision, an instruction) and are the same kind. An
/// event stays true when a later one happens, and a note says nothing of how long it holds.
pub fn succeeds(older: &Memory, newer: &Memory) -> bool {
    older.kind == newer.kind
        && matches!(
            older.kind,
            MemoryKind::Fact
                | MemoryKind::Preference
                | MemoryKind::Decision
                | MemoryKind::Instruction
        )
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The largest f64 below `x` (for finite positive scores; others are returned as is).
fn next_below(x: f64) -> f64 {
    if x.is_finite() && x > 0.0 {
        f64::from_bits(x.to_bits() - 1)
    } else {
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryId;

    fn scored(seq: i64, score: f64) -> ScoredMemory {
        ScoredMemory {
            memory: Memory {
                id: MemoryId::new_v4(),
                user_id: "u".into(),
                content: format!("memory {seq}"),
                kind: MemoryKind::Fact,
                tags: Vec::new(),
                created_at: chrono::Utc::now(),
                seq,
                expires_at: None,
            },
            score,
            dense_rank: None,
            lexical_rank: None,
            rerank_score: None,
        }
    }

    fn seqs(c: &[ScoredMemory]) -> Vec<i64> {
        c.iter().map(|s| s.memory.seq).collect()
    }

    #[test]
    fn the_later_of_two_close_memories_goes_first() {
        // 1 and 3 are one topic; 2 is another.
        let units = vec![vec![1.0, 0.0], vec![0.0, 1.0], vec![0.96, 0.28]];
        let mut c = vec![scored(1, 0.9), scored(2, 0.8), scored(3, 0.7)];
        assert!(prefer_current(&mut c, &units, SAME_TOPIC));
        assert_eq!(seqs(&c), [2, 3, 1]);
        assert!(c[2].score < c[1].score);
    }

    #[test]
    fn nothing_moves_without_a_close_pair_or_when_the_current_leads() {
        let units = vec![vec![1.0, 0.0], vec![0.0, 1.0]];
        let mut c = vec![scored(1, 0.9), scored(2, 0.8)];
        let before = c.clone();
        assert!(!prefer_current(&mut c, &units, SAME_TOPIC));
        assert_eq!(c, before);
        let units = vec![vec![1.0, 0.0], vec![1.0, 0.0]];
        let mut c = vec![scored(2, 0.9), scored(1, 0.8)];
        assert!(!prefer_current(&mut c, &units, SAME_TOPIC));
        assert_eq!(seqs(&c), [2, 1]);
    }

    #[test]
    fn a_chain_ends_with_the_newest_first() {
        let same = vec![1.0, 0.0];
        let units = vec![same.clone(), same.clone(), same];
        let mut c = vec![scored(1, 0.9), scored(2, 0.8), scored(3, 0.7)];
        prefer_current(&mut c, &units, SAME_TOPIC);
        assert_eq!(seqs(&c), [3, 2, 1]);
    }

    #[test]
    fn past_cues_are_whole_words() {
        assert!(asks_for_the_past("What did we use before nextest?"));
        assert!(asks_for_the_past("What was the ORIGINAL release date?"));
        assert!(!asks_for_the_past(
            "What command runs the tests these days?"
        ));
        assert!(!asks_for_the_past(
            "Which port does the beforehand proxy use?"
        ));
    }
}
