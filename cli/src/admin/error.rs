//! Why an administration command failed. Every variant says what to fix.

use std::path::PathBuf;

use cortex_app::config::ConfigError;
use cortex_app::engine::EngineError;
use cortex_core::{CortexError, EmbeddingSignature, ProviderError, StoreError};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Engine(#[from] EngineError),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("provider: {0}")]
    Provider(#[from] ProviderError),
    #[error("{0}")]
    Cortex(#[from] CortexError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A line of an import file that cannot be read or is invalid; nothing of its batch
    /// was written.
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    /// A store failure while writing these lines: where the backend writes a batch in one
    /// transaction (SQLite), none of them was written.
    #[error("lines {first}-{last}: {message}")]
    Lines {
        first: usize,
        last: usize,
        message: String,
    },
    /// The file is not an export this build reads.
    #[error("{0}")]
    Format(String),
    /// The store holds vectors of another model than the one configured.
    #[error(
        "the store holds vectors of {stored}, the configured embedder writes {configured}: set \
         CORTEX_EMBED_PROVIDER, CORTEX_EMBED_MODEL and CORTEX_EMBED_DIM back to what wrote \
         the store ({stored}), or run `cortex reembed` to move the store to {configured}"
    )]
    SignatureMismatch {
        stored: EmbeddingSignature,
        configured: EmbeddingSignature,
    },
    /// A migration's copy differs from its source.
    #[error("verification failed: {0}")]
    Verify(String),
    /// A command-line value that cannot work.
    #[error("{0}")]
    Usage(String),
}

impl AdminError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        AdminError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn line(line: usize, message: impl Into<String>) -> Self {
        AdminError::Line {
            line,
            message: message.into(),
        }
    }
}
