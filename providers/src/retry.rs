//! When and how long to wait before retrying a failed provider request.
//!
//! The policy is shared by every HTTP adapter. A provider's own hint wins over our
//! backoff, in this order: `retry-after-ms` (OpenAI SDK convention), `retry-after` in
//! seconds or as an HTTP date (Anthropic, proxies), then Gemini's
//! `google.rpc.RetryInfo.retryDelay` in the error body.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use reqwest::header::HeaderMap;
use serde_json::Value;

/// Bounds on retrying one logical request.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts in total, the first included; 1 disables retrying.
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubled for each later one.
    pub initial_backoff: Duration,
    /// Longest single wait. A provider hint above it ends the retries instead, since
    /// a quota that resets in an hour is not worth holding a request open for.
    pub max_backoff: Duration,
    /// Budget for all attempts and waits together.
    pub max_elapsed: Duration,
    /// Sleeps between attempts; tests swap in one that only records.
    pub sleeper: Arc<dyn Sleeper>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_elapsed: Duration::from_secs(120),
            sleeper: Arc::new(TokioSleeper),
        }
    }
}

impl RetryPolicy {
    /// Exponential backoff with "equal jitter": half the delay fixed, half random, so
    /// clients that failed together do not retry together.
    pub fn backoff(&self, failed_attempts: u32) -> Duration {
        let exponent = failed_attempts.saturating_sub(1).min(20);
        let full = self
            .initial_backoff
            .saturating_mul(1u32 << exponent)
            .min(self.max_backoff);
        let half = full / 2;
        let jitter_ms = u64::try_from(half.as_millis()).unwrap_or(u64::MAX);
        let jitter = if jitter_ms == 0 {
            Duration::ZERO
        } else {
            Duration::from_millis(rand::rng().random_range(0..=jitter_ms))
        };
        half + jitter
    }
}

/// A boxed sleep future.
pub type SleepFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Waits between attempts. Injectable so tests can assert the delays a server asked
/// for without spending them.
pub trait Sleeper: Send + Sync + fmt::Debug {
    fn sleep(&self, duration: Duration) -> SleepFuture;
}

/// The real sleeper.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, duration: Duration) -> SleepFuture {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// Whether a failed HTTP status is worth another attempt.
pub(crate) fn status_is_retryable(status: u16) -> bool {
    // 408 timeout, 409 lock conflict (OpenAI's SDK retries it), 429 rate limit, every
    // 5xx including Anthropic's 529 "overloaded".
    matches!(status, 408 | 409 | 429 | 500..=599)
}

/// The delay the provider asked for, from the headers or (Gemini) the error body.
pub(crate) fn retry_hint(headers: &HeaderMap, body: Option<&Value>) -> Option<Duration> {
    header_hint(headers).or_else(|| body.and_then(gemini_retry_delay))
}

fn header_hint(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
        && let Some(delay) = seconds(ms / 1000.0)
    {
        return Some(delay);
    }
    text("retry-after").and_then(parse_retry_after)
}

/// `Retry-After` is either delay-seconds or an HTTP date (RFC 9110 §10.2.3).
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return seconds(secs);
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date.with_timezone(&chrono::Utc) - chrono::Utc::now();
    // A date in the past means "now".
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// Gemini puts the hint in `error.details[]` as a `google.rpc.RetryInfo` whose
/// `retryDelay` is a protobuf Duration string such as `"22s"` or `"10.689924287s"`.
pub(crate) fn gemini_retry_delay(body: &Value) -> Option<Duration> {
    body.get("error")?
        .get("details")?
        .as_array()?
        .iter()
        .filter(|d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("google.rpc.RetryInfo"))
        })
        .find_map(|d| {
            d.get("retryDelay")?
                .as_str()?
                .strip_suffix('s')?
                .parse()
                .ok()
        })
        .and_then(seconds)
}

fn seconds(secs: f64) -> Option<Duration> {
    if secs.is_finite() && secs >= 0.0 {
        Duration::try_from_secs_f64(secs).ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;
    use serde_json::json;

    #[test]
    fn backoff_grows_and_is_capped() {
        let policy = RetryPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            ..RetryPolicy::default()
        };
        for _ in 0..50 {
            let first = policy.backoff(1);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let third = policy.backoff(3);
            assert!(third >= Duration::from_millis(175) && third <= Duration::from_millis(350));
            assert!(policy.backoff(40) <= Duration::from_millis(350));
        }
    }

    #[test]
    fn retryable_statuses() {
        for s in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(status_is_retryable(s), "{s}");
        }
        for s in [400, 401, 402, 403, 404, 413, 422] {
            assert!(!status_is_retryable(s), "{s}");
        }
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("soon"), None);
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        let future = (chrono::Utc::now() + chrono::TimeDelta::seconds(30)).to_rfc2822();
        let wait = parse_retry_after(&future).unwrap();
        assert!(wait > Duration::from_secs(25) && wait <= Duration::from_secs(30));
    }

    #[test]
    fn header_precedence() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_hint(&headers, None), Some(Duration::from_secs(3)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_hint(&headers, None), Some(Duration::from_millis(250)));
    }

    #[test]
    fn gemini_body_hint() {
        let body = json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "10.5s"}
        ]}});
        assert_eq!(
            retry_hint(&HeaderMap::new(), Some(&body)),
            Some(Duration::from_millis(10_500))
        );
        assert_eq!(
            gemini_retry_delay(&json!({"error": {"message": "x"}})),
            None
        );
        // A header, when present, wins over the body.
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("1"));
        assert_eq!(
            retry_hint(&headers, Some(&body)),
            Some(Duration::from_secs(1))
        );
    }
}
