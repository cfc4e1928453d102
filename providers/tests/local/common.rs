//! Finding the test model, and small vector helpers.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Once, OnceLock};

use cortex_providers::{LocalOptions, LocalProvider};

/// Where scripts/fetch-test-model.sh puts the model when given no directory.
fn default_model_dir() -> PathBuf {
    let home =
        std::env::var_os("HOME").map_or_else(|| PathBuf::from("/nonexistent"), PathBuf::from);
    home.join(".cortex/models/all-MiniLM-L6-v2")
}

/// The all-MiniLM-L6-v2 directory: `CORTEX_TEST_MODEL_DIR`, else the fetch script's
/// default place. When it is missing, CI fails (the model is part of the test setup
/// there) and a developer's run skips with one line.
pub fn model_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("CORTEX_TEST_MODEL_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(default_model_dir, PathBuf::from);
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    let hint = "run `export CORTEX_TEST_MODEL_DIR=\"$(bash scripts/fetch-test-model.sh)\"` first";
    // The same rule as cortex-conformance's in_ci().
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    if in_ci {
        panic!(
            "the local embedder's test model is missing at {}: {hint}",
            dir.display()
        );
    }
    static SKIP: Once = Once::new();
    SKIP.call_once(|| {
        // Written to stderr directly: libtest captures eprintln! of passing tests, and
        // this line must be seen.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: the all-MiniLM-L6-v2 tests: no model at {} ({hint})",
            dir.display()
        );
    });
    None
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
