//! One size of the Postgres table: its schema filled (or a kept one reused), the exact
//! searches with BM25 pruning and without, the approximate index built (afresh when a kept
//! one is stale) and searched, the sweeps, and the size's rows printed and returned.

use std::time::{Duration, Instant};

use cortex_core::{
    memory::MemoryKind, new_memory::NewMemory, store::MemoryStore, store::SearchRequest,
};
use cortex_postgres::{
    AnnIndex, DenseMode, HnswBuild, LexicalPaths, PostgresConfig, PostgresStore,
};
use serde_json::{Value, json};

use super::corpus::{self, Rng};
use super::diagnose::{explain, profile, trace};
use super::runs::{Run, overlap, paired, run};
use super::schema::{drop_schema, filled};
use super::{PgOptions, USER, secs, sweeps, table};
use crate::BoxError;

/// What every measurement of one size shares.
pub(super) struct Size<'a> {
    pub(super) opts: &'a PgOptions,
    pub(super) n: usize,
    pub(super) schema: String,
    /// The approximate index, as the rows name its mode.
    pub(super) kind: &'static str,
    pub(super) hybrid: Vec<SearchRequest>,
    pub(super) dense_only: Vec<SearchRequest>,
}

/// The exact searches: what the approximate index is measured against.
pub(super) struct Exact {
    pub(super) h: Run,
    pub(super) d: Run,
    unpruned: Run,
    /// The hybrid searches' BM25 paths, their warm-up included.
    paths: LexicalPaths,
}

/// The approximate index: its build and its searches.
struct Approximate {
    store: PostgresStore,
    build: Duration,
    h: Run,
    d: Run,
    /// The hybrid searches with both sides on one connection, paired with `h`.
    serial: Run,
}

/// Measures `n` memories and prints their rows; `None` when `--pg-profile` or
/// `--pg-trace` looked inside the searches instead.
pub(super) async fn measure(opts: &PgOptions, n: usize) -> Result<Option<Value>, BoxError> {
    let schema = format!("cortex_bench_{n}");
    let mut rng = Rng(n as u64);
    let corpus = corpus::generate(n, &mut rng);
    let (exact_store, load_rates) = filled(
        || opts.store_config(&schema, DenseMode::Exact),
        &schema,
        n,
        opts.keep,
        &corpus,
        &format!("loading {n} memories into Postgres..."),
        |i: usize| NewMemory::new(USER, &corpus.texts[i], MemoryKind::Note, &[], 1 << 16),
    )
    .await?;
    let (hybrid, dense_only) = corpus::requests(&corpus, &mut rng, opts.queries);
    let size = Size {
        opts,
        n,
        schema,
        kind: opts.ann_index.as_str(),
        hybrid,
        dense_only,
    };
    if size.inspected().await? {
        return Ok(None);
    }
    if opts.explain {
        let first = [&size.hybrid[0], &size.hybrid[1], &size.hybrid[2]];
        explain(&exact_store, "exact", &first).await?;
    }
    let exact = size.exact(&exact_store).await?;
    size.drop_stale(&exact_store).await?;
    let ann = size.approximate().await?;
    let row = size.report(&exact, &ann, load_rates).await?;
    if !opts.keep {
        drop_schema(&ann.store, &size.schema).await?;
    }
    Ok(Some(row))
}

impl Size<'_> {
    pub(super) fn config(&self, mode: DenseMode) -> PostgresConfig {
        self.opts.store_config(&self.schema, mode)
    }

    /// `--pg-profile` or `--pg-trace`, at the first `--pg-ef` when one is given: whether
    /// either ran.
    async fn inspected(&self) -> Result<bool, BoxError> {
        let traced = match self.opts.ef_sweep.first() {
            Some(&w) => self.opts.with_width(self.config(DenseMode::Hnsw), w),
            None => self.config(DenseMode::Hnsw),
        };
        if let Some(window) = self.opts.profile {
            profile(traced, &self.schema, &self.hybrid, window).await?;
            return Ok(true);
        }
        if let Some(repeat) = self.opts.trace {
            trace(
                traced,
                &self.schema,
                &self.hybrid,
                repeat,
                self.opts.explain,
            )
            .await?;
            return Ok(true);
        }
        Ok(false)
    }

    async fn exact(&self, exact: &PostgresStore) -> Result<Exact, BoxError> {
        eprintln!("exact searches...");
        let h = run(exact, &self.hybrid).await?;
        let paths = exact.diagnostics().lexical_paths();
        let d = run(exact, &self.dense_only).await?;

        // The same searches with BM25 pruning off, side by side.
        let unpruned = PostgresStore::connect(PostgresConfig {
            prune_budget: 0,
            ..self.config(DenseMode::Exact)
        })
        .await?;
        eprintln!("exact searches, pruning off...");
        let unpruned = run(&unpruned, &self.hybrid).await?;
        Ok(Exact {
            h,
            d,
            unpruned,
            paths,
        })
    }

    /// Drops a kept schema's index of the other kind, or one built with other settings,
    /// so that the searches use the one asked for, timed afresh.
    async fn drop_stale(&self, exact: &PostgresStore) -> Result<(), BoxError> {
        let opts = self.opts;
        let built = exact.diagnostics().hnsw_built_with().await?;
        let lists = exact.diagnostics().ivfflat_lists().await?;
        let stale = match opts.ann_index {
            AnnIndex::Hnsw => [built.is_some_and(|b| b != opts.hnsw_build), lists.is_some()],
            AnnIndex::IvfFlat => [
                built.is_some(),
                lists.is_some_and(|l| opts.ivf_lists.is_some_and(|want| want != l)),
            ],
        };
        let indexes = [
            "memories_embedding_hnsw_half",
            "memories_embedding_ivfflat_half",
        ];
        for (index, _) in indexes.into_iter().zip(stale).filter(|(_, stale)| *stale) {
            eprintln!("dropping {index} (HNSW built with {built:?}, IVFFlat lists {lists:?})...");
            exact
                .pool()
                .get()
                .await?
                .batch_execute(&format!("DROP INDEX IF EXISTS {}.{index}", self.schema))
                .await?;
        }
        Ok(())
    }

    async fn approximate(&self) -> Result<Approximate, BoxError> {
        let HnswBuild { m, ef_construction } = self.opts.hnsw_build;
        match self.opts.ann_index {
            AnnIndex::Hnsw => eprintln!(
                "building the HNSW index (m = {m}, ef_construction = {ef_construction})..."
            ),
            AnnIndex::IvfFlat => {
                eprintln!(
                    "building the IVFFlat index (lists {:?})...",
                    self.opts.ivf_lists
                )
            }
        }
        let start = Instant::now();
        let store = PostgresStore::connect(self.config(DenseMode::Hnsw)).await?;
        let build = start.elapsed();
        if self.opts.explain {
            explain(&store, "hnsw", &[&self.dense_only[0], &self.hybrid[0]]).await?;
        }
        eprintln!("{} searches...", self.kind);
        // The default, measured paired with every search on one connection (the dense
        // side after the BM25 side instead of beside it).
        let serial_store = PostgresStore::connect(PostgresConfig {
            parallel_search: false,
            ..self.config(DenseMode::Hnsw)
        })
        .await?;
        for r in self.hybrid.iter().take(5) {
            store.search(USER, r).await?;
            serial_store.search(USER, r).await?;
        }
        let (h, serial) = paired(&store, &serial_store, &self.hybrid).await?;
        let d = run(&store, &self.dense_only).await?;
        Ok(Approximate {
            store,
            build,
            h,
            d,
            serial,
        })
    }

    /// Prints the size's rows, runs the sweeps (printing theirs) and returns the JSON row.
    async fn report(
        &self,
        exact: &Exact,
        ann: &Approximate,
        load_rates: Option<(f64, f64)>,
    ) -> Result<Value, BoxError> {
        let (n, kind) = (self.n, self.kind);
        let overlaps = (
            overlap(&exact.h.results, &ann.h.results),
            overlap(&exact.d.results, &ann.d.results),
        );
        let rates = [
            table::rate(load_rates, |r| r.0),
            table::rate(load_rates, |r| r.1),
        ];
        let memorize = [rates[0].as_str(), rates[1].as_str()];
        table::line(
            n,
            "exact",
            &exact.h,
            &exact.d,
            "-",
            "1.000 / 1.000",
            memorize,
        );
        table::unpruned(n, &exact.unpruned, &exact.paths);
        let build = format!("{:.1}", secs(ann.build));
        let overlapping = format!("{:.3} / {:.3}", overlaps.0, overlaps.1);
        table::line(n, kind, &ann.h, &ann.d, &build, &overlapping, ["", ""]);
        let memory = ann.store.diagnostics().hnsw_memory().await?;
        let lists = ann.store.diagnostics().ivfflat_lists().await?;
        table::index_memory(n, kind, &memory, self.opts.ann_index, lists);
        table::hybrid_paths(n, kind, &ann.h);
        table::one_connection(n, kind, &ann.serial, &ann.h);
        let sweep = sweeps::widths(self, exact).await?;
        let budgets = sweeps::budgets(self, exact).await?;
        let (paths, h, d, serial) = (&exact.paths, &ann.h, &ann.d, &ann.serial);
        let unpruned = &exact.unpruned;
        let HnswBuild { m, ef_construction } = self.opts.hnsw_build;
        Ok(json!({
            "ef_sweep": sweep,
            "budget_sweep": budgets,
            "n": n,
            "memorize_one_client_per_s": load_rates.map(|r| r.0),
            "memorize_concurrent_per_s": load_rates.map(|r| r.1).filter(|r| r.is_finite()),
            "ann_index": kind,
            "ivfflat_lists": lists,
            "index_build_s": secs(ann.build),
            "hnsw_m": m,
            "hnsw_ef_construction": ef_construction,
            "hnsw_index_bytes": memory.index_bytes,
            "shared_buffers_bytes": memory.shared_buffers_bytes,
            "exact_unpruned": { "hybrid_p50_ms": unpruned.latencies.p50(), "hybrid_p95_ms": unpruned.latencies.p95() },
            "lexical_paths": { "full": paths.full, "once": paths.once, "pruned": paths.pruned, "pruned_extended": paths.pruned_extended, "impact": paths.impact, "rarest_first": paths.rarest_first },
            "exact": { "hybrid_p50_ms": exact.h.latencies.p50(), "hybrid_p95_ms": exact.h.latencies.p95(),
                       "dense_p50_ms": exact.d.latencies.p50(), "dense_p95_ms": exact.d.latencies.p95() },
            "hnsw": { "hybrid_p50_ms": h.latencies.p50(), "hybrid_p95_ms": h.latencies.p95(),
                      "dense_p50_ms": d.latencies.p50(), "dense_p95_ms": d.latencies.p95(),
                      "overlap_hybrid": overlaps.0, "overlap_dense": overlaps.1,
                      "rarest_first_candidates": h.lookups.candidates, "rarest_first_looked_up": h.lookups.looked_up,
                      "side_by_side_searches": h.side_by_side, "rewalks": h.rewalks },
            "hnsw_one_connection": { "hybrid_p50_ms": serial.latencies.p50(), "hybrid_p95_ms": serial.latencies.p95() },
        }))
    }
}
