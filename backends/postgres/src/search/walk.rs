//! The dense statement's settings (its plan, the index's search width, the iterative
//! scan) and how it runs after them: [`Walk`], first without the iterative scan when a
//! walk may come back short.

use cortex_core::error::StoreError;
use deadpool_postgres::Object;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, Statement};

use super::dense_side::Walked;
use crate::pg_err;

/// A statement parameter.
pub(super) type Param<'a> = &'a (dyn ToSql + Sync);

/// The dense statement's settings: a custom plan always; with an approximate index its
/// search width (`hnsw.ef_search` or `ivfflat.probes`) and its iterative scan, when
/// pgvector has it (HNSW's in distance order; IVFFlat's only mode, `relaxed_order`, may
/// return the rows past the probed lists slightly out of order, which ranking the
/// candidates by the full-precision distance puts right among those returned).
///
/// The dense statement always gets a custom plan: prepared once per connection, it may
/// after a few runs switch to a generic plan, which knows neither the user's size nor the
/// query vector (forced generic at 100k memories, the statement that then searched the
/// dense side inside the fusion joined the fused rows to every memory by a sequential hash
/// join: one-term searches took 100-113 ms, docs/BENCHMARKS.md). With an index the planner
/// chooses between the index's ordered scan and reading the user's rows by (user, seq)
/// and sorting them: for a user with few memories among many the latter is both exact and
/// faster. (Forcing the index with enable_sort=off was tried: it also turned the BM25
/// side into a full postings scan.)
#[derive(Debug)]
pub(super) struct Settings {
    pub(super) sql: &'static str,
    /// The same without the iterative scan, for a first walk (see [`Walk`]).
    pub(super) plain: Option<&'static str>,
    /// `hnsw.ef_search` or `ivfflat.probes`, with an index.
    pub(super) width: Option<String>,
}

/// The settings statements of each kind of search, `$1` the index's search width.
pub(super) const CUSTOM_ONLY: &str =
    "SELECT set_config('plan_cache_mode', 'force_custom_plan', true)";
pub(super) const HNSW_ITERATIVE: &str = "SELECT set_config('plan_cache_mode', 'force_custom_plan', true), \
     set_config('hnsw.ef_search', $1, true), \
     set_config('hnsw.iterative_scan', 'strict_order', true)";
pub(super) const HNSW_PLAIN: &str = "SELECT set_config('plan_cache_mode', 'force_custom_plan', true), \
     set_config('hnsw.ef_search', $1, true), \
     set_config('hnsw.iterative_scan', 'off', true)";
pub(super) const HNSW_OLD: &str = "SELECT set_config('plan_cache_mode', 'force_custom_plan', true), \
     set_config('hnsw.ef_search', $1, true)";
pub(super) const IVFFLAT_ITERATIVE: &str = "SELECT set_config('plan_cache_mode', 'force_custom_plan', true), \
     set_config('ivfflat.probes', $1, true), \
     set_config('ivfflat.iterative_scan', 'relaxed_order', true)";
pub(super) const IVFFLAT_PLAIN: &str = "SELECT set_config('plan_cache_mode', 'force_custom_plan', true), \
     set_config('ivfflat.probes', $1, true), \
     set_config('ivfflat.iterative_scan', 'off', true)";
pub(super) const IVFFLAT_OLD: &str = "SELECT set_config('plan_cache_mode', 'force_custom_plan', true), \
     set_config('ivfflat.probes', $1, true)";

impl Settings {
    pub(super) fn params(&self) -> Vec<Param<'_>> {
        match &self.width {
            Some(width) => vec![width as Param<'_>],
            None => Vec::new(),
        }
    }
}

/// How the dense statement runs inside its transaction (on either connection): after its
/// settings, in the same round trip; in HNSW mode for a user whose walks may skip it
/// (`Search::plain_first`), first without pgvector's iterative scan.
///
/// With the iterative scan on, pgvector 0.8 keeps every node a walk passes over
/// (allocated, in a heap) in case the scan must go on past `ef_search`; without it, a
/// search of a million memories took 5-7% less at the median, the dense side alone
/// 5% (docs/BENCHMARKS.md). When that walk
/// returns every candidate the statement asks for (`LIMIT`), its rows are the iterative
/// scan's: the iterative scan's first batch is the same walk, in the same order, and the
/// LIMIT ends the scan within it. When it comes back short (the user's memories are too
/// few among the walk's `ef_search` nearest of every user's), the statement runs again
/// with the iterative scan, in the same transaction and snapshot.
pub(super) struct Walk<'a> {
    pub(super) client: &'a Object,
    pub(super) settings: &'a Settings,
    pub(super) with_scan: Statement,
    pub(super) plain: Option<Statement>,
}

impl<'a> Walk<'a> {
    pub(super) async fn prepare(
        client: &'a Object,
        settings: &'a Settings,
    ) -> Result<Self, StoreError> {
        let with_scan = client.prepare_cached(settings.sql).await.map_err(pg_err)?;
        let plain = match settings.plain {
            Some(sql) => Some(client.prepare_cached(sql).await.map_err(pg_err)?),
            None => None,
        };
        Ok(Self {
            client,
            settings,
            with_scan,
            plain,
        })
    }

    /// `begin` (when given), the settings, `statement` and COMMIT, in one round trip; when
    /// the statement may run twice, COMMIT goes out after it returns. COMMIT of a failed
    /// transaction rolls it back, so the connection is clean either way; the first error
    /// is the one reported. Returns the rows and whether the statement ran twice.
    pub(super) async fn committed(
        &self,
        begin: Option<&str>,
        statement: &Statement,
        params: &[Param<'_>],
        top_k: usize,
    ) -> Result<(Vec<Row>, bool), StoreError> {
        let client = self.client;
        let begin = async {
            match begin {
                Some(sql) => client.batch_execute(sql).await,
                None => Ok(()),
            }
        };
        let found = self.run(statement, params, top_k);
        let (begin, found, commit) = match self.plain.is_some() {
            false => futures_util::join!(begin, found, client.batch_execute("COMMIT")),
            true => {
                let (begin, found) = futures_util::join!(begin, found);
                (begin, found, client.batch_execute("COMMIT").await)
            }
        };
        begin.map_err(pg_err)?;
        let found = found?;
        commit.map_err(pg_err)?;
        Ok(found)
    }

    /// The settings and `statement`, sent together; again with the iterative scan when
    /// the first walk came back short. Returns the rows and whether it ran twice.
    pub(super) async fn run(
        &self,
        statement: &Statement,
        params: &[Param<'_>],
        top_k: usize,
    ) -> Result<(Vec<Row>, bool), StoreError> {
        if let Some(plain) = &self.plain {
            let rows = self.once(plain, statement, params).await?;
            let short = match rows.first() {
                Some(row) => Walked::of(row)?.short(top_k),
                // Not a row: neither side found anything, which a walk that came back
                // full cannot leave.
                None => true,
            };
            if !short {
                return Ok((rows, false));
            }
            return Ok((self.once(&self.with_scan, statement, params).await?, true));
        }
        Ok((self.once(&self.with_scan, statement, params).await?, false))
    }

    /// `set`, then `statement`, sent together.
    pub(super) async fn once(
        &self,
        set: &Statement,
        statement: &Statement,
        params: &[Param<'_>],
    ) -> Result<Vec<Row>, StoreError> {
        let settings_params = self.settings.params();
        let (set, found) = futures_util::join!(
            self.client.query(set, &settings_params),
            self.client.query(statement, params),
        );
        set.map_err(pg_err)?;
        found.map_err(pg_err)
    }
}
