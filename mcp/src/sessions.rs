//! Bounds on HTTP sessions: how many may be open at once and how long one may sit idle.
//!
//! Each MCP session holds a worker task, its channels and a handler; a client that opens
//! sessions and never closes them (a crashed agent, a buggy or hostile one) would
//! otherwise grow the server without limit. Idle sessions end after `idle` (rmcp's
//! keep-alive, which also removes them from the session table), and a new session past
//! `max` is refused with 503 until one ends.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::http_screen::InboundMethod;

/// `CORTEX_HTTP_MAX_SESSIONS` when unset.
pub const DEFAULT_MAX_SESSIONS: usize = 500;
/// `CORTEX_HTTP_SESSION_IDLE_SECS` when unset: a conversation's pauses fit in it.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(30 * 60);

/// Why a session setting is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionLimitError {
    #[error("{var} must be a whole number from 1 to {max}, got {value:?}")]
    OutOfRange {
        var: &'static str,
        value: String,
        max: u64,
    },
}

/// The configured bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    pub max: usize,
    pub idle: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max: DEFAULT_MAX_SESSIONS,
            idle: DEFAULT_IDLE,
        }
    }
}

impl SessionLimits {
    /// Reads `CORTEX_HTTP_MAX_SESSIONS` and `CORTEX_HTTP_SESSION_IDLE_SECS` through
    /// `lookup`; empty values count as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, SessionLimitError> {
        let read = |var: &'static str, max: u64| -> Result<Option<u64>, SessionLimitError> {
            let Some(value) = lookup(var).filter(|v| !v.trim().is_empty()) else {
                return Ok(None);
            };
            match value.trim().parse::<u64>() {
                Ok(n) if (1..=max).contains(&n) => Ok(Some(n)),
                _ => Err(SessionLimitError::OutOfRange { var, value, max }),
            }
        };
        let defaults = Self::default();
        Ok(Self {
            max: read("CORTEX_HTTP_MAX_SESSIONS", 1_000_000)?
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(defaults.max),
            idle: read("CORTEX_HTTP_SESSION_IDLE_SECS", 7 * 24 * 3600)?
                .map_or(defaults.idle, Duration::from_secs),
        })
    }

    /// rmcp's in-memory session table, with sessions ending after `idle`.
    pub fn manager(&self) -> Arc<LocalSessionManager> {
        let mut manager = LocalSessionManager::default();
        manager.session_config.keep_alive = Some(self.idle);
        Arc::new(manager)
    }
}

/// Admits new sessions while fewer than `max` are open.
pub struct SessionGate {
    manager: Arc<LocalSessionManager>,
    max: usize,
    /// Held across one `initialize`, so two at once cannot both take the last place.
    opening: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for SessionGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionGate")
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl SessionGate {
    pub fn new(manager: Arc<LocalSessionManager>, max: usize) -> Self {
        Self {
            manager,
            max,
            opening: tokio::sync::Mutex::new(()),
        }
    }

    /// How many sessions are open now.
    pub async fn open(&self) -> usize {
        self.manager.sessions.read().await.len()
    }
}

/// Axum middleware (inside the body screen, which names the method): an `initialize`
/// that would open a session past the cap gets 503 with `Retry-After`.
pub async fn limit_sessions(
    State(gate): State<Arc<SessionGate>>,
    request: Request,
    next: Next,
) -> Response {
    let opens_session = request.method() == Method::POST
        && !request.headers().contains_key("mcp-session-id")
        && request
            .extensions()
            .get::<InboundMethod>()
            .is_some_and(|m| m.0 == "initialize");
    if !opens_session {
        return next.run(request).await;
    }
    let _opening = gate.opening.lock().await;
    let open = gate.open().await;
    if open >= gate.max {
        tracing::warn!(open, max = gate.max, "refused a new session: at the cap");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "60")],
            format!(
                "too many open sessions ({open}); close unused sessions (HTTP DELETE) or raise \
                 CORTEX_HTTP_MAX_SESSIONS\n"
            ),
        )
            .into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(pairs: &[(&str, &str)]) -> Result<SessionLimits, SessionLimitError> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        SessionLimits::from_lookup(|var| {
            pairs.iter().find(|(k, _)| k == var).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn settings_are_read_and_checked() {
        assert_eq!(limits(&[]).unwrap(), SessionLimits::default());
        assert_eq!(
            limits(&[
                ("CORTEX_HTTP_MAX_SESSIONS", "20"),
                ("CORTEX_HTTP_SESSION_IDLE_SECS", " 5 ")
            ])
            .unwrap(),
            SessionLimits {
                max: 20,
                idle: Duration::from_secs(5)
            }
        );
        assert_eq!(
            limits(&[("CORTEX_HTTP_MAX_SESSIONS", "")]).unwrap(),
            SessionLimits::default()
        );
        for bad in ["0", "-1", "many", "1.5"] {
            assert!(
                limits(&[("CORTEX_HTTP_MAX_SESSIONS", bad)]).is_err(),
                "{bad}"
            );
            assert!(
                limits(&[("CORTEX_HTTP_SESSION_IDLE_SECS", bad)]).is_err(),
                "{bad}"
            );
        }
    }
}
