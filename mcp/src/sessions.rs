//! Bounds on HTTP sessions: how many may be open at once, how many of them one user may
//! hold, and how long one may sit idle; and each session kept to the user who opened it.
//!
//! Each MCP session holds a worker task, its channels and a handler; a client that opens
//! sessions and never closes them (a crashed agent, a buggy or hostile one) would
//! otherwise grow the server without limit. Idle sessions end after `idle` (rmcp's
//! keep-alive, which also removes them from the session table), and a new session past
//! `max` is refused with 503 until one ends. Where each request names its user (keys,
//! OAuth), one user past `per_user` gets 429, so a runaway client of one user cannot take
//! every place from the others.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cortex_core::keys::Caller;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::http_screen::InboundMethod;

/// `CORTEX_HTTP_MAX_SESSIONS` when unset.
pub const DEFAULT_MAX_SESSIONS: usize = 500;
/// `CORTEX_HTTP_USER_MAX_SESSIONS` when unset: an agent or two per user, each with a few
/// sub-agents, fit in it.
pub const DEFAULT_USER_MAX_SESSIONS: usize = 16;
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
    /// Open sessions one user may hold (not applied to the one-token mode, whose single
    /// user has every session anyway).
    pub per_user: usize,
    pub idle: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max: DEFAULT_MAX_SESSIONS,
            per_user: DEFAULT_USER_MAX_SESSIONS,
            idle: DEFAULT_IDLE,
        }
    }
}

impl SessionLimits {
    /// Reads `CORTEX_HTTP_MAX_SESSIONS`, `CORTEX_HTTP_USER_MAX_SESSIONS` and
    /// `CORTEX_HTTP_SESSION_IDLE_SECS` through `lookup`; empty values count as unset.
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
            per_user: read("CORTEX_HTTP_USER_MAX_SESSIONS", 1_000_000)?
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(defaults.per_user),
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

/// Admits new sessions while fewer than `max` are open and their user holds fewer than
/// `per_user`, and keeps each session to the user who opened it.
pub struct SessionGate {
    manager: Arc<LocalSessionManager>,
    max: usize,
    per_user: usize,
    /// Who opened each session, for sessions opened by a named caller. Entries of ended
    /// sessions go when the next session opens (the table never outgrows `max` live
    /// entries plus those ended since).
    owners: tokio::sync::Mutex<HashMap<Arc<str>, String>>,
    /// Held across one `initialize`, so two at once cannot both take the last place.
    opening: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for SessionGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionGate")
            .field("max", &self.max)
            .field("per_user", &self.per_user)
            .finish_non_exhaustive()
    }
}

impl SessionGate {
    pub fn new(manager: Arc<LocalSessionManager>, limits: &SessionLimits) -> Self {
        Self {
            manager,
            max: limits.max,
            per_user: limits.per_user,
            owners: tokio::sync::Mutex::new(HashMap::new()),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    /// How many sessions are open now.
    pub async fn open(&self) -> usize {
        self.manager.sessions.read().await.len()
    }

    /// How many live sessions `user` holds, forgetting the owners of ended sessions.
    async fn held_by(&self, user: &str) -> usize {
        let live = self.manager.sessions.read().await;
        let mut owners = self.owners.lock().await;
        owners.retain(|session, _| live.contains_key(session));
        owners.values().filter(|owner| *owner == user).count()
    }

    /// Whether `user` may use `session`: a session opened by another user is refused as
    /// if it did not exist, so a leaked or guessed id reaches nothing.
    async fn admits(&self, session: &str, user: &str) -> bool {
        self.owners
            .lock()
            .await
            .get(session)
            .is_none_or(|owner| owner == user)
    }
}

/// Axum middleware (inside the credentials and the body screen, which name the caller and
/// the method): an `initialize` that would open a session past the cap gets 503, one past
/// its user's share 429, both with `Retry-After`; a request on another user's session 404.
pub async fn limit_sessions(
    State(gate): State<Arc<SessionGate>>,
    request: Request,
    next: Next,
) -> Response {
    let user = request
        .extensions()
        .get::<Caller>()
        .map(|caller| caller.user_id.clone());
    if let Some(session) = request.headers().get(SESSION_HEADER) {
        let session = session.to_str().unwrap_or_default();
        if let Some(user) = &user
            && !gate.admits(session, user).await
        {
            crate::metrics::refused("foreign_session");
            tracing::info!(user, "refused: a session another user opened");
            return (StatusCode::NOT_FOUND, "session not found\n").into_response();
        }
        return next.run(request).await;
    }
    let opens_session = request.method() == Method::POST
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
        crate::metrics::refused("sessions");
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
    let Some(user) = user else {
        return next.run(request).await;
    };
    let held = gate.held_by(&user).await;
    if held >= gate.per_user {
        crate::metrics::refused("user_sessions");
        tracing::info!(
            user,
            held,
            "refused a new session: the user's share is open"
        );
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "60")],
            format!(
                "this user has {held} open sessions, the most one user may hold; close unused \
                 sessions (HTTP DELETE) or raise CORTEX_HTTP_USER_MAX_SESSIONS\n"
            ),
        )
            .into_response();
    }
    let response = next.run(request).await;
    if let Some(session) = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
    {
        gate.owners.lock().await.insert(Arc::from(session), user);
    }
    response
}

/// The header that names a session, in requests and in the answer to `initialize`.
const SESSION_HEADER: &str = "mcp-session-id";

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
                per_user: DEFAULT_USER_MAX_SESSIONS,
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
            assert!(
                limits(&[("CORTEX_HTTP_USER_MAX_SESSIONS", bad)]).is_err(),
                "{bad}"
            );
        }
    }
}
