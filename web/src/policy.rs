//! The browser policies every response states. Their own file: the page layout repeats
//! the referrer policy, and the guards that send them depend on the error pages.
//!
//! The referrer policy is `same-origin`, not `no-referrer`: under `no-referrer` Chromium
//! sends `Origin: null` on the site's own form posts, which the same-origin check would
//! refuse; no Referer still leaves the site, so the one-time token cannot leak.

/// The Content-Security-Policy of every response: nothing inline, nothing from elsewhere.
pub const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; \
                       img-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                       base-uri 'none'";

/// The Referrer-Policy of every response (and the pages' `<meta name="referrer">`).
pub const REFERRER: &str = "same-origin";
