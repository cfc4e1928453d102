//! Timed searches on one store: a run of requests, each timed, with its results, the BM25
//! path it took and the store's counters over the run; two stores paired query by query;
//! and the overlap of two runs' results.

use std::time::Instant;

use cortex_core::{store::MemoryStore, store::SearchRequest};
use cortex_postgres::{PostgresStore, RarestFirstLookups};

use super::USER;
use crate::BoxError;
use crate::stats::Samples;

/// The BM25 paths, in [`Run::by_path`]'s order.
pub(super) const PATHS: [&str; 6] = [
    "full scan",
    "within the budget",
    "pruned",
    "pruned past the budget",
    "one term in impact order",
    "rarest term first",
];

pub(super) struct Run {
    pub(super) latencies: Samples,
    pub(super) results: Vec<Vec<uuid::Uuid>>,
    /// The same latencies by the BM25 path each search took: full scan, scored once,
    /// pruned, pruned past the budget.
    pub(super) by_path: [Samples; 6],
    /// The rarest-first candidates and lookups of the measured searches (not the warm-up).
    pub(super) lookups: RarestFirstLookups,
    /// How many of the measured searches ran their two sides on two connections.
    pub(super) side_by_side: u64,
    /// How many walked the HNSW graph again with the iterative scan, the first walk short.
    pub(super) rewalks: u64,
}

impl Run {
    /// The runs' searches as one run, in order.
    fn concat(runs: Vec<Run>) -> Run {
        let mut all = Run {
            latencies: Samples::default(),
            results: Vec::new(),
            by_path: Default::default(),
            lookups: RarestFirstLookups::default(),
            side_by_side: 0,
            rewalks: 0,
        };
        for run in runs {
            all.latencies.extend(&run.latencies);
            all.results.extend(run.results);
            for (into, from) in all.by_path.iter_mut().zip(&run.by_path) {
                into.extend(from);
            }
            all.lookups.candidates += run.lookups.candidates;
            all.lookups.looked_up += run.lookups.looked_up;
            all.side_by_side += run.side_by_side;
            all.rewalks += run.rewalks;
        }
        all
    }

    /// The searches by BM25 path, for the table: each path taken, how often, its p50.
    pub(super) fn paths_summary(&self) -> String {
        PATHS
            .iter()
            .zip(&self.by_path)
            .filter(|(_, s)| !s.is_empty())
            .map(|(name, s)| format!("{name} {} at p50 {:.1} ms", s.len(), s.p50()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Runs every request on both stores, alternating which goes first, so that the two are
/// measured under the same load and the same cache state.
pub(super) async fn paired(
    a: &PostgresStore,
    b: &PostgresStore,
    requests: &[SearchRequest],
) -> Result<(Run, Run), BoxError> {
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for (i, r) in requests.iter().enumerate() {
        let one = std::slice::from_ref(r);
        if i % 2 == 0 {
            first.push(measured(a, one).await?);
            second.push(measured(b, one).await?);
        } else {
            second.push(measured(b, one).await?);
            first.push(measured(a, one).await?);
        }
    }
    Ok((Run::concat(first), Run::concat(second)))
}

pub(super) async fn run(
    store: &PostgresStore,
    requests: &[SearchRequest],
) -> Result<Run, BoxError> {
    // Warm the statement cache and the buffers.
    for r in requests.iter().take(5) {
        store.search(USER, r).await?;
    }
    measured(store, requests).await
}

/// Runs `requests` one at a time, each timed.
async fn measured(store: &PostgresStore, requests: &[SearchRequest]) -> Result<Run, BoxError> {
    let mut latencies = Samples::default();
    let mut results = Vec::new();
    let mut by_path: [Samples; 6] = Default::default();
    let lookups_before = store.diagnostics().rarest_first_lookups();
    let parallel_before = store.diagnostics().parallel_searches();
    let rewalks_before = store.diagnostics().hnsw_rewalks();
    for r in requests {
        let before = store.diagnostics().lexical_paths();
        let start = Instant::now();
        let hits = store.search(USER, r).await?;
        let took = start.elapsed();
        let after = store.diagnostics().lexical_paths();
        latencies.push(took);
        let path = [
            after.full - before.full,
            after.once - before.once,
            after.pruned - before.pruned,
            after.pruned_extended - before.pruned_extended,
            after.impact - before.impact,
            after.rarest_first - before.rarest_first,
        ]
        .iter()
        .position(|&n| n > 0);
        if let Some(i) = path {
            by_path[i].push(took);
        }
        results.push(hits.iter().map(|h| h.memory.id).collect());
    }
    let lookups_after = store.diagnostics().rarest_first_lookups();
    Ok(Run {
        latencies,
        results,
        by_path,
        lookups: RarestFirstLookups {
            candidates: lookups_after.candidates - lookups_before.candidates,
            looked_up: lookups_after.looked_up - lookups_before.looked_up,
        },
        side_by_side: store.diagnostics().parallel_searches() - parallel_before,
        rewalks: store.diagnostics().hnsw_rewalks() - rewalks_before,
    })
}

/// The share of `a`'s results that `b` returned too, search by search.
pub(crate) fn overlap(a: &[Vec<uuid::Uuid>], b: &[Vec<uuid::Uuid>]) -> f64 {
    let mut shared = 0usize;
    let mut total = 0usize;
    for (x, y) in a.iter().zip(b) {
        shared += x.iter().filter(|id| y.contains(id)).count();
        total += x.len().max(1);
    }
    shared as f64 / total.max(1) as f64
}
