//! Two of rmcp's own answers, reworded for the clients and operators we meet:
//!
//! - A closed session: rmcp answers `DELETE /mcp` with `202 Accepted`, and the official
//!   Python SDK, which expects 200 or 204, logs "Session termination failed: 202" on every
//!   close. The session is gone when rmcp answers, so `204 No Content` says it.
//! - A foreign `Host`: rmcp's DNS-rebinding guard answers `403` with "Host header is not
//!   allowed", which does not tell an operator what to set. The answer names the setting,
//!   and the refusal is logged.

use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// What rmcp's host guard answers, word for word (rmcp 3.11).
const RMCP_HOST_REFUSAL: &str = "Forbidden: Host header is not allowed";

/// Axum middleware around the MCP service (inside the origin guard, whose own 403s never
/// pass through here).
pub async fn reword_answers(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let response = next.run(request).await;
    match (method, response.status()) {
        (Method::DELETE, StatusCode::ACCEPTED) => {
            let (mut parts, _) = response.into_parts();
            parts.status = StatusCode::NO_CONTENT;
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, axum::body::Body::empty())
        }
        (_, StatusCode::FORBIDDEN) => {
            let (parts, body) = response.into_parts();
            // rmcp's refusals are one short line; anything longer is not one of them.
            let text = axum::body::to_bytes(body, 1024).await.unwrap_or_default();
            if text.as_ref() != RMCP_HOST_REFUSAL.as_bytes() {
                return Response::from_parts(parts, axum::body::Body::from(text));
            }
            crate::metrics::refused("host");
            tracing::info!(host, "refused: Host not allowed");
            (
                StatusCode::FORBIDDEN,
                format!(
                    "Host {host:?} is not allowed: add it to CORTEX_HTTP_ALLOWED_HOSTS \
                     (comma-separated names, or * for any) on the server\n"
                ),
            )
                .into_response()
        }
        _ => response,
    }
}
