//! The `Origin` guard of the HTTP transport.
//!
//! The MCP transport spec requires servers to validate `Origin`: a web page a user visits
//! can make their browser post to a memory server on their machine, and a rebound DNS
//! name can make the browser believe the page and the server share an origin. A browser
//! always sends `Origin` on such a request, so a request carrying a foreign one is refused
//! (403) before the token is even looked at; a request without one (curl, SDK clients,
//! MCP hosts) is not a browser's and passes to the token check.

use std::fmt;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::hosts::{AllowedHosts, LOOPBACK_HOSTS};

/// Why a configured origin list is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OriginError {
    #[error(
        "CORTEX_HTTP_ALLOWED_ORIGINS: {0:?} is not an origin; write scheme://host[:port] \
         (`:*` for any port), `null`, or `*` alone for any origin"
    )]
    Malformed(String),
}

/// Which browser origins may call the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedOrigins {
    Any,
    Only(Vec<OriginPattern>),
}

/// As the start-up log shows it: `*`, or the patterns as `CORTEX_HTTP_ALLOWED_ORIGINS`
/// spells them, comma-separated.
impl fmt::Display for AllowedOrigins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowedOrigins::Any => f.write_str("*"),
            AllowedOrigins::Only(patterns) => {
                for (i, p) in patterns.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "," };
                    match (p.scheme.as_str(), p.port) {
                        ("null", _) => write!(f, "{sep}null")?,
                        (scheme, None) => write!(f, "{sep}{scheme}://{}:*", p.host)?,
                        (scheme, Some(port)) => write!(f, "{sep}{scheme}://{}:{port}", p.host)?,
                    }
                }
                Ok(())
            }
        }
    }
}

/// One allowed origin: scheme and host exactly, the port exactly or any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginPattern {
    scheme: String,
    host: String,
    /// `None` matches any port.
    port: Option<u16>,
}

impl OriginPattern {
    /// `scheme://host[:port]`, with `:*` for any port; the scheme's default port when
    /// none is written (an origin serialisation omits it).
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim().trim_end_matches('/');
        let (scheme, rest) = text.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme.is_empty() || rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
            return None;
        }
        let (host, port) = split_host_port(rest)?;
        let port = match port {
            Some("*") => None,
            Some(port) => Some(port.parse().ok()?),
            None => Some(default_port(&scheme)?),
        };
        Some(Self {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    fn matches(&self, origin: &Self) -> bool {
        self.scheme == origin.scheme
            && self.host == origin.host
            && self.port.is_none_or(|port| origin.port == Some(port))
    }
}

/// `host[:port]` with IPv6 literals in brackets; the brackets are dropped.
fn split_host_port(text: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    Some(match text.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (text, None),
    })
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        _ => None,
    }
}

/// The origin policy. `CORTEX_HTTP_ALLOWED_ORIGINS` (comma-separated origins, or `*`)
/// wins. Otherwise pages served from a name the server itself answers to may call it:
/// the loopback names and the configured `Host` names, over http or https, any port.
pub fn allowed_origins(
    configured: Option<&str>,
    hosts: &AllowedHosts,
) -> Result<AllowedOrigins, OriginError> {
    if let Some(list) = configured.map(str::trim).filter(|l| !l.is_empty()) {
        if list == "*" {
            return Ok(AllowedOrigins::Any);
        }
        return list
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| match entry {
                "null" => Ok(OriginPattern {
                    scheme: "null".into(),
                    host: String::new(),
                    port: None,
                }),
                _ => OriginPattern::parse(entry)
                    .ok_or_else(|| OriginError::Malformed(entry.to_owned())),
            })
            .collect::<Result<_, _>>()
            .map(AllowedOrigins::Only);
    }
    let names: Vec<String> = match hosts {
        AllowedHosts::Only(names) => names.clone(),
        AllowedHosts::Any => LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect(),
    };
    let mut patterns = Vec::new();
    for name in names {
        // A `Host` entry may carry a port; the origin is the same host on any port. A
        // bare IPv6 literal (two colons or more) has none.
        let host = if name.matches(':').count() > 1 && !name.starts_with('[') {
            name.as_str()
        } else {
            split_host_port(&name).map_or(name.as_str(), |(host, _)| host)
        };
        for scheme in ["http", "https"] {
            patterns.push(OriginPattern {
                scheme: scheme.into(),
                host: host.to_ascii_lowercase(),
                port: None,
            });
        }
    }
    Ok(AllowedOrigins::Only(patterns))
}

impl AllowedOrigins {
    /// Whether a request with this `Origin` header value (if any) may go on.
    pub fn admits(&self, origin: Option<&[u8]>) -> bool {
        let Some(origin) = origin else {
            return true;
        };
        let Self::Only(patterns) = self else {
            return true;
        };
        let Ok(origin) = std::str::from_utf8(origin) else {
            return false;
        };
        if origin.trim() == "null" {
            return patterns.iter().any(|p| p.scheme == "null");
        }
        OriginPattern::parse(origin)
            .is_some_and(|origin| patterns.iter().any(|p| p.matches(&origin)))
    }
}

/// Axum middleware: refuses a request whose `Origin` is not allowed with 403.
pub async fn require_origin(
    State(origins): State<std::sync::Arc<AllowedOrigins>>,
    request: Request,
    next: Next,
) -> Response {
    let origin = request.headers().get(header::ORIGIN).map(|v| v.as_bytes());
    if origins.admits(origin) {
        return next.run(request).await;
    }
    crate::metrics::refused("origin");
    tracing::warn!(
        origin = ?request.headers().get(header::ORIGIN),
        "refused a request from a foreign origin"
    );
    (
        StatusCode::FORBIDDEN,
        [(header::CONNECTION, "close")],
        "forbidden: this Origin may not call the server; allow it with CORTEX_HTTP_ALLOWED_ORIGINS\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> AllowedHosts {
        AllowedHosts::Only(LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect())
    }

    /// The start-up log shows the policies as the settings spell them, not as Rust
    /// structs.
    #[test]
    fn policies_display_as_settings() {
        let origins = allowed_origins(Some("https://app.example:8443, null"), &loopback()).unwrap();
        assert_eq!(origins.to_string(), "https://app.example:8443,null");
        let defaults = allowed_origins(None, &AllowedHosts::Only(vec!["localhost".into()]));
        assert_eq!(
            defaults.unwrap().to_string(),
            "http://localhost:*,https://localhost:*"
        );
        assert_eq!(AllowedOrigins::Any.to_string(), "*");
        assert_eq!(loopback().to_string(), LOOPBACK_HOSTS.join(","));
        assert_eq!(AllowedHosts::Any.to_string(), "*");
    }

    #[test]
    fn by_default_only_the_servers_own_names_are_admitted() {
        let origins = allowed_origins(None, &loopback()).unwrap();
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://LOCALHOST:8443",
            "http://[::1]:8765",
        ] {
            assert!(origins.admits(Some(ok.as_bytes())), "{ok}");
        }
        for refused in [
            "http://evil.example",
            "http://localhost.evil.example",
            "null",
            "file://",
            "garbage",
        ] {
            assert!(!origins.admits(Some(refused.as_bytes())), "{refused}");
        }
        assert!(origins.admits(None), "no Origin: not a browser");
        assert!(!origins.admits(Some(b"\xff")));
    }

    #[test]
    fn configured_host_names_are_admitted_on_any_port() {
        let hosts = AllowedHosts::Only(vec!["localhost".into(), "memory.example.com:443".into()]);
        let origins = allowed_origins(None, &hosts).unwrap();
        assert!(origins.admits(Some(b"https://memory.example.com")));
        assert!(!origins.admits(Some(b"https://evil.example.com")));
        let any_host = allowed_origins(None, &AllowedHosts::Any).unwrap();
        assert!(any_host.admits(Some(b"http://localhost:5173")));
        assert!(!any_host.admits(Some(b"http://evil.example")));
    }

    #[test]
    fn a_configured_list_replaces_the_default() {
        let origins = allowed_origins(
            Some("https://app.example.com, http://localhost:*, null"),
            &loopback(),
        )
        .unwrap();
        assert!(origins.admits(Some(b"https://app.example.com")));
        assert!(origins.admits(Some(b"https://app.example.com:443")));
        assert!(!origins.admits(Some(b"https://app.example.com:8443")));
        assert!(!origins.admits(Some(b"http://app.example.com")));
        assert!(origins.admits(Some(b"http://localhost:9")));
        assert!(origins.admits(Some(b"null")));
        assert!(!origins.admits(Some(b"http://127.0.0.1:9")));
        assert_eq!(
            allowed_origins(Some("*"), &loopback()).unwrap(),
            AllowedOrigins::Any
        );
        assert!(matches!(
            allowed_origins(Some("app.example.com"), &loopback()),
            Err(OriginError::Malformed(entry)) if entry == "app.example.com"
        ));
        assert!(allowed_origins(Some("https://a.example/path"), &loopback()).is_err());
    }
}
