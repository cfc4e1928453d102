use cortex_core::{error::ProviderError, provider::EmbedTask, provider::LLMProvider};
use cortex_providers::{ApiKey, GeminiConfig, GeminiProvider};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::common::{KEY, body, fast_http, header, norm, requests, texts};

const EMBED_PATH: &str = "/v1beta/models/gemini-embedding-001:batchEmbedContents";

fn provider(server: &MockServer, dimension: usize) -> GeminiProvider {
    let (http, _) = fast_http();
    GeminiProvider::new(GeminiConfig {
        base_url: format!("{}/v1beta", server.uri()),
        dimension,
        generation_model: "gemini-test".into(),
        http,
        ..GeminiConfig::new(ApiKey::new(KEY))
    })
    .unwrap()
}

/// Answers each embed request with one vector per text: text `t{i}` gets
/// `[i + 1, 1, 0, 0]`, unnormalised, so order and normalisation can be checked.
struct EchoEmbeddings;

impl Respond for EchoEmbeddings {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let embeddings: Vec<Value> = body["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let text = r["content"]["parts"][0]["text"].as_str().unwrap();
                let i: f32 = text.trim_start_matches('t').parse().unwrap();
                json!({"values": [i + 1.0, 1.0, 0.0, 0.0]})
            })
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({ "embeddings": embeddings }))
    }
}

#[tokio::test]
async fn embed_sends_the_documented_request_and_normalises_truncated_vectors() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(EMBED_PATH))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "embeddings": [{"values": [3.0, 4.0, 0.0, 0.0]}, {"values": [0.0, 0.0, 0.0, 2.0]}]
        })))
        .expect(1)
        .mount(&server)
        .await;

    let p = provider(&server, 4);
    let out = p
        .embed(&texts(&["first", "second"]), EmbedTask::Document)
        .await
        .unwrap();

    assert_eq!(
        out.vectors,
        vec![vec![0.6, 0.8, 0.0, 0.0], vec![0.0, 0.0, 0.0, 1.0]]
    );
    // batchEmbedContents documents no token counts: 0, not a guess.
    assert_eq!(out.usage.input_tokens, 0);
    assert_eq!(out.usage.output_tokens, 0);

    let reqs = requests(&server).await;
    let req = &reqs[0];
    assert_eq!(header(req, "x-goog-api-key"), Some(KEY));
    assert_eq!(req.url.query(), None, "the key must not travel in the URL");
    assert_eq!(header(req, "content-type"), Some("application/json"));
    assert_eq!(
        body(req),
        json!({"requests": [
            {"model": "models/gemini-embedding-001",
             "content": {"parts": [{"text": "first"}]},
             "taskType": "RETRIEVAL_DOCUMENT",
             "outputDimensionality": 4},
            {"model": "models/gemini-embedding-001",
             "content": {"parts": [{"text": "second"}]},
             "taskType": "RETRIEVAL_DOCUMENT",
             "outputDimensionality": 4}
        ]})
    );
    assert_eq!(p.embedding_signature().encode(), "gemini-embedding-001@4");
}

#[tokio::test]
async fn query_task_uses_retrieval_query_and_usage_metadata_is_read_when_present() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(EMBED_PATH))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "embeddings": [{"values": [1.0, 0.0, 0.0, 0.0]}],
            "usageMetadata": {"promptTokenCount": 7,
                              "promptTokenDetails": [{"modality": "TEXT", "tokenCount": 7}]}
        })))
        .mount(&server)
        .await;

    let out = provider(&server, 4)
        .embed(&texts(&["where is my key?"]), EmbedTask::Query)
        .await
        .unwrap();
    assert_eq!(out.usage.input_tokens, 7);
    let reqs = requests(&server).await;
    assert_eq!(body(&reqs[0])["requests"][0]["taskType"], "RETRIEVAL_QUERY");
}

#[tokio::test]
async fn large_inputs_are_split_into_batches_of_100_in_order() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(EMBED_PATH))
        .respond_with(EchoEmbeddings)
        .expect(3)
        .mount(&server)
        .await;

    let inputs: Vec<String> = (0..250).map(|i| format!("t{i}")).collect();
    let out = provider(&server, 4)
        .embed(&inputs, EmbedTask::Document)
        .await
        .unwrap();

    let sizes: Vec<usize> = requests(&server)
        .await
        .iter()
        .map(|r| body(r)["requests"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, vec![100, 100, 50]);
    assert_eq!(out.vectors.len(), 250);
    for (i, v) in out.vectors.iter().enumerate() {
        // [i + 1, 1] normalised: the ratio identifies the input.
        let ratio = v[0] / v[1];
        assert!(
            (ratio - (i as f32 + 1.0)).abs() < 1e-3,
            "vector {i} out of order"
        );
        assert!((norm(v) - 1.0).abs() < 1e-5);
    }
}

#[tokio::test]
async fn full_size_vectors_are_passed_through_unchanged() {
    let server = MockServer::start().await;
    // Google normalises the native 3072-dimension vector itself.
    let mut values = vec![0.01f32; 3072];
    values[0] = 0.5;
    Mock::given(method("POST"))
        .and(path(EMBED_PATH))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"embeddings": [{"values": values}]})),
        )
        .mount(&server)
        .await;

    let out = provider(&server, 3072)
        .embed(&texts(&["x"]), EmbedTask::Document)
        .await
        .unwrap();
    assert_eq!(out.vectors[0], values);
}

#[tokio::test]
async fn empty_input_makes_no_request() {
    let server = MockServer::start().await;
    let out = provider(&server, 4)
        .embed(&[], EmbedTask::Document)
        .await
        .unwrap();
    assert!(out.vectors.is_empty());
    assert!(requests(&server).await.is_empty());
}

async fn embed_with_answer(answer: Value) -> ProviderError {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(EMBED_PATH))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer))
        .mount(&server)
        .await;
    provider(&server, 4)
        .embed(&texts(&["a", "b"]), EmbedTask::Document)
        .await
        .unwrap_err()
}

#[tokio::test]
async fn invalid_vector_answers_are_errors() {
    let one_vector = json!({"embeddings": [{"values": [1.0, 0.0, 0.0, 0.0]}]});
    let err = embed_with_answer(one_vector).await;
    assert!(
        matches!(
            err,
            ProviderError::InvalidResponse {
                provider: "gemini",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("expected 2 vectors, got 1"),
        "{err}"
    );

    let short =
        json!({"embeddings": [{"values": [1.0, 0.0, 0.0, 0.0]}, {"values": [1.0, 0.0, 0.0]}]});
    let err = embed_with_answer(short).await;
    assert!(
        err.to_string()
            .contains("vector 1: expected dimension 4, got 3"),
        "{err}"
    );

    // 1e39 overflows f32 to infinity.
    let infinite = json!({"embeddings": [{"values": [1.0, 0.0, 0.0, 0.0]}, {"values": [1e39, 0.0, 0.0, 0.0]}]});
    let err = embed_with_answer(infinite).await;
    assert!(err.to_string().contains("not finite"), "{err}");

    let null = json!({"embeddings": [{"values": [1.0, null, 0.0, 0.0]}, {"values": [1.0, 0.0, 0.0, 0.0]}]});
    let err = embed_with_answer(null).await;
    assert!(
        matches!(err, ProviderError::InvalidResponse { .. }),
        "{err}"
    );

    let zero =
        json!({"embeddings": [{"values": [0.0, 0.0, 0.0, 0.0]}, {"values": [1.0, 0.0, 0.0, 0.0]}]});
    let err = embed_with_answer(zero).await;
    assert!(err.to_string().contains("all zeros"), "{err}");

    let err = embed_with_answer(json!({})).await;
    assert!(
        err.to_string().contains("expected 2 vectors, got 0"),
        "{err}"
    );
}

#[tokio::test]
async fn generate_sends_config_and_reads_usage_metadata() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1beta/models/gemini-test:generateContent"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{
                "content": {"role": "model", "parts": [
                    {"text": "let me think", "thought": true},
                    {"text": "Hello"},
                    {"text": ", world"}
                ]},
                "finishReason": "STOP",
                "index": 0
            }],
            "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 2,
                              "thoughtsTokenCount": 5, "totalTokenCount": 16},
            "modelVersion": "gemini-test",
            "responseId": "abc123"
        })))
        .expect(1)
        .mount(&server)
        .await;

    let out = provider(&server, 4)
        .generate("Say hello", 0.25, 64)
        .await
        .unwrap();
    assert_eq!(out.text, "Hello, world");
    assert_eq!(out.usage.input_tokens, 9);
    // Thinking is billed as output.
    assert_eq!(out.usage.output_tokens, 7);

    let reqs = requests(&server).await;
    assert_eq!(header(&reqs[0], "x-goog-api-key"), Some(KEY));
    assert_eq!(reqs[0].url.query(), None);
    assert_eq!(
        body(&reqs[0]),
        json!({
            "contents": [{"role": "user", "parts": [{"text": "Say hello"}]}],
            "generationConfig": {"temperature": 0.25, "maxOutputTokens": 64}
        })
    );
}

#[tokio::test]
async fn temperature_can_be_left_out() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "STOP"}]
        })))
        .mount(&server)
        .await;
    let (http, _) = fast_http();
    let p = GeminiProvider::new(GeminiConfig {
        base_url: format!("{}/v1beta", server.uri()),
        send_temperature: false,
        http,
        ..GeminiConfig::new(ApiKey::new(KEY))
    })
    .unwrap();
    let out = p.generate("q", 0.0, 10).await.unwrap();
    assert_eq!(out.text, "ok");
    // No usageMetadata: zero, not a guess.
    assert_eq!(out.usage.input_tokens + out.usage.output_tokens, 0);
    let reqs = requests(&server).await;
    assert_eq!(
        body(&reqs[0])["generationConfig"],
        json!({"maxOutputTokens": 10})
    );
    assert!(
        reqs[0]
            .url
            .path()
            .ends_with("/models/gemini-3.5-flash-lite:generateContent")
    );
}

#[tokio::test]
async fn blocked_or_empty_generations_are_errors() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "promptFeedback": {"blockReason": "SAFETY"},
            "usageMetadata": {"promptTokenCount": 4}
        })))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"role": "model"}, "finishReason": "MAX_TOKENS"}]
        })))
        .mount(&server)
        .await;
    let p = provider(&server, 4);
    let blocked = p.generate("q", 0.0, 10).await.unwrap_err();
    assert!(
        blocked.to_string().contains("blocked (SAFETY)"),
        "{blocked}"
    );
    let empty = p.generate("q", 0.0, 10).await.unwrap_err();
    assert!(empty.to_string().contains("MAX_TOKENS"), "{empty}");
}

#[tokio::test]
async fn debug_hides_the_key() {
    let server = MockServer::start().await;
    let p = provider(&server, 4);
    let text = format!("{p:?}");
    assert!(!text.contains(KEY), "{text}");
    assert!(text.contains("***"), "{text}");
}
