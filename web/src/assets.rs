//! The stylesheet and the one script (the graph's pan and zoom), built into the binary:
//! no CDN, nothing inline.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::IntoResponse;

/// The stylesheet's text.
pub const CSS: &str = include_str!("../assets/cortex.css");
/// The graph page's script.
pub const GRAPH_JS: &str = include_str!("../assets/graph.js");

/// `GET /assets/cortex.css`.
pub async fn css() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/css; charset=utf-8"),
            (CACHE_CONTROL, "no-cache"),
        ],
        CSS,
    )
}

/// `GET /assets/graph.js`.
pub async fn graph_js() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (CACHE_CONTROL, "no-cache"),
        ],
        GRAPH_JS,
    )
}
