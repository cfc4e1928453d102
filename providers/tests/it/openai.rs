use cortex_core::{error::ProviderError, provider::EmbedTask, provider::LLMProvider};
use cortex_providers::{ApiKey, MaxTokensField, OpenAiConfig, OpenAiProvider};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::common::{KEY, body, fast_http, header, requests, texts};

fn config(server: &MockServer, key: Option<&str>) -> OpenAiConfig {
    let (http, _) = fast_http();
    OpenAiConfig {
        base_url: format!("{}/v1", server.uri()),
        embed_model: "text-embedding-3-small".into(),
        dimension: 3,
        generation_model: "gpt-test".into(),
        http,
        ..OpenAiConfig::openai(key.map(ApiKey::new))
    }
}

fn provider(server: &MockServer) -> OpenAiProvider {
    OpenAiProvider::new(config(server, Some(KEY))).unwrap()
}

fn chat_answer(content: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1723780938,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 23, "completion_tokens": 8, "total_tokens": 31,
                  "completion_tokens_details": {"reasoning_tokens": 0}}
    }))
}

#[tokio::test]
async fn embeddings_request_shape_and_results_sorted_by_index() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": [
                {"object": "embedding", "index": 1, "embedding": [0.0, 1.0, 0.0]},
                {"object": "embedding", "index": 0, "embedding": [1.0, 0.0, 0.0]}
            ],
            "model": "text-embedding-3-small",
            "usage": {"prompt_tokens": 8, "total_tokens": 8}
        })))
        .expect(1)
        .mount(&server)
        .await;

    let p = provider(&server);
    let out = p
        .embed(&texts(&["first", "second"]), EmbedTask::Query)
        .await
        .unwrap();
    assert_eq!(out.vectors, vec![vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0]]);
    assert_eq!(out.usage.input_tokens, 8);
    assert_eq!(out.usage.output_tokens, 0);

    let reqs = requests(&server).await;
    let auth = format!("Bearer {KEY}");
    assert_eq!(header(&reqs[0], "authorization"), Some(auth.as_str()));
    assert_eq!(
        body(&reqs[0]),
        json!({"model": "text-embedding-3-small", "input": ["first", "second"],
               "encoding_format": "float"})
    );
    assert_eq!(p.name(), "openai");
    assert_eq!(p.embedding_signature().encode(), "text-embedding-3-small@3");
}

#[tokio::test]
async fn dimensions_are_sent_when_configured() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "data": [{"index": 0, "embedding": [1.0, 0.0, 0.0]}]
        })))
        .mount(&server)
        .await;
    let p = OpenAiProvider::new(OpenAiConfig {
        send_dimensions: true,
        ..config(&server, Some(KEY))
    })
    .unwrap();
    let out = p.embed(&texts(&["x"]), EmbedTask::Document).await.unwrap();
    // No usage block (some compatible servers omit it): zero.
    assert_eq!(out.usage.input_tokens, 0);
    let reqs = requests(&server).await;
    assert_eq!(body(&reqs[0])["dimensions"], 3);
}

/// Answers `/embeddings` with one vector per input, `[n, 1, 0]` for input `t{n}`.
struct EchoEmbeddings;

impl Respond for EchoEmbeddings {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let data: Vec<Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(index, text)| {
                let n: f32 = text.as_str().unwrap()[1..].parse().unwrap();
                json!({"index": index, "embedding": [n, 1.0, 0.0]})
            })
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({
            "data": data, "usage": {"prompt_tokens": data.len(), "total_tokens": data.len()}
        }))
    }
}

#[tokio::test]
async fn batches_split_at_max_batch_in_order() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(EchoEmbeddings)
        .expect(3)
        .mount(&server)
        .await;
    let p = OpenAiProvider::new(OpenAiConfig {
        max_batch: 2,
        ..config(&server, Some(KEY))
    })
    .unwrap();
    let inputs: Vec<String> = (0..5).map(|i| format!("t{i}")).collect();
    let out = p.embed(&inputs, EmbedTask::Document).await.unwrap();
    let firsts: Vec<f32> = out.vectors.iter().map(|v| v[0]).collect();
    assert_eq!(firsts, vec![0.0, 1.0, 2.0, 3.0, 4.0]);
    assert_eq!(out.usage.input_tokens, 5);
}

#[tokio::test]
async fn bad_indices_and_vectors_are_errors() {
    for (data, expect) in [
        (
            json!([{"index": 0, "embedding": [1.0, 0.0, 0.0]}, {"index": 0, "embedding": [1.0, 0.0, 0.0]}]),
            "indices",
        ),
        (
            json!([{"index": 0, "embedding": [1.0, 0.0, 0.0]}]),
            "expected 2 vectors, got 1",
        ),
        (
            json!([{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": [1.0, 0.0, 0.0]}]),
            "vector 0: expected dimension 3, got 2",
        ),
        (
            json!([{"index": 0, "embedding": [1.0, 0.0, 0.0]}, {"index": 1, "embedding": [-1e39, 0.0, 0.0]}]),
            "not finite",
        ),
    ] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"data": data})))
            .mount(&server)
            .await;
        let err = provider(&server)
            .embed(&texts(&["a", "b"]), EmbedTask::Document)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ProviderError::InvalidResponse { .. }),
            "{err}"
        );
        assert!(err.to_string().contains(expect), "{err} lacks {expect}");
    }
}

#[tokio::test]
async fn chat_sends_max_tokens_by_default() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(chat_answer(json!("Hello!")))
        .expect(1)
        .mount(&server)
        .await;
    let out = provider(&server)
        .generate("Say hello", 0.2, 256)
        .await
        .unwrap();
    assert_eq!(out.text, "Hello!");
    assert_eq!(out.usage.input_tokens, 23);
    assert_eq!(out.usage.output_tokens, 8);

    let reqs = requests(&server).await;
    let auth = format!("Bearer {KEY}");
    assert_eq!(header(&reqs[0], "authorization"), Some(auth.as_str()));
    assert_eq!(
        body(&reqs[0]),
        json!({"model": "gpt-test",
               "messages": [{"role": "user", "content": "Say hello"}],
               "temperature": 0.2,
               "max_tokens": 256})
    );
}

#[tokio::test]
async fn chat_field_name_and_temperature_are_configurable() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(chat_answer(json!("ok")))
        .mount(&server)
        .await;
    let p = OpenAiProvider::new(OpenAiConfig {
        max_tokens_field: MaxTokensField::MaxCompletionTokens,
        send_temperature: false,
        ..config(&server, Some(KEY))
    })
    .unwrap();
    p.generate("q", 0.7, 99).await.unwrap();
    let sent = body(&requests(&server).await[0]);
    assert_eq!(sent["max_completion_tokens"], 99);
    assert!(sent.get("max_tokens").is_none(), "{sent}");
    assert!(sent.get("temperature").is_none(), "{sent}");
}

#[tokio::test]
async fn without_a_key_no_authorization_header_is_sent() {
    // Ollama, vLLM, llama.cpp and LM Studio run keyless.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(chat_answer(json!("hi")))
        .mount(&server)
        .await;
    let p = OpenAiProvider::new(OpenAiConfig {
        base_url: format!("{}/v1/", server.uri()),
        ..OpenAiConfig::ollama()
    })
    .unwrap();
    assert_eq!(p.name(), "ollama");
    assert_eq!(p.embedding_signature().encode(), "nomic-embed-text@768");
    p.generate("q", 0.0, 5).await.unwrap();
    let reqs = requests(&server).await;
    assert!(header(&reqs[0], "authorization").is_none());
    assert_eq!(body(&reqs[0])["model"], "llama3.2");
}

#[tokio::test]
async fn null_content_is_an_error_naming_the_reason() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                         "refusal": "I can't help with that."}, "finish_reason": "stop"}]
        })))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"choices": []})))
        .mount(&server)
        .await;
    let p = provider(&server);
    let refused = p.generate("q", 0.0, 5).await.unwrap_err();
    assert!(refused.to_string().contains("refused"), "{refused}");
    let empty = p.generate("q", 0.0, 5).await.unwrap_err();
    assert!(empty.to_string().contains("no choices"), "{empty}");
}

#[tokio::test]
async fn debug_hides_the_key() {
    let server = MockServer::start().await;
    let text = format!("{:?}", provider(&server));
    assert!(!text.contains(KEY), "{text}");
    assert!(text.contains("***"), "{text}");
}
