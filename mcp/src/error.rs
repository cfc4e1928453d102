//! Tool errors: what an agent sees when a call is refused or fails.
//!
//! Every failure of a tool call becomes a tool result with `isError: true` and one sentence
//! that says what went wrong and what to do, never a JSON-RPC error: MCP hosts hand tool
//! results to the model, which can then correct itself, while protocol errors are usually
//! shown to nobody.

use std::fmt;

use cortex_core::keys::Scope;
use cortex_core::{error::BackendFault, error::CortexError, error::StoreError};
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
    /// Every tool, in the order the server lists them.
    pub const ALL: [Tool; 6] = [
        Tool::Memorize,
        Tool::Recall,
        Tool::RecallAbout,
        Tool::RecallTimeline,
        Tool::ListMemories,
        Tool::Forget,
    ];

    /// The tool a call names, if it is one of ours.
    pub fn named(name: &str) -> Option<Tool> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }

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

    /// What an API key needs to call this tool.
    pub fn scope(self) -> Scope {
        match self {
            Tool::Memorize | Tool::Forget => Scope::Write,
            Tool::Recall | Tool::RecallAbout | Tool::RecallTimeline | Tool::ListMemories => {
                Scope::Read
            }
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
    /// The call's API key does not allow this tool (a read key calling memorize).
    Scope { tool: Tool, scope: Scope },
    /// A server in key mode got a call without a key's caller: never served as anyone.
    NoCaller(Tool),
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
            ToolError::BadDate(_) | ToolError::Scope { .. } => false,
            ToolError::NoCaller(_) => true,
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

/// What is wrong when opening the store failed because of its settings, which no retry
/// can fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SettingFault {
    /// Nothing listens at the URL's address. When the store is being opened (it was never
    /// reached) that is most often a wrong host or port; it may also be a server not
    /// started yet, so the message says both.
    Refused,
    /// The host name does not resolve.
    UnknownHost,
    /// The server refused the user or password (SQLSTATE 28P01, 28000).
    Authentication,
    /// The URL names a database the server does not have (SQLSTATE 3D000).
    NoDatabase,
    /// A setting the store refused when reading it (a malformed URL, a path it cannot
    /// create).
    Invalid,
}

impl SettingFault {
    /// Classifies a failure to open the store from the fault its backend reported, or
    /// the store's own configuration error.
    fn of(e: &StoreError) -> Option<Self> {
        if let StoreError::Config(_) = e {
            return Some(SettingFault::Invalid);
        }
        match e.fault() {
            BackendFault::Refused => Some(SettingFault::Refused),
            BackendFault::UnknownHost => Some(SettingFault::UnknownHost),
            BackendFault::Authentication => Some(SettingFault::Authentication),
            BackendFault::MissingDatabase => Some(SettingFault::NoDatabase),
            BackendFault::InvalidSettings => Some(SettingFault::Invalid),
            _ => None,
        }
    }

    fn advice(self) -> &'static str {
        match self {
            SettingFault::Refused => {
                "Nothing accepts connections at that address: check the host and port in \
                 CORTEX_DATABASE_URL, and that the database server is started"
            }
            SettingFault::UnknownHost => {
                "This is a configuration error, not a passing fault: fix the host name in \
                 CORTEX_DATABASE_URL"
            }
            SettingFault::Authentication => {
                "This is a configuration error, not a passing fault: fix the user or password \
                 in CORTEX_DATABASE_URL (or the server's access rules)"
            }
            SettingFault::NoDatabase => {
                "This is a configuration error, not a passing fault: create that database or \
                 name an existing one in CORTEX_DATABASE_URL"
            }
            SettingFault::Invalid => {
                "This is a configuration error, not a passing fault: fix the server's \
                 environment variables (CORTEX_DATABASE_URL or CORTEX_DB_PATH; see \
                 docs/CONFIGURATION.md)"
            }
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Settings that can never work (a wrong host, port, user, password or database
        // name): calling again changes nothing, so no retry is promised.
        if let ToolError::NotConfigured(EngineError::Store(e)) = self
            && let Some(fault) = SettingFault::of(e)
        {
            return write!(
                f,
                "Cortex cannot open its memory store: {e}. {}; a changed setting takes a \
                 restart of the Cortex server.",
                fault.advice()
            );
        }
        match self {
            // The database being busy, restarting or out of reach is no configuration
            // mistake: sending the operator to the settings would mislead them.
            ToolError::NotConfigured(EngineError::Store(e @ StoreError::Backend { .. })) => {
                write!(
                    f,
                    "Cortex cannot reach its memory store: {e}. This is usually temporary (the \
                     database is busy, restarting or unreachable); the next call tries again."
                )
            }
            // Read from the environment at startup: only a restart reads it again.
            ToolError::NotConfigured(e @ EngineError::Config(_)) => write!(
                f,
                "Cortex is not set up: {e}. Fix the server's environment variables (see \
                 docs/CONFIGURATION.md) and restart the Cortex server."
            ),
            ToolError::NotConfigured(e) => write!(
                f,
                "Cortex is not set up: {e}. Fix the server's environment variables (see \
                 docs/CONFIGURATION.md); the next call tries again."
            ),
            ToolError::BadDate(e) => write!(f, "{e}"),
            ToolError::Scope { tool, scope } => write!(
                f,
                "This API key has scope {scope}, which does not allow {}: nothing was \
                 changed. Ask for a key with scope write (`cortex token create --scope write`).",
                tool.name()
            ),
            ToolError::NoCaller(tool) => write!(
                f,
                "The server could not tell which user this {} call is for, so it did \
                 nothing; this is a server fault, please report it.",
                tool.name()
            ),
            ToolError::Engine { tool, error } => explain(*tool, error, f),
        }
    }
}

fn explain(tool: Tool, error: &CortexError, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match error {
        CortexError::NotFound { id } if tool == Tool::RecallAbout => write!(
            f,
            "no entity named {id:?} is in the memory graph; the graph knows the entities \
             given to memorize as `entities`, `subject` or in `relations` (and those the \
             server's graph layer extracts). Try recall with the name instead."
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
    use cortex_core::error::ProviderError;

    use super::*;

    fn message(tool: Tool, error: CortexError) -> String {
        ToolError::engine(tool, error).to_string()
    }

    #[test]
    fn not_found_reads_differently_for_entities() {
        let e = || CortexError::NotFound { id: "Ada".into() };
        assert!(message(Tool::Forget, e()).contains("list_memories"));
        let about = message(Tool::RecallAbout, e());
        assert!(about.contains("no entity named \"Ada\""), "{about}");
        assert!(about.contains("`entities`"), "{about}");
        assert!(!about.contains("CORTEX_GRAPH"), "{about}");
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
        let busy = ToolError::from(EngineError::Store(cortex_core::error::StoreError::backend(
            "sqlite",
            std::io::Error::other("database is locked"),
        )));
        let msg = busy.to_string();
        assert!(msg.contains("cannot reach its memory store"), "{msg}");
        assert!(msg.contains("database is locked"), "{msg}");
        assert!(!msg.contains("environment variables"), "{msg}");
        let config = ToolError::from(EngineError::Store(cortex_core::error::StoreError::Config(
            "no home directory".into(),
        )));
        let msg = config.to_string();
        assert!(msg.contains("environment variables"), "{msg}");
        assert!(msg.contains("configuration error"), "{msg}");
        assert!(
            !msg.contains("temporary") && !msg.contains("tries again"),
            "a setting read at startup is not retried by calling again: {msg}"
        );
    }

    #[test]
    fn a_bad_setting_asks_for_a_restart_not_another_call() {
        let conflict = ToolError::from(EngineError::Config(crate::config::ConfigError::Conflict(
            "CORTEX_GRAPH needs a generation model, but CORTEX_LLM_PROVIDER is none".into(),
        )));
        let msg = conflict.to_string();
        assert!(
            msg.contains("CORTEX_GRAPH") && msg.contains("restart"),
            "{msg}"
        );
        assert!(!msg.contains("tries again"), "{msg}");
    }
}
