//! Who is asking: the [`Login`] seam that maps a presented secret to a user, the one-time
//! token `cortex ui` prints, and the server-side sessions a login opens.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use cortex_core::keys::Scope;
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "cortex_session";
/// The cookie that carries the login form's CSRF token before there is a session.
pub const LOGIN_COOKIE: &str = "cortex_login";

/// Who a secret opens the page for, and what they may do there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Viewer {
    pub user: String,
    /// `Read` sees every page and changes nothing (a read-only API key).
    pub scope: Scope,
    /// The API key it came with (its public id), so a revoked key ends its sessions.
    pub key_id: Option<String>,
}

impl Viewer {
    /// A viewer who may read and correct `user`'s memories.
    pub fn writer(user: impl Into<String>) -> Self {
        Self {
            user: user.into(),
            scope: Scope::Write,
            key_id: None,
        }
    }

    pub fn can_write(&self) -> bool {
        self.scope == Scope::Write
    }
}

/// Maps a secret a person presents (an API key, a token) to the user whose memories it
/// opens. The hosted server implements it over its credentials; `cortex ui` uses
/// [`OneTimeToken`].
#[async_trait]
pub trait Login: Send + Sync + std::fmt::Debug {
    /// Who `secret` logs in, or `None` when it opens nothing.
    async fn viewer_for_secret(&self, secret: &str) -> Option<Viewer>;

    /// Whether a session opened for `viewer` may go on: checked on every request, so a
    /// key revoked or expired since the login ends its sessions at once.
    async fn still_valid(&self, viewer: &Viewer) -> bool {
        let _ = viewer;
        true
    }
}

/// A random token that logs one user in once, as notebook servers do: `cortex ui` prints
/// and opens `http://127.0.0.1:PORT/login?token=...`; the first exchange consumes it.
pub struct OneTimeToken {
    user: String,
    token: String,
    used: Mutex<bool>,
}

impl std::fmt::Debug for OneTimeToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: never in a log line.
        f.debug_struct("OneTimeToken")
            .field("user", &self.user)
            .field("used", &*lock(&self.used))
            .finish_non_exhaustive()
    }
}

impl OneTimeToken {
    /// A fresh 256-bit token for `user`.
    pub fn new(user: impl Into<String>) -> Self {
        Self {
            user: user.into(),
            token: random_token(),
            used: Mutex::new(false),
        }
    }

    /// The token, to put in the URL the command prints.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The path that exchanges the token for a session.
    pub fn login_path(&self) -> String {
        format!("/login?token={}", self.token)
    }
}

#[async_trait]
impl Login for OneTimeToken {
    async fn viewer_for_secret(&self, secret: &str) -> Option<Viewer> {
        let mut used = lock(&self.used);
        if *used || !same(secret, &self.token) {
            return None;
        }
        *used = true;
        Some(Viewer::writer(self.user.clone()))
    }
}

/// One logged-in browser: who it is and the token every form it posts must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub viewer: Viewer,
    pub csrf: String,
}

impl Session {
    /// The user whose memories this session sees.
    pub fn user(&self) -> &str {
        &self.viewer.user
    }
}

#[derive(Debug)]
struct Held {
    session: Session,
    expires: Instant,
}

/// The open sessions, held in this process only (a restart logs everyone out), keyed by
/// a random 256-bit id the cookie carries.
#[derive(Debug)]
pub struct Sessions {
    ttl: Duration,
    held: Mutex<HashMap<String, Held>>,
}

impl Sessions {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            held: Mutex::new(HashMap::new()),
        }
    }

    /// How long a session lasts from its login.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Opens a session for `viewer`; returns its id (the cookie's value).
    pub fn open(&self, viewer: Viewer) -> String {
        let id = random_token();
        let now = Instant::now();
        let mut held = lock(&self.held);
        held.retain(|_, h| h.expires > now);
        held.insert(
            id.clone(),
            Held {
                session: Session {
                    viewer,
                    csrf: random_token(),
                },
                expires: now + self.ttl,
            },
        );
        id
    }

    /// The live session `id` names.
    pub fn get(&self, id: &str) -> Option<Session> {
        let now = Instant::now();
        let mut held = lock(&self.held);
        match held.get(id) {
            Some(h) if h.expires > now => Some(h.session.clone()),
            Some(_) => {
                held.remove(id);
                None
            }
            None => None,
        }
    }

    /// Ends session `id`.
    pub fn close(&self, id: &str) {
        lock(&self.held).remove(id);
    }
}

/// 256 random bits, hex-encoded.
pub fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Constant-time equality of two secrets (the length is not hidden).
pub fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

/// A `Set-Cookie` value with every flag the brief requires: only this site, only over
/// HTTPS (browsers accept it on http://127.0.0.1 and localhost), never to scripts.
pub fn set_cookie(name: &str, value: &str, path: &str, max_age: Duration) -> String {
    format!(
        "{name}={value}; HttpOnly; SameSite=Strict; Secure; Path={path}; Max-Age={}",
        max_age.as_secs()
    )
}

/// A `Set-Cookie` value that removes cookie `name`.
pub fn clear_cookie(name: &str, path: &str) -> String {
    set_cookie(name, "", path, Duration::ZERO)
}

/// A lock that a panicked holder did not leave unusable: every value guarded here is
/// valid after any partial update.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
