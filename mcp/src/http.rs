//! The streamable HTTP transport: MCP at `/mcp`, behind a bearer token, for hosted use.
//!
//! A token is always required, on loopback too: any local process or user could otherwise
//! read and delete every memory, and a browser page could try through DNS rebinding. The
//! `Host` allow-list (rmcp's DNS-rebinding guard) is the second fence; it has to admit the
//! names clients really use, which differ when the server sits in a container.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::request_id::{
    MakeRequestUuid, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::trace::TraceLayer;

use crate::answers::reword_answers;
use crate::auth::{Credentials, TokenError, require_credentials};
use crate::drain::{DEFAULT_DRAIN, Drain, track_calls};
use crate::engine::LazyEngine;
use crate::hosts::{AllowedHosts, allowed_hosts, host_part};
use crate::http_screen::screen_body;
use crate::origin::{AllowedOrigins, OriginError, allowed_origins, require_origin};
use crate::rate::{RateGate, UserRate, limit_rate};
use crate::sessions::{SessionGate, SessionLimitError, SessionLimits, limit_sessions};
use crate::tools::CortexServer;
use crate::web::{CredentialLogin, WebPage, WebSettingError};
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
    #[error(transparent)]
    Web(#[from] WebSettingError),
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
    /// How long a stop waits for the calls in flight (`CORTEX_HTTP_DRAIN_SECS`).
    pub drain: Duration,
    /// The web page at `/` (`CORTEX_HTTP_WEB`, `CORTEX_HTTP_WEB_ORIGINS`).
    pub web: WebPage,
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
        let drain = match lookup("CORTEX_HTTP_DRAIN_SECS").filter(|v| !v.trim().is_empty()) {
            None => DEFAULT_DRAIN,
            Some(value) => match value.trim().parse::<u64>() {
                Ok(secs) if secs <= 3600 => Duration::from_secs(secs),
                _ => {
                    return Err(SessionLimitError::OutOfRange {
                        var: "CORTEX_HTTP_DRAIN_SECS",
                        value,
                        max: 3600,
                    }
                    .into());
                }
            },
        };
        let web = WebPage::from_lookup(&lookup)?;
        Ok(Self {
            hosts,
            origins,
            sessions,
            rate,
            drain,
            web,
        })
    }
}

/// How the HTTP server stops: on `signal` it takes no new connection, waits up to
/// `deadline` for the calls in flight to answer, then ends the sessions (whose open event
/// streams would otherwise hold the stop until every client hung up).
#[derive(Debug, Clone)]
pub struct Stop {
    pub signal: CancellationToken,
    sessions: CancellationToken,
    drain: Arc<Drain>,
    deadline: Duration,
}

impl Stop {
    pub fn new(signal: CancellationToken, deadline: Duration) -> Self {
        Self {
            signal,
            sessions: CancellationToken::new(),
            drain: Arc::new(Drain::default()),
            deadline,
        }
    }

    /// After the signal: the calls in flight, then the sessions.
    async fn finish_calls(self) {
        self.signal.cancelled().await;
        let in_flight = self.drain.in_flight();
        tracing::info!(in_flight, "stopping: finishing the calls in flight");
        if !self.drain.wait(self.deadline).await {
            tracing::warn!(
                in_flight = self.drain.in_flight(),
                deadline_secs = self.deadline.as_secs(),
                "stopping with calls still in flight: CORTEX_HTTP_DRAIN_SECS passed"
            );
        }
        self.sessions.cancel();
    }
}

/// The app: `/mcp` behind the origin guard, the credentials, the rate, the body screen,
/// the session limits and the in-flight count (outermost first), with rmcp's host guard
/// inside; unauthenticated `/healthz`, `/readyz` and `/metrics`; the web page at `/`
/// behind its own login with the same credentials; all of it inside the request id and
/// its span.
pub fn router(
    engine: Arc<LazyEngine>,
    credentials: Credentials,
    policy: &HttpPolicy,
    stop: &Stop,
) -> Router {
    let config =
        StreamableHttpServerConfig::default().with_cancellation_token(stop.sessions.clone());
    let config = match &policy.hosts {
        AllowedHosts::Any => config.disable_allowed_hosts(),
        AllowedHosts::Only(list) => config.with_allowed_hosts(list.clone()),
    };
    let ready = Arc::clone(&engine);
    let scraped = Arc::clone(&engine);
    let web = policy.web.config().map(|config| {
        let login = Arc::new(CredentialLogin {
            credentials: credentials.clone(),
            engine: Arc::clone(&engine),
        });
        cortex_web::router(cortex_web::WebState::with_config(
            Arc::clone(&engine) as Arc<dyn cortex_web::EngineSource>,
            login,
            config,
        ))
    });
    let server = match &credentials {
        Credentials::Token(_) => CortexServer::new(engine),
        Credentials::Callers { .. } => CortexServer::new(engine).keyed(),
    };
    let oauth = match &credentials {
        Credentials::Callers { jwt: Some(jwt), .. } => Some(jwt.settings().clone()),
        _ => None,
    };
    let sessions = policy.sessions.manager();
    let gate = Arc::new(SessionGate::new(Arc::clone(&sessions), &policy.sessions));
    let mcp = StreamableHttpService::new(move || Ok(server.clone()), sessions, config);
    let guarded = Router::new()
        .nest_service(MCP_PATH, mcp)
        .layer(from_fn(reword_answers))
        .layer(from_fn_with_state(Arc::clone(&stop.drain), track_calls))
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
    // Outermost: every request gets an id (the client's `x-request-id`, else a new UUID),
    // every line logged while serving it carries that id in its `request` span, and the
    // answer names it, so a user's report finds its lines.
    let mut app = app.merge(guarded);
    if let Some(web) = web {
        // Its own paths (`/`, `/login`, `/memory/...`) and its 404 page for any other.
        app = app.merge(web);
    }
    app.layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
}

/// The span a request is served in: its id, method and path (never a header's value
/// beyond the id, which is the caller's to choose and at most 128 visible characters).
fn request_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    let id = request_id(request.extensions());
    tracing::info_span!(
        "request",
        id,
        method = %request.method(),
        path = request.uri().path()
    )
}

/// A request's id as set by the outermost layer, for the spans that log under it.
pub fn request_id(extensions: &axum::http::Extensions) -> &str {
    extensions
        .get::<RequestId>()
        .and_then(|id| id.header_value().to_str().ok())
        .filter(|id| id.len() <= 128)
        .unwrap_or("-")
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

/// Serves `app` on `listener` until `stop` is signalled and what was in flight answered.
pub async fn serve(listener: TcpListener, app: Router, stop: Stop) -> Result<(), HttpError> {
    let signal = stop.signal.clone();
    tokio::spawn(stop.finish_calls());
    // Without TCP_NODELAY a streamed answer's last small write waits for the client's
    // delayed ACK: every call took 40+ ms on loopback (docs/BENCHMARKS.md, the load test).
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    // The peer's address lets the web login throttle failures per client.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(async move { signal.cancelled().await })
    .await
    .map_err(HttpError::Serve)
}
