//! Throughput of the local embedder: sentences per second on this machine's CPU.
//!
//! ```sh
//! cargo run --release -p cortex-providers --example local_embed_bench -- \
//!     "$(bash scripts/fetch-test-model.sh)" [batch size, default 32] [sentences, default 512]
//! ```
//!
//! The sentences are generated (8 to 30 words, like short memories), so every run
//! embeds the same text. One untimed warm-up batch runs first.

use std::path::PathBuf;
use std::time::Instant;

use cortex_providers::{LocalOptions, LocalProvider};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or("usage: local_embed_bench <model dir> [batch] [n]")?,
    );
    let batch_size: usize = args.next().map_or(Ok(32), |a| a.parse())?;
    let count: usize = args.next().map_or(Ok(512), |a| a.parse())?;

    let started = Instant::now();
    let options = LocalOptions {
        batch_size,
        ..LocalOptions::default()
    };
    let model = LocalProvider::load(&dir, &options)?;
    let load = started.elapsed();

    let texts = sentences(count);
    model.embed_blocking(&texts[..batch_size.min(texts.len())])?;

    let started = Instant::now();
    let result = model.embed_blocking(&texts)?;
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "{} model {:?}: loaded in {:.2}s; {count} sentences ({:.1} tokens each on average) \
         at batch {batch_size} in {elapsed:.2}s = {:.1} sentences/s, {:.0} tokens/s ({} threads)",
        model.kind(),
        dir.file_name().unwrap_or_default(),
        load.as_secs_f64(),
        result.usage.input_tokens as f64 / count as f64,
        count as f64 / elapsed,
        result.usage.input_tokens as f64 / elapsed,
        std::thread::available_parallelism().map_or(1, usize::from),
    );
    Ok(())
}

/// Deterministic pseudo-sentences of 8 to 30 common words.
fn sentences(count: usize) -> Vec<String> {
    const WORDS: &[&str] = &[
        "the",
        "user",
        "prefers",
        "dark",
        "mode",
        "and",
        "asked",
        "about",
        "their",
        "meeting",
        "on",
        "tuesday",
        "with",
        "alice",
        "project",
        "deadline",
        "moved",
        "to",
        "next",
        "week",
        "because",
        "budget",
        "review",
        "is",
        "late",
        "she",
        "likes",
        "coffee",
        "in",
        "morning",
        "remember",
        "that",
        "flight",
        "from",
        "berlin",
        "lands",
        "at",
        "noon",
        "agent",
        "should",
        "summarise",
        "notes",
        "before",
        "call",
        "tax",
        "filing",
        "quarterly",
        "report",
        "was",
        "sent",
        "yesterday",
        "new",
        "api",
        "key",
        "expires",
        "soon",
        "garden",
        "needs",
        "water",
        "every",
        "evening",
    ];
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..count)
        .map(|_| {
            let len = 8 + (next() % 23) as usize;
            (0..len)
                .map(|_| WORDS[(next() % WORDS.len() as u64) as usize])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}
