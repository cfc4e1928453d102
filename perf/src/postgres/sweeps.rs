//! The sweeps over one size's approximate index: fixed search widths (`--pg-ef`,
//! `--pg-probes`), each paired with the iterative scan from the start, and BM25 prune
//! budgets and lookup costs (`--pg-budgets`, `--pg-lookup-costs`).

use cortex_core::store::MemoryStore;
use cortex_postgres::{
    DEFAULT_LOOKUP_COST, DEFAULT_PRUNE_BUDGET, DenseMode, PostgresConfig, PostgresStore,
};
use serde_json::{Value, json};

use super::runs::{overlap, paired, run};
use super::size::{Exact, Size};
use super::{USER, table};
use crate::BoxError;

/// Every width of the sweep, its rows printed; the JSON rows.
pub(super) async fn widths(size: &Size<'_>, exact: &Exact) -> Result<Vec<Value>, BoxError> {
    let mut sweep = Vec::new();
    for &ef in &size.opts.ef_sweep {
        sweep.push(width(size, exact, ef).await?);
    }
    Ok(sweep)
}

async fn width(size: &Size<'_>, exact: &Exact, ef: usize) -> Result<Value, BoxError> {
    let (n, kind, width_name) = (size.n, size.kind, size.opts.width_name());
    // The default (the graph walked first without the iterative scan), paired
    // query by query with the iterative scan from the start.
    let connect = |plain_walk| {
        PostgresStore::connect(size.opts.with_width(
            PostgresConfig {
                plain_walk,
                ..size.config(DenseMode::Hnsw)
            },
            ef,
        ))
    };
    let (store, iterative) = (connect(true).await?, connect(false).await?);
    for r in size.hybrid.iter().chain(&size.dense_only).take(5) {
        store.search(USER, r).await?;
        iterative.search(USER, r).await?;
    }
    let (h, hi) = paired(&store, &iterative, &size.hybrid).await?;
    let (d, di) = paired(&store, &iterative, &size.dense_only).await?;
    let o = (
        overlap(&exact.h.results, &h.results),
        overlap(&exact.d.results, &d.results),
    );
    // The two walks must agree search by search (see `PostgresConfig::plain_walk`).
    let same = h
        .results
        .iter()
        .chain(&d.results)
        .zip(hi.results.iter().chain(&di.results))
        .filter(|(a, b)| a == b)
        .count();
    table::line(
        n,
        &format!("{kind}, {width_name} {ef}"),
        &h,
        &d,
        "",
        &format!("{:.3} / {:.3}", o.0, o.1),
        ["", ""],
    );
    table::line(
        n,
        &format!("{kind}, {width_name} {ef}, iterative scan from the start"),
        &hi,
        &di,
        "",
        &format!(
            "{:.3} / {:.3} (paired with the row above: p50 {:.2}x hybrid, {:.2}x dense-only; the row above walked twice in {} of {} searches; the same results in {} of them)",
            overlap(&exact.h.results, &hi.results),
            overlap(&exact.d.results, &di.results),
            hi.latencies.p50() / h.latencies.p50(),
            di.latencies.p50() / d.latencies.p50(),
            h.rewalks + d.rewalks,
            h.latencies.len() + d.latencies.len(),
            same,
        ),
        ["", ""],
    );
    Ok(json!({ width_name: ef, "hybrid_p50_ms": h.latencies.p50(),
        "dense_p50_ms": d.latencies.p50(), "overlap_hybrid": o.0, "overlap_dense": o.1,
        "iterative_hybrid_p50_ms": hi.latencies.p50(), "iterative_dense_p50_ms": di.latencies.p50(),
        "rewalks": h.rewalks + d.rewalks }))
}

/// The hybrid searches at every prune budget of the sweep (at the default lookup cost),
/// then every lookup cost (at the default budget), their rows printed; the JSON rows.
pub(super) async fn budgets(size: &Size<'_>, exact: &Exact) -> Result<Vec<Value>, BoxError> {
    let opts = size.opts;
    let mut budgets = Vec::new();
    let settings = opts
        .budget_sweep
        .iter()
        .map(|&b| (b, DEFAULT_LOOKUP_COST))
        .chain(opts.lookup_sweep.iter().map(|&c| (DEFAULT_PRUNE_BUDGET, c)));
    for (budget, lookup_cost) in settings {
        let store = PostgresStore::connect(PostgresConfig {
            prune_budget: budget,
            lookup_cost,
            ..size.config(DenseMode::Hnsw)
        })
        .await?;
        let h = run(&store, &size.hybrid).await?;
        table::budget(size.n, size.kind, budget, lookup_cost, &h, &exact.h);
        budgets.push(json!({ "prune_budget": budget, "lookup_cost": lookup_cost,
            "hybrid_p50_ms": h.latencies.p50(), "hybrid_p95_ms": h.latencies.p95() }));
    }
    Ok(budgets)
}
