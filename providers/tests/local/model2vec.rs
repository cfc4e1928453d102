//! model2vec static models, on a tiny synthetic one whose vectors are known exactly: no
//! small real model2vec model ships in a package registry.

use std::path::Path;

use cortex_core::{provider::EmbedTask, provider::LLMProvider};
use cortex_providers::{LocalModelKind, LocalOptions, LocalProvider};
use serde_json::json;

use crate::common::{max_abs_diff, norm, strings};

/// `[UNK]`, then four words; one row per token.
pub const MATRIX: [[f32; 3]; 5] = [
    [0.5, 0.5, 0.5],
    [1.0, 0.0, 0.0],
    [0.0, 2.0, 0.0],
    [0.0, 0.0, 3.0],
    [1.0, 1.0, -1.0],
];

/// Writes a model2vec-format model into `dir`: a word-level `tokenizer.json` (whose own
/// truncation and padding must be ignored), `model.safetensors` holding `embeddings`
/// plus any `extra` tensors, and model2vec's `config.json`.
pub fn write_static_model(dir: &Path, extra: &[(&str, &str, Vec<usize>, Vec<u8>)]) {
    std::fs::create_dir_all(dir).unwrap();
    let tokenizer = json!({
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": 1, "strategy": "LongestFirst", "stride": 0},
        "padding": {"strategy": {"Fixed": 8}, "direction": "Right", "pad_to_multiple_of": null,
                    "pad_id": 0, "pad_type_id": 0, "pad_token": "[UNK]"},
        "added_tokens": [{"id": 0, "content": "[UNK]", "single_word": false, "lstrip": false,
                          "rstrip": false, "normalized": false, "special": true}],
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel",
                  "vocab": {"[UNK]": 0, "hello": 1, "world": 2, "cat": 3, "dog": 4},
                  "unk_token": "[UNK]"}
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    std::fs::write(
        dir.join("config.json"),
        json!({"model_type": "model2vec", "hidden_dim": 3, "normalize": true}).to_string(),
    )
    .unwrap();

    let matrix: Vec<u8> = MATRIX
        .iter()
        .flatten()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let mut tensors = vec![("embeddings", "F32", vec![5, 3], matrix)];
    tensors.extend(extra.iter().cloned());
    std::fs::write(dir.join("model.safetensors"), safetensors(&tensors)).unwrap();
}

/// The safetensors layout: little-endian header length, JSON header padded to 8 bytes,
/// then the tensors' bytes back to back.
fn safetensors(tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let start = data.len();
        data.extend_from_slice(bytes);
        header.insert(
            (*name).to_owned(),
            json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let mut header = serde_json::Value::Object(header).to_string().into_bytes();
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    out.extend(data);
    out
}

/// The expected vector: the mean of `rows` (with `scales`), normalised, in f64.
fn expected(rows: &[usize], scales: &[f64]) -> Vec<f32> {
    let mut mean = [0.0f64; 3];
    for (row, scale) in rows.iter().zip(scales) {
        for (m, x) in mean.iter_mut().zip(MATRIX[*row]) {
            *m += f64::from(x) * scale;
        }
    }
    let n = rows.len() as f64;
    mean.iter_mut().for_each(|m| *m /= n);
    let len = mean.iter().map(|m| m * m).sum::<f64>().sqrt();
    mean.iter().map(|m| (m / len) as f32).collect()
}

#[test]
fn computes_the_normalised_mean_of_token_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("tiny-static");
    write_static_model(&model_dir, &[]);
    let model = LocalProvider::load(&model_dir, &LocalOptions::default()).unwrap();
    assert_eq!(model.kind(), LocalModelKind::Model2Vec);
    let signature = model.embedding_signature();
    assert_eq!(
        (signature.model.as_str(), signature.dimension),
        ("tiny-static", 3)
    );

    let texts = strings(&[
        "hello world",
        "Cat cat DOG",
        // Unknown words are skipped, not averaged in.
        "hello zebra",
        // Nothing known at all: the unknown token's own vector.
        "zebra okapi",
        "",
    ]);
    let result = model.embed_blocking(&texts).unwrap();
    let want = [
        expected(&[1, 2], &[1.0, 1.0]),
        expected(&[3, 3, 4], &[1.0, 1.0, 1.0]),
        expected(&[1], &[1.0]),
        expected(&[0], &[1.0]),
        expected(&[0], &[1.0]),
    ];
    for ((text, got), want) in texts.iter().zip(&result.vectors).zip(&want) {
        assert!(
            max_abs_diff(got, want) < 1e-6,
            "{text:?}: {got:?} vs {want:?}"
        );
        assert!((norm(got) - 1.0).abs() < 1e-6);
    }
    // Every token the tokenizer produced, unknown ones included; the file's
    // max_length of 1 is ignored.
    assert_eq!(result.usage.input_tokens, 2 + 3 + 2 + 2);
}

#[test]
fn applies_token_weights_and_the_vocabulary_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let weights: Vec<u8> = [1.0f32, 2.0, 0.5, 1.0, 4.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    // Quantized vocabularies share rows: "dog" uses "cat"'s row here.
    let mapping: Vec<u8> = [0i64, 1, 2, 3, 3]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    write_static_model(
        dir.path(),
        &[
            ("weights", "F32", vec![5], weights),
            ("mapping", "I64", vec![5], mapping),
        ],
    );
    let model = LocalProvider::load(dir.path(), &LocalOptions::default()).unwrap();
    let result = model
        .embed_blocking(&strings(&["hello world", "dog"]))
        .unwrap();
    assert!(max_abs_diff(&result.vectors[0], &expected(&[1, 2], &[2.0, 0.5])) < 1e-6);
    assert!(max_abs_diff(&result.vectors[1], &expected(&[3], &[4.0])) < 1e-6);
}

#[test]
fn detection_works_without_config_json_and_refuses_mismatched_files() {
    let dir = tempfile::tempdir().unwrap();
    write_static_model(dir.path(), &[]);
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    let model = LocalProvider::load(dir.path(), &LocalOptions::default()).unwrap();
    assert_eq!(model.kind(), LocalModelKind::Model2Vec);

    // Forcing the wrong kind fails with a reason instead of loading garbage.
    let err = LocalProvider::load(
        dir.path(),
        &LocalOptions {
            kind: Some(LocalModelKind::Bert),
            ..LocalOptions::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("config.json"), "{err}");

    // A mapping that points past the matrix is refused at load time.
    let bad_mapping: Vec<u8> = [0i64, 1, 2, 3, 9]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    write_static_model(dir.path(), &[("mapping", "I64", vec![5], bad_mapping)]);
    let err = LocalProvider::load(dir.path(), &LocalOptions::default()).unwrap_err();
    assert!(err.to_string().contains("row 9"), "{err}");
}

#[tokio::test]
async fn embeds_through_the_provider_trait() {
    let dir = tempfile::tempdir().unwrap();
    write_static_model(dir.path(), &[]);
    let model = LocalProvider::load(dir.path(), &LocalOptions::default()).unwrap();
    let provider: &dyn LLMProvider = &model;
    let result = provider
        .embed(&strings(&["hello world"]), EmbedTask::Document)
        .await
        .unwrap();
    assert!(max_abs_diff(&result.vectors[0], &expected(&[1, 2], &[1.0, 1.0])) < 1e-6);
}
