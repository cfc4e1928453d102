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
use cortex_core::KeyStore;
use cortex_core::keys::{self, KeyError};
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
        let Some(presented) = bearer(authorization) else {
            return false;
        };
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
    /// API keys from the store (`CORTEX_HTTP_AUTH=keys`): each request is served as its
    /// key's user, within its key's scope, checked on every request so a revoked or
    /// expired key fails on its next one.
    Keys(Arc<dyn KeyStore>),
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Token(token) => f.debug_tuple("Token").field(token).finish(),
            Credentials::Keys(_) => f.write_str("Keys"),
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
    let presented = bearer(request.headers().get(header::AUTHORIZATION));
    let path = request.uri().path().to_owned();
    match (&credentials, presented) {
        (Credentials::Token(token), _) => {
            if !token.accepts(request.headers().get(header::AUTHORIZATION)) {
                tracing::info!(path, "refused: missing or wrong bearer token");
                return unauthorized(
                    "missing or wrong bearer token: send Authorization: Bearer \
                     <CORTEX_HTTP_TOKEN>",
                );
            }
        }
        (Credentials::Keys(_), None) => {
            tracing::info!(path, "refused: no API key");
            return unauthorized("missing API key: send Authorization: Bearer <key>");
        }
        (Credentials::Keys(store), Some(presented)) => {
            let id = keys::parse_token(presented).map(|(id, _)| id.to_owned());
            let found = match &id {
                Ok(id) => match store.find_key(id).await {
                    Ok(found) => found,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the API keys");
                        return (
                            StatusCode::SERVICE_UNAVAILABLE,
                            [(header::RETRY_AFTER, "5")],
                            "the server cannot check API keys right now; try again\n",
                        )
                            .into_response();
                    }
                },
                Err(_) => None,
            };
            match keys::verify(presented, found.as_ref(), Utc::now()) {
                Ok(caller) => {
                    request.extensions_mut().insert(caller);
                }
                Err(e) => {
                    let key = id.as_deref().unwrap_or("-");
                    tracing::info!(path, key, reason = %e, "refused: API key");
                    return unauthorized(match e {
                        KeyError::Revoked => "this API key was revoked",
                        KeyError::Expired => "this API key expired",
                        _ => "unknown API key: send Authorization: Bearer <key>",
                    });
                }
            }
        }
    }
    // Nothing past this point needs the secret: removing it keeps it out of rmcp's
    // request extensions and out of any log that prints them.
    request.headers_mut().remove(header::AUTHORIZATION);
    next.run(request).await
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
