//! Bearer-token authentication for the HTTP transport.
//!
//! The token is compared in constant time so response timing reveals nothing about how
//! much of a guess was right. A request without the right token is answered 401 by this
//! layer before it reaches MCP, so it can neither build the engine nor touch the store.

use std::fmt;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
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
        let Some(value) = authorization.map(HeaderValue::as_bytes) else {
            return false;
        };
        // RFC 7235: the scheme is case-insensitive; one or more spaces follow it.
        let Some(space) = value.iter().position(|b| *b == b' ') else {
            return false;
        };
        let (scheme, rest) = value.split_at(space);
        if !scheme.eq_ignore_ascii_case(b"bearer") {
            return false;
        }
        let presented = rest.trim_ascii();
        // Slices of different lengths compare unequal at once: that reveals the token's
        // length, which is not the secret part.
        bool::from(presented.ct_eq(&self.0))
    }
}

/// Axum middleware: the request goes on only with the right token, else 401.
pub async fn require_bearer(
    State(token): State<BearerToken>,
    mut request: Request,
    next: Next,
) -> Response {
    if token.accepts(request.headers().get(header::AUTHORIZATION)) {
        // Nothing past this point needs the token: removing it keeps it out of rmcp's
        // request extensions and out of any log that prints them.
        request.headers_mut().remove(header::AUTHORIZATION);
        return next.run(request).await;
    }
    tracing::debug!(
        path = request.uri().path(),
        "refused a request without the right bearer token"
    );
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::WWW_AUTHENTICATE, "Bearer realm=\"cortex\""),
            // The request body was never read, so the connection cannot carry another
            // request; saying so keeps clients from reusing it and racing the close.
            (header::CONNECTION, "close"),
        ],
        "missing or wrong bearer token: send Authorization: Bearer <CORTEX_HTTP_TOKEN>\n",
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
