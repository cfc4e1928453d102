//! Logging in: `GET /login?token=...` exchanges a one-time token, `POST /login` a key or
//! token typed into the form; either opens a session and redirects (303) to `/`, so no
//! secret stays in the URL. `POST /logout` ends the session.

use std::net::{IpAddr, SocketAddr};

use axum::Extension;
use axum::Form;
use axum::extract::{ConnectInfo, RawQuery, State};
use axum::http::header::{COOKIE, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{AppendHeaders, Html, IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;

use crate::auth::{
    LOGIN_COOKIE, SESSION_COOKIE, Viewer, clear_cookie, cookie, random_token, same, set_cookie,
};
use crate::error::WebError;
use crate::html::layout;
use crate::security::{CurrentSession, same_origin, session_of};
use crate::state::WebState;

/// How long a login form's CSRF cookie lasts.
const LOGIN_FORM_TTL: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// The client's address when the server knows it (it serves with connect info).
fn client(peer: Option<Extension<ConnectInfo<SocketAddr>>>) -> Option<IpAddr> {
    peer.map(|Extension(ConnectInfo(addr))| addr.ip())
}

/// Who `secret` logs in, unless this client has failed too often lately (then the
/// answer that tells it to wait).
async fn check_secret(
    state: &WebState,
    client: Option<IpAddr>,
    secret: &str,
) -> Result<Option<Viewer>, Response> {
    if let Some(wait) = state.throttle.wait(client) {
        tracing::info!(?client, "refused: too many failed logins");
        let page = layout(
            "Too many attempts",
            None,
            html! { p.error { "Too many failed logins from here. Wait a few minutes and try again." } },
        );
        return Err((
            StatusCode::TOO_MANY_REQUESTS,
            [(
                axum::http::header::RETRY_AFTER,
                wait.as_secs().max(1).to_string(),
            )],
            Html(page.into_string()),
        )
            .into_response());
    }
    let viewer = state.login.viewer_for_secret(secret).await;
    if viewer.is_none() {
        state.throttle.failed(client);
    }
    Ok(viewer)
}

/// `GET /login`: exchanges `?token=`, or shows the form.
pub async fn page(
    State(state): State<WebState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let mut token = None;
    let mut failed = false;
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "token" => token = Some(value.into_owned()),
            "error" => failed = true,
            _ => {}
        }
    }
    if let Some(token) = token {
        return match check_secret(&state, client(peer), token.trim()).await {
            Ok(Some(viewer)) => logged_in(&state, viewer),
            // Off the URL that holds the (spent or wrong) token all the same.
            Ok(None) => Redirect::to("/login?error=link").into_response(),
            Err(wait) => wait,
        };
    }
    if session_of(&state, &headers).is_some() {
        return Redirect::to("/").into_response();
    }
    let message = failed.then_some(
        "That login link is wrong or was already used. Start `cortex ui` again for a new \
         one, or log in with your key.",
    );
    form(StatusCode::OK, message)
}

#[derive(Debug, Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    secret: String,
}

/// `POST /login`: the secret typed into the form.
pub async fn submit(
    State(state): State<WebState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Form(login): Form<LoginForm>,
) -> Response {
    let expected = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|h| cookie(h, LOGIN_COOKIE))
        .unwrap_or_default();
    if !same_origin(&headers, &state.config.extra_origins)
        || expected.is_empty()
        || !same(&login.csrf, expected)
    {
        return WebError::Forbidden(
            "this login form is stale or came from another site; reload the login page",
        )
        .into_response();
    }
    match check_secret(&state, client(peer), login.secret.trim()).await {
        Ok(Some(viewer)) => logged_in(&state, viewer),
        Ok(None) => form(
            StatusCode::UNAUTHORIZED,
            Some("That key or token opens no memories."),
        ),
        Err(wait) => wait,
    }
}

/// `POST /logout`.
pub async fn logout(State(state): State<WebState>, current: CurrentSession) -> Response {
    state.sessions.close(&current.id);
    (
        AppendHeaders([(SET_COOKIE, clear_cookie(SESSION_COOKIE, "/"))]),
        Redirect::to("/login"),
    )
        .into_response()
}

/// A new session for `viewer`: its cookie, and off to Browse.
fn logged_in(state: &WebState, viewer: Viewer) -> Response {
    let id = state.sessions.open(viewer);
    (
        StatusCode::SEE_OTHER,
        AppendHeaders([
            (LOCATION, "/".to_owned()),
            (
                SET_COOKIE,
                set_cookie(SESSION_COOKIE, &id, "/", state.sessions.ttl()),
            ),
            (SET_COOKIE, clear_cookie(LOGIN_COOKIE, "/login")),
        ]),
    )
        .into_response()
}

/// The login form, with a fresh CSRF token in the form and in a cookie.
fn form(status: StatusCode, message: Option<&str>) -> Response {
    let csrf = random_token();
    let page = layout(
        "Log in",
        None,
        html! {
            @if let Some(m) = message { p.error { (m) } }
            form.login method="post" action="/login" {
                input type="hidden" name="csrf" value=(csrf);
                label { "Key or token " input type="password" name="secret" autocomplete="current-password" required; }
                button type="submit" { "Log in" }
            }
        },
    );
    (
        status,
        AppendHeaders([(
            SET_COOKIE,
            set_cookie(LOGIN_COOKIE, &csrf, "/login", LOGIN_FORM_TTL),
        )]),
        Html(page.into_string()),
    )
        .into_response()
}
