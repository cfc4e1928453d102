//! The routes and the guards around them.

use axum::Router;
use axum::http::Uri;
use axum::middleware;
use axum::routing::{get, post};

use crate::assets;
use crate::error::WebError;
use crate::pages::{browse, entity, export, graph, login, memory, search, stats, timeline};
use crate::security;
use crate::state::WebState;

/// The web pages as one router, to serve alone or to `.merge` beside the MCP endpoint
/// (its paths are `/`, `/search`, `/memory/...`, `/timeline`, `/graph`, `/entity`,
/// `/stats`, `/export...`, `/login`, `/logout`, `/assets/...`; any other path is this
/// router's 404 page). Every response carries the security headers;
/// every page but the login needs a session; every write needs the session's CSRF token.
pub fn router(state: WebState) -> Router {
    let guarded = Router::new()
        .route("/", get(browse::page))
        .route("/search", get(search::page))
        .route("/memory/{id}", get(memory::show))
        .route("/memory/{id}/forget", post(memory::forget))
        .route("/memory/{id}/retag", post(memory::retag))
        .route("/memory/{id}/replace", post(memory::replace))
        .route("/timeline", get(timeline::page))
        .route("/graph", get(graph::page))
        .route("/entity", get(entity::page))
        .route("/stats", get(stats::page))
        .route("/export", get(export::page))
        .route("/export/download", get(export::download))
        .route("/logout", post(login::logout))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            security::require_session,
        ));
    Router::new()
        .route("/login", get(login::page).post(login::submit))
        .route("/assets/cortex.css", get(assets::css))
        .route("/assets/graph.js", get(assets::graph_js))
        .merge(guarded)
        .fallback(not_found)
        .layer(middleware::map_response(security::headers))
        .with_state(state)
}

async fn not_found(uri: Uri) -> WebError {
    WebError::NoSuchPage(uri.path().to_owned())
}
