//! The search pushdown: the whole hybrid query in SQL, as statements in one snapshot (see
//! [`transaction`]): the BM25 side ([`lexical`], run with a generic plan) and the dense
//! side ([`dense_side`], planned per search), one behind the other on one connection or
//! side by side on two, then their fusion ([`fusion`] reading both sides' ranks, generic).
//!
//! It returns what `hybrid_retrieve` over `build_index` returns on the same data: the same
//! ids in the same order, the same ranks and bit-equal fused scores. The arithmetic follows
//! the core's expression by expression, in float8 with every literal and parameter cast:
//!
//! - dense: candidates and their order by pgvector's `<=>` (see [`dense_plan`]), with
//!   every run of near-equal distances re-ordered by the core's own cosine
//!   (`cortex_unit_dot`, once per distinct embedding, see [`tie_break`]), 1-based,
//!   ties by insertion sequence (in HNSW mode, which is approximate anyway, by `<=>`
//!   alone);
//! - lexical: `bm25_term_score(bm25_idf(N, df), tf, dl, total_len / N)` per matched
//!   (memory, term), with df from the `terms` table the postings' triggers keep, summed in
//!   the query terms' order (byte order, see [`scores`]), only memories with a query
//!   term, ranked by score then sequence (a one-term query reads only the postings that
//!   can reach the pool, in impact order, see [`impact`]; when the rarest of several
//!   terms carries the pool, only its postings that can reach it are read, the same way,
//!   and the others looked up for those, in stages, see [`rarest_first`]; otherwise
//!   several terms prune the commonest lists where they cannot change the pool, see
//!   [`maxscore`]; a query of more than [`lexical::MAX_PRUNED_TERMS`] terms scores every
//!   posting);
//! - fusion (`cortex_core::fusion`): the lists' weights (`ListWeights::new`, computed by
//!   the core and bound as values) from BM25's first share (from the BM25 statement's
//!   scores, live count and dfs) and the gap between the core's own scores
//!   (`cortex_core::index::unit_score`) of the embeddings of the dense side's first two,
//!   which the dense statement returns; then `dense_weight / (RRF_K + dense_rank)` `+ (lexical_weight * share) / (RRF_K +
//!   lexical_rank)`, plus `NEIGHBOUR_WEIGHT` times the larger of the two neighbouring live
//!   memories' fused scores (by sequence; 0 when not fused), ordered by score then
//!   sequence, the best `top_k`.
//!
//! A filter (`SearchRequest::filter`, see `crate::filter`) restricts the candidates of
//! both sides and nothing else, as `hybrid_retrieve_filtered` does: the dense side reads
//! only the memories that pass (exact: ranked among them, the tie-break as ever; HNSW: the
//! index's iterative scan, or the exact plan when few pass, see [`dense_plan`]); the BM25
//! side scores every posting of the query terms whose memory passes (path `Full`: the
//! pruned paths' floors assume every memory is a candidate), with the statistics, dfs
//! and bound of every live memory, planned for the filter's values; the weights come from
//! the filtered lists and the neighbours are every live memory's. The empty filter builds
//! the statements it built before filters existed, text for text. Every recall's filter
//! has `alive_at` (only memories not expired then); the store probes first whether any of
//! the user's live memories has expired by then, and when none has it leaves the condition
//! out, which changes no result, so that a recall with no other condition stays
//! unfiltered (`PostgresStore::search_request`).
//!
//! Every module, one line each: docs/ARCHITECTURE.md, "Module map".

mod aliases;
pub(crate) mod ann_index;
mod bm25;
mod cte;
pub(crate) mod dense_plan;
mod dense_side;
mod explain;
mod fusion;
mod impact;
pub(crate) mod ivfflat;
mod lexical;
pub(crate) mod lexical_path;
mod lexical_query;
mod maxscore;
mod rarest_first;
mod scores;
mod statistics;
#[cfg(test)]
mod tests;
mod tie_break;
mod transaction;
mod walk;

use cortex_core::error::StoreError;
use tokio_postgres::Row;

pub(crate) use dense_side::{DenseRanks, decode_dense, dense};
pub(crate) use fusion::{decode, fused};
pub(crate) use lexical::{LexicalSide, Pruning, decode_lexical, lexical};
pub(crate) use transaction::{Search, Store};

use crate::sql::get_named;
use aliases::Col;

/// One side's result, which the fused statement reads: the best `pool` memories' sequence
/// numbers and their 1-based ranks, best first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Ranked {
    pub seqs: Vec<i64>,
    pub ranks: Vec<i64>,
}

impl Ranked {
    /// A [`lexical`] or [`dense`] statement's `seqs` and `ranks`.
    fn decode(row: &Row) -> Result<Self, StoreError> {
        Ok(Self {
            seqs: get_named(row, Col::Seqs)?,
            ranks: get_named(row, Col::Ranks)?,
        })
    }
}

/// A LIMIT or OFFSET count: at least 1.
fn sql_count(n: usize) -> u64 {
    Ord::max(crate::sql::limit(n), 1)
}
