//! The guards around every page: security headers on every response, a session for every
//! page but the login, and on every write a same-origin check and the session's CSRF token.

use axum::body::{Body, to_bytes};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, COOKIE, HOST, ORIGIN, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use crate::auth::{SESSION_COOKIE, Session, cookie, same};
use crate::error::WebError;
pub use crate::policy::{CSP, REFERRER};
use crate::state::WebState;

/// The largest form a page accepts (a memory is at most 32 KiB; encoding can triple it).
pub const MAX_FORM_BYTES: usize = 256 * 1024;

/// The logged-in session a guarded handler runs for, with its id (the cookie's value).
#[derive(Debug, Clone)]
pub struct CurrentSession {
    pub id: String,
    pub session: Session,
}

impl<S: Send + Sync> FromRequestParts<S> for CurrentSession {
    type Rejection = WebError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<CurrentSession>()
            .cloned()
            .ok_or(WebError::Forbidden("you are not logged in"))
    }
}

/// Adds the security headers to every response.
pub async fn headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // A one-time token in the first URL must never travel on in a Referer: no Referer
    // leaves this site. Not `no-referrer`: under that policy a browser sends
    // `Origin: null` on its own form posts, which the same-origin check must refuse.
    h.insert(REFERRER_POLICY, HeaderValue::from_static(REFERRER));
    if !h.contains_key(CACHE_CONTROL) {
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// The session the request's cookie names, if it is open.
pub fn session_of(state: &WebState, headers: &HeaderMap) -> Option<CurrentSession> {
    let id = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|h| cookie(h, SESSION_COOKIE))?;
    let session = state.sessions.get(id)?;
    Some(CurrentSession {
        id: id.to_owned(),
        session,
    })
}

/// Whether a write comes from this site: an `Origin` header, when present, names this
/// host (or one of `extra`, the public origins of a server behind a proxy that rewrites
/// `Host`), and the browser does not call the request cross-site. `Origin: null` (what a
/// browser sends when a page's referrer policy is `no-referrer`, but also what a sandboxed
/// frame elsewhere sends) passes only when the browser says `Sec-Fetch-Site: same-origin`.
pub fn same_origin(headers: &HeaderMap, extra: &[String]) -> bool {
    let fetch_site = headers.get("sec-fetch-site").map(HeaderValue::as_bytes);
    if fetch_site == Some(b"cross-site") {
        return false;
    }
    let Some(origin) = headers.get(ORIGIN) else {
        return true;
    };
    if origin.as_bytes() == b"null" {
        return fetch_site == Some(b"same-origin");
    }
    if let Ok(o) = origin.to_str()
        && extra
            .iter()
            .any(|e| e.trim_end_matches('/').eq_ignore_ascii_case(o))
    {
        return true;
    }
    let authority = origin.to_str().ok().and_then(|o| {
        o.strip_prefix("https://")
            .or_else(|| o.strip_prefix("http://"))
    });
    let host = headers.get(HOST).and_then(|h| h.to_str().ok());
    matches!((authority, host), (Some(a), Some(h)) if a.eq_ignore_ascii_case(h))
}

/// The value of field `name` in an urlencoded form body.
pub fn form_field(body: &[u8], name: &str) -> Option<String> {
    form_urlencoded::parse(body)
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Lets a request through only with an open session whose credential still holds; a page
/// request without one goes to the login page. A write must also come from this site,
/// carry the session's CSRF token and come from a session that may write; otherwise it is
/// refused (403) before its handler runs.
pub async fn require_session(
    State(state): State<WebState>,
    request: Request,
    next: Next,
) -> Response {
    let reading = matches!(*request.method(), Method::GET | Method::HEAD);
    let mut current = session_of(&state, request.headers());
    if let Some(c) = &current
        && !state.login.still_valid(&c.session.viewer).await
    {
        // The key was revoked or expired since the login: the session ends with it.
        state.sessions.close(&c.id);
        current = None;
    }
    let Some(current) = current else {
        return if reading {
            Redirect::to("/login").into_response()
        } else {
            WebError::Forbidden("you are not logged in").into_response()
        };
    };
    let logging_out = request.uri().path() == "/logout";
    if !reading && !logging_out && !current.session.viewer.can_write() {
        return WebError::Forbidden("this key can only read; nothing was changed").into_response();
    }
    let mut request = if reading {
        request
    } else {
        match checked_write(request, &current.session, &state.config.extra_origins).await {
            Ok(request) => request,
            Err(e) => return e.into_response(),
        }
    };
    request.extensions_mut().insert(current);
    next.run(request).await
}

/// The write, unchanged, when it is same-origin and carries the session's CSRF token.
async fn checked_write(
    request: Request,
    session: &Session,
    extra_origins: &[String],
) -> Result<Request, WebError> {
    if !same_origin(request.headers(), extra_origins) {
        return Err(WebError::Forbidden(
            "this form was sent from another site; nothing was changed",
        ));
    }
    let (parts, body) = request.into_parts();
    let bytes = to_bytes(body, MAX_FORM_BYTES)
        .await
        .map_err(|_| WebError::TooLarge(MAX_FORM_BYTES))?;
    let token = form_field(&bytes, "csrf").unwrap_or_default();
    if token.is_empty() || !same(&token, &session.csrf) {
        return Err(WebError::Forbidden(
            "this form's security token is missing or stale; reload the page and try again. \
             Nothing was changed",
        ));
    }
    Ok(Request::from_parts(parts, Body::from(bytes)))
}
