//! all-mpnet-base-v2 through candle (providers/src/local/mpnet.rs), checked against
//! vectors from an independent implementation that matches published PyTorch outputs
//! (tests/fixtures/all-mpnet-base-v2.json: eight texts, one past the 384-token limit).

use std::path::Path;
use std::sync::OnceLock;

use cortex_core::provider::LLMProvider;
use cortex_providers::{LocalModelKind, LocalOptions, LocalProvider};
use serde::Deserialize;

use crate::common::{cosine, norm};

#[derive(Deserialize)]
struct Fixture {
    weights_sha256: String,
    vectors: serde_json::Map<String, serde_json::Value>,
}

fn fixture() -> Fixture {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/all-mpnet-base-v2.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn mpnet() -> Option<LocalProvider> {
    static MODEL: OnceLock<Option<LocalProvider>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            cortex_conformance::skip::test_mpnet_model_dir()
                .map(|dir| LocalProvider::load(&dir, &LocalOptions::default()).unwrap())
        })
        .clone()
}

#[test]
fn reports_the_models_shape() {
    let Some(model) = mpnet() else { return };
    assert_eq!(model.kind(), LocalModelKind::Bert);
    assert_eq!(model.embedding_signature().dimension, 768);
    assert_eq!(model.embedding_signature().model, "all-mpnet-base-v2");
    // sentence_bert_config.json's 384 wins over the 512 positions the table leaves.
    assert_eq!(model.max_tokens(), 384);
}

#[test]
fn agrees_with_the_reference_implementation() {
    let Some(model) = mpnet() else { return };
    let fixture = fixture();
    assert_eq!(
        fixture.weights_sha256,
        "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
    );
    let (texts, references): (Vec<String>, Vec<Vec<f32>>) = fixture
        .vectors
        .into_iter()
        .map(|(text, vector)| (text, serde_json::from_value(vector).unwrap()))
        .unzip();
    assert_eq!(texts.len(), 8);
    // One batch: the short texts are padded to the longest (384 tokens), so this also
    // checks that padding changes nothing.
    let result = model.embed_blocking(&texts).unwrap();
    for ((text, reference), vector) in texts.iter().zip(&references).zip(&result.vectors) {
        assert_eq!(vector.len(), 768);
        assert!((norm(vector) - 1.0).abs() < 1e-5, "{text}");
        let similarity = cosine(vector, reference);
        assert!(
            similarity > 0.9999,
            "cosine {similarity} with the reference for {text:?}"
        );
    }
    // The longest text was cut at the limit.
    assert!(result.usage.input_tokens >= 384);
}

#[test]
fn a_text_alone_and_in_a_batch_embed_alike() {
    let Some(model) = mpnet() else { return };
    let texts = [
        "Who does Priya report to?",
        "Hello world, and a longer sentence too.",
    ]
    .map(str::to_owned);
    let batch = model.embed_blocking(&texts).unwrap();
    let alone = model.embed_blocking(&texts[..1]).unwrap();
    assert!(cosine(&batch.vectors[0], &alone.vectors[0]) > 0.99999);
}
