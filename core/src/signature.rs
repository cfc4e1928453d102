//! The embedding signature: which model, at which dimension, wrote a store's vectors.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Model name and vector dimension. Vectors from different signatures are not comparable,
/// so a store records the first one it sees and refuses any other.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EmbeddingSignature {
    pub model: String,
    pub dimension: usize,
}

impl EmbeddingSignature {
    pub fn new(model: impl Into<String>, dimension: usize) -> Self {
        Self {
            model: model.into(),
            dimension,
        }
    }

    /// The form kept in a store's meta table: `model` and `dimension` as text.
    pub fn encode(&self) -> String {
        format!("{}@{}", self.model, self.dimension)
    }

    /// Inverse of [`encode`](Self::encode); `None` for text that is not a signature.
    pub fn decode(text: &str) -> Option<Self> {
        let (model, dim) = text.rsplit_once('@')?;
        let dimension = dim.parse().ok().filter(|d| *d > 0)?;
        Some(Self::new(model, dimension))
    }
}

impl fmt::Display for EmbeddingSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (dim {})", self.model, self.dimension)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_round_trips_models_with_at_signs() {
        let sig = EmbeddingSignature::new("org@x/model", 768);
        assert_eq!(EmbeddingSignature::decode(&sig.encode()), Some(sig));
        assert_eq!(EmbeddingSignature::decode("no-dimension"), None);
        assert_eq!(EmbeddingSignature::decode("m@x"), None);
        assert_eq!(EmbeddingSignature::decode("m@0"), None);
    }
}
