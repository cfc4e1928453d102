use cortex_core::{error::ProviderError, provider::EmbedTask};
use cortex_providers::{EmbedProviderKind, LlmProviderKind, MaxTokensField, ProviderConfig};
use serde_json::json;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::common::{KEY, body, env, requests, texts};

fn config(pairs: &[(&str, &str)]) -> Result<ProviderConfig, ProviderError> {
    ProviderConfig::from_env_map(env(pairs))
}

fn missing_key(err: ProviderError) -> &'static str {
    match err {
        ProviderError::MissingKey { variable, .. } => variable,
        other => panic!("expected MissingKey, got {other:?}"),
    }
}

#[test]
fn defaults_are_gemini_embeddings_and_no_generation() {
    let c = config(&[]).unwrap();
    assert_eq!(c.embed.provider, EmbedProviderKind::Gemini);
    assert_eq!(c.embedding_signature().encode(), "gemini-embedding-001@768");
    assert_eq!(c.llm.provider, LlmProviderKind::None);
    assert_eq!(c.llm.max_tokens_field, MaxTokensField::MaxTokens);
    assert!(c.llm.send_temperature);
    assert!(c.build_llm().unwrap().is_none());

    let c = config(&[
        ("CORTEX_EMBED_MODEL", "models/gemini-embedding-001"),
        ("GEMINI_API_KEY", KEY),
    ])
    .unwrap();
    assert_eq!(c.embedding_signature().encode(), "gemini-embedding-001@768");
    assert_eq!(
        c.build_embedder().unwrap().embedding_signature(),
        c.embedding_signature()
    );
}

#[test]
fn a_missing_key_names_the_variable() {
    // Without CORTEX_EMBED_PROVIDER the error lists every way out (tests/local.rs).
    let err = config(&[("CORTEX_EMBED_PROVIDER", "gemini")])
        .unwrap()
        .build_embedder()
        .unwrap_err();
    assert!(err.to_string().contains("GEMINI_API_KEY"), "{err}");
    assert_eq!(missing_key(err), "GEMINI_API_KEY");

    let c = config(&[("CORTEX_EMBED_PROVIDER", "openai")]).unwrap();
    assert_eq!(
        missing_key(c.build_embedder().unwrap_err()),
        "OPENAI_API_KEY"
    );

    let c = config(&[
        ("CORTEX_EMBED_PROVIDER", "fake"),
        ("CORTEX_LLM_PROVIDER", "anthropic"),
    ])
    .unwrap();
    assert_eq!(missing_key(c.build_llm().unwrap_err()), "ANTHROPIC_API_KEY");

    let c = config(&[
        ("CORTEX_EMBED_PROVIDER", "fake"),
        ("CORTEX_LLM_PROVIDER", "gemini"),
    ])
    .unwrap();
    assert_eq!(missing_key(c.build_llm().unwrap_err()), "GEMINI_API_KEY");

    // An empty value counts as unset.
    let c = config(&[
        ("CORTEX_EMBED_PROVIDER", "gemini"),
        ("GEMINI_API_KEY", "  "),
    ])
    .unwrap();
    assert_eq!(
        missing_key(c.build_embedder().unwrap_err()),
        "GEMINI_API_KEY"
    );
}

#[test]
fn google_api_key_is_accepted_for_gemini() {
    let c = config(&[("GOOGLE_API_KEY", KEY)]).unwrap();
    let p = c.build_embedder().unwrap();
    assert_eq!(p.name(), "gemini");
}

#[test]
fn unknown_provider_names_list_the_valid_ones() {
    let err = config(&[("CORTEX_EMBED_PROVIDER", "word2vec")]).unwrap_err();
    assert!(matches!(err, ProviderError::Config(_)));
    let text = err.to_string();
    assert!(text.contains("\"word2vec\""), "{text}");
    assert!(
        text.contains("gemini, openai, ollama, fake, local"),
        "{text}"
    );

    let err = config(&[("CORTEX_EMBED_PROVIDER", "anthropic")]).unwrap_err();
    assert!(err.to_string().contains("CORTEX_EMBED_PROVIDER"), "{err}");

    let err = config(&[("CORTEX_LLM_PROVIDER", "gpt")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("gemini, openai, ollama, anthropic, fake, none"),
        "{err}"
    );
}

#[test]
fn provider_names_are_case_insensitive() {
    let c = config(&[
        ("CORTEX_EMBED_PROVIDER", " Ollama "),
        ("CORTEX_LLM_PROVIDER", "NONE"),
    ])
    .unwrap();
    assert_eq!(c.embed.provider, EmbedProviderKind::Ollama);
    assert_eq!(c.llm.provider, LlmProviderKind::None);
}

#[test]
fn ollama_needs_no_key_and_has_local_defaults() {
    let c = config(&[
        ("CORTEX_EMBED_PROVIDER", "ollama"),
        ("CORTEX_LLM_PROVIDER", "ollama"),
    ])
    .unwrap();
    assert_eq!(c.embedding_signature().encode(), "nomic-embed-text@768");
    assert_eq!(c.ollama.base_url, "http://localhost:11434/v1");
    assert_eq!(c.llm.model, "llama3.2");
    assert_eq!(c.build_embedder().unwrap().name(), "ollama");
    assert_eq!(c.build_llm().unwrap().unwrap().name(), "ollama");
}

#[test]
fn openai_compatible_servers_need_no_key() {
    let c = config(&[
        ("CORTEX_EMBED_PROVIDER", "openai"),
        ("CORTEX_OPENAI_BASE_URL", "http://localhost:8000/v1"),
        ("CORTEX_EMBED_MODEL", "BAAI/bge-small-en-v1.5"),
        ("CORTEX_EMBED_DIM", "384"),
    ])
    .unwrap();
    assert!(c.embed.send_dimensions);
    assert_eq!(
        c.build_embedder().unwrap().embedding_signature().encode(),
        "BAAI/bge-small-en-v1.5@384"
    );
}

#[test]
fn embedding_dimensions() {
    let c = config(&[("CORTEX_EMBED_PROVIDER", "openai")]).unwrap();
    assert_eq!(
        c.embedding_signature().encode(),
        "text-embedding-3-small@1536"
    );
    assert!(!c.embed.send_dimensions);

    let c = config(&[
        ("CORTEX_EMBED_PROVIDER", "openai"),
        ("CORTEX_EMBED_DIM", "512"),
    ])
    .unwrap();
    assert_eq!(c.embed.dimension, 512);
    assert!(c.embed.send_dimensions);

    // The native size is not sent: older models refuse `dimensions`.
    let c = config(&[
        ("CORTEX_EMBED_PROVIDER", "openai"),
        ("CORTEX_EMBED_MODEL", "text-embedding-ada-002"),
        ("CORTEX_EMBED_DIM", "1536"),
    ])
    .unwrap();
    assert!(!c.embed.send_dimensions);

    let c = config(&[
        ("CORTEX_EMBED_PROVIDER", "ollama"),
        ("CORTEX_EMBED_MODEL", "mxbai-embed-large"),
    ])
    .unwrap();
    assert_eq!(c.embed.dimension, 1024);

    let err = config(&[
        ("CORTEX_EMBED_PROVIDER", "ollama"),
        ("CORTEX_EMBED_MODEL", "my-embedder"),
    ])
    .unwrap_err();
    assert!(err.to_string().contains("set CORTEX_EMBED_DIM"), "{err}");

    let c = config(&[("CORTEX_EMBED_DIM", "1536")]).unwrap();
    assert_eq!(
        c.embedding_signature().encode(),
        "gemini-embedding-001@1536"
    );
    let err = config(&[("CORTEX_EMBED_DIM", "4096")]).unwrap_err();
    assert!(err.to_string().contains("128..=3072"), "{err}");
    assert!(config(&[("CORTEX_EMBED_DIM", "0")]).is_err());
    let err = config(&[("CORTEX_EMBED_DIM", "lots")]).unwrap_err();
    assert!(
        err.to_string().contains("CORTEX_EMBED_DIM=\"lots\""),
        "{err}"
    );
}

#[tokio::test]
async fn fake_builds_the_offline_provider() {
    let c = config(&[
        ("CORTEX_EMBED_PROVIDER", "fake"),
        ("CORTEX_EMBED_DIM", "32"),
        ("CORTEX_LLM_PROVIDER", "fake"),
    ])
    .unwrap();
    let e = c.build_embedder().unwrap();
    assert_eq!(e.name(), "fake");
    assert_eq!(e.embedding_signature().encode(), "fake-hash@32");
    let out = e
        .embed(&texts(&["hello"]), EmbedTask::Document)
        .await
        .unwrap();
    assert_eq!(out.vectors[0].len(), 32);
    assert_eq!(c.build_llm().unwrap().unwrap().name(), "fake");
}

#[test]
fn other_settings_parse_or_fail_clearly() {
    let c = config(&[
        ("CORTEX_OPENAI_MAX_TOKENS_FIELD", "max_completion_tokens"),
        ("CORTEX_LLM_SEND_TEMPERATURE", "false"),
        ("CORTEX_PROVIDER_TIMEOUT_SECS", "5"),
        ("CORTEX_PROVIDER_MAX_ATTEMPTS", "2"),
        ("CORTEX_PROVIDER_RETRY_BUDGET_SECS", "9"),
    ])
    .unwrap();
    assert_eq!(c.llm.max_tokens_field, MaxTokensField::MaxCompletionTokens);
    assert!(!c.llm.send_temperature);
    assert_eq!(c.http.timeout.as_secs(), 5);
    assert_eq!(c.http.retry.max_attempts, 2);
    assert_eq!(c.http.retry.max_elapsed.as_secs(), 9);

    let err = config(&[("CORTEX_OPENAI_MAX_TOKENS_FIELD", "max")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("max_tokens, max_completion_tokens"),
        "{err}"
    );
    let err = config(&[("CORTEX_LLM_SEND_TEMPERATURE", "maybe")]).unwrap_err();
    assert!(
        err.to_string().contains("CORTEX_LLM_SEND_TEMPERATURE"),
        "{err}"
    );
    assert!(config(&[("CORTEX_PROVIDER_MAX_ATTEMPTS", "-1")]).is_err());
}

#[test]
fn debug_never_shows_keys() {
    let c = config(&[
        ("GEMINI_API_KEY", KEY),
        ("OPENAI_API_KEY", KEY),
        ("ANTHROPIC_API_KEY", KEY),
        ("OLLAMA_API_KEY", KEY),
        ("CORTEX_LLM_PROVIDER", "anthropic"),
    ])
    .unwrap();
    let shown = format!("{c:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("***"));
    let llm = c.build_llm().unwrap().unwrap();
    assert!(!format!("{llm:?}").contains(KEY));
    let embedder = c.build_embedder().unwrap();
    assert!(!format!("{embedder:?}").contains(KEY));
}

#[tokio::test]
async fn env_settings_reach_the_wire() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(
            "/v1beta/models/gemini-embedding-001:batchEmbedContents",
        ))
        .and(header("x-goog-api-key", KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "embeddings": [{"values": vec![0.5f32; 256]}]
        })))
        .expect(2)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}
        })))
        .mount(&server)
        .await;
    let base = server.uri();
    let c = config(&[
        ("GEMINI_API_KEY", KEY),
        ("CORTEX_GEMINI_BASE_URL", &format!("{base}/v1beta")),
        ("CORTEX_EMBED_DIM", "256"),
        ("CORTEX_LLM_PROVIDER", "openai"),
        ("CORTEX_OPENAI_BASE_URL", &format!("{base}/v1")),
        ("CORTEX_LLM_MODEL", "my-local-model"),
        ("CORTEX_OPENAI_MAX_TOKENS_FIELD", "max_completion_tokens"),
    ])
    .unwrap();

    let embedder = c.build_embedder().unwrap();
    let one = embedder
        .embed(&texts(&["x"]), EmbedTask::Query)
        .await
        .unwrap();
    // The product never caches: the mock's expect(2) sees both requests.
    let two = embedder
        .embed(&texts(&["x"]), EmbedTask::Query)
        .await
        .unwrap();
    assert_eq!(one.vectors, two.vectors);
    assert!((one.vectors[0][0] - 1.0 / 16.0).abs() < 1e-6, "normalised");

    let llm = c.build_llm().unwrap().unwrap();
    assert_eq!(llm.generate("q", 0.1, 7).await.unwrap().text, "hi");
    let chat = requests(&server)
        .await
        .into_iter()
        .find(|r| r.url.path() == "/v1/chat/completions")
        .unwrap();
    assert_eq!(
        body(&chat),
        json!({"model": "my-local-model", "messages": [{"role": "user", "content": "q"}],
               "temperature": 0.1, "max_completion_tokens": 7})
    );
    assert!(chat.headers.get("authorization").is_none());
}
