//! Screening of HTTP request bodies before rmcp reads them.
//!
//! rmcp answers a body that is not JSON with 415 (the fault is the body, not its media
//! type) and a `tools/call` whose params it cannot read with "method not found". This
//! layer answers those with 400 and the JSON-RPC error instead, and tells the layers
//! inside it which method a request calls ([`InboundMethod`]).

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{ErrorCode, JsonRpcMessage};
use serde_json::json;

use crate::inbound::{Screened, screen};

/// rmcp's own body limit for streamable HTTP.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The JSON-RPC method of a screened request, for the layers inside this one.
#[derive(Debug, Clone)]
pub struct InboundMethod(pub String);

/// Axum middleware: screens the body of a JSON POST; other requests pass untouched (rmcp
/// answers a wrong media type itself).
pub async fn screen_body(request: Request, next: Next) -> Response {
    let is_json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("application/json")
        });
    if request.method() != Method::POST || !is_json {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes: Bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body over {MAX_BODY_BYTES} bytes or unreadable: {e}\n"),
            )
                .into_response();
        }
    };
    let method = match screen(&bytes) {
        Screened::Message(message) => match *message {
            JsonRpcMessage::Request(request) => Some(request.request.method().to_owned()),
            _ => None,
        },
        Screened::Rejected(rejection) => {
            tracing::warn!(
                id = ?rejection.id,
                code = rejection.code.0,
                "refused a request body: {}",
                rejection.message
            );
            // A request that was read but is malformed in its params still gets its
            // answer as a JSON-RPC response; a body that is not one request is the
            // client's fault at the HTTP level.
            let status = if rejection.code == ErrorCode::INVALID_PARAMS {
                StatusCode::OK
            } else {
                StatusCode::BAD_REQUEST
            };
            let body = rejection.response().unwrap_or_else(|| {
                json!({
                    "jsonrpc": "2.0",
                    "id": null,
                    "error": { "code": rejection.code.0, "message": rejection.message },
                })
            });
            return (
                status,
                [(header::CONTENT_TYPE, "application/json")],
                body.to_string(),
            )
                .into_response();
        }
    };
    let mut request = Request::from_parts(parts, Body::from(bytes));
    if let Some(method) = method {
        request.extensions_mut().insert(InboundMethod(method));
    }
    next.run(request).await
}
