//! Exact dense search over a contiguous matrix of unit vectors.

use super::compact::{CompactCodes, CompactQuery, Scan};
use super::parallel::{PARALLEL_LISTS_FROM, both};

/// Row-major matrix of pre-normalised vectors, so cosine similarity is one dot product,
/// with an 8-bit copy that narrows a search to the rows worth scoring exactly. A matrix
/// that is not `resident` keeps only the 8-bit copy: its full rows are read back from a
/// [`VectorSource`](super::VectorSource) for the rows the copy cannot rule out.
#[derive(Debug, Clone)]
pub(crate) struct DenseMatrix {
    dimension: usize,
    resident: bool,
    /// The unit rows; empty when not `resident`.
    data: Vec<f32>,
    codes: CompactCodes,
}

impl DenseMatrix {
    #[cfg(test)]
    pub(crate) fn new(dimension: usize) -> Self {
        Self::with_rows(dimension, true)
    }

    /// A matrix that keeps its f32 rows (`resident`) or only their codes.
    pub(crate) fn with_rows(dimension: usize, resident: bool) -> Self {
        Self {
            dimension,
            resident,
            data: Vec::new(),
            codes: CompactCodes::new(dimension),
        }
    }

    pub(crate) fn dimension(&self) -> usize {
        self.dimension
    }

    /// A matrix of codes only (not `resident`), as a snapshot wrote them.
    pub(super) fn from_codes(codes: CompactCodes) -> Self {
        Self {
            dimension: codes.dimension(),
            resident: false,
            data: Vec::new(),
            codes,
        }
    }

    pub(super) fn codes(&self) -> &CompactCodes {
        &self.codes
    }

    /// Appends `vector` scaled to unit length (validated: finite, not all zero).
    pub(crate) fn push_normalized(&mut self, vector: &[f32]) {
        if self.resident {
            let start = self.data.len();
            self.data.extend(crate::embedding::normalized_iter(vector));
            self.codes.push(&self.data[start..]);
        } else {
            self.codes.push(&crate::embedding::normalized(vector));
        }
    }

    /// Moves the last row into `row` and drops the last row (mirrors `Vec::swap_remove`).
    pub(crate) fn swap_remove(&mut self, row: usize) {
        let d = self.dimension;
        if d == 0 {
            return;
        }
        if self.resident {
            let last = self.data.len() / d - 1;
            if row != last {
                self.data.copy_within(last * d..(last + 1) * d, row * d);
            }
            self.data.truncate(last * d);
        }
        self.codes.swap_remove(row);
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        self.data.shrink_to_fit();
        self.codes.shrink_to_fit();
    }

    pub(crate) fn bytes(&self) -> usize {
        self.data.capacity() * std::mem::size_of::<f32>() + self.codes.bytes()
    }

    /// The rows among `rows` (every row when `None`), ascending, that could be among the
    /// `pool` with the highest dot product with `query` (unit length): scoring just these
    /// with [`scores_of_rows`](Self::scores_of_rows) finds the same top `pool`, scores
    /// and ties included, as scoring every row.
    pub(crate) fn candidates(
        &self,
        query: &[f32],
        pool: usize,
        rows: Option<&[usize]>,
    ) -> Vec<usize> {
        if self.dimension == 0 {
            return Vec::new();
        }
        self.codes.candidates(&CompactQuery::new(query), pool, rows)
    }

    /// [`candidates`](Self::candidates), with `beside()` run at the same time: from
    /// [`PARALLEL_LISTS_FROM`] rows two threads share the scan, one of them running
    /// `beside` first. The candidates are the same rows either way or a few more (each
    /// thread's threshold rises on the rows it saw), so the exact top is the same.
    pub(crate) fn candidates_beside<B>(
        &self,
        query: &[f32],
        pool: usize,
        rows: Option<&[usize]>,
        beside: impl FnOnce() -> B,
    ) -> (Vec<usize>, B) {
        if self.dimension == 0 {
            return (Vec::new(), beside());
        }
        let query = CompactQuery::new(query);
        let scan = Scan::new(&self.codes, &query, pool, rows);
        if self.codes.len() < PARALLEL_LISTS_FROM {
            let kept = scan.work();
            return (scan.finish([kept]), beside());
        }
        let (theirs, (mine, b)) = both(
            || scan.work(),
            || {
                let b = beside();
                (scan.work(), b)
            },
        );
        (scan.finish([theirs, mine]), b)
    }

    /// Dot product of `query` with every row, in row order: the exhaustive scan the
    /// candidates are tested against.
    #[cfg(test)]
    pub(crate) fn scores(&self, query: &[f32]) -> Vec<f32> {
        if self.dimension == 0 {
            return Vec::new();
        }
        // Widen the query once instead of once per row.
        let query = widened(query);
        self.data
            .chunks_exact(self.dimension)
            .map(|row| dot(row, &query))
            .collect()
    }
}

impl DenseMatrix {
    /// A resident matrix's unit row; `None` when only the codes are kept.
    pub(crate) fn unit_row(&self, row: usize) -> Option<&[f32]> {
        let d = self.dimension;
        (self.resident && d > 0).then(|| &self.data[row * d..(row + 1) * d])
    }

    /// Dot product of `query` with each of `rows` (ascending row numbers), as `scores`
    /// computes it for those rows. Only for a resident matrix.
    pub(crate) fn scores_of_rows<'a>(
        &'a self,
        query: &[f32],
        rows: &'a [usize],
    ) -> impl Iterator<Item = (usize, f32)> + 'a {
        let query = widened(query);
        let d = self.dimension;
        rows.iter()
            .map(move |&row| (row, dot(&self.data[row * d..(row + 1) * d], &query)))
    }
}

/// Dot product accumulated in f64 over eight independent lanes (so the compiler keeps
/// them in SIMD registers), rounded to f32 at the end. Each f32 x f32 product is exact in
/// f64, so the result is the correctly rounded dot product up to f64 summation error,
/// which the final rounding to f32 absorbs: vectors that tie mathematically get bit-equal
/// scores whatever the order of their components, and then rank by insertion as the
/// contract says.
pub(crate) fn dot(a: &[f32], b: &[f64]) -> f32 {
    const LANES: usize = 8;
    let mut acc = [0.0f64; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
    for (x, y) in a_chunks.zip(b_chunks) {
        for i in 0..LANES {
            acc[i] += f64::from(x[i]) * y[i];
        }
    }
    let mut sum = acc.iter().sum::<f64>();
    for (x, y) in a_rest.iter().zip(b_rest) {
        sum += f64::from(*x) * y;
    }
    sum as f32
}

/// `query` widened once for [`dot`].
pub(crate) fn widened(query: &[f32]) -> Vec<f64> {
    query.iter().map(|x| f64::from(*x)).collect()
}

/// A stored embedding's exact dense score against a unit query (the query scaled by
/// `normalized`), as the index scores it: the embedding normalised as it was when
/// inserted, then [`dot`]. A backend that ranks by its own distance computes the scores
/// the fusion reads with this, so they are bit-equal to the index's.
pub fn unit_score(embedding: &[f32], unit_query: &[f32]) -> f32 {
    let mut row = Vec::with_capacity(embedding.len());
    unit_score_with(embedding, &widened(unit_query), &mut row)
}

/// [`unit_score`] with the query already [`widened`], normalising into `row` (a buffer
/// reused across calls).
pub(crate) fn unit_score_with(embedding: &[f32], query: &[f64], row: &mut Vec<f32>) -> f32 {
    row.clear();
    row.extend(crate::embedding::normalized_iter(embedding));
    dot(row, query)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_naive_sum_for_odd_lengths() {
        let a: Vec<f32> = (0..19).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..19).map(|i| 1.0 - i as f32 * 0.1).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        let wide: Vec<f64> = b.iter().map(|x| f64::from(*x)).collect();
        assert!((dot(&a, &wide) - naive).abs() < 1e-4);
    }

    #[test]
    fn permuted_vectors_tie_exactly() {
        let q = [0.3f32, 0.7, 0.1, 0.9, 0.2, 0.4, 0.6, 0.8, 0.5, 0.05];
        let a = [0.0f32, 0.7, 0.0, 0.9, 0.0, 0.0, 0.6, 0.0, 0.0, 0.0];
        // The same three products, met in another order.
        let mut b = [0.0f32; 10];
        let mut q2 = q;
        (b[9], q2[9]) = (0.7, 0.7);
        (b[0], q2[0]) = (0.9, 0.9);
        (b[4], q2[4]) = (0.6, 0.6);
        let wide = |v: &[f32]| v.iter().map(|x| f64::from(*x)).collect::<Vec<f64>>();
        let (qa, qb) = (dot(&a, &wide(&q)), dot(&b, &wide(&q2)));
        assert_eq!(qa.to_bits(), qb.to_bits());
    }

    #[test]
    fn swap_remove_moves_the_last_row() {
        let mut m = DenseMatrix::new(2);
        m.push_normalized(&[2.0, 0.0]);
        m.push_normalized(&[0.0, 1.0]);
        m.push_normalized(&[0.6, 0.8]);
        m.swap_remove(0);
        assert_eq!(m.scores(&[1.0, 0.0]), vec![0.6, 0.0]);
        m.swap_remove(1);
        assert_eq!(m.scores(&[0.0, 1.0]), vec![0.8]);
    }
}
