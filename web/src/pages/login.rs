//! Logging in: `GET /login?token=...` exchanges a one-time token, `POST /login` a key or
//! token typed into the form; either opens a session and redirects (303) to `/`, so no
//! secret stays in the URL. `POST /logout` ends the session.

use axum::Form;
use axum::extract::{RawQuery, State};
use axum::http::header::{COOKIE, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{AppendHeaders, Html, IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;

use crate::auth::{
    LOGIN_COOKIE, SESSION_COOKIE, clear_cookie, cookie, random_token, same, set_cookie,
};
use crate::error::WebError;
use crate::html::layout;
use crate::security::{CurrentSession, same_origin, session_of};
use crate::state::WebState;

/// How long a login form's CSRF cookie lasts.
const LOGIN_FORM_TTL: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// `GET /login`: exchanges `?token=`, or shows the form.
pub async fn page(
    State(state): State<WebState>,
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
        return match state.login.user_for_secret(token.trim()).await {
            Some(user) => logged_in(&state, user),
            // Off the URL that holds the (spent or wrong) token all the same.
            None => Redirect::to("/login?error=link").into_response(),
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
    headers: HeaderMap,
    Form(login): Form<LoginForm>,
) -> Response {
    let expected = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|h| cookie(h, LOGIN_COOKIE))
        .unwrap_or_default();
    if !same_origin(&headers) || expected.is_empty() || !same(&login.csrf, expected) {
        return WebError::Forbidden(
            "this login form is stale or came from another site; reload the login page",
        )
        .into_response();
    }
    match state.login.user_for_secret(login.secret.trim()).await {
        Some(user) => logged_in(&state, user),
        None => form(
            StatusCode::UNAUTHORIZED,
            Some("That key or token opens no memories."),
        ),
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

/// A new session for `user`: its cookie, and off to Browse.
fn logged_in(state: &WebState, user: String) -> Response {
    let id = state.sessions.open(user);
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
