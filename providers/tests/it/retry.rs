//! The shared failure handling, exercised through the adapters.

use std::time::Duration;

use cortex_core::{error::ProviderError, provider::EmbedTask, provider::LLMProvider};
use cortex_providers::{
    AnthropicConfig, AnthropicProvider, ApiKey, GeminiConfig, GeminiProvider, HttpOptions,
    OpenAiConfig, OpenAiProvider,
};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::common::{KEY, fast_http, requests, texts};

fn gemini(base: &str, http: HttpOptions) -> GeminiProvider {
    GeminiProvider::new(GeminiConfig {
        base_url: format!("{base}/v1beta"),
        dimension: 2,
        http,
        ..GeminiConfig::new(ApiKey::new(KEY))
    })
    .unwrap()
}

fn openai(base: &str, http: HttpOptions) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiConfig {
        base_url: format!("{base}/v1"),
        dimension: 2,
        http,
        ..OpenAiConfig::openai(Some(ApiKey::new(KEY)))
    })
    .unwrap()
}

fn embeddings_ok() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"embeddings": [{"values": [1.0, 0.0]}]}))
}

async fn fail_once_then_succeed(server: &MockServer, failure: ResponseTemplate) {
    Mock::given(method("POST"))
        .respond_with(failure)
        .up_to_n_times(1)
        .mount(server)
        .await;
    Mock::given(method("POST"))
        .respond_with(embeddings_ok())
        .mount(server)
        .await;
}

#[tokio::test]
async fn a_429_with_retry_after_is_retried_after_the_asked_delay() {
    let server = MockServer::start().await;
    fail_once_then_succeed(
        &server,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "7")
            .set_body_json(json!({"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}})),
    )
    .await;
    let (http, sleeper) = fast_http();
    let out = gemini(&server.uri(), http)
        .embed(&texts(&["x"]), EmbedTask::Document)
        .await
        .unwrap();
    assert_eq!(out.vectors.len(), 1);
    assert_eq!(requests(&server).await.len(), 2);
    assert_eq!(sleeper.slept(), vec![Duration::from_secs(7)]);
}

#[tokio::test]
async fn retry_after_ms_and_http_dates_are_honoured() {
    let server = MockServer::start().await;
    fail_once_then_succeed(
        &server,
        ResponseTemplate::new(429)
            .insert_header("retry-after-ms", "250")
            .insert_header("retry-after", "9"),
    )
    .await;
    let (http, sleeper) = fast_http();
    gemini(&server.uri(), http)
        .embed(&texts(&["x"]), EmbedTask::Document)
        .await
        .unwrap();
    assert_eq!(sleeper.slept(), vec![Duration::from_millis(250)]);

    let server = MockServer::start().await;
    let when = (chrono::Utc::now() + chrono::TimeDelta::seconds(20)).to_rfc2822();
    fail_once_then_succeed(
        &server,
        ResponseTemplate::new(503).insert_header("retry-after", when.as_str()),
    )
    .await;
    let (http, sleeper) = fast_http();
    gemini(&server.uri(), http)
        .embed(&texts(&["x"]), EmbedTask::Document)
        .await
        .unwrap();
    let slept = sleeper.slept();
    assert_eq!(slept.len(), 1);
    assert!(
        slept[0] > Duration::from_secs(15) && slept[0] <= Duration::from_secs(20),
        "{slept:?}"
    );
}

#[tokio::test]
async fn gemini_retry_info_in_the_body_is_honoured() {
    let server = MockServer::start().await;
    fail_once_then_succeed(
        &server,
        ResponseTemplate::new(429).set_body_json(json!({"error": {
            "code": 429,
            "message": "You exceeded your current quota",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3.5s"}
            ]
        }})),
    )
    .await;
    let (http, sleeper) = fast_http();
    gemini(&server.uri(), http)
        .embed(&texts(&["x"]), EmbedTask::Document)
        .await
        .unwrap();
    assert_eq!(sleeper.slept(), vec![Duration::from_millis(3500)]);
}

#[tokio::test]
async fn persistent_5xx_exhausts_the_attempts() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).set_body_json(
            json!({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}),
        ))
        .mount(&server)
        .await;
    let (http, sleeper) = fast_http();
    let err = gemini(&server.uri(), http)
        .embed(&texts(&["x"]), EmbedTask::Document)
        .await
        .unwrap_err();
    assert_eq!(requests(&server).await.len(), 3);
    // Two waits, exponential: the second base is twice the first.
    assert_eq!(sleeper.slept().len(), 2);
    match &err {
        ProviderError::Http {
            provider,
            status,
            message,
        } => {
            assert_eq!((*provider, *status), ("gemini", 503));
            assert!(
                message.contains("The model is overloaded. [UNAVAILABLE]"),
                "{message}"
            );
            assert!(message.contains("gave up after 3 attempts"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn anthropic_529_overloaded_is_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(529).set_body_json(json!({
            "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}
        })))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "content": [{"type": "text", "text": "fine"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 1}
        })))
        .mount(&server)
        .await;
    let (http, sleeper) = fast_http();
    let p = AnthropicProvider::new(AnthropicConfig {
        base_url: format!("{}/v1", server.uri()),
        http,
        ..AnthropicConfig::new(ApiKey::new(KEY))
    })
    .unwrap();
    assert_eq!(p.generate("q", 0.0, 5).await.unwrap().text, "fine");
    assert_eq!(requests(&server).await.len(), 2);
    assert_eq!(sleeper.slept().len(), 1);
}

#[tokio::test]
async fn auth_errors_are_not_retried_and_never_show_the_key() {
    let server = MockServer::start().await;
    // A provider that echoes the key it was sent: the error must still not carry it.
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {
            "message": format!("Incorrect API key provided: {KEY}."),
            "type": "invalid_request_error", "param": null, "code": "invalid_api_key"
        }})))
        .mount(&server)
        .await;
    let (http, sleeper) = fast_http();
    let err = openai(&server.uri(), http)
        .embed(&texts(&["x"]), EmbedTask::Document)
        .await
        .unwrap_err();
    assert_eq!(requests(&server).await.len(), 1);
    assert!(sleeper.slept().is_empty());
    let shown = err.to_string();
    assert!(
        matches!(err, ProviderError::Http { status: 401, .. }),
        "{shown}"
    );
    assert!(
        shown.contains("Incorrect API key provided: ***. [invalid_api_key]"),
        "{shown}"
    );
    assert!(!shown.contains(KEY), "{shown}");
    assert!(!format!("{err:?}").contains(KEY));
}

#[tokio::test]
async fn bad_requests_and_forbidden_are_not_retried() {
    for status in [400, 403, 404] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(status).set_body_json(json!({"error": {
                "code": status, "message": "outputDimensionality too large", "status": "INVALID_ARGUMENT"
            }})))
            .mount(&server)
            .await;
        let (http, _) = fast_http();
        let err = gemini(&server.uri(), http)
            .embed(&texts(&["x"]), EmbedTask::Document)
            .await
            .unwrap_err();
        assert_eq!(requests(&server).await.len(), 1, "status {status}");
        assert!(
            err.to_string().contains("outputDimensionality too large"),
            "{err}"
        );
    }
}

#[tokio::test]
async fn openai_insufficient_quota_is_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).set_body_json(json!({"error": {
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota", "param": null, "code": "insufficient_quota"
        }})))
        .mount(&server)
        .await;
    let (http, _) = fast_http();
    let err = openai(&server.uri(), http)
        .generate("q", 0.0, 5)
        .await
        .unwrap_err();
    assert_eq!(requests(&server).await.len(), 1);
    assert!(
        err.to_string().contains("exceeded your current quota"),
        "{err}"
    );
}

#[tokio::test]
async fn a_hint_beyond_the_cap_ends_the_retries() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "3600"))
        .mount(&server)
        .await;
    let (http, sleeper) = fast_http();
    let err = gemini(&server.uri(), http)
        .embed(&texts(&["x"]), EmbedTask::Document)
        .await
        .unwrap_err();
    assert_eq!(requests(&server).await.len(), 1);
    assert!(sleeper.slept().is_empty());
    assert!(err.to_string().contains("beyond the retry limit"), "{err}");
}

#[tokio::test]
async fn the_total_time_budget_bounds_retries() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).insert_header("retry-after", "4"))
        .mount(&server)
        .await;
    let (mut http, sleeper) = fast_http();
    http.retry.max_attempts = 10;
    http.retry.max_elapsed = Duration::from_secs(10);
    let err = gemini(&server.uri(), http)
        .embed(&texts(&["x"]), EmbedTask::Document)
        .await
        .unwrap_err();
    // 4s + 4s fit in 10s; a third wait would not.
    assert_eq!(sleeper.slept(), vec![Duration::from_secs(4); 2]);
    assert_eq!(requests(&server).await.len(), 3);
    assert!(err.to_string().contains("budget"), "{err}");
}

#[tokio::test]
async fn connection_failures_are_retried_then_reported() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (http, sleeper) = fast_http();
    let err = gemini(&format!("http://127.0.0.1:{port}"), http)
        .embed(&texts(&["x"]), EmbedTask::Document)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ProviderError::Transport {
                provider: "gemini",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("cannot connect"), "{err}");
    assert!(
        err.to_string().contains("gave up after 3 attempts"),
        "{err}"
    );
    assert_eq!(sleeper.slept().len(), 2);
}

#[tokio::test]
async fn timeouts_are_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(embeddings_ok().set_delay(Duration::from_secs(3)))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(embeddings_ok())
        .mount(&server)
        .await;
    let (mut http, sleeper) = fast_http();
    http.timeout = Duration::from_millis(300);
    let out = gemini(&server.uri(), http)
        .embed(&texts(&["x"]), EmbedTask::Document)
        .await
        .unwrap();
    assert_eq!(out.vectors.len(), 1);
    assert_eq!(requests(&server).await.len(), 2);
    assert_eq!(sleeper.slept().len(), 1);
}

#[tokio::test]
async fn non_json_error_bodies_are_quoted() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(413).set_body_string("<html>Request Entity Too Large</html>"),
        )
        .mount(&server)
        .await;
    let (http, _) = fast_http();
    let err = openai(&server.uri(), http)
        .generate("q", 0.0, 5)
        .await
        .unwrap_err();
    assert_eq!(requests(&server).await.len(), 1);
    assert!(
        err.to_string().contains("Request Entity Too Large"),
        "{err}"
    );
}
