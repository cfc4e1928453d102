//! Tier profiles (`CORTEX_TIER`): the single source of truth for the retrieval and reader
//! knobs that trade cost for quality.

use std::fmt;
use std::str::FromStr;

use crate::error::CortexError;

/// Which trade-off to make.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Small depth and a small reader: cents per thousand questions.
    #[default]
    Cheap,
    /// Deeper retrieval and reranking, a stronger reader with more room to think.
    Flagship,
}

/// The knobs a tier sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub tier: Tier,
    /// Default recall depth.
    pub top_k: usize,
    /// Fused candidates handed to a reranker, when one is configured.
    pub rerank_depth: usize,
    /// The reader model the benchmark harness uses unless one is named explicitly.
    pub reader_model: &'static str,
    /// The reader's output budget; the answer comes first, so a cut never eats it.
    pub reader_max_output_tokens: u32,
}

impl Tier {
    pub fn profile(self) -> Profile {
        match self {
            Tier::Cheap => Profile {
                tier: self,
                top_k: 10,
                rerank_depth: 30,
                reader_model: "gemini-3.5-flash-lite",
                reader_max_output_tokens: 512,
            },
            Tier::Flagship => Profile {
                tier: self,
                top_k: 20,
                rerank_depth: 100,
                reader_model: "gemini-3.5-pro",
                reader_max_output_tokens: 2048,
            },
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Cheap => "cheap",
            Tier::Flagship => "flagship",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Tier {
    type Err = CortexError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_lowercase().as_str() {
            "cheap" => Ok(Tier::Cheap),
            "flagship" => Ok(Tier::Flagship),
            _ => Err(CortexError::invalid(
                "tier",
                format!("unknown tier {s:?}; use cheap or flagship"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_parse_and_flagship_goes_deeper() {
        assert_eq!(" Flagship ".parse::<Tier>().unwrap(), Tier::Flagship);
        assert!("premium".parse::<Tier>().is_err());
        let (cheap, flagship) = (Tier::Cheap.profile(), Tier::Flagship.profile());
        assert!(flagship.top_k > cheap.top_k);
        assert!(flagship.rerank_depth > cheap.rerank_depth);
        assert!(flagship.reader_max_output_tokens > cheap.reader_max_output_tokens);
        assert!(cheap.rerank_depth >= cheap.top_k && flagship.rerank_depth >= flagship.top_k);
        assert_eq!(Tier::default(), Tier::Cheap);
    }
}
