//! The Postgres table's rows: the header, a mode's row (hybrid and dense-only latencies
//! beside the memorize rates, the index build and the overlap with exact), and the rows
//! that annotate the mode above them.

use cortex_postgres::{AnnIndex, HnswMemory, LexicalPaths, RarestFirstLookups};

use super::WRITERS;
use super::runs::{Run, overlap};

pub(super) fn header() {
    println!(
        "\n| memories | memorize, 1 client (/s) | memorize, {WRITERS} clients (/s) | index build (s) | mode | hybrid p50 (ms) | hybrid p95 (ms) | dense-only p50 (ms) | dense-only p95 (ms) | overlap@10 with exact (hybrid / dense-only) |"
    );
    println!("|---:|---:|---:|---:|---|---:|---:|---:|---:|---|");
}

/// A memorize rate of `rates` (one client, then many), "-" when none was measured.
pub(crate) fn rate(rates: Option<(f64, f64)>, pick: fn((f64, f64)) -> f64) -> String {
    rates
        .map(pick)
        .filter(|r| r.is_finite())
        .map_or("-".into(), |r| format!("{r:.0}"))
}

/// A mode's row over `n` memories: its hybrid and dense-only runs, with `build`, `overlap`
/// and the `memorize` rates (one client, many) in their columns, empty where another row
/// holds them.
pub(super) fn line(
    n: usize,
    mode: &str,
    h: &Run,
    d: &Run,
    build: &str,
    overlap: &str,
    memorize: [&str; 2],
) {
    let [one, many] = memorize;
    println!(
        "| {n} | {one} | {many} | {build} | {mode} | {:.1} | {:.1} | {:.1} | {:.1} | {overlap} |",
        h.latencies.p50(),
        h.latencies.p95(),
        d.latencies.p50(),
        d.latencies.p95(),
    );
}

/// The exact hybrid searches with BM25 pruning off, beside the shares of the BM25 paths
/// the pruned ones took (`paths`, counted with their warm-up searches).
pub(super) fn unpruned(n: usize, unpruned: &Run, paths: &LexicalPaths) {
    let searches = paths.total().max(1) as f64;
    let share = |n: u64| n as f64 * 100.0 / searches;
    println!(
        "| {n} | | | - | exact, BM25 pruning off | {:.1} | {:.1} | | | (BM25 paths of the hybrid searches: pruned {:.0}%, of which rarest-first {:.0}% and past the budget {:.0}%; within the budget {:.0}%; one term in impact order {:.0}%; full {:.0}%) |",
        unpruned.latencies.p50(),
        unpruned.latencies.p95(),
        share(paths.pruned_total()),
        share(paths.rarest_first),
        share(paths.pruned_extended),
        share(paths.once),
        share(paths.impact),
        share(paths.full)
    );
}

/// The approximate index's size beside shared_buffers: an index larger than
/// shared_buffers is read through the kernel's cache.
pub(super) fn index_memory(
    n: usize,
    kind: &str,
    memory: &HnswMemory,
    ann_index: AnnIndex,
    lists: Option<u32>,
) {
    println!(
        "| {n} | | | | {kind} index {:.0} MB{}, shared_buffers {:.0} MB ({}) | | | | | |",
        memory.index_bytes as f64 / 1e6,
        match (ann_index, lists) {
            (AnnIndex::IvfFlat, Some(l)) => format!(", {l} lists"),
            _ => String::new(),
        },
        memory.shared_buffers_bytes as f64 / 1e6,
        if memory.fits() {
            "fits"
        } else {
            "does not fit"
        }
    );
}

/// How the approximate index's hybrid searches went: by BM25 path, the rarest-first
/// lookups, the searches run on two connections and those that walked the index twice.
pub(super) fn hybrid_paths(n: usize, kind: &str, hnsw_h: &Run) {
    let RarestFirstLookups {
        candidates,
        looked_up,
    } = hnsw_h.lookups;
    println!(
        "| {n} | | | | {kind} hybrid searches by BM25 path | | | | | {}; rarest-first: {looked_up} of {candidates} candidates looked up; {} of {} searches with the dense side on a second connection; {} walked the index twice |",
        hnsw_h.paths_summary(),
        hnsw_h.side_by_side,
        hnsw_h.latencies.len(),
        hnsw_h.rewalks
    );
}

/// The approximate index's hybrid searches with every search on one connection, paired
/// with the default's (`hnsw_h`).
pub(super) fn one_connection(n: usize, kind: &str, serial_h: &Run, hnsw_h: &Run) {
    println!(
        "| {n} | | | | {kind}, one connection per search | {:.1} | {:.1} | | | (paired with the {kind} row, alternating per query: p50 {:.2}x, p95 {:.2}x the {kind} row's) |",
        serial_h.latencies.p50(),
        serial_h.latencies.p95(),
        serial_h.latencies.p50() / hnsw_h.latencies.p50(),
        serial_h.latencies.p95() / hnsw_h.latencies.p95(),
    );
}

/// The hybrid searches at one BM25 prune budget and lookup cost.
pub(super) fn budget(n: usize, kind: &str, budget: u64, lookup_cost: u64, h: &Run, exact_h: &Run) {
    println!(
        "| {n} | | | | {kind}, prune budget {budget}, lookup cost {lookup_cost} | {:.1} | {:.1} | | | {:.3} / - ({}) |",
        h.latencies.p50(),
        h.latencies.p95(),
        overlap(&exact_h.results, &h.results),
        h.paths_summary()
    );
}
