//! The streamable HTTP transport: MCP at `/mcp`, behind a bearer token, for hosted use.
//!
//! A token is always required, on loopback too: any local process or user could otherwise
//! read and delete every memory, and a browser page could try through DNS rebinding. The
//! `Host` allow-list (rmcp's DNS-rebinding guard) is the second fence; it has to admit the
//! names clients really use, which differ when the server sits in a container.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::routing::get;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::auth::{BearerToken, TokenError, require_bearer};
use crate::engine::LazyEngine;
use crate::http_screen::screen_body;
use crate::origin::{AllowedOrigins, OriginError, allowed_origins, require_origin};
use crate::sessions::{SessionGate, SessionLimitError, SessionLimits, limit_sessions};
use crate::tools::CortexServer;

/// The path MCP is served at.
pub const MCP_PATH: &str = "/mcp";

/// Names the DNS-rebinding guard always admits: how a client on the same machine (or
/// through a published container port) addresses the server.
pub(crate) const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Why HTTP serving could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    #[error(transparent)]
    Token(#[from] TokenError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Origins(#[from] OriginError),
    #[error(transparent)]
    Sessions(#[from] SessionLimitError),
    #[error("the HTTP server failed: {0}")]
    Serve(#[source] std::io::Error),
}

/// What the HTTP front admits: `Host` names, browser origins and sessions.
#[derive(Debug, Clone)]
pub struct HttpPolicy {
    pub hosts: AllowedHosts,
    pub origins: AllowedOrigins,
    pub sessions: SessionLimits,
}

impl HttpPolicy {
    /// Reads the policy's settings through `lookup` (the process environment in the
    /// binary) for a listener asked for `requested` and bound at `bound`.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
        requested: &str,
        bound: SocketAddr,
    ) -> Result<Self, HttpError> {
        let hosts = allowed_hosts(
            lookup("CORTEX_HTTP_ALLOWED_HOSTS").as_deref(),
            host_part(requested),
            bound,
        );
        let origins = allowed_origins(lookup("CORTEX_HTTP_ALLOWED_ORIGINS").as_deref(), &hosts)?;
        let sessions = SessionLimits::from_lookup(&lookup)?;
        Ok(Self {
            hosts,
            origins,
            sessions,
        })
    }
}

/// Which `Host` headers are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHosts {
    Any,
    Only(Vec<String>),
}

/// The `Host` policy for a listener. `CORTEX_HTTP_ALLOWED_HOSTS` (comma-separated names,
/// each optionally with `:port`, or `*`) wins, with the loopback names always added.
/// Otherwise: a wildcard bind (0.0.0.0, ::) is reached under names the server cannot know
/// (a container's service name, a load balancer's), so any host is served and the token
/// alone guards; a specific address is served under its own name and the loopback names.
pub fn allowed_hosts(
    configured: Option<&str>,
    requested_host: &str,
    bound: SocketAddr,
) -> AllowedHosts {
    let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect();
    let mut add = |host: &str| {
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        if !host.is_empty() && !hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            hosts.push(host.to_ascii_lowercase());
        }
    };
    if let Some(list) = configured.map(str::trim).filter(|l| !l.is_empty()) {
        if list == "*" {
            return AllowedHosts::Any;
        }
        list.split(',').for_each(&mut add);
        return AllowedHosts::Only(hosts);
    }
    if bound.ip().is_unspecified() {
        return AllowedHosts::Any;
    }
    if !bound.ip().is_loopback() {
        add(requested_host);
        add(&bound.ip().to_string());
    }
    AllowedHosts::Only(hosts)
}

/// The host part of a `host:port` bind address (`[::1]:80` gives `::1`).
pub fn host_part(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// The app: `/mcp` behind the origin guard, the token, the body screen and the session
/// cap (outermost first), with rmcp's host guard inside; and an unauthenticated
/// `/healthz` for container health checks (it answers "ok" and touches nothing).
pub fn router(
    engine: Arc<LazyEngine>,
    token: BearerToken,
    policy: &HttpPolicy,
    shutdown: &CancellationToken,
) -> Router {
    // Cancelling this token on shutdown closes open SSE streams; without it a graceful
    // shutdown waits for every client to hang up.
    let config =
        StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token());
    let config = match &policy.hosts {
        AllowedHosts::Any => config.disable_allowed_hosts(),
        AllowedHosts::Only(list) => config.with_allowed_hosts(list.clone()),
    };
    let server = CortexServer::new(engine);
    let sessions = policy.sessions.manager();
    let gate = Arc::new(SessionGate::new(Arc::clone(&sessions), policy.sessions.max));
    let mcp = StreamableHttpService::new(move || Ok(server.clone()), sessions, config);
    let guarded = Router::new()
        .nest_service(MCP_PATH, mcp)
        .layer(from_fn_with_state(gate, limit_sessions))
        .layer(from_fn(screen_body))
        .layer(from_fn_with_state(token, require_bearer))
        .layer(from_fn_with_state(
            Arc::new(policy.origins.clone()),
            require_origin,
        ));
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .merge(guarded)
}

/// Binds `addr` (`host:port`; a name is resolved, port 0 picks a free port).
pub async fn bind(addr: &str) -> Result<TcpListener, HttpError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| HttpError::Bind {
            addr: addr.to_owned(),
            source,
        })
}

/// Serves `app` on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: CancellationToken,
) -> Result<(), HttpError> {
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(HttpError::Serve)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn only(extra: &[&str]) -> AllowedHosts {
        let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect();
        hosts.extend(extra.iter().map(|h| (*h).to_owned()));
        AllowedHosts::Only(hosts)
    }

    #[test]
    fn loopback_binds_serve_loopback_names() {
        let bound = addr("127.0.0.1:8765");
        assert_eq!(allowed_hosts(None, "127.0.0.1", bound), only(&[]));
        assert_eq!(allowed_hosts(None, "localhost", bound), only(&[]));
    }

    #[test]
    fn wildcard_binds_serve_any_host_unless_configured() {
        let bound = addr("0.0.0.0:8765");
        assert_eq!(allowed_hosts(None, "0.0.0.0", bound), AllowedHosts::Any);
        assert_eq!(
            allowed_hosts(Some("cortex, Cortex.example.com:443"), "0.0.0.0", bound),
            only(&["cortex", "cortex.example.com:443"])
        );
        assert_eq!(
            allowed_hosts(Some("*"), "0.0.0.0", bound),
            AllowedHosts::Any
        );
        assert_eq!(
            allowed_hosts(Some(" "), "0.0.0.0", bound),
            AllowedHosts::Any
        );
    }

    #[test]
    fn specific_addresses_serve_their_own_name() {
        let bound = addr("192.0.2.7:8765");
        assert_eq!(
            allowed_hosts(None, "memory.internal", bound),
            only(&["memory.internal", "192.0.2.7"])
        );
    }

    #[test]
    fn host_parts() {
        assert_eq!(host_part("127.0.0.1:8765"), "127.0.0.1");
        assert_eq!(host_part("[::1]:8765"), "::1");
        assert_eq!(host_part("localhost:0"), "localhost");
    }
}
