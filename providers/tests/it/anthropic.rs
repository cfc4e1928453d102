use cortex_core::{error::ProviderError, provider::EmbedTask, provider::LLMProvider};
use cortex_providers::{AnthropicConfig, AnthropicProvider, ApiKey};
use serde_json::json;
use wiremock::matchers::{header as has_header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::common::{KEY, body, fast_http, header, requests, texts};

fn provider(server: &MockServer) -> AnthropicProvider {
    let (http, _) = fast_http();
    AnthropicProvider::new(AnthropicConfig {
        base_url: format!("{}/v1", server.uri()),
        generation_model: "claude-test".into(),
        http,
        ..AnthropicConfig::new(ApiKey::new(KEY))
    })
    .unwrap()
}

#[tokio::test]
async fn messages_request_shape_text_and_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(has_header("x-api-key", KEY))
        .and(has_header("anthropic-version", "2023-06-01"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_012899dyMDyCX4FgMNNbao8k", "type": "message", "role": "assistant",
            "model": "claude-test",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "x"},
                {"type": "text", "text": "Hello! "},
                {"type": "text", "text": "How can I help?"}
            ],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 30,
                      "cache_creation_input_tokens": 2, "cache_read_input_tokens": 3}
        })))
        .expect(1)
        .mount(&server)
        .await;

    let out = provider(&server)
        .generate("Hello, world", 0.2, 1024)
        .await
        .unwrap();
    assert_eq!(out.text, "Hello! How can I help?");
    assert_eq!(out.usage.input_tokens, 15);
    assert_eq!(out.usage.output_tokens, 30);

    let reqs = requests(&server).await;
    assert_eq!(header(&reqs[0], "content-type"), Some("application/json"));
    assert_eq!(
        body(&reqs[0]),
        json!({"model": "claude-test", "max_tokens": 1024, "temperature": 0.2,
               "messages": [{"role": "user", "content": "Hello, world"}]})
    );
}

#[tokio::test]
async fn temperature_can_be_left_out_for_models_that_refuse_it() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1}
        })))
        .mount(&server)
        .await;
    let (http, _) = fast_http();
    let p = AnthropicProvider::new(AnthropicConfig {
        base_url: format!("{}/v1", server.uri()),
        send_temperature: false,
        http,
        ..AnthropicConfig::new(ApiKey::new(KEY))
    })
    .unwrap();
    p.generate("q", 0.0, 10).await.unwrap();
    let sent = body(&requests(&server).await[0]);
    assert!(sent.get("temperature").is_none(), "{sent}");
    assert_eq!(sent["model"], "claude-haiku-4-5");
}

#[tokio::test]
async fn refusals_are_errors() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "content": [], "stop_reason": "refusal",
            "usage": {"input_tokens": 1, "output_tokens": 0}
        })))
        .mount(&server)
        .await;
    let err = provider(&server).generate("q", 0.0, 10).await.unwrap_err();
    assert!(
        matches!(
            err,
            ProviderError::InvalidResponse {
                provider: "anthropic",
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn embed_is_unsupported_and_sends_nothing() {
    let server = MockServer::start().await;
    let p = provider(&server);
    let err = p
        .embed(&texts(&["x"]), EmbedTask::Document)
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        ProviderError::Unsupported {
            provider: "anthropic",
            operation: "embeddings"
        }
    ));
    assert!(requests(&server).await.is_empty());
    assert_eq!(p.name(), "anthropic");
}

#[tokio::test]
async fn debug_hides_the_key() {
    let server = MockServer::start().await;
    let text = format!("{:?}", provider(&server));
    assert!(!text.contains(KEY), "{text}");
}
