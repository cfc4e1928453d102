//! The web page (crate `cortex-web`) in the HTTP server, at `/`: logged in with the same
//! credentials as the tools (the shared token, an API key or an OAuth JWT, typed into the
//! login form), each person seeing only the memories of the user their credential names,
//! and a read-only key changing nothing.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::Utc;
use cortex_app::engine::Engine;
use cortex_core::keys::Scope;
use cortex_core::keys::{self, Caller};
use cortex_web::{EngineSource, Login, Viewer, WebConfig, WebError};

use crate::auth::Credentials;
use crate::engine::LazyEngine;

/// Whether the page is served, and from which public origins its forms may come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebPage {
    Off,
    On {
        /// Origins besides the request's `Host` (`CORTEX_HTTP_WEB_ORIGINS`): the public
        /// address of a server behind a proxy that rewrites `Host`.
        origins: Vec<String>,
    },
}

/// Why the web settings are not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebSettingError {
    #[error("CORTEX_HTTP_WEB must be on or off, not {0:?}")]
    Switch(String),
    #[error(
        "CORTEX_HTTP_WEB_ORIGINS holds {0:?}; give each origin as scheme://host[:port], \
         such as https://memory.example.com, comma-separated"
    )]
    Origin(String),
}

impl WebPage {
    /// From `CORTEX_HTTP_WEB` (on by default) and `CORTEX_HTTP_WEB_ORIGINS`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, WebSettingError> {
        let switch = lookup("CORTEX_HTTP_WEB").unwrap_or_default();
        match switch.trim().to_ascii_lowercase().as_str() {
            "" | "on" | "true" | "1" => {}
            "off" | "false" | "0" => return Ok(WebPage::Off),
            _ => return Err(WebSettingError::Switch(switch)),
        }
        let mut origins = Vec::new();
        for origin in lookup("CORTEX_HTTP_WEB_ORIGINS")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|o| !o.is_empty())
        {
            let rest = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            match rest {
                Some(host) if !host.is_empty() && !host.contains('/') => {
                    origins.push(origin.to_owned());
                }
                _ => return Err(WebSettingError::Origin(origin.to_owned())),
            }
        }
        Ok(WebPage::On { origins })
    }

    /// The pages' settings on a server many people may share: the store's size on disk
    /// (every user's) is not shown.
    pub fn config(&self) -> Option<WebConfig> {
        match self {
            WebPage::Off => None,
            WebPage::On { origins } => Some(WebConfig {
                extra_origins: origins.clone(),
                show_store_size: false,
                ..WebConfig::default()
            }),
        }
    }
}

#[async_trait]
impl EngineSource for LazyEngine {
    async fn engine(&self) -> Result<Arc<Engine>, WebError> {
        self.get()
            .await
            .map_err(|e| WebError::Unavailable(e.to_string()))
    }
}

/// The login over the server's own credentials.
#[derive(Debug)]
pub struct CredentialLogin {
    pub credentials: Credentials,
    pub engine: Arc<LazyEngine>,
}

fn viewer(caller: Caller) -> Viewer {
    Viewer {
        user: caller.user_id,
        scope: caller.scope,
        key_id: caller.key_id,
    }
}

#[async_trait]
impl Login for CredentialLogin {
    async fn viewer_for_secret(&self, secret: &str) -> Option<Viewer> {
        match &self.credentials {
            Credentials::Token(token) => {
                if !token.matches(secret) {
                    return None;
                }
                // The shared token is the configured user, as on /mcp.
                let engine = self.engine.get().await.ok()?;
                Some(Viewer {
                    user: engine.user_id.clone(),
                    scope: Scope::Write,
                    key_id: None,
                })
            }
            Credentials::Callers {
                keys: Some(store), ..
            } if secret.starts_with(keys::KEY_PREFIX) => {
                let (id, _) = keys::parse_token(secret).ok()?;
                let found = store
                    .find_key(id)
                    .await
                    .map_err(|e| tracing::warn!(error = %e, "cannot read the API keys"))
                    .ok()?;
                keys::verify(secret, found.as_ref(), Utc::now())
                    .ok()
                    .map(viewer)
            }
            Credentials::Callers { jwt: Some(jwt), .. } => {
                jwt.verify(secret).await.ok().map(viewer)
            }
            Credentials::Callers { .. } => None,
        }
    }

    /// A key revoked or expired since the login ends its sessions on their next request.
    async fn still_valid(&self, viewer: &Viewer) -> bool {
        let (
            Some(id),
            Credentials::Callers {
                keys: Some(store), ..
            },
        ) = (&viewer.key_id, &self.credentials)
        else {
            return true;
        };
        match store.find_key(id).await {
            Ok(Some(key)) => key.is_active(Utc::now()) && key.user_id == viewer.user,
            Ok(None) => false,
            Err(e) => {
                // Cannot tell: refuse rather than let a possibly revoked key through.
                tracing::warn!(error = %e, "cannot read the API keys");
                false
            }
        }
    }
}
