//! Finding the test model, and small vector helpers.

use std::path::PathBuf;
use std::sync::OnceLock;

use cortex_providers::{LocalOptions, LocalProvider};

/// The all-MiniLM-L6-v2 directory, or `None` after the workspace's skip policy ran (one
/// line per test; a failure under CI, where the model is part of the test setup).
pub fn model_dir() -> Option<PathBuf> {
    cortex_conformance::skip::test_model_dir()
}

/// The model, loaded once per test binary (with the default batch size).
pub fn minilm() -> Option<LocalProvider> {
    static MODEL: OnceLock<Option<LocalProvider>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            model_dir().map(|dir| LocalProvider::load(&dir, &LocalOptions::default()).unwrap())
        })
        .clone()
}

pub fn strings(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| (*t).to_owned()).collect()
}

pub fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum()
}

pub fn norm(a: &[f32]) -> f64 {
    dot(a, a).sqrt()
}

pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    dot(a, b) / (norm(a) * norm(b))
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}
