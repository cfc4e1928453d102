//! all-MiniLM-L6-v2 through candle, checked against vectors from an independent
//! implementation (tests/fixtures/all-minilm-l6-v2.json, made by
//! scripts/make-embedding-fixture.py).

use std::path::Path;

use cortex_core::{error::ProviderError, provider::EmbedTask, provider::LLMProvider};
use cortex_providers::{LocalModelKind, LocalOptions, LocalProvider};
use serde::Deserialize;

use crate::common::{cosine, max_abs_diff, minilm, model_dir, norm, strings};

#[derive(Deserialize)]
struct Fixture {
    dimension: usize,
    max_seq_length: usize,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    tokens: u64,
    vector: Vec<f32>,
}

fn fixture() -> Fixture {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/all-minilm-l6-v2.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn reports_the_models_shape() {
    let Some(model) = minilm() else { return };
    assert_eq!(model.kind(), LocalModelKind::Bert);
    assert_eq!(model.embedding_signature().dimension, 384);
    // sentence_bert_config.json's 256 wins over max_position_embeddings' 512.
    assert_eq!(model.max_tokens(), 256);
    assert_eq!(model.name(), "local");
}

/// The longest case is over 256 tokens; it is embedded on its own (see
/// `long_inputs_are_cut_at_256_tokens`) because in a debug build each 256-token
/// forward pass costs seconds, and batched with the others it would pad them all to 256.
fn split_cases(fixture: &Fixture) -> (Vec<&Case>, &Case) {
    let (long, short): (Vec<&Case>, Vec<&Case>) =
        fixture.cases.iter().partition(|c| c.tokens >= 256);
    assert_eq!(long.len(), 1, "the fixture has one over-long case");
    (short, long[0])
}

fn assert_agrees(case: &Case, vector: &[f32]) {
    assert_eq!(vector.len(), 384);
    assert!((norm(vector) - 1.0).abs() < 1e-5, "{}", case.text);
    let similarity = cosine(vector, &case.vector);
    assert!(
        similarity > 0.999,
        "cosine {similarity} with the reference for {:?}",
        case.text
    );
}

#[test]
fn agrees_with_the_reference_implementation() {
    let Some(model) = minilm() else { return };
    let fixture = fixture();
    assert_eq!(fixture.dimension, 384);
    assert_eq!(fixture.max_seq_length, model.max_tokens());
    let (short, _) = split_cases(&fixture);
    let texts: Vec<String> = short.iter().map(|c| c.text.clone()).collect();
    let result = model.embed_blocking(&texts).unwrap();
    for (case, vector) in short.iter().zip(&result.vectors) {
        assert_agrees(case, vector);
    }
    // Same tokens as the reference tokenizer, [CLS] and [SEP] included.
    let tokens: u64 = short.iter().map(|c| c.tokens).sum();
    assert_eq!(result.usage.input_tokens, tokens);
    assert_eq!(result.usage.output_tokens, 0);
}

#[test]
fn long_inputs_are_cut_at_256_tokens() {
    let Some(model) = minilm() else { return };
    let fixture = fixture();
    let (_, long) = split_cases(&fixture);
    let result = model
        .embed_blocking(std::slice::from_ref(&long.text))
        .unwrap();
    // Cut exactly where sentence-transformers cuts, so the vector is the reference's.
    assert_eq!(result.usage.input_tokens, 256);
    assert_agrees(long, &result.vectors[0]);
}

#[test]
fn similar_sentences_are_closer_than_unrelated_ones() {
    let Some(model) = minilm() else { return };
    let texts = strings(&[
        "a cat sits on the mat",
        "a kitten is on the rug",
        "quarterly tax filing deadline",
        "the user prefers dark mode",
        "they like a dark colour theme in their editor",
    ]);
    let v = model.embed_blocking(&texts).unwrap().vectors;
    for vector in &v {
        assert!((norm(vector) - 1.0).abs() < 1e-5);
    }
    let cat_kitten = cosine(&v[0], &v[1]);
    let cat_tax = cosine(&v[0], &v[2]);
    assert!(cat_kitten > cat_tax + 0.3, "{cat_kitten} vs {cat_tax}");
    let dark = cosine(&v[3], &v[4]);
    assert!(dark > cosine(&v[3], &v[2]) + 0.2, "{dark}");
}

#[test]
fn batches_give_the_same_vectors_as_one_at_a_time() {
    let Some(model) = minilm() else { return };
    // A batch size of 3 puts texts of different lengths together, so padding and the
    // attention mask are exercised.
    let model = model.with_batch_size(3);
    assert_eq!(model.batch_size(), 3);
    let texts = strings(&[
        "short",
        "a somewhat longer sentence about memory and agents",
        "",
        "Punctuation, CAPITALS and numbers: 42, 3.14!",
        "one",
        "the longest text of this batch goes on for a while, so that every other text \
         in its batch needs many padding positions",
        "médiocre café",
    ]);
    let together = model.embed_blocking(&texts).unwrap();
    let mut tokens = 0;
    for (text, batched) in texts.iter().zip(&together.vectors) {
        let alone = model.embed_blocking(std::slice::from_ref(text)).unwrap();
        tokens += alone.usage.input_tokens;
        let diff = max_abs_diff(batched, &alone.vectors[0]);
        assert!(diff < 1e-5, "{text:?} differs by {diff}");
    }
    assert_eq!(together.usage.input_tokens, tokens);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeds_through_the_provider_trait_off_the_runtime() {
    let Some(model) = minilm() else { return };
    let provider: &dyn LLMProvider = &model;
    let empty = provider.embed(&[], EmbedTask::Query).await.unwrap();
    assert!(empty.vectors.is_empty());
    assert_eq!(empty.usage.input_tokens, 0);

    let texts = strings(&["where do I keep my notes?", "notes live in the vault"]);
    let (query, document) = tokio::join!(
        provider.embed(&texts[..1], EmbedTask::Query),
        provider.embed(&texts[1..], EmbedTask::Document),
    );
    let direct = model.embed_blocking(&texts).unwrap();
    assert!(max_abs_diff(&query.unwrap().vectors[0], &direct.vectors[0]) < 1e-6);
    assert!(max_abs_diff(&document.unwrap().vectors[0], &direct.vectors[1]) < 1e-6);

    assert!(matches!(
        provider.generate("hi", 0.0, 10).await,
        Err(ProviderError::Unsupported {
            provider: "local",
            ..
        })
    ));
}

#[test]
fn a_dimension_that_differs_from_the_model_is_refused() {
    let Some(dir) = model_dir() else { return };
    let err = LocalProvider::load(
        &dir,
        &LocalOptions {
            dimension: Some(768),
            ..LocalOptions::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, ProviderError::Config(_)));
    let text = err.to_string();
    assert!(
        text.contains("CORTEX_EMBED_DIM=768") && text.contains("384"),
        "{text}"
    );
}
