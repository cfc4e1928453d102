//! Who may call the HTTP transport, and as whom: one shared bearer token (every caller is
//! the configured user), or API keys from the store, each naming its user and scope
//! (`cortex token create`).
//!
//! Secrets are compared in constant time so response timing reveals nothing about how much
//! of a guess was right. A request without valid credentials is answered 401 by this layer
//! before it reaches MCP, so it can neither build the engine nor touch a memory. No secret
//! reaches a log: a refusal is logged with its reason and, for a key, its public id.

use std::fmt;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use cortex_core::keys::KeyStore;
use cortex_core::keys::{self, KeyError};

use crate::oauth::{self, JwtError, JwtVerifier};
use subtle::ConstantTimeEq;

/// Shortest token accepted: short tokens can be guessed over the network.
pub const MIN_TOKEN_LEN: usize = 16;

/// A token that is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    #[error(
        "CORTEX_HTTP_TOKEN is not set; HTTP mode always requires a bearer token. Generate one \
         with `openssl rand -hex 32` and set it in the server's environment"
    )]
    Missing,
    #[error(
        "CORTEX_HTTP_TOKEN is too short ({len} characters); use at least {MIN_TOKEN_LEN}, e.g. \
         from `openssl rand -hex 32`"
    )]
    TooShort { len: usize },
    #[error(
        "CORTEX_HTTP_TOKEN must be printable ASCII without spaces, so clients can send it in \
         an Authorization header"
    )]
    BadCharacters,
}

/// The shared secret clients present as `Authorization: Bearer <token>`. `Debug` hides it
/// and there is no `Display`, so it cannot reach a log line.
#[derive(Clone)]
pub struct BearerToken(Arc<[u8]>);

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(***)")
    }
}

impl BearerToken {
    /// Validates a configured token; surrounding whitespace (a trailing newline from a
    /// secrets file, say) is dropped.
    pub fn new(text: Option<&str>) -> Result<Self, TokenError> {
        let text = text.map(str::trim).unwrap_or_default();
        if text.is_empty() {
            return Err(TokenError::Missing);
        }
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError::BadCharacters);
        }
        if text.len() < MIN_TOKEN_LEN {
            return Err(TokenError::TooShort { len: text.len() });
        }
        Ok(Self(Arc::from(text.as_bytes())))
    }

    /// Whether an `Authorization` header value carries this token.
    pub fn accepts(&self, authorization: Option<&HeaderValue>) -> bool {
        bearer(authorization).is_some_and(|presented| self.matches(presented))
    }

    /// Whether `presented` is this token (the web page's login form sends it bare).
    pub fn matches(&self, presented: &str) -> bool {
        // Slices of different lengths compare unequal at once: that reveals the token's
        // length, which is not the secret part.
        bool::from(presented.as_bytes().ct_eq(&self.0))
    }
}

/// The credential of an `Authorization: Bearer <credential>` header, if it has that form.
fn bearer(authorization: Option<&HeaderValue>) -> Option<&str> {
    let value = authorization?.to_str().ok()?;
    // RFC 7235: the scheme is case-insensitive; one or more spaces follow it.
    let (scheme, rest) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| rest.trim_ascii())
        .filter(|credential| !credential.is_empty())
}

/// What the HTTP front accepts.
#[derive(Clone)]
pub enum Credentials {
    /// One shared token (`CORTEX_HTTP_TOKEN`): every caller is the configured user.
    Token(BearerToken),
    /// Each request is served as the user its credential names, within its scope:
    /// API keys from the store (`keys`, checked on every request so a revoked or expired
    /// key fails on its next one) and/or JWTs from an OAuth issuer (`jwt`).
    Callers {
        keys: Option<Arc<dyn KeyStore>>,
        jwt: Option<Arc<JwtVerifier>>,
    },
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Token(token) => f.debug_tuple("Token").field(token).finish(),
            Credentials::Callers { keys, jwt } => f
                .debug_struct("Callers")
                .field("keys", &keys.is_some())
                .field("jwt", &jwt.as_ref().map(|j| &j.settings().issuer))
                .finish(),
        }
    }
}

/// Axum middleware: the request goes on only with valid credentials, else 401 (503 when
/// the key store cannot be read). In key mode the request carries its [`keys::Caller`]
/// on, which the tools read (`CortexServer::caller`).
pub async fn require_credentials(
    State(credentials): State<Credentials>,
    mut request: Request,
    next: Next,
) -> Response {
    let presented = bearer(request.headers().get(header::AUTHORIZATION)).map(str::to_owned);
    let path = request.uri().path().to_owned();
    match (&credentials, presented.as_deref()) {
        (Credentials::Token(token), _) => {
            if !token.accepts(request.headers().get(header::AUTHORIZATION)) {
                crate::metrics::refused("credentials");
                tracing::info!(path, "refused: missing or wrong bearer token");
                return unauthorized(
                    "missing or wrong bearer token: send Authorization: Bearer \
                     <CORTEX_HTTP_TOKEN>",
                );
            }
        }
        (Credentials::Callers { jwt, .. }, None) => {
            crate::metrics::refused("credentials");
            tracing::info!(path, "refused: no credential");
            return refuse(
                jwt.as_deref(),
                None,
                "missing credential: send Authorization: Bearer <key or token>",
            );
        }
        (
            Credentials::Callers {
                keys: Some(store), ..
            },
            Some(presented),
        ) if presented.starts_with(keys::KEY_PREFIX) => {
            match key_caller(store.as_ref(), presented, &path).await {
                Ok(caller) => {
                    request.extensions_mut().insert(caller);
                }
                Err(refusal) => return refusal,
            }
        }
        (Credentials::Callers { jwt: Some(jwt), .. }, Some(presented)) => {
            match jwt.verify(presented).await {
                Ok(caller) => {
                    request.extensions_mut().insert(caller);
                }
                Err(JwtError::Keys(e)) => {
                    tracing::warn!(error = %e, "cannot fetch the OAuth issuer's keys");
                    return unavailable("the server cannot check tokens right now; try again");
                }
                Err(e) => {
                    crate::metrics::refused("credentials");
                    tracing::info!(path, reason = %e, "refused: bearer JWT");
                    return refuse(Some(jwt), Some("invalid_token"), &e.to_string());
                }
            }
        }
        (Credentials::Callers { jwt, .. }, Some(_)) => {
            crate::metrics::refused("credentials");
            tracing::info!(path, "refused: unknown credential");
            return refuse(
                jwt.as_deref(),
                None,
                "unknown API key: send Authorization: Bearer <key>",
            );
        }
    }
    // Nothing past this point needs the secret: removing it keeps it out of rmcp's
    // request extensions and out of any log that prints them.
    request.headers_mut().remove(header::AUTHORIZATION);
    next.run(request).await
}

/// A key's caller, or the response that refuses it.
async fn key_caller(
    store: &dyn KeyStore,
    presented: &str,
    path: &str,
) -> Result<keys::Caller, Response> {
    let id = keys::parse_token(presented).map(|(id, _)| id.to_owned());
    let found = match &id {
        Ok(id) => store.find_key(id).await.map_err(|e| {
            tracing::warn!(error = %e, "cannot read the API keys");
            unavailable("the server cannot check API keys right now; try again")
        })?,
        Err(_) => None,
    };
    keys::verify(presented, found.as_ref(), Utc::now()).map_err(|e| {
        let key = id.as_deref().unwrap_or("-");
        crate::metrics::refused("credentials");
        tracing::info!(path, key, reason = %e, "refused: API key");
        unauthorized(match e {
            KeyError::Revoked => "this API key was revoked",
            KeyError::Expired => "this API key expired",
            _ => "unknown API key: send Authorization: Bearer <key>",
        })
    })
}

fn unavailable(message: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "5")],
        format!("{message}\n"),
    )
        .into_response()
}

/// 401 that, with OAuth on, names the protected-resource metadata (RFC 9728, section 5.1)
/// so a client can find the issuer, and says `invalid_token` when a token was refused.
fn refuse(jwt: Option<&JwtVerifier>, error: Option<&str>, message: &str) -> Response {
    let Some(jwt) = jwt else {
        return unauthorized(message);
    };
    let metadata = oauth::metadata_url(&jwt.settings().resource);
    let challenge = match error {
        Some(error) => format!("Bearer error=\"{error}\", resource_metadata=\"{metadata}\""),
        None => format!("Bearer resource_metadata=\"{metadata}\""),
    };
    let mut response = unauthorized(message);
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

fn unauthorized(message: &str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::WWW_AUTHENTICATE, "Bearer realm=\"cortex\""),
            // The request body was never read, so the connection cannot carry another
            // request; saying so keeps clients from reusing it and racing the close.
            (header::CONNECTION, "close"),
        ],
        format!("{message}\n"),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123";

    fn accepts(header: &str) -> bool {
        let token = BearerToken::new(Some(TOKEN)).unwrap();
        token.accepts(Some(&HeaderValue::from_str(header).unwrap()))
    }

    #[test]
    fn the_right_token_is_accepted_in_any_scheme_case() {
        assert!(accepts(&format!("Bearer {TOKEN}")));
        assert!(accepts(&format!("bearer  {TOKEN} ")));
    }

    #[test]
    fn anything_else_is_refused() {
        assert!(!accepts("Bearer wrong-token-wrong-token"));
        assert!(!accepts(&format!("Bearer {TOKEN}x")));
        assert!(!accepts(&format!("Bearer {}", &TOKEN[1..])));
        assert!(!accepts(&format!("Basic {TOKEN}")));
        assert!(!accepts(TOKEN));
        assert!(!accepts("Bearer "));
        let token = BearerToken::new(Some(TOKEN)).unwrap();
        assert!(!token.accepts(None));
    }

    #[test]
    fn configured_tokens_are_validated() {
        assert_eq!(BearerToken::new(None).unwrap_err(), TokenError::Missing);
        assert_eq!(
            BearerToken::new(Some("  ")).unwrap_err(),
            TokenError::Missing
        );
        assert_eq!(
            BearerToken::new(Some("short")).unwrap_err(),
            TokenError::TooShort { len: 5 }
        );
        assert_eq!(
            BearerToken::new(Some("has a space in the middle")).unwrap_err(),
            TokenError::BadCharacters
        );
        assert!(BearerToken::new(Some(&format!("{TOKEN}\n"))).is_ok());
    }

    #[test]
    fn debug_hides_the_token() {
        let token = BearerToken::new(Some(TOKEN)).unwrap();
        assert!(!format!("{token:?}").contains("0123"));
    }
}
