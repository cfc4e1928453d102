//! Reads from hot standbys, on real containers: a primary and its standbys made by the
//! project's image (see `cluster`), and stores whose reads go to a standby
//! (`CORTEX_DATABASE_READ_URL`):
//!
//! - `conformance`: the conformance, enrichment and transfer suites, every read through
//!   a standby (with the pushdown and with the in-process index);
//! - `routing`: reads really are a standby's; a store reading from a server that is not a
//!   standby, or from one lagging past the bound, reads from the primary;
//! - `read_your_writes`: under a replay delay (`recovery_min_apply_delay`), a user's read
//!   right after their write sees it, after the wait or from the primary;
//! - `faults`: the standby stopped, or cut off the network, under load: no read fails, none
//!   misses its user's write, none returns another user's memory.
//!
//! They need the project's PostgreSQL image (`CORTEX_TEST_PG_IMAGE`, whose entrypoint makes
//! a standby) and a Docker engine: scripts/test-docker.sh runs them with both, by name
//! (`test = false` in Cargo.toml keeps them out of the workspace's test run). Run without
//! either, each test goes through `cortex_conformance::skip_or_fail`: one skip line, and a
//! failure under CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster;
mod conformance;
mod faults;
mod read_your_writes;
mod routing;

use std::sync::Arc;
use std::time::Duration;

use cortex_postgres::{DenseMode, PostgresConfig, PostgresStore, ReadReplicas};

use cluster::Cluster;

/// The cluster, or `None` after the workspace's skip policy ran (a failure under CI).
pub async fn gate() -> Option<Arc<Cluster>> {
    if let Err(why) = cluster::image() {
        cortex_conformance::skip_or_fail(why);
        return None;
    }
    match cluster::cluster().await {
        Ok(cluster) => Some(cluster),
        Err(why) => {
            cortex_conformance::skip_or_fail(why);
            None
        }
    }
}

/// A schema name no other test uses.
pub fn unique_schema(tag: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "cortex_r_{tag}_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

/// Settings for a store in `schema` of the primary at `primary` reading from `standbys`.
pub fn config(primary: &str, schema: &str, standbys: &[&str], pushdown: bool) -> PostgresConfig {
    PostgresConfig {
        pool_size: 4,
        schema: Some(schema.to_owned()),
        dense_mode: DenseMode::Exact,
        pushdown,
        replicas: ReadReplicas {
            urls: standbys.iter().map(|s| (*s).to_owned()).collect(),
            ..ReadReplicas::default()
        },
        ..PostgresConfig::new(primary)
    }
}

/// Drops `schema` of the primary at `url`, from a thread of its own (a `Drop` may run in a
/// runtime, where it cannot block on a future).
pub fn drop_schema(url: &str, schema: &str) {
    let (url, name) = (url.to_owned(), schema.to_owned());
    let dropped = std::thread::spawn(move || {
        let schema = name;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(connection);
            client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .await
                .map_err(|e| e.to_string())
        })
    })
    .join();
    if !matches!(dropped, Ok(Ok(()))) {
        eprintln!("could not drop test schema {schema}");
    }
}

/// Waits until `check` holds, for at most `limit`; whether it did.
pub async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + limit;
    while std::time::Instant::now() < until {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check()
}

/// A store over a fresh schema of the cluster's primary, reading from `standbys`.
pub async fn store(
    primary: &str,
    schema: &str,
    standbys: &[&str],
    tune: impl FnOnce(&mut PostgresConfig),
) -> PostgresStore {
    let mut config = config(primary, schema, standbys, true);
    tune(&mut config);
    PostgresStore::connect(config)
        .await
        .expect("connect to the primary")
}
