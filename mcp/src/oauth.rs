//! The resource-server side of the MCP authorization spec: bearer JWTs from one configured
//! issuer, checked against the issuer's published keys (JWKS), each naming its user.
//!
//! The keys are fetched on first use and cached; a token signed with a key id the cache
//! does not hold makes one refetch (at most one per [`REFETCH_EVERY`], so a flood of made-up
//! ids cannot turn the server into the issuer's load generator). Only asymmetric algorithms
//! are accepted, the one the key names; `alg: none` does not parse. `exp`, `nbf`, `iss` and
//! `aud` are checked, with [`LEEWAY`] for clock skew.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cortex_app::OAuthSettings;
use cortex_core::keys::{Caller, Scope};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde_json::Value;
use tokio::sync::{Mutex, RwLock};

/// Clock skew tolerated on `exp` and `nbf`.
pub const LEEWAY: Duration = Duration::from_secs(30);
/// Fewest seconds between two JWKS fetches caused by unknown key ids.
pub const REFETCH_EVERY: Duration = Duration::from_secs(2);
/// A scope that lets a token write; without it a token that names scopes reads only.
pub const WRITE_SCOPE: &str = "memory:write";
pub const READ_SCOPE: &str = "memory:read";

/// Why a JWT was refused; never carries the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JwtError {
    #[error("not a JWT this server accepts: {0}")]
    Malformed(String),
    #[error("the token names no key id (kid)")]
    NoKeyId,
    #[error("the issuer publishes no key with this token's key id")]
    UnknownKey,
    #[error("the token failed validation: {0}")]
    Invalid(String),
    #[error("the token has no usable {0} claim to name its user")]
    NoUser(String),
    #[error("cannot fetch the issuer's keys: {0}")]
    Keys(String),
}

/// Checks bearer JWTs for the configured issuer.
#[derive(Debug)]
pub struct JwtVerifier {
    settings: OAuthSettings,
    http: reqwest::Client,
    keys: RwLock<Option<JwkSet>>,
    /// When the keys were last fetched, to space out refetches for unknown ids.
    fetched: Mutex<Option<Instant>>,
}

impl JwtVerifier {
    pub fn new(settings: OAuthSettings) -> Result<Self, JwtError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| JwtError::Keys(e.to_string()))?;
        Ok(Self {
            settings,
            http,
            keys: RwLock::new(None),
            fetched: Mutex::new(None),
        })
    }

    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// Who `token` is for, if the issuer signed it for this server and it is current.
    pub async fn verify(&self, token: &str) -> Result<Caller, JwtError> {
        let header = decode_header(token).map_err(|e| JwtError::Malformed(e.to_string()))?;
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            // A shared-secret algorithm would let anyone holding the public key sign.
            return Err(JwtError::Malformed(format!(
                "{:?} is not accepted",
                header.alg
            )));
        }
        let kid = header.kid.ok_or(JwtError::NoKeyId)?;
        let jwk = match self.key(&kid).await? {
            Some(jwk) => jwk,
            None => {
                self.refetch().await?;
                self.key(&kid).await?.ok_or(JwtError::UnknownKey)?
            }
        };
        let key = DecodingKey::from_jwk(&jwk).map_err(|e| JwtError::Keys(e.to_string()))?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let claims = decode::<Value>(token, &key, &validation)
            .map_err(|e| JwtError::Invalid(e.to_string()))?
            .claims;
        let claim = &self.settings.user_claim;
        let user = claims[claim]
            .as_str()
            .filter(|u| cortex_core::memory::validate_user(u).is_ok())
            .ok_or_else(|| JwtError::NoUser(claim.clone()))?;
        Ok(Caller {
            user_id: user.to_owned(),
            scope: scope_of(&claims),
            key_id: None,
        })
    }

    /// The cached key with this id, fetching the set first if it was never fetched.
    async fn key(&self, kid: &str) -> Result<Option<Jwk>, JwtError> {
        if self.keys.read().await.is_none() {
            self.refetch().await?;
        }
        Ok(self
            .keys
            .read()
            .await
            .as_ref()
            .and_then(|set| set.find(kid).cloned()))
    }

    /// Fetches the key set again unless it was fetched within [`REFETCH_EVERY`].
    async fn refetch(&self) -> Result<(), JwtError> {
        let mut fetched = self.fetched.lock().await;
        if fetched.is_some_and(|at| at.elapsed() < REFETCH_EVERY) {
            return Ok(());
        }
        *fetched = Some(Instant::now());
        let url = match &self.settings.jwks_url {
            Some(url) => url.clone(),
            None => self.discover().await?,
        };
        let set: JwkSet = self.get_json(&url).await?;
        tracing::info!(keys = set.keys.len(), "fetched the OAuth issuer's keys");
        *self.keys.write().await = Some(set);
        Ok(())
    }

    /// The issuer's `jwks_uri`, from its OpenID or OAuth metadata.
    async fn discover(&self) -> Result<String, JwtError> {
        let base = self.settings.issuer.trim_end_matches('/');
        let mut last = String::new();
        for document in ["openid-configuration", "oauth-authorization-server"] {
            let url = format!("{base}/.well-known/{document}");
            match self.get_json::<Value>(&url).await {
                Ok(meta) => match meta["jwks_uri"].as_str() {
                    Some(jwks) => return Ok(jwks.to_owned()),
                    None => last = format!("{url} names no jwks_uri"),
                },
                Err(e) => last = e.to_string(),
            }
        }
        Err(JwtError::Keys(format!(
            "{last}; set CORTEX_OAUTH_JWKS_URL to the issuer's key set"
        )))
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, JwtError> {
        let fail = |e: reqwest::Error| JwtError::Keys(format!("{url}: {e}"));
        self.http
            .get(url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(fail)?
            .json()
            .await
            .map_err(fail)
    }
}

/// A token without a `scope` claim writes (the issuer let the user in, and the memories
/// are the user's own); one that names scopes writes only with [`WRITE_SCOPE`].
fn scope_of(claims: &Value) -> Scope {
    match claims["scope"].as_str() {
        None => Scope::Write,
        Some(scopes) if scopes.split_whitespace().any(|s| s == WRITE_SCOPE) => Scope::Write,
        Some(_) => Scope::Read,
    }
}

/// The protected-resource metadata (RFC 9728) this server serves.
pub fn resource_metadata(settings: &OAuthSettings) -> Value {
    serde_json::json!({
        "resource": settings.resource,
        "authorization_servers": [settings.issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": [READ_SCOPE, WRITE_SCOPE],
    })
}

/// Where the metadata is: `/.well-known/oauth-protected-resource` inserted between the
/// resource URL's host and its path (RFC 9728, section 3.1).
pub fn metadata_url(resource: &str) -> String {
    let (scheme, rest) = resource.split_once("://").unwrap_or(("https", resource));
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.trim_end_matches('/');
    match path.is_empty() {
        true => format!("{scheme}://{host}/.well-known/oauth-protected-resource"),
        false => format!("{scheme}://{host}/.well-known/oauth-protected-resource/{path}"),
    }
}

/// The path part of [`metadata_url`], which the server routes.
pub fn metadata_path(resource: &str) -> String {
    let url = metadata_url(resource);
    let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
    rest.find('/').map_or("/".into(), |i| rest[i..].to_owned())
}

/// The verifier behind an `Arc`, as the middleware holds it.
pub type SharedVerifier = Arc<JwtVerifier>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_sits_between_host_and_path() {
        assert_eq!(
            metadata_url("https://memory.example.com/mcp"),
            "https://memory.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8765/"),
            "http://127.0.0.1:8765/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            metadata_path("https://memory.example.com/mcp"),
            "/.well-known/oauth-protected-resource/mcp"
        );
    }

    #[test]
    fn scopes_read_only_when_named_without_write() {
        assert_eq!(scope_of(&serde_json::json!({})), Scope::Write);
        let read = serde_json::json!({"scope": "openid memory:read"});
        assert_eq!(scope_of(&read), Scope::Read);
        let write = serde_json::json!({"scope": "memory:read memory:write"});
        assert_eq!(scope_of(&write), Scope::Write);
    }
}
