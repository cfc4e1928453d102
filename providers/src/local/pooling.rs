//! Turning a transformer's per-token outputs into one sentence vector.

use std::path::Path;

use cortex_core::error::ProviderError;
use serde_json::Value;

use super::files::{config_error, read_json_object_if_present};

/// How token vectors become a sentence vector, from sentence-transformers'
/// `1_Pooling/config.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pooling {
    /// The average of the real (unpadded) tokens: all-MiniLM and most sentence models.
    Mean,
    /// The first token's vector: BGE and other CLS-trained models.
    Cls,
}

impl Pooling {
    /// Reads `dir/1_Pooling/config.json`; a model without one is taken as mean-pooled,
    /// sentence-transformers' own default. Modes this code does not implement are
    /// refused rather than silently replaced by another.
    pub(crate) fn from_model_dir(dir: &Path) -> Result<Self, ProviderError> {
        let path = dir.join("1_Pooling").join("config.json");
        let Some(config) = read_json_object_if_present(&path)? else {
            return Ok(Self::Mean);
        };
        let on = |key: &str| config.get(key).and_then(Value::as_bool).unwrap_or(false);
        let unsupported: Vec<&str> = [
            "pooling_mode_max_tokens",
            "pooling_mode_mean_sqrt_len_tokens",
            "pooling_mode_weightedmean_tokens",
            "pooling_mode_lasttoken",
        ]
        .into_iter()
        .filter(|key| on(key))
        .collect();
        match (on("pooling_mode_mean_tokens"), on("pooling_mode_cls_token")) {
            _ if !unsupported.is_empty() => Err(config_error(format!(
                "{} asks for {}; only mean and CLS pooling are supported",
                path.display(),
                unsupported.join(", ")
            ))),
            (true, false) => Ok(Self::Mean),
            (false, true) => Ok(Self::Cls),
            (true, true) => Err(config_error(format!(
                "{} asks for mean and CLS pooling concatenated; only one is supported",
                path.display()
            ))),
            (false, false) => Err(config_error(format!(
                "{} enables no pooling mode",
                path.display()
            ))),
        }
    }

    /// One sentence vector from `tokens` (one row per position, padding included) and
    /// the attention `mask` (1 for a real token, 0 for padding).
    pub(crate) fn pool(self, tokens: &[Vec<f32>], mask: &[u32]) -> Vec<f32> {
        match self {
            Self::Cls => tokens.first().cloned().unwrap_or_default(),
            Self::Mean => masked_mean(tokens, mask),
        }
    }
}

/// The mean of the rows whose mask is set. Sums in f64 so long inputs lose nothing to
/// rounding; an all-zero mask yields zeros, which the caller's validation refuses.
pub(crate) fn masked_mean(tokens: &[Vec<f32>], mask: &[u32]) -> Vec<f32> {
    let width = tokens.first().map_or(0, Vec::len);
    let mut sum = vec![0.0f64; width];
    let mut count = 0usize;
    for (row, _) in tokens.iter().zip(mask).filter(|(_, m)| **m != 0) {
        for (s, x) in sum.iter_mut().zip(row) {
            *s += f64::from(*x);
        }
        count += 1;
    }
    let count = count.max(1) as f64;
    sum.into_iter().map(|s| (s / count) as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_ignores_padding() {
        let tokens = vec![vec![1.0, 2.0], vec![3.0, 4.0], vec![100.0, -100.0]];
        assert_eq!(masked_mean(&tokens, &[1, 1, 0]), vec![2.0, 3.0]);
        assert_eq!(Pooling::Mean.pool(&tokens, &[1, 1, 0]), vec![2.0, 3.0]);
        assert_eq!(Pooling::Cls.pool(&tokens, &[1, 1, 0]), vec![1.0, 2.0]);
        assert_eq!(masked_mean(&tokens, &[0, 0, 0]), vec![0.0, 0.0]);
    }

    #[test]
    fn reads_sentence_transformers_pooling_config() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Pooling::from_model_dir(dir.path()).unwrap(), Pooling::Mean);
        std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
        let write = |json: &str| {
            std::fs::write(dir.path().join("1_Pooling/config.json"), json).unwrap();
        };
        write(r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#);
        assert_eq!(Pooling::from_model_dir(dir.path()).unwrap(), Pooling::Cls);
        write(r#"{"pooling_mode_mean_tokens": true}"#);
        assert_eq!(Pooling::from_model_dir(dir.path()).unwrap(), Pooling::Mean);
        write(r#"{"pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": true}"#);
        let err = Pooling::from_model_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("pooling_mode_max_tokens"), "{err}");
    }
}
