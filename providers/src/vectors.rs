//! Checks on the vectors a provider sends back, before anyone can store them.

use cortex_core::embedding::validate_embedding;
use cortex_core::error::ProviderError;

/// Refuses an answer with the wrong number of vectors, or any vector that is empty, of
/// the wrong dimension, non-finite or all zeros. A bad answer must be an error, never a
/// silent write of garbage into the index.
pub fn check_vectors(
    provider: &'static str,
    vectors: &[Vec<f32>],
    expected_count: usize,
    dimension: usize,
) -> Result<(), ProviderError> {
    if vectors.len() != expected_count {
        return Err(ProviderError::InvalidResponse {
            provider,
            message: format!("expected {expected_count} vectors, got {}", vectors.len()),
        });
    }
    for (i, vector) in vectors.iter().enumerate() {
        validate_embedding(vector, dimension).map_err(|problem| {
            ProviderError::InvalidResponse {
                provider,
                message: format!("vector {i}: {problem}"),
            }
        })?;
    }
    Ok(())
}

/// Scales `vector` to unit length in place. Callers have already refused all-zero and
/// non-finite vectors.
pub(crate) fn l2_normalize(vector: &mut [f32]) {
    let norm = vector
        .iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 && norm.is_finite() {
        for x in vector.iter_mut() {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_bad_answers() {
        let ok = vec![vec![1.0, 0.0], vec![0.0, 2.0]];
        assert!(check_vectors("p", &ok, 2, 2).is_ok());
        let err = check_vectors("p", &ok, 3, 2).unwrap_err().to_string();
        assert!(err.contains("expected 3 vectors, got 2"), "{err}");
        let err = check_vectors("p", &ok, 2, 3).unwrap_err().to_string();
        assert!(
            err.contains("vector 0: expected dimension 3, got 2"),
            "{err}"
        );
        let nan = vec![vec![1.0, f32::NAN]];
        assert!(
            check_vectors("p", &nan, 1, 2)
                .unwrap_err()
                .to_string()
                .contains("not finite")
        );
        let zero = vec![vec![0.0, 0.0]];
        assert!(
            check_vectors("p", &zero, 1, 2)
                .unwrap_err()
                .to_string()
                .contains("all zeros")
        );
    }

    #[test]
    fn normalizes_to_unit_length() {
        let mut v = vec![3.0, 4.0];
        l2_normalize(&mut v);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        let mut zero = vec![0.0, 0.0];
        l2_normalize(&mut zero);
        assert_eq!(zero, vec![0.0, 0.0]);
    }
}
