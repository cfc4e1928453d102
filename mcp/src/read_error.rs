//! Why a resource read or a prompt failed, and the JSON-RPC error each becomes.
//!
//! Unlike a tool call, whose failure is a result the model reads and corrects, a resource
//! or a prompt is fetched by the host application, and MCP answers its failures as
//! JSON-RPC errors. A resource that does not exist is `-32002` "Resource not found" with the
//! URI as data (rmcp turns it into `-32602` for peers on 2026-07-28, whose spec moved it to
//! invalid params); an argument or query parameter the caller must fix is `-32602`; a
//! fault on the server's side is `-32603` with the same advice a tool would give.

use cortex_core::error::CortexError;
use rmcp::ErrorData;
use serde_json::json;

use crate::error::{Tool, ToolError};

/// A failed `resources/read` or `prompts/get`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// Nothing the caller may read has this URI. Another user's memory or entity, an id
    /// that never existed and a URI that is none of ours all read alike, so an answer
    /// never tells whether someone else holds a thing.
    #[error("Resource not found")]
    NotFound { uri: String },
    /// A parameter or argument the caller must fix.
    #[error("{0}")]
    Invalid(String),
    #[error("unknown prompt {0:?}; prompts/list names the prompts this server has")]
    UnknownPrompt(String),
    /// A server in key mode got a request without a key's caller: never served as anyone.
    #[error(
        "the server could not tell which user this request is for, so it read nothing; \
         this is a server fault, please report it"
    )]
    NoCaller,
    /// The engine is not set up, or the store or the embedder failed.
    #[error("{0}")]
    Failed(ToolError),
    #[error("cannot encode the resource: {0}")]
    Encode(#[from] serde_json::Error),
}

impl ReadError {
    /// An engine error while reading `uri` as the tool `like` would: what does not exist
    /// is not found, a refused argument the caller's to fix, anything else the server's.
    pub fn engine(like: Tool, uri: &str, error: CortexError) -> Self {
        match error {
            CortexError::NotFound { .. } => ReadError::NotFound {
                uri: uri.to_owned(),
            },
            error => ReadError::argument(like, error),
        }
    }

    /// An engine error of a call that names no resource (the prompt).
    pub fn argument(like: Tool, error: CortexError) -> Self {
        match error {
            CortexError::InvalidInput { .. } => ReadError::Invalid(error.to_string()),
            error => ReadError::Failed(ToolError::engine(like, error)),
        }
    }

    /// Whether the fault is the server's (worth a warning in its log).
    pub fn is_server_side(&self) -> bool {
        matches!(
            self,
            ReadError::NoCaller | ReadError::Failed(_) | ReadError::Encode(_)
        )
    }
}

impl From<ReadError> for ErrorData {
    fn from(error: ReadError) -> Self {
        let message = error.to_string();
        match error {
            ReadError::NotFound { uri } => {
                ErrorData::resource_not_found(message, Some(json!({ "uri": uri })))
            }
            ReadError::Invalid(_) | ReadError::UnknownPrompt(_) => {
                ErrorData::invalid_params(message, None)
            }
            ReadError::NoCaller | ReadError::Failed(_) | ReadError::Encode(_) => {
                ErrorData::internal_error(message, None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::ErrorCode;

    use super::*;

    #[test]
    fn each_failure_has_its_code() {
        let uri = "cortex://memory/3f2a9c1e-0b4d-4e8f-9a7b-1c2d3e4f5a6b";
        let missing = ErrorData::from(ReadError::engine(
            Tool::ListMemories,
            uri,
            CortexError::NotFound { id: "x".into() },
        ));
        assert_eq!(missing.code, ErrorCode::RESOURCE_NOT_FOUND);
        assert_eq!(missing.message, "Resource not found");
        assert_eq!(missing.data, Some(json!({ "uri": uri })));
        let invalid = ErrorData::from(ReadError::engine(
            Tool::RecallTimeline,
            uri,
            CortexError::InvalidInput {
                field: "since",
                reason: "must not be after until".into(),
            },
        ));
        assert_eq!(invalid.code, ErrorCode::INVALID_PARAMS);
        assert!(invalid.message.contains("since"), "{}", invalid.message);
        let failed = ErrorData::from(ReadError::engine(
            Tool::Recall,
            uri,
            CortexError::Store(cortex_core::error::StoreError::backend(
                "sqlite",
                std::io::Error::other("disk I/O error"),
            )),
        ));
        assert_eq!(failed.code, ErrorCode::INTERNAL_ERROR);
        assert!(
            failed.message.contains("disk I/O error"),
            "{}",
            failed.message
        );
    }
}
