//! Each user's request rate over HTTP: a token bucket per user (governor's keyed limiter),
//! so one busy or runaway client slows only its own user. A request past the bucket gets
//! `429 Too Many Requests` with `Retry-After`, before it reaches MCP.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cortex_core::keys::Caller;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::sessions::SessionLimitError;

/// Requests per second one user may make when `CORTEX_HTTP_USER_RPS` is unset.
pub const DEFAULT_RPS: u32 = 50;
/// Requests one user may make at once after being idle (`CORTEX_HTTP_USER_BURST`).
pub const DEFAULT_BURST: u32 = 200;
/// Past this many remembered users, those whose buckets are full again are forgotten.
const RETAIN_PAST: usize = 10_000;

/// The configured rate, per user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRate {
    pub per_second: NonZeroU32,
    pub burst: NonZeroU32,
}

impl Default for UserRate {
    fn default() -> Self {
        Self {
            per_second: NonZeroU32::MIN.saturating_add(DEFAULT_RPS - 1),
            burst: NonZeroU32::MIN.saturating_add(DEFAULT_BURST - 1),
        }
    }
}

impl UserRate {
    /// Reads `CORTEX_HTTP_USER_RPS` (1-100000) and `CORTEX_HTTP_USER_BURST` (1-1000000).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, SessionLimitError> {
        let read = |var: &'static str, max: u64| -> Result<Option<NonZeroU32>, SessionLimitError> {
            let Some(value) = lookup(var).filter(|v| !v.trim().is_empty()) else {
                return Ok(None);
            };
            match value.trim().parse::<u32>() {
                Ok(n) if (1..=max).contains(&u64::from(n)) => Ok(NonZeroU32::new(n)),
                _ => Err(SessionLimitError::OutOfRange { var, value, max }),
            }
        };
        let defaults = Self::default();
        Ok(Self {
            per_second: read("CORTEX_HTTP_USER_RPS", 100_000)?.unwrap_or(defaults.per_second),
            burst: read("CORTEX_HTTP_USER_BURST", 1_000_000)?.unwrap_or(defaults.burst),
        })
    }
}

/// The buckets, one per user seen.
#[derive(Debug)]
pub struct RateGate {
    rate: UserRate,
    limiter: DefaultKeyedRateLimiter<String>,
}

impl RateGate {
    pub fn new(rate: UserRate) -> Self {
        let quota = Quota::per_second(rate.per_second).allow_burst(rate.burst);
        Self {
            rate,
            limiter: RateLimiter::keyed(quota),
        }
    }

    /// `Ok` when `user` may make a request now, else how long until it may.
    pub fn check(&self, user: &str) -> Result<(), Duration> {
        if self.limiter.len() > RETAIN_PAST {
            self.limiter.retain_recent();
        }
        self.limiter
            .check_key(&user.to_owned())
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }
}

/// Axum middleware, inside the credentials: the user is the request's caller, or the one
/// configured user when every caller shares a token.
pub async fn limit_rate(
    State(gate): State<Arc<RateGate>>,
    request: Request,
    next: Next,
) -> Response {
    let user = request
        .extensions()
        .get::<Caller>()
        .map_or("", |caller| caller.user_id.as_str());
    match gate.check(user) {
        Ok(()) => next.run(request).await,
        Err(wait) => {
            // Whole seconds, rounded up: a client that waits what it is told gets in.
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            crate::metrics::refused("rate_limit");
            tracing::debug!(user, retry_after = secs, "refused: rate limit");
            (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, secs.max(1).to_string())],
                format!(
                    "rate limit: {} requests per second per user (bursts of {}); retry after \
                     {} s\n",
                    gate.rate.per_second,
                    gate.rate.burst,
                    secs.max(1)
                ),
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_user_has_a_bucket_of_its_own() {
        let rate = UserRate {
            per_second: NonZeroU32::MIN,
            burst: NonZeroU32::MIN.saturating_add(1),
        };
        let gate = RateGate::new(rate);
        assert!(gate.check("ada").is_ok());
        assert!(gate.check("ada").is_ok());
        let wait = gate.check("ada").unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert!(gate.check("bea").is_ok(), "another user is not slowed");
    }

    #[test]
    fn settings_are_read_and_checked() {
        let rate = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            UserRate::from_lookup(move |name| {
                pairs
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            })
        };
        assert_eq!(rate(&[]).unwrap(), UserRate::default());
        let set = rate(&[
            ("CORTEX_HTTP_USER_RPS", "5"),
            ("CORTEX_HTTP_USER_BURST", "9"),
        ])
        .unwrap();
        assert_eq!((set.per_second.get(), set.burst.get()), (5, 9));
        assert!(rate(&[("CORTEX_HTTP_USER_RPS", "0")]).is_err());
        assert!(rate(&[("CORTEX_HTTP_USER_BURST", "many")]).is_err());
    }
}
