//! Cortex's web pages: see and correct what your agent remembers (issue 32).
//!
//! [`router`] serves, over an engine and a [`Login`] seam, server-rendered pages:
//! Browse (`/`, newest first, paged by the list cursor, filtered), Search (`/search`,
//! recall with each result's fused score and dense and BM25 ranks) and a memory's page
//! (`/memory/{id}`: its history chain, retag, replace with a correction, forget after a
//! confirmation), Timeline (the episodic events on a time axis), Graph (the entity graph
//! drawn to pan and zoom, each entity a link to its dossier at `/entity`), Stats and
//! Export (JSON Lines or markdown, streamed). Markup comes from maud, which escapes every
//! value, so a memory is always text; the stylesheet and the graph's one script are built
//! in and served under `/assets/`; every response carries a Content-Security-Policy that
//! allows nothing inline.
//!
//! A login (a one-time token from the URL, or a key typed into the form) opens a
//! server-side session named by an `HttpOnly; SameSite=Strict; Secure` cookie and
//! redirects to `/`, so the secret leaves the URL. Every write is a form POST that must
//! carry the session's CSRF token and must not come from another origin; a read-only key
//! sees every page and changes nothing. Failed logins are throttled per client.

mod assets;
pub mod auth;
pub mod error;
mod html;
mod layout;
mod pages;
pub mod params;
mod policy;
mod router;
pub mod security;
pub mod state;
pub mod throttle;

pub use auth::{Login, OneTimeToken, SESSION_COOKIE, Session, Sessions, Viewer};
pub use error::WebError;
pub use router::router;
pub use security::CSP;
pub use state::{EngineSource, Ready, WebConfig, WebState};
