//! The error types a caller can match on.

use crate::signature::EmbeddingSignature;

/// A boxed error from a lower layer (a driver, an HTTP client), kept as a source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What a storage backend's methods return.
pub type StoreResult<T> = Result<T, StoreError>;

/// Everything the engine can refuse or fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CortexError {
    /// No memory with this id (or prefix) exists for this user.
    #[error("no memory matches {id:?}")]
    NotFound { id: String },

    /// A short id prefix matched more than one memory; nothing was deleted.
    #[error("prefix {prefix:?} matches {count} memories; give more characters of the id")]
    AmbiguousPrefix { prefix: String, count: usize },

    /// The caller's input was refused before anything was written.
    #[error("invalid {field}: {reason}")]
    InvalidInput { field: &'static str, reason: String },

    /// An embedding vector failed validation before any write.
    #[error("invalid embedding: {0}")]
    InvalidEmbedding(#[from] EmbeddingProblem),

    /// The store was written with another embedding model or dimension.
    #[error(
        "embedding signature mismatch: the store holds vectors of {stored}, the configured \
         embedder gives {got}; set CORTEX_EMBED_PROVIDER, CORTEX_EMBED_MODEL and \
         CORTEX_EMBED_DIM back to what wrote the store ({stored}), or run `cortex reembed` \
         to move the store to {got}"
    )]
    EmbeddingMismatch {
        stored: EmbeddingSignature,
        got: EmbeddingSignature,
    },

    /// The model provider failed.
    #[error("provider: {0}")]
    Provider(#[from] ProviderError),

    /// The storage backend failed.
    #[error("store: {0}")]
    Store(StoreError),
}

impl From<StoreError> for CortexError {
    fn from(err: StoreError) -> Self {
        match err {
            // The store enforces the signature inside its write transaction; surface it as
            // the same error the engine's own guard gives.
            StoreError::SignatureMismatch { stored, got } => {
                CortexError::EmbeddingMismatch { stored, got }
            }
            other => CortexError::Store(other),
        }
    }
}

impl CortexError {
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        CortexError::InvalidInput {
            field,
            reason: reason.into(),
        }
    }
}

/// Why an embedding vector was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EmbeddingProblem {
    #[error("the vector is empty")]
    Empty,
    #[error("expected dimension {expected}, got {got}")]
    WrongDimension { expected: usize, got: usize },
    #[error("component {index} is not finite")]
    NonFinite { index: usize },
    #[error("the vector is all zeros")]
    Zero,
    #[error("expected {expected} vectors, got {got}")]
    WrongCount { expected: usize, got: usize },
}

/// A failure inside a storage backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The driver or database failed. `fault` says what kind of failure it was, so a
    /// caller can word it (and decide whether to retry) without knowing the backend.
    #[error("{backend}: {source}")]
    Backend {
        backend: &'static str,
        fault: BackendFault,
        #[source]
        source: BoxError,
    },
    /// The store holds data this version cannot read.
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// The schema could not be created or migrated.
    #[error("schema: {0}")]
    Schema(String),
    /// The store is misconfigured (a bad path, URL or option).
    #[error("configuration: {0}")]
    Config(String),
    /// The store's recorded embedding signature differs from the one written.
    #[error("embedding signature mismatch: stored {stored}, got {got}")]
    SignatureMismatch {
        stored: EmbeddingSignature,
        got: EmbeddingSignature,
    },
    /// A record refers to a memory or entity that does not exist for this user.
    #[error("{0} does not exist for this user")]
    MissingReference(String),
    /// An id being imported already belongs to another user's record.
    #[error("{0} already belongs to another user")]
    ForeignId(String),
    /// The backend does not implement this optional operation.
    #[error("{0} is not supported by this store")]
    Unsupported(&'static str),
    /// Records that contradict themselves (an extraction naming an entity it lacks, say).
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// A write that supersedes a memory found it already superseded (two corrections of
    /// one memory raced); nothing was written.
    #[error("memory {0} was already superseded")]
    AlreadySuperseded(uuid::Uuid),
}

/// What kind of failure a [`StoreError::Backend`] is. The first four are the settings'
/// fault: trying again with the same settings cannot succeed (except that a refused
/// connection may also be a server not started yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendFault {
    /// Nothing accepts connections at the configured address.
    Refused,
    /// The configured host name does not resolve.
    UnknownHost,
    /// The server refused the configured credentials or role.
    Authentication,
    /// The configured database does not exist.
    MissingDatabase,
    /// The connection settings are malformed or contradict each other.
    InvalidSettings,
    /// Anything else: busy, restarting, unreachable for a while, or a failed statement.
    Other,
}

impl StoreError {
    /// Wraps a driver error of no particular [`BackendFault`].
    pub fn backend(backend: &'static str, source: impl Into<BoxError>) -> Self {
        Self::backend_fault(backend, BackendFault::Other, source)
    }

    /// Wraps a driver error the backend has classified.
    pub fn backend_fault(
        backend: &'static str,
        fault: BackendFault,
        source: impl Into<BoxError>,
    ) -> Self {
        StoreError::Backend {
            backend,
            fault,
            source: source.into(),
        }
    }

    /// The backend's classification of this failure; [`BackendFault::Other`] for every
    /// error that is not a backend's.
    pub fn fault(&self) -> BackendFault {
        match self {
            StoreError::Backend { fault, .. } => *fault,
            _ => BackendFault::Other,
        }
    }
}

/// A failure inside a model provider.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// A required credential is not set; names the variable to set.
    #[error("{variable} is not set; export it to use {provider}")]
    MissingKey {
        provider: &'static str,
        variable: &'static str,
    },
    /// The provider answered with an error status.
    #[error("{provider} returned HTTP {status}: {message}")]
    Http {
        provider: &'static str,
        status: u16,
        message: String,
    },
    /// The request did not reach the provider or no answer came back.
    #[error("{provider}: {message}")]
    Transport {
        provider: &'static str,
        message: String,
    },
    /// The provider's answer did not have the documented shape.
    #[error("{provider} sent an invalid response: {message}")]
    InvalidResponse {
        provider: &'static str,
        message: String,
    },
    /// The provider cannot do this (Anthropic has no embeddings, say).
    #[error("{provider} does not support {operation}")]
    Unsupported {
        provider: &'static str,
        operation: &'static str,
    },
    /// The provider is misconfigured.
    #[error("{0}")]
    Config(String),
}

pub type Result<T, E = CortexError> = std::result::Result<T, E>;
