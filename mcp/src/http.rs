//! The streamable HTTP transport: MCP at `/mcp`, behind a bearer token, for hosted use.
//!
//! A token is always required, on loopback too: any local process or user could otherwise
//! read and delete every memory, and a browser page could try through DNS rebinding. The
//! `Host` allow-list (rmcp's DNS-rebinding guard) is the second fence; it has to admit the
//! names clients really use, which differ when the server sits in a container.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::answers::reword_answers;
use crate::auth::{Credentials, TokenError, require_credentials};
use crate::engine::LazyEngine;
use crate::hosts::{AllowedHosts, allowed_hosts, host_part};
use crate::http_screen::screen_body;
use crate::origin::{AllowedOrigins, OriginError, allowed_origins, require_origin};
use crate::rate::{RateGate, UserRate, limit_rate};
use crate::sessions::{SessionGate, SessionLimitError, SessionLimits, limit_sessions};
use crate::tools::CortexServer;
use crate::{metrics, oauth};

/// The path MCP is served at.
pub const MCP_PATH: &str = "/mcp";

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
    pub rate: UserRate,
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
        let rate = UserRate::from_lookup(&lookup)?;
        Ok(Self {
            hosts,
            origins,
            sessions,
            rate,
        })
    }
}

/// The app: `/mcp` behind the origin guard, the credentials, the body screen and the session
/// cap (outermost first), with rmcp's host guard inside; and an unauthenticated
/// `/healthz` for container health checks (it answers "ok" and touches nothing).
pub fn router(
    engine: Arc<LazyEngine>,
    credentials: Credentials,
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
    let ready = Arc::clone(&engine);
    let scraped = Arc::clone(&engine);
    let server = match &credentials {
        Credentials::Token(_) => CortexServer::new(engine),
        Credentials::Callers { .. } => CortexServer::new(engine).keyed(),
    };
    let oauth = match &credentials {
        Credentials::Callers { jwt: Some(jwt), .. } => Some(jwt.settings().clone()),
        _ => None,
    };
    let sessions = policy.sessions.manager();
    let gate = Arc::new(SessionGate::new(Arc::clone(&sessions), policy.sessions.max));
    let mcp = StreamableHttpService::new(move || Ok(server.clone()), sessions, config);
    let guarded = Router::new()
        .nest_service(MCP_PATH, mcp)
        .layer(from_fn(reword_answers))
        .layer(from_fn_with_state(gate, limit_sessions))
        .layer(from_fn(screen_body))
        .layer(from_fn_with_state(
            Arc::new(RateGate::new(policy.rate)),
            limit_rate,
        ))
        .layer(from_fn_with_state(credentials, require_credentials))
        .layer(from_fn_with_state(
            Arc::new(policy.origins.clone()),
            require_origin,
        ));
    let mut app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(move || readyz(Arc::clone(&ready))));
    match metrics::install() {
        // Counts only, no user in any label: open like /healthz, for a scraper.
        Ok(handle) => {
            app = app.route(
                "/metrics",
                get(move || {
                    let text = metrics::render(&handle, &scraped);
                    async move { ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text) }
                }),
            );
        }
        Err(e) => tracing::warn!(error = %e, "no /metrics: cannot install the recorder"),
    }
    if let Some(settings) = oauth {
        // The protected-resource metadata is public: a client reads it to find the issuer.
        let document = oauth::resource_metadata(&settings).to_string();
        let answer = move || {
            let document = document.clone();
            async move { ([(header::CONTENT_TYPE, "application/json")], document) }
        };
        let path = oauth::metadata_path(&settings.resource);
        if path != ROOT_METADATA {
            app = app.route(ROOT_METADATA, get(answer.clone()));
        }
        app = app.route(&path, get(answer));
    }
    app.merge(guarded)
}

/// Ready when the engine is built (the store opened and its schema migrated, the embedder
/// set up) and the store answers a read now; else `503` with the reason, which names
/// settings but never a secret. Unauthenticated, like `/healthz`, for load balancers.
async fn readyz(engine: Arc<LazyEngine>) -> Response {
    let checked = match engine.get().await {
        Ok(engine) => engine
            .memory
            .store()
            .generation(&engine.user_id)
            .await
            .map(|_| ())
            .map_err(|e| format!("the store does not answer: {e}")),
        Err(e) => Err(format!("not set up: {e}")),
    };
    match checked {
        Ok(()) => "ready\n".into_response(),
        Err(reason) => {
            tracing::warn!(reason, "not ready");
            (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")).into_response()
        }
    }
}

/// The metadata at the host's root, for clients that do not insert the resource's path.
const ROOT_METADATA: &str = "/.well-known/oauth-protected-resource";

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
