//! Why a benchmark run failed.

use std::path::PathBuf;

use cortex_core::{error::CortexError, error::ProviderError, error::StoreError};

/// A benchmark run's failure. Every variant names what to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("dataset {question}: {reason}")]
    Dataset { question: String, reason: String },

    #[error("invalid option {option}: {reason}")]
    Option {
        option: &'static str,
        reason: String,
    },

    /// `--qa` without a generation model to read and judge with.
    #[error(
        "--qa needs a generation model: set CORTEX_LLM_PROVIDER (gemini, openai, ollama or \
         anthropic) and its key, e.g. CORTEX_LLM_PROVIDER=gemini with GEMINI_API_KEY; see \
         docs/PROVIDERS.md"
    )]
    NoLlm,

    /// The backend was asked for but is not in this build.
    #[error("{0}")]
    Unavailable(String),

    #[error("provider: {0}")]
    Provider(#[from] ProviderError),

    #[error("store: {0}")]
    Store(#[from] StoreError),

    #[error("question {question}: {source}")]
    Engine {
        question: String,
        source: CortexError,
    },

    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),

    /// The `reranked` retriever without a reranker.
    #[error(
        "--retriever reranked needs a reranker: set CORTEX_RERANK_PROVIDER=local (after \
         `bash scripts/fetch-reranker-model.sh`) or a hosted one; see docs/PROVIDERS.md"
    )]
    NoReranker,

    /// The reranker failed on a question, so recall fell back to the fused order; a
    /// benchmark of the reranker must not report that order as its own.
    #[error("question {0}: the reranker failed and recall fell back to the fused order")]
    RerankFailed(String),
}

impl BenchError {
    pub(crate) fn option(option: &'static str, reason: impl Into<String>) -> Self {
        BenchError::Option {
            option,
            reason: reason.into(),
        }
    }

    pub(crate) fn engine(question: &str, source: impl Into<CortexError>) -> Self {
        BenchError::Engine {
            question: question.to_owned(),
            source: source.into(),
        }
    }
}
