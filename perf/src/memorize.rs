//! Memorize through the engine on SQLite at both commit durabilities, FULL (the default,
//! an fsync per commit) and NORMAL (fsync at checkpoints), with the Fake embedder.

use std::sync::Arc;
use std::time::Instant;

use cortex_core::{engine::CortexMemory, memory::MemoryKind, store::MemoryStore};
use cortex_providers::FakeProvider;
use cortex_sqlite::{SqliteConfig, SqliteStore, Synchronous};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde_json::{Value, json};

use crate::stats::Samples;
use crate::{BoxError, USER, corpus};

/// Measures `count` memorizes at each durability and prints the rates.
pub(crate) async fn run(count: usize) -> Result<Value, BoxError> {
    let write = measure(count).await?;
    println!(
        "\nmemorize, WAL + synchronous=FULL (the default), Fake embedder, d=384: {:.0} memories/s ({} in {:.2} s)",
        write["per_second"].as_f64().unwrap_or(0.0),
        write["count"],
        write["seconds"].as_f64().unwrap_or(0.0)
    );
    println!(
        "memorize p50 / p95: FULL {:.2} / {:.2} ms, NORMAL {:.2} / {:.2} ms; NORMAL is {:.2}x as fast",
        write["full"]["p50_ms"].as_f64().unwrap_or(0.0),
        write["full"]["p95_ms"].as_f64().unwrap_or(0.0),
        write["normal"]["p50_ms"].as_f64().unwrap_or(0.0),
        write["normal"]["p95_ms"].as_f64().unwrap_or(0.0),
        write["normal_speedup"].as_f64().unwrap_or(0.0)
    );
    Ok(write)
}

/// The two durabilities in alternating rounds, so that both see the same machine.
async fn measure(count: usize) -> Result<Value, BoxError> {
    const ROUNDS: usize = 3;
    let mut rng = SmallRng::seed_from_u64(11);
    let texts: Vec<String> = (0..count).map(|_| corpus::text(&mut rng)).collect();
    let per_round = count.div_ceil(ROUNDS);
    let mut seconds = [0.0f64; 2];
    let mut latencies = [Samples::default(), Samples::default()];
    let modes = [Synchronous::Full, Synchronous::Normal];
    let dir = tempfile::tempdir()?;
    let engines = modes
        .iter()
        .enumerate()
        .map(|(i, mode)| {
            let config = SqliteConfig {
                synchronous: *mode,
                ..SqliteConfig::new(dir.path().join(format!("w{i}.db")))
            };
            let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open_with(&config)?);
            Ok(CortexMemory::new(store, Arc::new(FakeProvider::new(384))))
        })
        .collect::<Result<Vec<_>, BoxError>>()?;
    for chunk in texts.chunks(per_round) {
        for (i, engine) in engines.iter().enumerate() {
            let started = Instant::now();
            for t in chunk {
                let one = Instant::now();
                engine
                    .memorize(USER, t, MemoryKind::Note, &[], &Default::default())
                    .await?;
                latencies[i].push(one.elapsed());
            }
            seconds[i] += started.elapsed().as_secs_f64();
        }
    }
    let report = |i: usize| {
        json!({
            "count": count, "seconds": seconds[i], "per_second": count as f64 / seconds[i],
            "p50_ms": latencies[i].p50(), "p95_ms": latencies[i].p95(),
        })
    };
    Ok(json!({
        "count": count, "seconds": seconds[0], "per_second": count as f64 / seconds[0],
        "full": report(0), "normal": report(1),
        "normal_speedup": seconds[0] / seconds[1],
    }))
}
