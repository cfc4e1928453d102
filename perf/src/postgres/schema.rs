//! A bench schema on the Postgres server: the store configuration the bench fixes, the
//! corpus loaded into it (the memorize rates measured on the way), a kept schema reused,
//! and the schema vacuumed or dropped.

use std::sync::Arc;
use std::time::Instant;

use cortex_core::{
    error::CortexError, new_memory::NewMemory, signature::EmbeddingSignature, store::MemoryStore,
};
use cortex_postgres::{DenseMode, PostgresConfig, PostgresStore};

use super::corpus::Corpus;
use super::{DIM, USER, WRITERS};
use crate::BoxError;

pub(crate) fn config(url: &str, schema: &str, mode: DenseMode) -> PostgresConfig {
    PostgresConfig {
        // Fixed, whatever CORTEX_PG_* says: the bench measures the defaults.
        schema: Some(schema.to_owned()),
        dense_mode: mode,
        pool_size: WRITERS,
        ..PostgresConfig::new(url)
    }
}

/// Memorize rates: one client one add at a time, then `WRITERS` concurrent clients (NaN,
/// printed "-", when the first 2,000 were all there was). `new` makes the `i`-th memory
/// (its text is `corpus.texts[i]`, its vector `corpus.vectors[i]`).
pub(crate) async fn load(
    store: Arc<PostgresStore>,
    corpus: &Corpus,
    new: impl Fn(usize) -> Result<NewMemory, CortexError>,
) -> Result<(f64, f64), BoxError> {
    let sig = EmbeddingSignature::new("bench", DIM);
    let sequential = 2000.min(corpus.texts.len());
    let start = Instant::now();
    for i in 0..sequential {
        store.add(&new(i)?, &corpus.vectors[i], &sig).await?;
    }
    let one = sequential as f64 / start.elapsed().as_secs_f64();
    let rest = corpus.texts.len() - sequential;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let chunk = (sequential..corpus.texts.len())
            .filter(|i| i % WRITERS == w)
            .map(|i| Ok((new(i)?, corpus.vectors[i].clone())))
            .collect::<Result<Vec<_>, BoxError>>()?;
        let store = store.clone();
        let sig = sig.clone();
        tasks.push(tokio::spawn(async move {
            for (m, v) in chunk {
                store.add(&m, &v, &sig).await?;
            }
            Ok::<_, cortex_core::error::StoreError>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let many = match rest {
        0 => f64::NAN,
        _ => rest as f64 / start.elapsed().as_secs_f64().max(1e-9),
    };
    Ok((one, many))
}

/// The schema holding `corpus`, as a store in exact mode from `exact`, with the memorize
/// rates when it was loaded (`None`: reused). A kept schema (`keep`) already holding `n`
/// memories is reused as it is: loading 100,000 again would dwarf the searches measured.
/// Otherwise the schema is dropped and loaded afresh, `loading` said first, then vacuumed
/// so that the planner's statistics are those of the loaded rows.
pub(crate) async fn filled(
    exact: impl Fn() -> PostgresConfig,
    schema: &str,
    n: usize,
    keep: bool,
    corpus: &Corpus,
    loading: &str,
    new: impl Fn(usize) -> Result<NewMemory, CortexError>,
) -> Result<(PostgresStore, Option<(f64, f64)>), BoxError> {
    let store = PostgresStore::connect(exact()).await?;
    if keep && store.count(USER).await? == n as u64 {
        eprintln!("reusing the {n} memories in schema {schema}");
        return Ok((store, None));
    }
    drop_schema(&store, schema).await?;
    let store = Arc::new(PostgresStore::connect(exact()).await?);
    eprintln!("{loading}");
    let rates = load(store.clone(), corpus, new).await?;
    vacuum(&store, schema).await?;
    Ok((PostgresStore::connect(exact()).await?, Some(rates)))
}

pub(crate) async fn vacuum(store: &PostgresStore, schema: &str) -> Result<(), BoxError> {
    store
        .pool()
        .get()
        .await?
        .batch_execute(&format!(
            "VACUUM ANALYZE {schema}.memories, {schema}.postings, {schema}.terms"
        ))
        .await?;
    Ok(())
}

pub(crate) async fn drop_schema(store: &PostgresStore, schema: &str) -> Result<(), BoxError> {
    store
        .pool()
        .get()
        .await?
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await?;
    Ok(())
}
