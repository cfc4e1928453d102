//! The BM25 arithmetic in SQL, written once: every statement that scores a posting, bounds
//! a term's scores or solves a score for a length builds its expression here, so that each
//! follows `cortex_core::index::{bm25_idf, bm25_term_score}` operation by operation, in
//! float8 (bit-equal results need the same operations in the same order, not just the same
//! formula).

use cortex_core::index::{BM25_B, BM25_K1};

/// The values of the statistics row's `k1p1`, `k1`, `omb` and `b`: k1 + 1, k1, 1 - b, b,
/// computed in Rust exactly as the core computes them.
pub(super) const BM25_PARAMS: [f64; 4] = [BM25_K1 + 1.0, BM25_K1, 1.0 - BM25_B, BM25_B];

/// bm25_idf: ln(1 + (N - df + 0.5) / (df + 0.5)), of a term row `t` (its `df`) over the
/// statistics row `s` (its `n`).
pub(super) const IDF: &str =
    "ln(1::float8 + (s.n - t.df::float8 + 0.5::float8) / (t.df::float8 + 0.5::float8))";

/// bm25_term_score without its idf factor: tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl /
/// avgdl)), for the SQL expressions `tf` and `len` over the statistics row aliased
/// `stats` (its `k1p1`, `k1`, `omb`, `b` and `avgdl`).
pub(super) fn saturation(tf: &str, len: &str, stats: &str) -> String {
    format!(
        "{tf}::float8 * {stats}.k1p1 / ({tf}::float8 + {stats}.k1 * ({stats}.omb + {stats}.b \
         * {len}::float8 / {stats}.avgdl))"
    )
}

/// bm25_term_score of the posting aliased `posting` (its `tf` and `doc_len`) for a term
/// whose idf is the expression `idf`, over the statistics row aliased `stats`.
pub(super) fn term_score(idf: &str, posting: &str, stats: &str) -> String {
    format!(
        "{idf} * ({})",
        saturation(
            &format!("{posting}.tf"),
            &format!("{posting}.doc_len"),
            stats
        )
    )
}

/// How far below a floor the length bound reaches: far beyond the few ulps the score and
/// its inversion round by.
pub(super) const FLOOR_SLACK: f64 = 1e-9;

/// The longest memory whose posting with the tf `g.tf` of the term row `e` (its `idf`)
/// scores `floor` or more, over the statistics row `stats`:
/// idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)) >= floor solved for dl, the
/// floor lowered by far more than rounding, clamped to int4.
pub(super) fn length_bound(floor: &str) -> String {
    format!(
        "LEAST(GREATEST(COALESCE(floor(((e.idf * g.tf::float8 \
         * stats.k1p1 / ({floor} * {keep}::float8) - g.tf::float8) / stats.k1 \
         - stats.omb) * stats.avgdl / stats.b) + 1::float8, {max}::float8), \
         0::float8), {max}::float8)::int4",
        keep = 1.0 - FLOOR_SLACK,
        max = i32::MAX,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn term_score_is_idf_times_saturation() {
        assert_eq!(
            term_score("e.idf", "p", "s"),
            "e.idf * (p.tf::float8 * s.k1p1 / (p.tf::float8 + s.k1 * (s.omb + s.b \
             * p.doc_len::float8 / s.avgdl)))"
        );
    }
}
