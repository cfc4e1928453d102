//! Checks every vector must pass before it is written or searched with.

use crate::error::EmbeddingProblem;

/// Refuses empty, wrong-dimension, non-finite and all-zero vectors.
pub fn validate_embedding(vector: &[f32], dimension: usize) -> Result<(), EmbeddingProblem> {
    if vector.is_empty() {
        return Err(EmbeddingProblem::Empty);
    }
    if vector.len() != dimension {
        return Err(EmbeddingProblem::WrongDimension {
            expected: dimension,
            got: vector.len(),
        });
    }
    if let Some(index) = vector.iter().position(|x| !x.is_finite()) {
        return Err(EmbeddingProblem::NonFinite { index });
    }
    if vector.iter().all(|x| *x == 0.0) {
        return Err(EmbeddingProblem::Zero);
    }
    Ok(())
}

/// The vector scaled to unit length, so cosine similarity becomes a dot product.
/// The caller has validated it (finite, not all zero).
pub fn normalized(vector: &[f32]) -> Vec<f32> {
    normalized_iter(vector).collect()
}

/// [`normalized`] without the allocation.
pub fn normalized_iter(vector: &[f32]) -> impl Iterator<Item = f32> + '_ {
    let norm = vector
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    vector.iter().map(move |x| (f64::from(*x) / norm) as f32)
}

/// Cosine similarity of two vectors of equal length (0 when either is all zeros).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bad_vector_is_named() {
        assert_eq!(validate_embedding(&[], 3), Err(EmbeddingProblem::Empty));
        assert_eq!(
            validate_embedding(&[1.0, 2.0], 3),
            Err(EmbeddingProblem::WrongDimension {
                expected: 3,
                got: 2
            })
        );
        assert_eq!(
            validate_embedding(&[1.0, f32::NAN, 0.0], 3),
            Err(EmbeddingProblem::NonFinite { index: 1 })
        );
        assert_eq!(
            validate_embedding(&[0.0, f32::INFINITY, 0.0], 3),
            Err(EmbeddingProblem::NonFinite { index: 1 })
        );
        assert_eq!(
            validate_embedding(&[0.0, 0.0, 0.0], 3),
            Err(EmbeddingProblem::Zero)
        );
        assert_eq!(validate_embedding(&[0.0, -1.0, 0.0], 3), Ok(()));
    }

    #[test]
    fn normalized_has_unit_length_and_keeps_direction() {
        let v = normalized(&[3.0, 4.0]);
        assert!((v[0] - 0.6).abs() < 1e-7 && (v[1] - 0.8).abs() < 1e-7);
        assert!((cosine(&[3.0, 4.0], &[6.0, 8.0]) - 1.0).abs() < 1e-12);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
    }
}
