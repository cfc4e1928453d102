//! Looking inside the HNSW hybrid searches rather than timing the table: repeat them for
//! a profiler attached to the server (`--pg-profile`), break each down by BM25 path and
//! plan times (`--pg-trace`), or print their plans (`--pg-explain`).

use std::time::{Duration, Instant};

use cortex_core::{store::MemoryStore, store::SearchRequest};
use cortex_postgres::{PostgresConfig, PostgresStore};

use super::USER;
use super::runs::{PATHS, paired};
use crate::BoxError;

/// Repeats the HNSW hybrid searches for `window`, one at a time, and says how many ran.
/// `hnsw` is the store's configuration in HNSW mode, with the index's build settings (a
/// kept index built otherwise is built again).
pub(super) async fn profile(
    hnsw: PostgresConfig,
    schema: &str,
    requests: &[SearchRequest],
    window: Duration,
) -> Result<(), BoxError> {
    let hnsw = PostgresStore::connect(hnsw).await?;
    for r in requests.iter().take(5) {
        hnsw.search(USER, r).await?;
    }
    eprintln!("profiling window: {schema}, {:.0} s", window.as_secs_f64());
    let start = Instant::now();
    let mut searches = 0usize;
    while start.elapsed() < window {
        for r in requests {
            hnsw.search(USER, r).await?;
            searches += 1;
        }
    }
    let took = start.elapsed().as_secs_f64();
    println!(
        "{schema}: {searches} HNSW hybrid searches in {took:.1} s ({:.2} ms each)",
        took * 1e3 / searches.max(1) as f64
    );
    Ok(())
}

/// Prints each HNSW hybrid search: terms, path, median of `repeat` runs, and the times
/// EXPLAIN ANALYZE reports for it: the planning it pays per search (the dense
/// statement's; the BM25 and fused ones' generic plans are made once per connection) and
/// the execution of all three (and the plans themselves to stderr, with `print_plans`).
/// `hnsw` as for [`profile`].
pub(super) async fn trace(
    hnsw: PostgresConfig,
    schema: &str,
    requests: &[SearchRequest],
    repeat: usize,
    print_plans: bool,
) -> Result<(), BoxError> {
    let serial = PostgresStore::connect(PostgresConfig {
        parallel_search: false,
        ..hnsw.clone()
    })
    .await?;
    let hnsw = PostgresStore::connect(hnsw).await?;
    for r in requests.iter().take(5) {
        hnsw.search(USER, r).await?;
        serial.search(USER, r).await?;
    }
    println!(
        "| {schema} query | BM25 path | median ms | one connection: median ms | planning ms (per search) | execution ms | rarest-first lookups / candidates |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for r in requests {
        let (runs, one) = paired(&hnsw, &serial, &vec![r.clone(); repeat.max(1)]).await?;
        let path = runs
            .by_path
            .iter()
            .position(|s| !s.is_empty())
            .map_or("none", |i| PATHS[i]);
        let latencies = runs.latencies;
        let before = hnsw.diagnostics().rarest_first_lookups();
        hnsw.search(USER, r).await?;
        let after = hnsw.diagnostics().rarest_first_lookups();
        let lookups = match after.candidates - before.candidates {
            0 => String::new(),
            candidates => format!("{} / {candidates}", after.looked_up - before.looked_up),
        };
        let plan = hnsw.diagnostics().explain_search(USER, r).await?;
        if print_plans {
            eprintln!("-- {:?}\n{}", r.terms, plan.join("\n"));
        }
        let times = |label: &str| {
            plan.iter()
                .filter_map(|l| l.strip_prefix(label))
                .filter_map(|t| t.trim().trim_end_matches(" ms").parse::<f64>().ok())
                .collect::<Vec<f64>>()
        };
        // The statements in the order the one-connection path runs them (EXPLAIN never runs
        // side by side): BM25, dense, fused. Only the dense one is planned per search; the
        // others' generic plans are made afresh for EXPLAIN, where a search reuses its
        // connection's, so they are left out.
        let planned = times("Planning Time:");
        let planning = planned.len().checked_sub(2).map_or(0.0, |i| planned[i]);
        let execution = times("Execution Time:").iter().sum::<f64>();
        println!(
            "| {} | {path} | {:.1} | {:.1} | {:.2} | {:.2} | {lookups} |",
            r.query,
            latencies.p50(),
            one.latencies.p50(),
            planning,
            execution
        );
    }
    Ok(())
}

/// Prints the search plans (EXPLAIN ANALYZE) of `requests` to stderr.
pub(super) async fn explain(
    store: &PostgresStore,
    label: &str,
    requests: &[&SearchRequest],
) -> Result<(), BoxError> {
    for request in requests {
        eprintln!("-- {label} {:?}", request.terms);
        for line in store.diagnostics().explain_search(USER, request).await? {
            eprintln!("{line}");
        }
    }
    Ok(())
}
