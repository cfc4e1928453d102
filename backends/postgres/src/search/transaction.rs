//! One search as one read-only transaction: begun with the BM25 side and the dense side
//! (behind it on the same connection, or beside it on a spare one, in the same
//! snapshot), then the fusion and the commit; dropped before it ends, it rolls back.
//! [`Search::explain`] runs the same statements under EXPLAIN ANALYZE.

use cortex_core::{error::StoreError, store::SearchRequest};
use deadpool_postgres::Object;
use futures_util::FutureExt;
use tokio_postgres::{Row, Statement};

use super::dense_plan::{self, DensePlan};
use super::explain::explain_generic;
use super::ivfflat;
use super::lexical_path::{LexicalPath, RarestFirstLookups};
use super::walk::{
    CUSTOM_ONLY, HNSW_ITERATIVE, HNSW_OLD, HNSW_PLAIN, IVFFLAT_ITERATIVE, IVFFLAT_OLD,
    IVFFLAT_PLAIN, Settings, Walk,
};
use super::{
    DenseRanks, LexicalSide, Pruning, decode_dense, decode_lexical, dense, fused, lexical,
};
use crate::config::{AnnIndex, PostgresConfig};
use crate::names::Names;
use crate::pg_err;
use crate::pool::Connections;
use crate::sql::{Built, get};

/// The BM25 statement's generic plan (see [`Search::run`]), set for its transaction.
const GENERIC_PLAN: &str = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)";
/// The same, and the transaction's snapshot exported for a second connection to share.
const GENERIC_PLAN_EXPORTED: &str = "SELECT set_config('plan_cache_mode', \
     'force_generic_plan', true), pg_export_snapshot()";
const READ_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY";
/// A filtered BM25 statement's plan, made for its values (see [`LexicalPlan`]).
const CUSTOM_PLAN: &str = "SELECT set_config('plan_cache_mode', 'force_custom_plan', true)";
/// The same, and the transaction's snapshot exported for a second connection to share.
const CUSTOM_PLAN_EXPORTED: &str = "SELECT set_config('plan_cache_mode', \
     'force_custom_plan', true), pg_export_snapshot()";

/// How the BM25 statement is planned. Unfiltered, its shape does not hinge on estimates
/// and it is planned once per connection (generic). Filtered, it joins every posting of
/// its terms to the memories that pass, and the best join (from the postings, or from the
/// few memories a selective filter leaves) depends on the filter's values, which only a
/// plan made for them sees (custom). The fused statement reading both sides' ranks is
/// planned the same way (its mode set again before it when the dense side ran on the same
/// connection: the dense side's settings make the transaction's plans custom).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LexicalPlan {
    Generic,
    Custom,
}

impl LexicalPlan {
    fn of(request: &SearchRequest) -> Self {
        match request.filter.is_empty() {
            true => Self::Generic,
            false => Self::Custom,
        }
    }

    fn setting(self) -> &'static str {
        match self {
            Self::Generic => GENERIC_PLAN,
            Self::Custom => CUSTOM_PLAN,
        }
    }

    fn setting_exported(self) -> &'static str {
        match self {
            Self::Generic => GENERIC_PLAN_EXPORTED,
            Self::Custom => CUSTOM_PLAN_EXPORTED,
        }
    }
}

/// What a search reads from its store.
#[derive(Clone, Copy)]
pub(crate) struct Store<'a> {
    pub names: &'a Names,
    pub config: &'a PostgresConfig,
    pub pool: &'a Connections,
    /// pgvector 0.8 or later (`hnsw.iterative_scan`, `ivfflat.iterative_scan`).
    pub iterative_scan: bool,
    /// The IVFFlat index's lists, once known (the default probes follow them).
    pub ivf_lists: u32,
}

/// One search to run: its store, dense plan, user, request and unit query embedding.
#[derive(Clone, Copy)]
pub(crate) struct Search<'a> {
    pub store: Store<'a>,
    pub plan: DensePlan,
    pub user: &'a str,
    /// The query embedding scaled to unit length by the core (`normalized`).
    pub unit: &'a [f32],
    pub request: &'a SearchRequest,
    /// Walk the HNSW graph first without pgvector's iterative scan (see [`Walk`]).
    pub plain_first: bool,
}

/// What a search found: the fused statement's rows (with `explain`, the plans) and how
/// its BM25 side went.
#[derive(Debug)]
pub(crate) struct Found {
    pub rows: Vec<Row>,
    pub path: LexicalPath,
    pub lookups: RarestFirstLookups,
    /// Whether the dense side ran on a second connection.
    pub parallel: bool,
    /// Whether the HNSW graph was walked again with the iterative scan, the walk without
    /// it having come back short (see [`Walk`]).
    pub rewalked: bool,
}

impl Search<'_> {
    /// Runs the search in one read-only snapshot, in two round trips: the BM25 and dense
    /// statements (the dense one on a spare connection beside the BM25 one, with several
    /// terms and one free), then the fused one.
    pub(crate) async fn run(&self) -> Result<Found, StoreError> {
        self.execute(false).await
    }

    /// The plans of the search statements (EXPLAIN ANALYZE of the BM25 statement with its
    /// generic plan, a filtered one's for its values, of the dense one for its values,
    /// then of the fused one, each run with the same settings as the search), for
    /// diagnosing a slow recall. Always on one connection, as when no second connection is
    /// free. A generic plan is made afresh for EXPLAIN, so its planning time is counted
    /// where a search reuses the plan its connection made once.
    pub(crate) async fn explain(&self) -> Result<Vec<String>, StoreError> {
        let found = self.execute(true).await?;
        found.rows.iter().map(|row| get::<String>(row, 0)).collect()
    }

    fn lexical(&self) -> Option<Built> {
        let config = self.store.config;
        lexical(
            self.store.names,
            self.user,
            &self.request.terms,
            self.request.top_k,
            Pruning {
                budget: config.prune_budget,
                lookup_cost: config.lookup_cost,
            },
            &self.request.filter,
        )
    }

    /// One read-only snapshot for both sides: a write between them could otherwise leave
    /// a memory ranked by one side and missing from the other. The BM25 statement's text
    /// depends only on the number of terms and the settings, and its plan's shape not on
    /// estimates (see [`lexical`]): planned once per connection instead of per search.
    /// The dense statement is planned per search (see [`Settings`]), on a second
    /// connection beside the BM25 side when the query has several terms and one is free,
    /// else right behind the BM25 side on this one, in the same round trip (a one-term
    /// BM25 side, impact-ordered, costs less than a second connection's extra round trip
    /// and snapshot export, docs/BENCHMARKS.md). The fused statement then reads both
    /// sides' ranks, planned once per connection: planning it per search with the dense
    /// side inside cost more than a millisecond, and the weights' two exact scores in
    /// PL/pgSQL almost another (docs/BENCHMARKS.md); the core computes those from the
    /// dense statement's first two embeddings.
    async fn execute(&self, explain: bool) -> Result<Found, StoreError> {
        let settings = settings(self, explain);
        let client = self.store.pool.get().await?;
        let transaction = Transaction {
            client: &client,
            settings: &settings,
            lexical_plan: LexicalPlan::of(self.request),
            explain,
            open: true,
        };
        let lexical = self.lexical();
        let dense = dense(
            self.store.names,
            self.plan,
            self.user,
            self.unit,
            self.request.top_k,
            &self.request.filter,
        );
        let config = self.store.config;
        let second = match !explain && config.parallel_search && self.request.terms.len() > 1 {
            // Never waits for one to come free: a search holding one connection while
            // waiting for another could, under load, leave every search waiting on every
            // other. A failed connect is no error: the search then runs on one connection.
            true => self.store.pool.spare().await,
            false => None,
        };
        let sides = match (&second, &lexical) {
            (Some(second), Some(lexical)) => {
                transaction
                    .side_by_side(second, lexical, &dense, self.unit, self.request.top_k)
                    .await
            }
            _ => {
                transaction
                    .one_connection(lexical.as_ref(), &dense, self.unit, self.request.top_k)
                    .await
            }
        };
        // Back to the pool before the fusion: the next search finds it free.
        drop(second);
        let sides = match sides {
            Ok(sides) => sides,
            Err(e) => {
                transaction.rollback().await;
                return Err(e);
            }
        };
        let fused = fused(
            self.store.names,
            self.user,
            self.request.top_k,
            &sides.dense,
            &sides.lexical,
        );
        let found = transaction.fuse(&fused, !sides.parallel).await?;
        let mut rows = sides.plans;
        rows.extend(found);
        Ok(Found {
            rows,
            path: sides.path,
            lookups: sides.lookups,
            parallel: sides.parallel,
            rewalked: sides.rewalked,
        })
    }
}

/// What the two sides found, before the fusion.
struct Sides {
    lexical: LexicalSide,
    path: LexicalPath,
    lookups: RarestFirstLookups,
    dense: DenseRanks,
    /// Whether the dense side ran on a second connection.
    parallel: bool,
    /// Whether the HNSW graph was walked again (see [`Walk`]).
    rewalked: bool,
    /// The two statements' plans, with `explain`.
    plans: Vec<Row>,
}

/// A search's read-only transaction on its pooled connection. BEGIN, the settings, a
/// statement (and COMMIT after the last) go out together as one pipelined batch: one round
/// trip (each future sends its message on its first poll, and join polls them in order).
/// The settings hold for these statements only (SET LOCAL semantics: a pooled connection
/// is reused), which needs the transaction.
///
/// Dropped before it ends (its caller gave up midway, e.g. a cancelled request), it
/// queues a ROLLBACK behind whatever is still in flight, before the connection goes back
/// to the pool, so that the next caller on it is not inside this read-only snapshot.
struct Transaction<'a> {
    client: &'a Object,
    settings: &'a Settings,
    /// How the BM25 statement is planned (set for the whole transaction).
    lexical_plan: LexicalPlan,
    /// Statements run under EXPLAIN ANALYZE, their plans returned instead of their rows.
    explain: bool,
    open: bool,
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if self.open {
            // One poll is enough: tokio-postgres queues a request on its first poll, and
            // the connection sends it in order whether or not its reply is awaited.
            let _ = self.client.batch_execute("ROLLBACK").now_or_never();
        }
    }
}

impl Transaction<'_> {
    async fn prepare(&self, built: &Built) -> Result<Statement, StoreError> {
        let text = match self.explain {
            true => format!("EXPLAIN (ANALYZE, BUFFERS) {}", built.0),
            false => built.0.clone(),
        };
        self.client.prepare_cached(&text).await.map_err(pg_err)
    }

    /// Ends the transaction whatever failed; the error to report is the caller's first.
    async fn rollback(mut self) {
        self.open = false;
        let _ = self.client.batch_execute("ROLLBACK").await;
    }

    /// The fused statement, then COMMIT, in one round trip; with `explain`, its plan as
    /// the search runs it instead of its rows. Reading two sides' ranks, its shape depends
    /// on no value (planning it per search cost 0.3 ms, ten times its generic planning); a
    /// filtered search's is planned for its values, as its BM25 side is. After a dense
    /// side that ran on this connection (`dense_here`), whose settings made the
    /// transaction's plans custom, the plan mode goes out again first; after one that ran
    /// on a second connection, the BM25 side's mode still holds.
    async fn fuse(mut self, fused: &Built, dense_here: bool) -> Result<Vec<Row>, StoreError> {
        let client = self.client;
        let prepared = async {
            let mode = match dense_here || self.explain {
                true => Some(
                    client
                        .prepare_cached(self.lexical_plan.setting())
                        .await
                        .map_err(pg_err)?,
                ),
                false => None,
            };
            let statement = client.prepare_cached(&fused.0).await.map_err(pg_err)?;
            Ok::<_, StoreError>((mode, statement))
        };
        let (mode, statement) = match prepared.await {
            Ok(prepared) => prepared,
            Err(e) => {
                self.rollback().await;
                return Err(e);
            }
        };
        let params = fused.1.as_params();
        if self.explain {
            let plans = async {
                if let Some(mode) = &mode {
                    client.query(mode, &[]).await.map_err(pg_err)?;
                }
                match self.lexical_plan {
                    LexicalPlan::Generic => explain_generic(client, &statement, fused).await,
                    LexicalPlan::Custom => {
                        let explained = self.prepare(fused).await?;
                        client.query(&explained, &params).await.map_err(pg_err)
                    }
                }
            };
            return match plans.await {
                Ok(plans) => {
                    self.open = false;
                    client.batch_execute("COMMIT").await.map_err(pg_err)?;
                    Ok(plans)
                }
                Err(e) => {
                    self.rollback().await;
                    Err(e)
                }
            };
        }
        let set = async {
            match &mode {
                Some(mode) => client.query(mode, &[]).await.map(drop),
                None => Ok(()),
            }
        };
        let (set, found, commit) = futures_util::join!(
            set,
            client.query(&statement, &params),
            client.batch_execute("COMMIT"),
        );
        self.open = false;
        set.map_err(pg_err)?;
        let found = found.map_err(pg_err)?;
        commit.map_err(pg_err)?;
        Ok(found)
    }

    /// Opens the read-only snapshot and runs both sides there, in one round trip: the
    /// BM25 statement (when the query has terms) with its plan mode, then the dense
    /// statement with its settings (a second walk of the HNSW graph, when the first comes
    /// back short, is one more: see [`Walk`]). With `explain`, also their plans as they
    /// ran (the BM25 statement's generic, or for its values when filtered; the dense one's
    /// for its values).
    async fn one_connection(
        &self,
        bm25: Option<&Built>,
        dense: &Built,
        unit: &[f32],
        top_k: usize,
    ) -> Result<Sides, StoreError> {
        let client = self.client;
        let lexical_statements = match bm25 {
            Some(lexical) => Some((
                client.prepare_cached(&lexical.0).await.map_err(pg_err)?,
                client
                    .prepare_cached(self.lexical_plan.setting())
                    .await
                    .map_err(pg_err)?,
            )),
            None => None,
        };
        let dense_statement = client.prepare_cached(&dense.0).await.map_err(pg_err)?;
        let walk = Walk::prepare(client, self.settings).await?;
        let lexical_params = bm25.map(|l| l.1.as_params()).unwrap_or_default();
        let dense_params = dense.1.as_params();
        // join! polls in order, and each future sends its messages on its first poll:
        // BEGIN, the BM25 side, then the dense side go out together.
        let lexical_side = async {
            match &lexical_statements {
                Some((statement, plan_mode)) => {
                    let (set, found) = futures_util::join!(
                        client.query(plan_mode, &[]),
                        client.query_one(statement, &lexical_params),
                    );
                    set.map_err(pg_err)?;
                    found.map(Some).map_err(pg_err)
                }
                None => Ok(None),
            }
        };
        let (begin, lexical_found, dense_found) = futures_util::join!(
            client.batch_execute(READ_SNAPSHOT),
            lexical_side,
            walk.run(&dense_statement, &dense_params, top_k),
        );
        begin.map_err(pg_err)?;
        let (lexical, path, lookups) = match lexical_found? {
            Some(row) => decode_lexical(&row)?,
            None => (
                LexicalSide::default(),
                LexicalPath::Once,
                RarestFirstLookups::default(),
            ),
        };
        let (dense_rows, rewalked) = dense_found?;
        let dense_row = dense_rows
            .first()
            .ok_or_else(|| StoreError::Corrupt("the dense statement returned no row".into()))?;
        let mut plans = Vec::new();
        if self.explain {
            // Each explained under its own settings again: the dense side's made the
            // transaction's plans custom after the BM25 statement ran.
            if let (Some((statement, plan_mode)), Some(bm25)) = (&lexical_statements, bm25) {
                client.query(plan_mode, &[]).await.map_err(pg_err)?;
                plans.extend(match self.lexical_plan {
                    LexicalPlan::Generic => explain_generic(client, statement, bm25).await?,
                    LexicalPlan::Custom => {
                        let explained = self.prepare(bm25).await?;
                        client
                            .query(&explained, &lexical_params)
                            .await
                            .map_err(pg_err)?
                    }
                });
            }
            client
                .query(&walk.with_scan, &self.settings.params())
                .await
                .map_err(pg_err)?;
            let explained = self.prepare(dense).await?;
            plans.extend(
                client
                    .query(&explained, &dense_params)
                    .await
                    .map_err(pg_err)?,
            );
        }
        Ok(Sides {
            lexical,
            path,
            lookups,
            dense: decode_dense(dense_row, unit)?,
            parallel: false,
            rewalked,
            plans,
        })
    }

    /// Opens the read-only snapshot, runs the BM25 side there and, as soon as the
    /// snapshot is exported, the `dense` statement on `second` in the same snapshot, in a
    /// transaction of its own that ends here.
    async fn side_by_side(
        &self,
        second: &Object,
        lexical: &Built,
        dense: &Built,
        unit: &[f32],
        top_k: usize,
    ) -> Result<Sides, StoreError> {
        let client = self.client;
        let statement = client.prepare_cached(&lexical.0).await.map_err(pg_err)?;
        let exported = client
            .prepare_cached(self.lexical_plan.setting_exported())
            .await
            .map_err(pg_err)?;
        let on_second = OnSecond {
            statement: second.prepare_cached(&dense.0).await.map_err(pg_err)?,
            walk: Walk::prepare(second, self.settings).await?,
        };
        let lexical_params = lexical.1.as_params();
        // The BM25 statement goes out right behind the export; the dense side waits only
        // for the snapshot's name. join! polls in order, so BEGIN, the export and the
        // BM25 statement are sent in that order.
        // Err: the export failed (on `client`); Ok(Err): the dense side failed (on
        // `second`), which may only follow from a failure on `client` (an aborted
        // exporting transaction's snapshot can no longer be imported), so `client`'s
        // errors are reported first.
        let dense_side = async {
            let row = client.query_one(&exported, &[]).await.map_err(pg_err)?;
            let snapshot: String = get(&row, "pg_export_snapshot")?;
            Ok::<_, StoreError>(on_second.dense(&snapshot, dense, unit, top_k).await)
        };
        let (begin, dense_ranked, lexical_found) = futures_util::join!(
            client.batch_execute(READ_SNAPSHOT),
            dense_side,
            client.query_one(&statement, &lexical_params),
        );
        begin.map_err(pg_err)?;
        let dense_ranked = dense_ranked?;
        let (ranked, path, lookups) = decode_lexical(&lexical_found.map_err(pg_err)?)?;
        let (dense_ranked, rewalked) = dense_ranked?;
        Ok(Sides {
            lexical: ranked,
            path,
            lookups,
            dense: dense_ranked,
            parallel: true,
            rewalked,
            plans: Vec::new(),
        })
    }
}

/// The dense side's connection, when it runs beside the BM25 side, with its statements
/// prepared.
struct OnSecond<'a> {
    statement: Statement,
    walk: Walk<'a>,
}

impl OnSecond<'_> {
    /// The `dense` statement in the exported `snapshot`, in a transaction that ends in
    /// the same round trip (after the walk, when it may run twice: see [`Walk`]): COMMIT
    /// of a failed one rolls it back, so the connection goes back to the pool clean
    /// either way. Returns the ranks and whether the graph was walked twice.
    async fn dense(
        &self,
        snapshot: &str,
        dense: &Built,
        unit: &[f32],
        top_k: usize,
    ) -> Result<(DenseRanks, bool), StoreError> {
        // A snapshot's name is hex digits and dashes; it is written into the command (SET
        // TRANSACTION SNAPSHOT takes no parameter).
        if snapshot.is_empty() || !snapshot.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Err(StoreError::Corrupt(format!("snapshot name {snapshot:?}")));
        }
        let params = dense.1.as_params();
        let begin = format!("{READ_SNAPSHOT}; SET TRANSACTION SNAPSHOT '{snapshot}'");
        let (rows, rewalked) = self
            .walk
            .committed(Some(&begin), &self.statement, &params, top_k)
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Corrupt("the dense statement returned no row".into()))?;
        Ok((decode_dense(row, unit)?, rewalked))
    }
}

/// The dense statement's settings for `search` (see [`Settings`]).
fn settings(search: &Search<'_>, explain: bool) -> Settings {
    let config = search.store.config;
    let index = search.plan.is_index();
    let iterative = search.store.iterative_scan;
    let ivfflat = config.ann_index == AnnIndex::IvfFlat;
    let plain = (index && iterative && search.plain_first && !explain).then_some(match ivfflat {
        true => IVFFLAT_PLAIN,
        false => HNSW_PLAIN,
    });
    let sql = match (index, ivfflat, iterative) {
        (false, _, _) => CUSTOM_ONLY,
        (true, false, true) => HNSW_ITERATIVE,
        (true, false, false) => HNSW_OLD,
        (true, true, true) => IVFFLAT_ITERATIVE,
        (true, true, false) => IVFFLAT_OLD,
    };
    let pool = cortex_core::hybrid::candidate_pool(search.request.top_k);
    let width = index.then(|| match ivfflat {
        true => ivfflat::probes(config.ivfflat, search.store.ivf_lists).to_string(),
        false => match config.ef_search {
            Some(ef) => ef.clamp(1, 1000),
            None => dense_plan::ef_search(dense_plan::hnsw_candidates(pool)),
        }
        .to_string(),
    });
    Settings { sql, plain, width }
}
