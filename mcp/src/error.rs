//! Tool errors: what an agent sees when a call is refused or fails.
//!
//! Every failure of a tool call becomes a tool result with `isError: true` and one sentence
//! that says what went wrong and what to do, never a JSON-RPC error: MCP hosts hand tool
//! results to the model, which can then correct itself, while protocol errors are usually
//! shown to nobody.

use std::fmt;

use cortex_core::CortexError;
use rmcp::model::{ContentBlock, IntoContents};

use crate::dates::DateError;
use crate::engine::EngineError;

/// Which tool failed; the same engine error reads differently per tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Memorize,
    Recall,
    RecallAbout,
    RecallTimeline,
    ListMemories,
    Forget,
}

impl Tool {
    pub fn name(self) -> &'static str {
        match self {
            Tool::Memorize => "memorize",
            Tool::Recall => "recall",
            Tool::RecallAbout => "recall_about",
            Tool::RecallTimeline => "recall_timeline",
            Tool::ListMemories => "list_memories",
            Tool::Forget => "forget",
        }
    }
}

/// A failed tool call.
#[derive(Debug)]
#[non_exhaustive]
pub enum ToolError {
    /// The engine could not be built from the server's environment.
    NotConfigured(EngineError),
    /// A `since`/`until` argument did not parse.
    BadDate(DateError),
    /// The engine refused the call or failed while doing it.
    Engine { tool: Tool, error: CortexError },
}

impl ToolError {
    pub fn engine(tool: Tool, error: CortexError) -> Self {
        ToolError::Engine { tool, error }
    }

    /// Whether the fault is on the server's side (store, provider, configuration) rather
    /// than in the caller's arguments: those are worth a warning in the server's log.
    pub fn is_server_side(&self) -> bool {
        match self {
            ToolError::NotConfigured(_) => true,
            ToolError::BadDate(_) => false,
            ToolError::Engine { error, .. } => matches!(
                error,
                CortexError::Provider(_)
                    | CortexError::Store(_)
                    | CortexError::InvalidEmbedding(_)
                    | CortexError::EmbeddingMismatch { .. }
            ),
        }
    }
}

impl std::error::Error for ToolError {}

impl From<DateError> for ToolError {
    fn from(e: DateError) -> Self {
        ToolError::BadDate(e)
    }
}

impl From<EngineError> for ToolError {
    fn from(e: EngineError) -> Self {
        ToolError::NotConfigured(e)
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The database being busy, restarting or out of reach is no configuration
            // mistake: sending the operator to the settings would mislead them.
            ToolError::NotConfigured(EngineError::Store(
                e @ cortex_core::StoreError::Backend { .. },
            )) => write!(
                f,
                "Cortex cannot reach its memory store: {e}. This is usually temporary (the \
                 database is busy, restarting or unreachable); the next call tries again."
            ),
            ToolError::NotConfigured(e) => write!(
                f,
                "Cortex is not set up: {e}. Fix the server's environment variables (see \
                 docs/CONFIGURATION.md); the next call tries again."
            ),
            ToolError::BadDate(e) => write!(f, "{e}"),
            ToolError::Engine { tool, error } => explain(*tool, error, f),
        }
    }
}

fn explain(tool: Tool, error: &CortexError, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match error {
        CortexError::NotFound { id } if tool == Tool::RecallAbout => write!(
            f,
            "no entity named {id:?} is in the memory graph; the graph only knows entities \
             from memories stored while CORTEX_GRAPH was on. Try recall with the name instead."
        ),
        CortexError::NotFound { id } => write!(
            f,
            "no memory matches {id:?}; call list_memories or recall to find the memory's id"
        ),
        CortexError::AmbiguousPrefix { .. } => write!(
            f,
            "{error}. Nothing was deleted; call list_memories to see the full ids"
        ),
        CortexError::InvalidInput { .. } => write!(f, "{error}"),
        CortexError::LayerDisabled { .. } => write!(
            f,
            "{error} in the server's environment and restart the server; until then, use \
             recall"
        ),
        CortexError::EmbeddingMismatch { .. } => write!(f, "{error}"),
        CortexError::InvalidEmbedding(problem) => write!(
            f,
            "the embedding provider returned an unusable vector ({problem}); nothing was \
             changed. Check CORTEX_EMBED_MODEL and CORTEX_EMBED_DIM"
        ),
        CortexError::Provider(e) => write!(
            f,
            "the embedding provider failed: {e}. Nothing was changed; check the provider's \
             key, model and network, then try again"
        ),
        CortexError::Store(e) => write!(
            f,
            "the memory store failed: {e}. Nothing was changed; try again, and if it \
             persists check the database (CORTEX_DB_PATH or CORTEX_DATABASE_URL)"
        ),
        other => write!(f, "{} failed: {other}", tool.name()),
    }
}

impl IntoContents for ToolError {
    fn into_contents(self) -> Vec<ContentBlock> {
        vec![ContentBlock::text(self.to_string())]
    }
}

#[cfg(test)]
mod tests {
    use cortex_core::ProviderError;

    use super::*;

    fn message(tool: Tool, error: CortexError) -> String {
        ToolError::engine(tool, error).to_string()
    }

    #[test]
    fn not_found_reads_differently_for_entities() {
        let e = || CortexError::NotFound { id: "Ada".into() };
        assert!(message(Tool::Forget, e()).contains("list_memories"));
        assert!(message(Tool::RecallAbout, e()).contains("no entity named \"Ada\""));
    }

    #[test]
    fn disabled_layers_name_the_variable() {
        let msg = message(
            Tool::RecallTimeline,
            CortexError::LayerDisabled {
                layer: "episodic",
                variable: "CORTEX_EPISODIC",
            },
        );
        assert!(msg.contains("set CORTEX_EPISODIC=1"), "{msg}");
        assert!(msg.contains("restart"), "{msg}");
    }

    #[test]
    fn provider_failures_are_server_side() {
        let err = ToolError::engine(
            Tool::Recall,
            CortexError::Provider(ProviderError::Transport {
                provider: "gemini",
                message: "timed out".into(),
            }),
        );
        assert!(err.is_server_side());
        assert!(err.to_string().contains("timed out"));
        let bad = ToolError::engine(
            Tool::Forget,
            CortexError::AmbiguousPrefix {
                prefix: "abcd".into(),
                count: 2,
            },
        );
        assert!(!bad.is_server_side());
        assert!(bad.to_string().contains("Nothing was deleted"));
    }

    #[test]
    fn an_unreachable_store_is_not_called_a_configuration_mistake() {
        let busy = ToolError::from(EngineError::Store(cortex_core::StoreError::backend(
            "sqlite",
            std::io::Error::other("database is locked"),
        )));
        let msg = busy.to_string();
        assert!(msg.contains("cannot reach its memory store"), "{msg}");
        assert!(msg.contains("database is locked"), "{msg}");
        assert!(!msg.contains("environment variables"), "{msg}");
        let config = ToolError::from(EngineError::Store(cortex_core::StoreError::Config(
            "no home directory".into(),
        )));
        assert!(config.to_string().contains("environment variables"));
    }
}
