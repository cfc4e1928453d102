//! Exact dense search over a contiguous matrix of unit vectors.

/// Row-major matrix of pre-normalised vectors, so cosine similarity is one dot product and
/// a scan is a single streaming pass over contiguous memory.
#[derive(Debug, Clone)]
pub(crate) struct DenseMatrix {
    dimension: usize,
    data: Vec<f32>,
}

impl DenseMatrix {
    pub(crate) fn new(dimension: usize) -> Self {
        Self {
            dimension,
            data: Vec::new(),
        }
    }

    pub(crate) fn dimension(&self) -> usize {
        self.dimension
    }

    pub(crate) fn push(&mut self, unit: &[f32]) {
        self.data.extend_from_slice(unit);
    }

    /// Moves the last row into `row` and drops the last row (mirrors `Vec::swap_remove`).
    pub(crate) fn swap_remove(&mut self, row: usize) {
        let d = self.dimension;
        let last = self.data.len() / d - 1;
        if row != last {
            self.data.copy_within(last * d..(last + 1) * d, row * d);
        }
        self.data.truncate(last * d);
    }

    pub(crate) fn bytes(&self) -> usize {
        self.data.capacity() * std::mem::size_of::<f32>()
    }

    /// Dot product of `query` with every row, in row order.
    pub(crate) fn scores(&self, query: &[f32]) -> Vec<f32> {
        self.data
            .chunks_exact(self.dimension)
            .map(|row| dot(row, query))
            .collect()
    }
}

/// Dot product with eight independent accumulators so the compiler can keep them in SIMD
/// lanes; a single running sum would serialise every addition.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let mut acc = [0.0f32; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
    for (x, y) in a_chunks.zip(b_chunks) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    let mut sum = acc.iter().sum::<f32>();
    for (x, y) in a_rest.iter().zip(b_rest) {
        sum += x * y;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_naive_sum_for_odd_lengths() {
        let a: Vec<f32> = (0..19).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..19).map(|i| 1.0 - i as f32 * 0.1).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-4);
    }

    #[test]
    fn swap_remove_moves_the_last_row() {
        let mut m = DenseMatrix::new(2);
        m.push(&[1.0, 0.0]);
        m.push(&[0.0, 1.0]);
        m.push(&[0.6, 0.8]);
        m.swap_remove(0);
        assert_eq!(m.scores(&[1.0, 0.0]), vec![0.6, 0.0]);
        m.swap_remove(1);
        assert_eq!(m.scores(&[0.0, 1.0]), vec![0.8]);
    }
}
