//! The one stylesheet, built into the binary: no CDN, nothing inline.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::IntoResponse;

/// The stylesheet's text.
pub const CSS: &str = include_str!("../assets/cortex.css");

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
