use cortex_core::{error::ProviderError, reranker::Reranker};
use cortex_providers::ApiKey;
use cortex_providers::rerank::{HttpReranker, RerankConfig, RerankStyle};
use serde_json::json;
use wiremock::matchers::{header as has_header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::common::{KEY, body, fast_http, requests};

fn reranker(server: &MockServer, style: RerankStyle) -> HttpReranker {
    let (http, _) = fast_http();
    HttpReranker::new(RerankConfig {
        base_url: server.uri(),
        model: "rerank-test".into(),
        http,
        ..RerankConfig::new(style, ApiKey::new(KEY))
    })
    .unwrap()
}

fn docs() -> Vec<String> {
    [
        "Carson City is the capital of Nevada.",
        "Washington, D.C. is the capital of the USA.",
        "Capital punishment",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

#[tokio::test]
async fn cohere_v2_request_and_results() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v2/rerank"))
        .and(has_header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "07734bd2-2473-4f07-94e1-0d9f0e6843cf",
            "results": [{"index": 1, "relevance_score": 0.99}, {"index": 0, "relevance_score": 0.42}],
            "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let hits = reranker(&server, RerankStyle::Cohere)
        .rerank("capital of the US", &docs(), 2)
        .await
        .unwrap();
    assert_eq!(
        hits.iter().map(|h| (h.index, h.score)).collect::<Vec<_>>(),
        [(1, 0.99), (0, 0.42)]
    );
    let sent = body(&requests(&server).await[0]);
    assert_eq!(
        sent,
        json!({"model": "rerank-test", "query": "capital of the US", "documents": docs(), "top_n": 2})
    );
}

#[tokio::test]
async fn jina_asks_for_no_documents_back() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/rerank"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "model": "rerank-test",
            "usage": {"total_tokens": 38},
            "results": [{"index": 2, "relevance_score": 0.7}]
        })))
        .mount(&server)
        .await;
    let hits = reranker(&server, RerankStyle::Jina)
        .rerank("q", &docs(), 5)
        .await
        .unwrap();
    assert_eq!(hits[0].index, 2);
    let sent = body(&requests(&server).await[0]);
    assert_eq!(sent["top_n"], 3, "never more than the documents");
    assert_eq!(sent["return_documents"], false);
}

#[tokio::test]
async fn voyage_uses_top_k_and_data() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/rerank"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": [{"relevance_score": 0.4, "index": 0}, {"relevance_score": 0.1, "index": 2}],
            "model": "rerank-test",
            "usage": {"total_tokens": 26}
        })))
        .mount(&server)
        .await;
    let hits = reranker(&server, RerankStyle::Voyage)
        .rerank("q", &docs(), 2)
        .await
        .unwrap();
    assert_eq!(hits.iter().map(|h| h.index).collect::<Vec<_>>(), [0, 2]);
    let sent = body(&requests(&server).await[0]);
    assert_eq!(sent["top_k"], 2);
    assert!(sent.get("top_n").is_none());
}

#[tokio::test]
async fn out_of_range_indexes_and_missing_lists_are_errors() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"results": [{"index": 9, "relevance_score": 1.0}]})),
        )
        .mount(&server)
        .await;
    let err = reranker(&server, RerankStyle::Cohere)
        .rerank("q", &docs(), 2)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::InvalidResponse { .. }),
        "{err:?}"
    );
    let err = reranker(&server, RerankStyle::Voyage)
        .rerank("q", &docs(), 2)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("data"), "{err}");
}

#[tokio::test]
async fn unauthorized_is_reported_without_the_key_and_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(401)
                .set_body_json(json!({"message": format!("invalid api token {KEY}")})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let err = reranker(&server, RerankStyle::Cohere)
        .rerank("q", &docs(), 2)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::Http { status: 401, .. }),
        "{err:?}"
    );
    assert!(!err.to_string().contains(KEY));
}

#[test]
fn env_config_names_the_missing_key_and_refuses_unknown_services() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    assert!(RerankConfig::from_env_map(env(&[])).unwrap().is_none());
    assert!(
        RerankConfig::from_env_map(env(&[("CORTEX_RERANK_PROVIDER", "none")]))
            .unwrap()
            .is_none()
    );
    match RerankConfig::from_env_map(env(&[("CORTEX_RERANK_PROVIDER", "voyage")])) {
        Err(ProviderError::MissingKey { variable, .. }) => assert_eq!(variable, "VOYAGE_API_KEY"),
        other => panic!("expected MissingKey, got {other:?}"),
    }
    assert!(matches!(
        RerankConfig::from_env_map(env(&[("CORTEX_RERANK_PROVIDER", "bing")])),
        Err(ProviderError::Config(_))
    ));
    let config = RerankConfig::from_env_map(env(&[
        ("CORTEX_RERANK_PROVIDER", "Cohere"),
        ("COHERE_API_KEY", "k"),
        ("CORTEX_RERANK_MODEL", "rerank-x"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(
        (config.style, config.model.as_str()),
        (RerankStyle::Cohere, "rerank-x")
    );
    assert!(!format!("{config:?}").contains("\"k\""));
}
