//! The one HTTP path every adapter uses: timeout, retries, error mapping, redaction.

use std::time::{Duration, Instant};

use cortex_core::error::ProviderError;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::retry::{RetryPolicy, retry_hint, status_is_retryable};
use crate::secret::{ApiKey, redact};

/// Longest piece of a non-JSON error body quoted in an error message.
const BODY_EXCERPT: usize = 300;

/// Transport settings shared by the adapters.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Limit on one attempt, from connecting to the last byte of the answer.
    pub timeout: Duration,
    /// Limit on establishing the connection, so a dead host fails fast.
    pub connect_timeout: Duration,
    pub retry: RetryPolicy,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
        }
    }
}

/// A JSON-over-HTTPS client for one provider.
#[derive(Debug, Clone)]
pub(crate) struct HttpClient {
    provider: &'static str,
    client: reqwest::Client,
    retry: RetryPolicy,
}

/// One failed attempt, before deciding whether to try again.
struct Failure {
    error: ProviderError,
    retryable: bool,
    hint: Option<Duration>,
}

impl HttpClient {
    pub(crate) fn new(
        provider: &'static str,
        options: &HttpOptions,
    ) -> Result<Self, ProviderError> {
        let client = reqwest::Client::builder()
            .timeout(options.timeout)
            .connect_timeout(options.connect_timeout)
            .build()
            .map_err(|e| {
                ProviderError::Config(format!("{provider}: cannot build the HTTP client: {e}"))
            })?;
        Ok(Self {
            provider,
            client,
            retry: options.retry.clone(),
        })
    }

    /// A header carrying the key, marked sensitive so the HTTP stack never prints it.
    pub(crate) fn secret_header(
        &self,
        name: &'static str,
        value: &str,
    ) -> Result<(HeaderName, HeaderValue), ProviderError> {
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            ProviderError::Config(format!(
                "{}: the API key contains characters not allowed in an HTTP header",
                self.provider
            ))
        })?;
        value.set_sensitive(true);
        Ok((HeaderName::from_static(name), value))
    }

    /// POSTs `body` as JSON and decodes the answer, retrying per the policy. `key` is
    /// only used to scrub error text.
    pub(crate) async fn post_json<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        url: &str,
        mut headers: HeaderMap,
        body: &B,
        key: Option<&ApiKey>,
    ) -> Result<T, ProviderError> {
        let payload = serde_json::to_vec(body).map_err(|e| {
            ProviderError::Config(format!("{}: cannot encode the request: {e}", self.provider))
        })?;
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));

        let mut attempt: u32 = 0;
        let mut spent = Duration::ZERO;
        loop {
            attempt += 1;
            let started = Instant::now();
            let outcome = self.attempt(url, &headers, &payload, key).await;
            spent += started.elapsed();
            let failure = match outcome {
                Ok(text) => return self.decode(&text),
                Err(failure) => failure,
            };
            if !failure.retryable || attempt >= self.retry.max_attempts {
                return Err(with_attempts(failure.error, attempt, None));
            }
            let delay = match failure.hint {
                Some(hint) if hint > self.retry.max_backoff => {
                    let why =
                        format!("the provider asked to wait {hint:?}, beyond the retry limit");
                    return Err(with_attempts(failure.error, attempt, Some(why)));
                }
                Some(hint) => hint,
                None => self.retry.backoff(attempt),
            };
            if spent + delay > self.retry.max_elapsed {
                let why = format!("retry time budget of {:?} spent", self.retry.max_elapsed);
                return Err(with_attempts(failure.error, attempt, Some(why)));
            }
            tracing::warn!(
                provider = self.provider,
                attempt,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                error = %failure.error,
                "provider request failed; retrying"
            );
            self.retry.sleeper.sleep(delay).await;
            spent += delay;
        }
    }

    async fn attempt(
        &self,
        url: &str,
        headers: &HeaderMap,
        payload: &[u8],
        key: Option<&ApiKey>,
    ) -> Result<String, Failure> {
        let response = self
            .client
            .post(url)
            .headers(headers.clone())
            .body(payload.to_vec())
            .send()
            .await
            .map_err(|e| self.transport(e, key))?;
        let status = response.status();
        let response_headers = response.headers().clone();
        let text = response.text().await.map_err(|e| self.transport(e, key))?;
        if status.is_success() {
            return Ok(text);
        }
        let json: Option<Value> = serde_json::from_str(&text).ok();
        let code = status.as_u16();
        let message = redact(
            key,
            &error_message(json.as_ref(), &text, status.canonical_reason()),
        );
        let retryable = status_is_retryable(code) && !is_quota_exhausted(json.as_ref());
        Err(Failure {
            error: ProviderError::Http {
                provider: self.provider,
                status: code,
                message,
            },
            retryable,
            hint: retry_hint(&response_headers, json.as_ref()),
        })
    }

    fn transport(&self, error: reqwest::Error, key: Option<&ApiKey>) -> Failure {
        let retryable =
            error.is_timeout() || error.is_connect() || error.is_request() || error.is_body();
        let kind = if error.is_timeout() {
            "request timed out"
        } else if error.is_connect() {
            "cannot connect"
        } else {
            "request failed"
        };
        // The URL is dropped from the text: it is noise here, and no adapter should ever
        // put a key in one, but this makes sure.
        let detail = error_chain(&error.without_url());
        Failure {
            error: ProviderError::Transport {
                provider: self.provider,
                message: redact(key, &format!("{kind}: {detail}")),
            },
            retryable,
            hint: None,
        }
    }

    fn decode<T: DeserializeOwned>(&self, text: &str) -> Result<T, ProviderError> {
        serde_json::from_str(text).map_err(|e| ProviderError::InvalidResponse {
            provider: self.provider,
            message: format!("cannot decode the answer: {e}"),
        })
    }
}

/// An error and its sources on one line ("error sending request: connection refused").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let part = inner.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = inner.source();
    }
    text
}

fn with_attempts(error: ProviderError, attempts: u32, why: Option<String>) -> ProviderError {
    if attempts <= 1 && why.is_none() {
        return error;
    }
    let suffix = match why {
        Some(why) => format!(" (gave up after {attempts} attempt(s): {why})"),
        None => format!(" (gave up after {attempts} attempts)"),
    };
    match error {
        ProviderError::Http {
            provider,
            status,
            message,
        } => ProviderError::Http {
            provider,
            status,
            message: message + &suffix,
        },
        ProviderError::Transport { provider, message } => ProviderError::Transport {
            provider,
            message: message + &suffix,
        },
        other => other,
    }
}

/// OpenAI answers 429 both for "slow down" and for "out of credit"; only the first
/// gets better by waiting.
fn is_quota_exhausted(body: Option<&Value>) -> bool {
    let Some(error) = body.and_then(|b| b.get("error")) else {
        return false;
    };
    ["code", "type"]
        .iter()
        .any(|field| error.get(*field).and_then(Value::as_str) == Some("insufficient_quota"))
}

/// The provider's own explanation, from whichever error envelope it uses:
/// Google `{"error":{"message","status"}}`, OpenAI `{"error":{"message","code"}}`,
/// Anthropic `{"error":{"type","message"}}`, Ollama native `{"error":"…"}`, or a bare
/// `{"message"}` / `{"detail"}`. Falls back to an excerpt of the raw body.
fn error_message(json: Option<&Value>, raw: &str, reason: Option<&str>) -> String {
    if let Some(json) = json {
        let error = json.get("error");
        if let Some(text) = error.and_then(Value::as_str) {
            return text.to_owned();
        }
        let message = error
            .and_then(|e| e.get("message"))
            .or_else(|| json.get("message"))
            .or_else(|| json.get("detail"))
            .and_then(Value::as_str);
        if let Some(message) = message {
            let kind = error.and_then(|e| {
                ["status", "code", "type"]
                    .iter()
                    .find_map(|f| e.get(*f).and_then(Value::as_str))
            });
            return match kind {
                Some(kind) => format!("{message} [{kind}]"),
                None => message.to_owned(),
            };
        }
    }
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return reason.unwrap_or("no error message").to_owned();
    }
    let mut excerpt: String = trimmed.chars().take(BODY_EXCERPT).collect();
    if excerpt.len() < trimmed.len() {
        excerpt.push('…');
    }
    excerpt
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_from_each_envelope() {
        let google =
            json!({"error": {"code": 400, "message": "bad dim", "status": "INVALID_ARGUMENT"}});
        assert_eq!(
            error_message(Some(&google), "", None),
            "bad dim [INVALID_ARGUMENT]"
        );
        let openai = json!({"error": {"message": "Incorrect API key", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}});
        assert_eq!(
            error_message(Some(&openai), "", None),
            "Incorrect API key [invalid_api_key]"
        );
        let anthropic = json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}});
        assert_eq!(
            error_message(Some(&anthropic), "", None),
            "invalid x-api-key [authentication_error]"
        );
        let ollama = json!({"error": "model not found"});
        assert_eq!(error_message(Some(&ollama), "", None), "model not found");
        assert_eq!(
            error_message(None, "  <html>oops</html> ", None),
            "<html>oops</html>"
        );
        assert_eq!(error_message(None, "", Some("Bad Gateway")), "Bad Gateway");
        let long = "x".repeat(1000);
        assert_eq!(
            error_message(None, &long, None).chars().count(),
            BODY_EXCERPT + 1
        );
    }

    #[test]
    fn insufficient_quota_is_detected() {
        let quota = json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}});
        assert!(is_quota_exhausted(Some(&quota)));
        let rate = json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}});
        assert!(!is_quota_exhausted(Some(&rate)));
        assert!(!is_quota_exhausted(None));
    }
}
