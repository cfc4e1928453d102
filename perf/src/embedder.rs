//! The local embedder's throughput against its FLOP count (issue 33, item 6): tokens a
//! second at several batch sizes, the model's FLOPs those tokens cost, and what candle's
//! own matrix product reaches on this CPU at the model's shapes, measured in the same run
//! (the ceiling a BERT forward pass, which is mostly matrix products, can approach).
//!
//! Threads: candle sizes its pool from `RAYON_NUM_THREADS` (else every core), once per
//! process, so a thread sweep is this mode run again with that variable set.

use std::path::Path;
use std::time::Instant;

use candle_core::{Device, Tensor};
use cortex_providers::local::{LocalOptions, LocalProvider};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde_json::{Value, json};

use crate::BoxError;
use crate::stats::Samples;

/// Texts of each batch-size measurement, and the batch sizes (the full run, then --quick).
const TEXTS: usize = 256;
const BATCH_SIZES: [usize; 7] = [1, 4, 8, 16, 32, 64, 128];
const QUICK_TEXTS: usize = 16;
const QUICK_BATCH_SIZES: [usize; 2] = [1, 8];

/// The shape of a BERT encoder, from its `config.json`.
#[derive(Debug, Clone, Copy)]
struct Shape {
    hidden: usize,
    intermediate: usize,
    layers: usize,
}

impl Shape {
    fn read(dir: &Path) -> Result<Self, BoxError> {
        let config: Value = serde_json::from_slice(&std::fs::read(dir.join("config.json"))?)?;
        let get = |key: &str| {
            config[key]
                .as_u64()
                .map(|v| v as usize)
                .ok_or_else(|| format!("config.json has no {key}"))
        };
        Ok(Self {
            hidden: get("hidden_size")?,
            intermediate: get("intermediate_size")?,
            layers: get("num_hidden_layers")?,
        })
    }

    /// The forward pass's floating-point operations for one text of `tokens` tokens (a
    /// multiply-add counts two): per layer the four attention projections (4 h^2 per
    /// token), the feed-forward pair (2 h f per token), and the attention's two L x L x h
    /// products. Embedding lookups, softmax, norms and activations are left out (a few
    /// per cent).
    fn flops(&self, tokens: usize) -> f64 {
        let (l, h, f) = (tokens as f64, self.hidden as f64, self.intermediate as f64);
        let per_layer = 2.0 * (l * (4.0 * h * h + 2.0 * h * f) + 2.0 * l * l * h);
        per_layer * self.layers as f64
    }
}

/// GFLOP/s of candle's CPU matrix product `[m x k] @ [k x n]` (median of several).
fn matmul_gflops(m: usize, k: usize, n: usize, budget: f64) -> Result<f64, BoxError> {
    let device = Device::Cpu;
    let a = Tensor::ones((m, k), candle_core::DType::F32, &device)?;
    let b = Tensor::ones((k, n), candle_core::DType::F32, &device)?;
    let reps = (budget / (2.0 * (m * k * n) as f64)).clamp(1.0, 2000.0) as usize;
    let mut samples = Samples::default();
    a.matmul(&b)?;
    for _ in 0..5 {
        let started = Instant::now();
        for _ in 0..reps {
            std::hint::black_box(a.matmul(&b)?);
        }
        samples.push(started.elapsed() / reps as u32);
    }
    Ok(2.0 * (m * k * n) as f64 / (samples.p50() / 1e3) / 1e9)
}

/// `quick`: a few texts and batch sizes, once each (keeps the mode working in CI).
pub fn measure(model: &Path, quick: bool) -> Result<Value, BoxError> {
    let (texts_n, batch_sizes, repeats): (usize, &[usize], usize) = if quick {
        (QUICK_TEXTS, &QUICK_BATCH_SIZES, 1)
    } else {
        (TEXTS, &BATCH_SIZES, 3)
    };
    let shape = Shape::read(model)?;
    let provider = LocalProvider::load(model, &LocalOptions::default())?;
    let threads = candle_core::utils::get_num_threads();
    let mut rng = SmallRng::seed_from_u64(29);
    let texts: Vec<String> = (0..texts_n)
        .map(|_| crate::local::sentence(&mut rng))
        .collect();

    // Each text alone, as one memorize embeds it: its tokens, and the latency.
    let single = provider.clone().with_batch_size(1);
    let mut lengths = Vec::with_capacity(texts_n);
    let mut one = Samples::default();
    single.embed_blocking(&texts[..1])?;
    for text in &texts {
        let started = Instant::now();
        let result = single.embed_blocking(std::slice::from_ref(text))?;
        one.push(started.elapsed());
        lengths.push(result.usage.input_tokens as usize);
    }
    let tokens: usize = lengths.iter().sum();
    let flops: f64 = lengths.iter().map(|&l| shape.flops(l)).sum();
    let mean_len = tokens as f64 / texts_n as f64;

    println!(
        "\nlocal embedder: {} texts, {tokens} tokens ({mean_len:.1} a text with [CLS] and [SEP]), {:.1} MFLOP a text, {threads} threads",
        texts_n,
        flops / texts_n as f64 / 1e6
    );
    let per_call_ms = one.p50();
    println!(
        "one text a call (memorize, recall): p50 {per_call_ms:.2} ms, p95 {:.2} ms, {:.0} tokens/s, {:.1} GFLOP/s",
        one.p95(),
        mean_len / (per_call_ms / 1e3),
        flops / texts_n as f64 / (per_call_ms / 1e3) / 1e9
    );

    let (matmuls, ceiling) = matmul_table(shape, mean_len, quick)?;
    let batches = batch_table(
        &provider,
        &texts,
        batch_sizes,
        repeats,
        tokens,
        flops,
        ceiling,
    )?;
    Ok(json!({
        "threads": threads,
        "texts": texts_n,
        "tokens": tokens,
        "flops_per_text": flops / texts_n as f64,
        "one_text_p50_ms": per_call_ms,
        "one_text_p95_ms": one.p95(),
        "matmul": matmuls,
        "batches": batches,
    }))
}

/// candle's matrix product at the model's shapes (one text of `mean_len` tokens, and a
/// batch of 64) and at a large square one, printed: the rows and the best GFLOP/s, the
/// ceiling the embedder is measured against.
fn matmul_table(shape: Shape, mean_len: f64, quick: bool) -> Result<(Vec<Value>, f64), BoxError> {
    let rows_one = mean_len.round() as usize;
    let ceilings = [
        (
            "one text, feed-forward",
            rows_one,
            shape.hidden,
            shape.intermediate,
        ),
        ("one text, projection", rows_one, shape.hidden, shape.hidden),
        (
            "64 texts, feed-forward",
            64 * rows_one,
            shape.hidden,
            shape.intermediate,
        ),
        ("1024 square", 1024, 1024, 1024),
    ];
    let mut matmuls = Vec::new();
    println!("\n| candle matmul | m x k x n | GFLOP/s |\n|---|---|---:|");
    for (name, m, k, n) in ceilings {
        let g = matmul_gflops(m, k, n, if quick { 1e8 } else { 2e9 })?;
        println!("| {name} | {m} x {k} x {n} | {g:.1} |");
        matmuls.push(json!({ "shape": name, "m": m, "k": k, "n": n, "gflops": g }));
    }
    let ceiling = matmuls
        .iter()
        .filter_map(|m| m["gflops"].as_f64())
        .fold(0.0, f64::max);
    Ok((matmuls, ceiling))
}

/// The texts embedded at each batch size (one warm-up, then the median of `repeats`), in
/// tokens and GFLOP/s (`tokens` and `flops` are the texts' total) against `ceiling`,
/// printed: the rows.
fn batch_table(
    provider: &LocalProvider,
    texts: &[String],
    batch_sizes: &[usize],
    repeats: usize,
    tokens: usize,
    flops: f64,
    ceiling: f64,
) -> Result<Vec<Value>, BoxError> {
    let texts_n = texts.len();
    println!(
        "\n| batch size | ms for {texts_n} texts | tokens/s | GFLOP/s | of the best matmul |\n|---:|---:|---:|---:|---:|"
    );
    let mut batches = Vec::new();
    for &size in batch_sizes {
        let batched = provider.clone().with_batch_size(size);
        let mut samples = Samples::default();
        batched.embed_blocking(texts)?;
        for _ in 0..repeats {
            let started = Instant::now();
            batched.embed_blocking(texts)?;
            samples.push(started.elapsed());
        }
        let seconds = samples.p50() / 1e3;
        let gflops = flops / seconds / 1e9;
        println!(
            "| {size} | {:.1} | {:.0} | {gflops:.1} | {:.0}% |",
            seconds * 1e3,
            tokens as f64 / seconds,
            100.0 * gflops / ceiling
        );
        batches.push(json!({
            "batch_size": size,
            "ms": seconds * 1e3,
            "tokens_per_second": tokens as f64 / seconds,
            "gflops": gflops,
        }));
    }
    Ok(batches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flops_of_minilm_count_the_projections_the_feed_forward_and_attention() {
        let shape = Shape {
            hidden: 384,
            intermediate: 1536,
            layers: 6,
        };
        // One token: 2 * (4 * 384^2 + 2 * 384 * 1536 + 2 * 384) * 6.
        assert_eq!(
            shape.flops(1),
            2.0 * (589_824.0 + 1_179_648.0 + 768.0) * 6.0
        );
        // Attention grows with the square of the length, the rest linearly.
        let quadratic = shape.flops(20) - 20.0 * shape.flops(1);
        assert_eq!(quadratic, 2.0 * 2.0 * (400.0 - 20.0) * 384.0 * 6.0);
    }
}
