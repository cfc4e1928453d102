//! Helpers shared by the adapter tests: a sleeper that only records, fast HTTP options,
//! and request inspection.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cortex_providers::{HttpOptions, RetryPolicy, SleepFuture, Sleeper};
use serde_json::Value;
use wiremock::{MockServer, Request};

/// A key that must never appear in an error, a log or a Debug string.
pub const KEY: &str = "test-key-5f2a9c1e";

/// Records the delays the retry loop asks for and returns at once, so tests can assert
/// that a `Retry-After` was honoured without waiting for it.
#[derive(Debug, Default)]
pub struct RecordingSleeper {
    slept: Mutex<Vec<Duration>>,
}

impl RecordingSleeper {
    pub fn slept(&self) -> Vec<Duration> {
        self.slept.lock().unwrap().clone()
    }
}

impl Sleeper for RecordingSleeper {
    fn sleep(&self, duration: Duration) -> SleepFuture {
        self.slept.lock().unwrap().push(duration);
        Box::pin(async {})
    }
}

/// Short timeouts, three attempts, and a recording sleeper.
pub fn fast_http() -> (HttpOptions, Arc<RecordingSleeper>) {
    let sleeper = Arc::new(RecordingSleeper::default());
    let options = HttpOptions {
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(2),
        retry: RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_secs(30),
            max_elapsed: Duration::from_secs(120),
            sleeper: sleeper.clone(),
        },
    };
    (options, sleeper)
}

pub async fn requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap_or_default()
}

pub fn body(request: &Request) -> Value {
    serde_json::from_slice(&request.body).unwrap()
}

pub fn header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request.headers.get(name).map(|v| v.to_str().unwrap())
}

pub fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// An env lookup over fixed pairs, so no test touches the process environment.
pub fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

pub fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}
