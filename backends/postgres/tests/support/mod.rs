//! Where the Postgres tests get a database, and a schema per test.
//!
//! In this order: `CORTEX_TEST_DATABASE_URL`; else, when a Docker engine answers, a
//! PostgreSQL + pgvector container (testcontainers) started once per test binary: the image
//! `CORTEX_TEST_PG_IMAGE` names (`pgvector/pgvector:pg17` by default; with no registry,
//! `cortex-pgvector:local` from scripts/build-images.sh); else the tests go through
//! `cortex_conformance::skip_or_fail`: one skip line, or a failure under CI.
//!
//! The container outlives the test process (nothing drops it at exit): it carries the label
//! `cortex.test=postgres`, by which scripts/test.sh removes it afterwards.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use cortex_conformance::{StoreFactory, TestStorage};
use cortex_core::{
    enrichment_store::EnrichmentStore, keys::KeyStore, store::MemoryStore, transfer::TransferStore,
};
use cortex_postgres::{DenseMode, PostgresConfig, PostgresStore};
use tokio::sync::OnceCell;

/// The database URL, or why there is none.
pub async fn database() -> Result<String, String> {
    static SOURCE: OnceCell<Result<String, String>> = OnceCell::const_new();
    SOURCE.get_or_init(find_database).await.clone()
}

async fn find_database() -> Result<String, String> {
    if let Ok(url) = std::env::var("CORTEX_TEST_DATABASE_URL")
        && !url.trim().is_empty()
    {
        return Ok(url.trim().to_owned());
    }
    if docker_reachable() {
        return start_container().await;
    }
    Err(
        "no CORTEX_TEST_DATABASE_URL and no Docker engine reachable \
         (set CORTEX_TEST_DATABASE_URL=postgres://... to run the Postgres tests)"
            .into(),
    )
}

/// Why the Postgres tests cannot run here, or `None` when they can.
pub async fn unavailable() -> Option<String> {
    database().await.err()
}

/// Whether the test may go on: a database is there, or else [`skip_or_fail`] ran (a skip
/// line; a panic under CI) and the test returns.
///
/// [`skip_or_fail`]: cortex_conformance::skip_or_fail
pub async fn require_database() -> bool {
    match unavailable().await {
        None => true,
        Some(reason) => {
            cortex_conformance::skip_or_fail(reason);
            false
        }
    }
}

/// A quick, harmless probe: can we open the engine's socket at all?
fn docker_reachable() -> bool {
    let timeout = Duration::from_millis(300);
    match std::env::var("DOCKER_HOST") {
        Ok(host) if host.starts_with("tcp://") => {
            use std::net::ToSocketAddrs;
            host.trim_start_matches("tcp://")
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .is_some_and(|addr| std::net::TcpStream::connect_timeout(&addr, timeout).is_ok())
        }
        Ok(host) if host.starts_with("unix://") => {
            unix_socket_answers(host.trim_start_matches("unix://"))
        }
        Ok(_) => false,
        Err(_) => unix_socket_answers("/var/run/docker.sock"),
    }
}

#[cfg(unix)]
fn unix_socket_answers(path: &str) -> bool {
    std::os::unix::net::UnixStream::connect(path).is_ok()
}

#[cfg(not(unix))]
fn unix_socket_answers(_path: &str) -> bool {
    false
}

/// Starts the container on a thread of its own whose runtime outlives every test's
/// runtime, and keeps it until the process ends.
async fn start_container() -> Result<String, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            use testcontainers::core::{IntoContainerPort, WaitFor};
            use testcontainers::runners::AsyncRunner;
            use testcontainers::{GenericImage, ImageExt};
            let image = std::env::var("CORTEX_TEST_PG_IMAGE")
                .ok()
                .filter(|name| !name.trim().is_empty())
                .unwrap_or_else(|| "pgvector/pgvector:pg17".to_owned());
            let (name, tag) = split_image(image.trim());
            let started = GenericImage::new(name, tag)
                .with_exposed_port(5432.tcp())
                .with_wait_for(WaitFor::message_on_stderr(
                    "database system is ready to accept connections",
                ))
                .with_env_var("POSTGRES_PASSWORD", "postgres")
                .with_label("cortex.test", "postgres")
                .start()
                .await;
            let container = match started {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Err(format!("starting the container {image}: {e}")));
                    return;
                }
            };
            let address = async {
                let host = container.get_host().await?;
                let port = container.get_host_port_ipv4(5432).await?;
                Ok::<_, testcontainers::TestcontainersError>((host, port))
            }
            .await;
            let url = address
                .map(|(host, port)| {
                    format!("postgres://postgres:postgres@{host}:{port}/postgres?sslmode=disable")
                })
                .map_err(|e| format!("container address: {e}"));
            let _ = tx.send(url);
            // Keep the container (and the runtime driving its client) alive.
            std::future::pending::<()>().await;
        });
    });
    let url = rx
        .await
        .map_err(|_| "the container thread died".to_owned())??;
    // The image restarts the server once after initdb: wait until it really answers.
    for _ in 0..60 {
        if tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .is_ok()
        {
            return Ok(url);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err("the pgvector container never accepted connections".into())
}

/// `name:tag` split at the tag's colon (a registry's port is not a tag); `latest` when none.
fn split_image(image: &str) -> (&str, &str) {
    match image.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => (name, tag),
        _ => (image, "latest"),
    }
}

/// The test server's TCP address, and libpq key=value settings for the same database
/// and credentials (the password kept, if any) without a host or port, for the tests that
/// reach it through a proxy of their own.
pub async fn tcp_server(application_name: &str) -> (String, String) {
    let url = database().await.unwrap();
    let config: tokio_postgres::Config = url.split('?').next().unwrap().parse().unwrap();
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        #[cfg(unix)]
        tokio_postgres::config::Host::Unix(p) => {
            panic!("the proxy tests need TCP; the test server is at {p:?}")
        }
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let quote = |v: &str| format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"));
    let mut settings = format!(
        "sslmode=disable application_name={}",
        quote(application_name)
    );
    if let Some(user) = config.get_user() {
        settings.push_str(&format!(" user={}", quote(user)));
    }
    if let Some(db) = config.get_dbname() {
        settings.push_str(&format!(" dbname={}", quote(db)));
    }
    if let Some(password) = config.get_password() {
        let password = String::from_utf8(password.to_vec()).unwrap();
        settings.push_str(&format!(" password={}", quote(&password)));
    }
    (format!("{host}:{port}"), settings)
}

/// A schema name no other test (or test run) uses.
pub fn unique_schema(tag: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "cortex_t_{tag}_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

/// Settings for a store in `schema`.
pub fn config(url: &str, schema: &str, pushdown: bool, mode: DenseMode) -> PostgresConfig {
    PostgresConfig {
        pool_size: 4,
        schema: Some(schema.to_owned()),
        dense_mode: mode,
        pushdown,
        ..PostgresConfig::new(url)
    }
}

/// One test's schema: connected to as often as the test likes, dropped with it.
pub struct TestSchema {
    pub url: String,
    pub schema: String,
    pub pushdown: bool,
    pub mode: DenseMode,
}

impl TestSchema {
    pub async fn new(tag: &str, pushdown: bool, mode: DenseMode) -> Self {
        let url = database().await.expect("database available");
        Self {
            url,
            schema: unique_schema(tag),
            pushdown,
            mode,
        }
    }

    pub async fn store(&self) -> PostgresStore {
        PostgresStore::connect(config(&self.url, &self.schema, self.pushdown, self.mode))
            .await
            .expect("connect to postgres")
    }
}

#[async_trait]
impl TestStorage for TestSchema {
    async fn connect(&self) -> Arc<dyn MemoryStore> {
        Arc::new(self.store().await)
    }

    async fn connect_enrichment(&self) -> Option<Arc<dyn EnrichmentStore>> {
        Some(Arc::new(self.store().await))
    }

    async fn connect_transfer(&self) -> Option<Arc<dyn TransferStore>> {
        Some(Arc::new(self.store().await))
    }

    async fn connect_keys(&self) -> Option<Arc<dyn KeyStore>> {
        Some(Arc::new(self.store().await))
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        // Drop runs inside the test's runtime, where we cannot block on a future: a
        // thread with its own runtime drops the schema, and we wait for it.
        let (url, schema) = (self.url.clone(), self.schema.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let store =
                    PostgresStore::connect(config(&url, &schema, true, DenseMode::Exact)).await?;
                let client = store.pool().get().await.map_err(|e| e.to_string())?;
                client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test schema {}", self.schema);
        }
    }
}

/// The conformance factory: a fresh schema per scenario.
pub struct Pg {
    pub pushdown: bool,
}

#[async_trait]
impl StoreFactory for Pg {
    async fn unavailable(&self) -> Option<String> {
        unavailable().await
    }

    async fn create(&self) -> Box<dyn TestStorage> {
        let tag = if self.pushdown { "push" } else { "index" };
        Box::new(TestSchema::new(tag, self.pushdown, DenseMode::Exact).await)
    }
}

/// A small deterministic generator (SplitMix64), so every run writes the same corpus.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Roughly Zipf: low indices far more often, like words in text.
    pub fn zipf(&mut self, n: usize) -> usize {
        let x = self.unit();
        ((n as f64).powf(x) - 1.0) as usize % n
    }

    pub fn float(&mut self) -> f32 {
        (self.unit() * 2.0 - 1.0) as f32
    }
}

/// Words the generated corpora draw from (Zipf over this order), one rare token last.
pub const VOCABULARY: &str = "work note idea task time day list mail chat food news shop game \
    park walk team project deploy release build test server database api user customer \
    meeting call email report budget plan review design code bug fix issue ticket sprint \
    week month year monday friday morning evening night today tomorrow alice bob carol \
    dana erik berlin lisbon tokyo paris office home remote coffee tea lunch dinner \
    birthday holiday flight hotel train doctor dentist invoice payment refund contract \
    vendor security key password backup restore postgres rust python docker cluster \
    latency error timeout retry cache index search vector embedding model prompt token \
    jazz piano guitar book film garden cat dog zq7731";
