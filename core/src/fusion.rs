//! Fusion: how the dense and BM25 lists become one ranking.
//!
//! Reciprocal Rank Fusion, with two things ranks alone cannot tell (docs/RETRIEVAL.md has
//! the measurements):
//!
//! - **How much of the query a lexical match carries.** A memory that BM25 ranks first
//!   on one incidental word and one that holds every rare query term get the same rank.
//!   Each lexical candidate's RRF term is scaled by its *share*: its BM25 score over the
//!   query's own bound, the sum of the query terms' idfs (what a memory holding each
//!   query term once, at the average length, scores), capped at 1. A query term no
//!   memory holds still counts in the bound: a query whose words the memories do not use
//!   is a question BM25 cannot answer.
//! - **How sure each list is of its first.** The lists are weighted per query by their
//!   confidence: BM25's is the share of its first memory, dense's is how far its first
//!   cosine stands above its second. The lexical weight is
//!   `LEXICAL_CONFIDENCE x lexical / (LEXICAL_CONFIDENCE x lexical + dense)` (both plus a
//!   small `EPSILON`, so that two silent lists weigh the same), squeezed into
//!   `[MIN_WEIGHT, 1 - MIN_WEIGHT]` so that neither list is ever ignored; dense gets the
//!   rest. Both weights are doubled, so that equal confidence is plain RRF.
//!
//! Every backend computes the weights with these functions and adds the terms in the same
//! order (dense, then lexical, then the neighbour share), so scores are bit-equal.

/// The RRF constant. Cormack et al. (2009) tuned 60 for fusing many deep TREC runs; for
/// two lists a small constant keeps the fused order on the top of each list and makes it
/// insensitive to the pool's depth.
pub const RRF_K: f64 = 3.0;

/// How much a unit of lexical confidence (a share) weighs against a unit of dense
/// confidence (a cosine gap). Below 1: a paraphrase's incidental match often has a share
/// of 0.2-0.5 while dense's first leads its second by only 0.01-0.05, and a lexical first
/// that is right usually holds most of the query (share 0.65 and up on LoCoMo).
pub const LEXICAL_CONFIDENCE: f64 = 0.4;

/// The least weight either list keeps, whatever the other's confidence.
pub const MIN_WEIGHT: f64 = 0.2;

/// Added to both confidences: two lists with no confidence weigh the same.
pub const EPSILON: f64 = 1e-3;

/// The share of its best neighbour's fused score a candidate adds to its own. Memories
/// written one after another belong together (the turns of one conversation): a
/// candidate next to a strong one moves up among the candidates. Only candidates move; a
/// memory neither list ranked is never added.
pub const NEIGHBOUR_WEIGHT: f64 = 0.1;

/// A query's lexical bound: the sum of its terms' idfs (see [`crate::index::bm25_idf`]),
/// added in the terms' (byte) order from zero.
pub fn lexical_bound(idfs: impl IntoIterator<Item = f64>) -> f64 {
    idfs.into_iter().fold(0.0, |sum, idf| sum + idf)
}

/// A BM25 score as a share of the query's bound, at most 1 (0 for an empty bound).
pub fn lexical_share(score: f64, bound: f64) -> f64 {
    if bound > 0.0 {
        (score / bound).min(1.0)
    } else {
        0.0
    }
}

/// The two lists' weights for one query, each doubled (equal confidence: 1 and 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ListWeights {
    pub dense: f64,
    pub lexical: f64,
}

impl ListWeights {
    /// `lexical_confidence`: the share of BM25's first memory (0 with no lexical
    /// candidate); `dense_confidence`: its first cosine minus its second (0 with fewer
    /// than two dense candidates).
    pub fn new(lexical_confidence: f64, dense_confidence: f64) -> Self {
        let lexical = LEXICAL_CONFIDENCE * lexical_confidence + EPSILON;
        let dense = dense_confidence.max(0.0) + EPSILON;
        let balance = lexical / (lexical + dense);
        let lexical = MIN_WEIGHT + (1.0 - 2.0 * MIN_WEIGHT) * balance;
        Self {
            dense: 2.0 * (1.0 - lexical),
            lexical: 2.0 * lexical,
        }
    }

    /// The weights of one query from its lists: the dense cosines and the lexical scores,
    /// each best first (only the first two and the first are read), and the query's
    /// [`lexical_bound`].
    pub fn of_lists(
        dense: impl IntoIterator<Item = f64>,
        lexical: impl IntoIterator<Item = f64>,
        bound: f64,
    ) -> Self {
        let lexical_confidence = lexical
            .into_iter()
            .next()
            .map_or(0.0, |s| lexical_share(s, bound));
        let mut dense = dense.into_iter();
        let dense_confidence = match (dense.next(), dense.next()) {
            (Some(first), Some(second)) => first - second,
            _ => 0.0,
        };
        Self::new(lexical_confidence, dense_confidence)
    }

    /// A dense candidate's term for its 1-based rank.
    pub fn dense_term(&self, rank: u32) -> f64 {
        self.dense / (RRF_K + f64::from(rank))
    }

    /// The numerator of a lexical candidate's term: its share, weighted.
    pub fn lexical_numerator(&self, share: f64) -> f64 {
        self.lexical * share
    }
}

/// A lexical candidate's term from its [`ListWeights::lexical_numerator`] and 1-based
/// rank.
pub fn lexical_term(numerator: f64, rank: u32) -> f64 {
    numerator / (RRF_K + f64::from(rank))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_confidence_is_plain_rrf() {
        let w = ListWeights::new(0.0, 0.0);
        assert_eq!((w.dense, w.lexical), (1.0, 1.0));
        assert_eq!(w.dense_term(1), 1.0 / 4.0);
    }

    #[test]
    fn weights_follow_confidence_within_their_bounds() {
        // A full lexical match against a dense list whose first barely leads.
        let lexical = ListWeights::new(1.0, 0.0);
        assert!(lexical.lexical > lexical.dense);
        assert!((lexical.lexical - 2.0 * (1.0 - MIN_WEIGHT)).abs() < 0.01);
        // One incidental word against a clear dense first.
        let dense = ListWeights::new(0.1, 0.2);
        assert!(dense.dense > dense.lexical);
        assert!(dense.lexical >= 2.0 * MIN_WEIGHT);
        // They always add up to two.
        for w in [lexical, dense, ListWeights::new(0.4, 0.03)] {
            assert!((w.dense + w.lexical - 2.0).abs() < 1e-12);
        }
    }

    #[test]
    fn shares_are_capped_and_an_empty_bound_has_none() {
        assert_eq!(lexical_share(3.0, 2.0), 1.0);
        assert_eq!(lexical_share(1.0, 4.0), 0.25);
        assert_eq!(lexical_share(1.0, 0.0), 0.0);
        assert_eq!(lexical_bound([0.5, 0.25, 1.0]), 1.75);
    }

    #[test]
    fn list_weights_read_the_first_of_each_list() {
        let w = ListWeights::of_lists([0.9, 0.5, 0.1], [2.0, 1.0], 4.0);
        assert_eq!(w, ListWeights::new(0.5, 0.9 - 0.5));
        assert_eq!(
            ListWeights::of_lists([0.9], [], 4.0),
            ListWeights::new(0.0, 0.0)
        );
    }
}
