//! [`PostgresStore`]: the MemoryStore over a PostgreSQL + pgvector database.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use async_trait::async_trait;
use cortex_core::embedding::validate_embedding;
use cortex_core::hybrid::ScoredMemory;
use cortex_core::memory::Supersession;
use cortex_core::record_tx::{self, require_memory};
use cortex_core::{
    error::StoreError, error::StoreResult, index::MemoryIndex, memory::Memory, memory::MemoryId,
    new_memory::NewMemory, signature::EmbeddingSignature, store::Added, store::BuiltIndex,
    store::Capabilities, store::Deleted, store::Generation, store::ListQuery, store::MemoryStore,
    store::SearchRequest,
};
use deadpool_postgres::{GenericClient, Pool};
use pgvector::Vector;
use sea_query::{Expr, ExprTrait, LockType, OnConflict, Order, Query};
use tokio_postgres::IsolationLevel;

use crate::codec::{SUPERSESSION_COLUMNS, memory_columns, memory_of, supersession_of};
use crate::config::{AnnIndex, DenseMode, PostgresConfig};
use crate::filter::filter_conditions;
use crate::meta::{
    generation_of, read_generation, read_signature, read_signature_locked, record_signature,
};
use crate::names::Names;
use crate::pool::Connections;
use crate::postings::{DocTerms, adjust_stats, bump_user, delete_postings, insert_postings};
use crate::prefix::prefix_bounds;
use crate::records::PgRecords;
use crate::replicas::Replicas;
use crate::schema::{ServerInfo, migrate};
use crate::search::lexical_path::PathCounters;
use crate::sql::{self, build, get, get_named, limit, row_opt, rows, sea_err};
use crate::tables::{Memories, Supersessions};
use crate::{pg_err, pool, tls};

mod search_plan;

/// Live counts (and users whose HNSW walks came back short) remembered per user;
/// forgotten wholesale past this many users.
const MAX_CACHED_COUNTS: usize = 100_000;

/// A count of memories as a LIMIT (a bigint).
fn limit_of(n: u64) -> u64 {
    Ord::min(n, i64::MAX as u64)
}

/// A MemoryStore over PostgreSQL + pgvector, shared safely by any number of processes.
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Connections,
    names: Names,
    config: PostgresConfig,
    server: ServerInfo,
    /// The signature once read or written; only a re-embedding's switch changes it.
    signature: RwLock<Option<EmbeddingSignature>>,
    /// Whether the approximate index (`ann_index`) is there, and whether a task builds it.
    index_ready: AtomicBool,
    index_building: AtomicBool,
    /// The IVFFlat index's lists once it is there (its searches' default probes).
    ivf_lists: AtomicU32,
    /// Each user's live count as last seen, to choose exact or HNSW in `auto` mode and
    /// whether an HNSW walk may skip the iterative scan (not kept in `exact` mode).
    live_counts: Mutex<HashMap<String, u64>>,
    /// Which way each search's BM25 side went (diagnostics).
    lexical_paths: PathCounters,
    /// Searches whose two sides ran on two connections (diagnostics).
    parallel_searches: AtomicU64,
    /// Filtered searches that HNSW would have served, searched exactly because few
    /// memories passed (diagnostics).
    filtered_exact: AtomicU64,
    /// Users whose HNSW walk without the iterative scan came back short: their searches
    /// scan iteratively from the start (see `search::transaction::Walk`).
    short_walks: Mutex<HashSet<String>>,
    /// Searches that walked the graph twice for that (diagnostics).
    rewalks: AtomicU64,
    /// The hot standbys reads go to, when `CORTEX_DATABASE_READ_URL` names any.
    replicas: Option<Replicas>,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects, makes sure pgvector is installed, migrates the schema forward (once, even
    /// with several processes starting together) and opens the pool.
    pub async fn connect(config: PostgresConfig) -> Result<Self, StoreError> {
        let names = Names::new(config.schema_name())?;
        if config.pool_size == 0 {
            return Err(StoreError::Config("pool size must be at least 1".into()));
        }
        let endpoint = pool::Endpoint::new(tls::parse(&config.url)?, &config.timeouts);
        let mut boot = pool::connect_one(&endpoint).await?;
        let server = migrate(&mut boot, &names).await?;
        drop(boot);
        let mut search_path = vec![names.schema()];
        if server.extension_schema != names.schema() {
            search_path.push(&server.extension_schema);
        }
        let pool = pool::build_pool(endpoint, &search_path, config.pool_size)?;
        let replicas = match config.replicas.is_empty() {
            true => None,
            false => Some(Replicas::open(&config, &search_path).await?),
        };
        if !server.iterative_scan && config.dense_mode != DenseMode::Exact {
            tracing::warn!(
                "pgvector is older than 0.8: HNSW searches cannot scan iteratively, so a \
                 user's filter may return fewer candidates than asked; upgrade pgvector"
            );
        }
        let store = Self {
            inner: Arc::new(Inner {
                pool,
                names,
                config,
                server,
                signature: RwLock::new(None),
                index_ready: AtomicBool::new(false),
                index_building: AtomicBool::new(false),
                ivf_lists: AtomicU32::new(0),
                live_counts: Mutex::new(HashMap::new()),
                lexical_paths: PathCounters::default(),
                parallel_searches: AtomicU64::new(0),
                filtered_exact: AtomicU64::new(0),
                short_walks: Mutex::new(HashSet::new()),
                rewalks: AtomicU64::new(0),
                replicas,
            }),
        };
        if store.inner.config.dense_mode == DenseMode::Hnsw
            && let Some(signature) = store.known_signature().await?
        {
            store.ensure_index(signature.dimension).await?;
        }
        Ok(store)
    }

    pub fn config(&self) -> &PostgresConfig {
        &self.inner.config
    }

    /// The pool, for tools and tests that need plain SQL next to the store.
    pub fn pool(&self) -> &Pool {
        self.inner.pool.pool()
    }

    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.inner.pool.get().await
    }

    pub(crate) fn connections(&self) -> &Connections {
        &self.inner.pool
    }

    /// The hot standbys, if any (reads reach them through `read`).
    pub(crate) fn replicas(&self) -> Option<&Replicas> {
        self.inner.replicas.as_ref()
    }

    /// Runs one call under the store's deadline (see [`crate::deadline`]).
    pub(crate) async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        self.inner.pool.bounded(call).await
    }

    pub(crate) fn names(&self) -> &Names {
        &self.inner.names
    }

    fn cached_signature(&self) -> Option<EmbeddingSignature> {
        self.inner
            .signature
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Caches the store's signature, as read, written, or switched to by a re-embedding
    /// (which also forgets the HNSW index when the dimension changed).
    pub(crate) fn remember_signature(&self, signature: EmbeddingSignature) {
        let mut known = self
            .inner
            .signature
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if known
            .as_ref()
            .is_some_and(|k| k.dimension != signature.dimension)
        {
            self.inner.index_ready.store(false, Ordering::Release);
        }
        *known = Some(signature);
    }

    pub(crate) async fn known_signature(&self) -> Result<Option<EmbeddingSignature>, StoreError> {
        if let Some(known) = self.cached_signature() {
            return Ok(Some(known));
        }
        let client = self.client().await?;
        let read = read_signature(&client, self.names()).await?;
        if let Some(signature) = &read {
            self.remember_signature(signature.clone());
        }
        Ok(read)
    }
}

#[async_trait]
impl MemoryStore for PostgresStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            search: self.inner.config.pushdown,
            records: true,
            persistent: true,
            shared: true,
        }
    }

    async fn signature(&self) -> StoreResult<Option<EmbeddingSignature>> {
        self.bounded(self.known_signature()).await
    }

    async fn add(
        &self,
        memory: &NewMemory,
        embedding: &[f32],
        signature: &EmbeddingSignature,
    ) -> StoreResult<Added> {
        self.bounded(async {
            validate_embedding(embedding, signature.dimension).map_err(pg_err)?;
            memory.check_records()?;
            let doc = DocTerms::of(&memory.content)?;
            let names = self.names();
            let insert_memory = build(
                Query::insert()
                    .into_table(names.table(Memories::Table))
                    .columns([
                        Memories::Id,
                        Memories::UserId,
                        Memories::Content,
                        Memories::Kind,
                        Memories::Tags,
                        Memories::CreatedAt,
                        Memories::DocLen,
                        Memories::Embedding,
                        Memories::ExpiresAt,
                    ])
                    .values([
                        memory.id.into(),
                        memory.user_id.clone().into(),
                        memory.content.clone().into(),
                        memory.kind.as_str().into(),
                        memory.tags.clone().into(),
                        memory.created_at.into(),
                        doc.len.into(),
                        Vector::from(embedding.to_vec()).into(),
                        memory.expires_at.into(),
                    ])
                    .map_err(sea_err)?
                    .returning_col(Memories::Seq),
            );
            let bump = bump_user(names, &memory.user_id, 1, i64::from(doc.len))?;
            let postings = insert_postings(names, memory.id, &doc)?;

            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(pg_err)?;
            let first = match read_signature_locked(&tx, names, Some(LockType::Share)).await? {
                Some(stored) if &stored != signature => {
                    return Err(StoreError::SignatureMismatch {
                        stored,
                        got: signature.clone(),
                    });
                }
                Some(_) => false,
                None => {
                    record_signature(&tx, names, signature).await?;
                    true
                }
            };
            let generation = generation_of(row_opt(&tx, &bump).await?)?;
            let seq: i64 = match row_opt(&tx, &insert_memory).await? {
                Some(row) => get(&row, 0)?,
                None => return Err(StoreError::Corrupt("insert returned no seq".into())),
            };
            sql::execute(&tx, &postings).await?;
            // Before the supersessions: a correction refused below takes its records back.
            if let Some(records) = &memory.records {
                let mut records_tx = PgRecords::new(&tx, names);
                record_tx::record_extraction(&mut records_tx, &memory.user_id, records).await?;
            }
            for s in &memory.supersedes {
                // The users row locked by the bump serialises the user's writers, so this
                // is race-free: two corrections of one memory cannot both commit.
                if !write_supersession(&tx, names, &memory.user_id, s).await? {
                    return Err(StoreError::AlreadySuperseded(s.old_id));
                }
            }
            tx.commit().await.map_err(pg_err)?;
            self.note_write(&client, &memory.user_id).await;
            // Back to the pool before anything else takes a connection.
            drop(client);
            self.remember_signature(signature.clone());
            if first
                && self.inner.config.dense_mode == DenseMode::Hnsw
                && self.inner.config.ann_index == AnnIndex::Hnsw
            {
                // The table is empty but for this row: building now is instant. (IVFFlat's
                // lists would be trained on this one row: its first search builds it.)
                self.ensure_index(signature.dimension).await?;
            }
            Ok(Added {
                memory: memory.clone().into_memory(seq),
                generation,
            })
        })
        .await
    }

    async fn get(&self, user: &str, id: &MemoryId) -> StoreResult<Option<Memory>> {
        let built = build(
            Query::select()
                .columns(memory_columns("m"))
                .from_as(self.names().table(Memories::Table), "m")
                .and_where(Expr::col(("m", Memories::Id)).eq(*id))
                .and_where(Expr::col(("m", Memories::UserId)).eq(user)),
        );
        let built = &built;
        self.read(user, move |on| async move {
            let client = on.get().await?;
            row_opt(&client, built)
                .await?
                .map(|row| memory_of(&row))
                .transpose()
        })
        .await
    }

    async fn find_by_prefix(&self, user: &str, prefix: &str) -> StoreResult<Vec<MemoryId>> {
        let Some((low, high)) = prefix_bounds(prefix) else {
            return Ok(Vec::new());
        };
        let built = build(
            Query::select()
                .column(Memories::Id)
                .from(self.names().table(Memories::Table))
                .and_where(Expr::col(Memories::Id).gte(low))
                .and_where(Expr::col(Memories::Id).lte(high))
                .and_where(Expr::col(Memories::UserId).eq(user))
                .order_by(Memories::Id, Order::Asc),
        );
        let built = &built;
        self.read(user, move |on| async move {
            let client = on.get().await?;
            rows(&client, built)
                .await?
                .iter()
                .map(|r| get(r, 0))
                .collect()
        })
        .await
    }

    async fn delete(&self, user: &str, id: &MemoryId) -> StoreResult<Option<Deleted>> {
        self.bounded(async {
            let names = self.names();
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(pg_err)?;
            let generation = generation_of(row_opt(&tx, &bump_user(names, user, 0, 0)?).await?)?;
            let target = build(
                Query::select()
                    .columns([Memories::Seq, Memories::Superseded, Memories::DocLen])
                    .from(names.table(Memories::Table))
                    .and_where(Expr::col(Memories::Id).eq(*id))
                    .and_where(Expr::col(Memories::UserId).eq(user)),
            );
            let Some(row) = row_opt(&tx, &target).await? else {
                // Nothing to delete: the rollback also undoes the generation bump.
                tx.rollback().await.map_err(pg_err)?;
                return Ok(None);
            };
            let (seq, superseded, doc_len): (i64, bool, i32) = (
                get_named(&row, Memories::Seq)?,
                get_named(&row, Memories::Superseded)?,
                get_named(&row, Memories::DocLen)?,
            );
            let superseded_by_it = build(
                Query::select()
                    .column(Supersessions::OldId)
                    .from(names.table(Supersessions::Table))
                    .and_where(Expr::col(Supersessions::NewId).eq(*id))
                    .order_by(Supersessions::Seq, Order::Asc),
            );
            let olds: Vec<MemoryId> = rows(&tx, &superseded_by_it)
                .await?
                .iter()
                .map(|r| get(r, 0))
                .collect::<Result<_, _>>()?;
            // Postings, events, links, edges read from it and supersessions go by cascade.
            sql::execute(
                &tx,
                &build(
                    Query::delete()
                        .from_table(names.table(Memories::Table))
                        .and_where(Expr::col(Memories::Seq).eq(seq)),
                ),
            )
            .await?;
            if !superseded {
                sql::execute(&tx, &adjust_stats(names, user, -1, -i64::from(doc_len))).await?;
            }
            let mut restored = Vec::new();
            for old in olds {
                // Live again only when nothing else supersedes it.
                let revive = build(
                    Query::update()
                        .table(names.table(Memories::Table))
                        .value(Memories::Superseded, false)
                        .and_where(Expr::col(Memories::Id).eq(old))
                        .and_where(Expr::col(Memories::UserId).eq(user))
                        .and_where(Expr::col(Memories::Superseded).eq(true))
                        .and_where(Expr::cust(format!(
                            "NOT EXISTS (SELECT 1 FROM {} s WHERE s.old_id = {}.id)",
                            names.q(Supersessions::Table),
                            names.q(Memories::Table)
                        )))
                        .returning(Query::returning().column(Memories::Content)),
                );
                if let Some(row) = row_opt(&tx, &revive).await? {
                    let content: String = get(&row, 0)?;
                    let doc = DocTerms::of(&content)?;
                    sql::execute(&tx, &insert_postings(names, old, &doc)?).await?;
                    sql::execute(&tx, &adjust_stats(names, user, 1, i64::from(doc.len))).await?;
                    restored.push(old);
                }
            }
            tx.commit().await.map_err(pg_err)?;
            self.note_write(&client, user).await;
            Ok(Some(Deleted {
                generation,
                restored,
            }))
        })
        .await
    }

    async fn list(&self, user: &str, query: &ListQuery) -> StoreResult<Vec<Memory>> {
        let mut select = Query::select();
        select
            .columns(memory_columns("m"))
            .from_as(self.names().table(Memories::Table), "m")
            .and_where(Expr::col(("m", Memories::UserId)).eq(user))
            .and_where(Expr::cust("NOT m.superseded"));
        if let Some(key) = query.before {
            // A row comparison, which the (user_id, created_at) index can range over.
            select.and_where(
                Expr::tuple([
                    Expr::col(("m", Memories::CreatedAt)),
                    Expr::col(("m", Memories::Seq)),
                ])
                .lt(Expr::tuple([Expr::val(key.created_at), Expr::val(key.seq)])),
            );
        }
        for condition in filter_conditions("m", &query.filter) {
            select.and_where(condition);
        }
        let built = build(
            select
                .order_by(("m", Memories::CreatedAt), Order::Desc)
                .order_by(("m", Memories::Seq), Order::Desc)
                .limit(limit(query.limit)),
        );
        let built = &built;
        self.read(user, move |on| async move {
            let client = on.get().await?;
            rows(&client, built).await?.iter().map(memory_of).collect()
        })
        .await
    }

    async fn count(&self, user: &str) -> StoreResult<u64> {
        self.read(
            user,
            move |on| async move { self.live_count(on, user).await },
        )
        .await
    }

    async fn generation(&self, user: &str) -> StoreResult<Generation> {
        self.read(user, move |on| async move {
            let client = on.get().await?;
            read_generation(&client, self.names(), user).await
        })
        .await
    }

    async fn build_index(&self, user: &str, dimension: usize) -> StoreResult<BuiltIndex> {
        self.read(user, move |on| async move {
            let names = self.names();
            let mut client = on.get().await?;
            // One snapshot, so the rows and the generation describe the same state.
            let tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await
                .map_err(pg_err)?;
            let generation = read_generation(&tx, names, user).await?;
            let built = build(
                Query::select()
                    .columns(memory_columns("m"))
                    .column(("m", Memories::Embedding))
                    .from_as(names.table(Memories::Table), "m")
                    .and_where(Expr::col(("m", Memories::UserId)).eq(user))
                    .and_where(Expr::cust("NOT m.superseded"))
                    .order_by(("m", Memories::Seq), Order::Asc),
            );
            let found = rows(&tx, &built).await?;
            tx.commit().await.map_err(pg_err)?;
            let mut index = MemoryIndex::new(dimension);
            for row in &found {
                let memory = memory_of(row)?;
                let vector: Vector = get_named(row, Memories::Embedding)?;
                let id = memory.id;
                index
                    .insert(memory, vector.as_slice())
                    .map_err(|e| StoreError::Corrupt(format!("embedding of {id}: {e}")))?;
            }
            index.shrink_to_fit();
            Ok(BuiltIndex { index, generation })
        })
        .await
    }

    async fn search(&self, user: &str, request: &SearchRequest) -> StoreResult<Vec<ScoredMemory>> {
        self.read(user, move |on| async move {
            self.pushdown(on, user, request).await
        })
        .await
    }

    async fn embeddings(&self, user: &str, ids: &[MemoryId]) -> StoreResult<Vec<Option<Vec<f32>>>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let built = build(
            Query::select()
                .column(("m", Memories::Id))
                .column(("m", Memories::Embedding))
                .from_as(self.names().table(Memories::Table), "m")
                .and_where(Expr::col(("m", Memories::UserId)).eq(user))
                .and_where(Expr::col(("m", Memories::Id)).is_in(ids.iter().copied())),
        );
        let built = &built;
        self.read(user, move |on| async move {
            let client = on.get().await?;
            let mut by_id = HashMap::new();
            for row in rows(&client, built).await? {
                let id: MemoryId = get_named(&row, Memories::Id)?;
                let vector: Vector = get_named(&row, Memories::Embedding)?;
                by_id.insert(id, vector.to_vec());
            }
            Ok(ids.iter().map(|id| by_id.get(id).cloned()).collect())
        })
        .await
    }

    async fn supersede(&self, user: &str, supersession: &Supersession) -> StoreResult<Generation> {
        self.bounded(async {
            let names = self.names();
            let s = supersession;
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(pg_err)?;
            let generation = generation_of(row_opt(&tx, &bump_user(names, user, 0, 0)?).await?)?;
            // An old memory already superseded gains one more successor, as before.
            write_supersession(&tx, names, user, s).await?;
            tx.commit().await.map_err(pg_err)?;
            self.note_write(&client, user).await;
            Ok(generation)
        })
        .await
    }

    async fn supersessions(
        &self,
        user: &str,
        memory_id: &MemoryId,
    ) -> StoreResult<Vec<Supersession>> {
        let built = build(
            Query::select()
                .columns(SUPERSESSION_COLUMNS)
                .from(self.names().table(Supersessions::Table))
                .and_where(Expr::col(Supersessions::UserId).eq(user))
                .and_where(
                    Expr::col(Supersessions::OldId)
                        .eq(*memory_id)
                        .or(Expr::col(Supersessions::NewId).eq(*memory_id)),
                )
                .order_by(Supersessions::CreatedAt, Order::Asc)
                .order_by(Supersessions::Seq, Order::Asc),
        );
        let built = &built;
        self.read(user, move |on| async move {
            let client = on.get().await?;
            rows(&client, built)
                .await?
                .iter()
                .map(supersession_of)
                .collect()
        })
        .await
    }
}

/// Writes one supersession inside `tx`: both memories must be the user's; the old one
/// leaves the live set with its postings and its share of the statistics. The caller
/// bumps the generation (once per transaction). False when the old memory was not live.
async fn write_supersession(
    tx: &deadpool_postgres::Transaction<'_>,
    names: &Names,
    user: &str,
    s: &Supersession,
) -> StoreResult<bool> {
    let mut records = PgRecords::new(tx, names);
    require_memory(&mut records, user, &s.old_id).await?;
    require_memory(&mut records, user, &s.new_id).await?;
    let insert = build(
        Query::insert()
            .into_table(names.table(Supersessions::Table))
            .columns([
                Supersessions::OldId,
                Supersessions::NewId,
                Supersessions::UserId,
                Supersessions::Reason,
                Supersessions::CreatedAt,
            ])
            .values([
                s.old_id.into(),
                s.new_id.into(),
                user.into(),
                s.reason.clone().into(),
                s.created_at.into(),
            ])
            .map_err(sea_err)?
            .on_conflict(
                OnConflict::columns([Supersessions::OldId, Supersessions::NewId])
                    .do_nothing()
                    .to_owned(),
            ),
    );
    sql::execute(tx, &insert).await?;
    // Out of the live set: its postings and its share of the statistics go.
    let hide = build(
        Query::update()
            .table(names.table(Memories::Table))
            .value(Memories::Superseded, true)
            .and_where(Expr::col(Memories::Id).eq(s.old_id))
            .and_where(Expr::col(Memories::Superseded).eq(false))
            .returning(Query::returning().columns([Memories::Seq, Memories::DocLen])),
    );
    if let Some(row) = row_opt(tx, &hide).await? {
        let (seq, doc_len): (i64, i32) = (
            get_named(&row, Memories::Seq)?,
            get_named(&row, Memories::DocLen)?,
        );
        sql::execute(tx, &delete_postings(names, seq)).await?;
        sql::execute(tx, &adjust_stats(names, user, -1, -i64::from(doc_len))).await?;
        return Ok(true);
    }
    Ok(false)
}
