//! The server restarting under a memorize-and-recall loop: no call hangs, calls during the
//! outage fail saying why, the store recovers by itself once the server is back, and
//! every memorize that was acknowledged is still there.
//!
//! The machine's real server is shared with tests running in parallel, so a restart is
//! simulated: a TCP proxy between the store and the server that goes down (every
//! connection dropped, new ones refused) and comes back on the same port, and
//! `pg_terminate_backend` on the store's sessions, which is what clients see when the
//! server shuts down.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cortex_core::{engine::CortexMemory, memory::MemoryId, memory::MemoryKind, store::MemoryStore};
use cortex_postgres::{DenseMode, PostgresConfig, PostgresStore};
use cortex_providers::FakeProvider;
use support::TestSchema;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// No call may take longer than this: past it, it hangs.
const BOUND: Duration = Duration::from_secs(30);
const USER: &str = "restart";
const POOL_SIZE: usize = 4;

/// A TCP proxy to `upstream` that can be taken down and brought back on the same port.
struct Proxy {
    address: SocketAddr,
    upstream: String,
    accept: Mutex<Option<JoinHandle<()>>>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(upstream: String) -> Arc<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Arc::new(Self {
            address: listener.local_addr().unwrap(),
            upstream,
            accept: Mutex::new(None),
            links: Arc::new(Mutex::new(Vec::new())),
        });
        proxy.serve(listener);
        proxy
    }

    fn serve(&self, listener: TcpListener) {
        let (upstream, links) = (self.upstream.clone(), self.links.clone());
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                let upstream = upstream.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                links.lock().unwrap().push(link);
            }
        });
        *self.accept.lock().unwrap() = Some(accept);
    }

    /// Drops every connection and closes the port: connecting is refused until `up`.
    async fn down(&self) {
        let accept = self.accept.lock().unwrap().take();
        if let Some(accept) = accept {
            accept.abort();
            let _ = accept.await;
        }
        let links: Vec<_> = self.links.lock().unwrap().drain(..).collect();
        for link in links {
            link.abort();
            let _ = link.await;
        }
    }

    /// Listens on the same port again (retried: another socket may hold the port for a
    /// moment, e.g. as an outgoing connection's local port).
    async fn up(&self) {
        for _ in 0..100 {
            if let Ok(listener) = TcpListener::bind(self.address).await {
                self.serve(listener);
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the proxy could not listen on {} again", self.address);
    }
}

/// What the loop saw.
#[derive(Default)]
struct Log {
    acknowledged: Mutex<Vec<MemoryId>>,
    failures: Mutex<Vec<String>>,
}

impl Log {
    fn acknowledged(&self) -> usize {
        self.acknowledged.lock().unwrap().len()
    }
}

/// One memorize, then one recall, each within [`BOUND`]; an acknowledged memorize is
/// logged, so is every failure. Ok when both succeeded.
async fn memorize_and_recall(engine: &CortexMemory, log: &Log, n: u64) -> Result<(), String> {
    let text = format!("note {n} written while the server restarts");
    let written = tokio::time::timeout(
        BOUND,
        engine.memorize(USER, &text, MemoryKind::Note, &[], &Default::default()),
    )
    .await
    .unwrap_or_else(|_| panic!("memorize {n} hung past {BOUND:?}"));
    let recalled = tokio::time::timeout(BOUND, engine.recall(USER, "restarts", 5))
        .await
        .unwrap_or_else(|_| panic!("recall {n} hung past {BOUND:?}"));
    let mut failed = Vec::new();
    match written {
        Ok(m) => log.acknowledged.lock().unwrap().push(m.memory.id),
        Err(e) => failed.push(e.to_string()),
    }
    if let Err(e) = recalled {
        failed.push(e.to_string());
    }
    log.failures.lock().unwrap().extend(failed.iter().cloned());
    match failed.is_empty() {
        true => Ok(()),
        false => Err(failed.join("; ")),
    }
}

/// Waits until the background loop has acknowledged `count` memorize calls.
async fn until_acknowledged(log: &Log, count: usize, worker: &JoinHandle<()>) {
    for _ in 0..600 {
        if log.acknowledged() >= count {
            return;
        }
        assert!(
            !worker.is_finished(),
            "the loop ended early: one of its calls hung or failed to return"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the loop acknowledged {} memorize calls, expected {count}; failures: {:?}",
        log.acknowledged(),
        log.failures
            .lock()
            .unwrap()
            .iter()
            .rev()
            .take(3)
            .collect::<Vec<_>>()
    );
}

/// Whether a failure says why: the connection refused, closed, or the server shutting
/// down (never only the driver's "db error" or "error connecting to server").
fn says_why(message: &str) -> bool {
    ["refused", "closed", "shutting down", "not accepting"]
        .iter()
        .any(|cause| message.contains(cause))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_survives_a_restart_under_load() {
    if !support::require_database().await {
        return;
    }
    let schema = TestSchema::new("restart", true, DenseMode::Exact).await;
    // The schema is made directly, so the proxy carries the workload alone.
    let direct = schema.store().await;
    let application_name = format!("cortex_restart_{}", std::process::id());
    let url = support::database().await.unwrap();
    let (upstream, settings) = support::tcp_server(&application_name).await;
    let proxy = Proxy::start(upstream).await;
    let settings = format!("host=127.0.0.1 port={} {settings}", proxy.address.port());
    let store = PostgresStore::connect(PostgresConfig {
        pool_size: POOL_SIZE,
        ..support::config(&settings, &schema.schema, true, DenseMode::Exact)
    })
    .await
    .unwrap();
    let engine = Arc::new(CortexMemory::new(
        Arc::new(store),
        Arc::new(FakeProvider::new(32)),
    ));
    let log = Arc::new(Log::default());

    // The loop runs through everything below.
    let running = Arc::new(AtomicBool::new(true));
    let worker = {
        let (engine, log, running) = (engine.clone(), log.clone(), running.clone());
        tokio::spawn(async move {
            let mut n = 0u64;
            while running.load(Ordering::Acquire) {
                n += 1;
                let _ = memorize_and_recall(&engine, &log, n).await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let mut n = 1_000_000u64;
    let mut next = || {
        n += 1;
        n
    };
    until_acknowledged(&log, 20, &worker).await;

    // Down: every connection dropped, new ones refused.
    proxy.down().await;
    let mut refused = Vec::new();
    for _ in 0..3 {
        let e = memorize_and_recall(&engine, &log, next())
            .await
            .expect_err("a call succeeded with the server unreachable");
        assert!(says_why(&e), "{e}");
        if e.contains("refused") {
            refused.push(e);
        }
    }
    let address = proxy.address.to_string();
    assert!(
        refused.iter().any(|e| e.contains(&address)),
        "no failure named the refused address {address}: {refused:?}"
    );
    // The rest of the outage, the loop running into it.
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Back on the same port: the store reconnects by itself.
    proxy.up().await;
    let recovered = recover(&engine, &log, &mut next, 1).await;
    assert!(recovered, "calls kept failing after the server came back");
    let before = log.acknowledged();
    until_acknowledged(&log, before + 20, &worker).await;

    // Every session of the store terminated, as a shutting-down server does.
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let terminated: i64 = admin
        .query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1",
            &[&application_name],
        )
        .await
        .unwrap()
        .get(0);
    assert!(terminated > 0, "no session of the store to terminate");
    // The pool verifies each connection it hands out, so not even the first call after
    // the termination fails on a dead connection.
    let recovered = recover(&engine, &log, &mut next, 1).await;
    assert!(
        recovered,
        "calls kept failing after the sessions were terminated"
    );
    let before = log.acknowledged();
    until_acknowledged(&log, before + 20, &worker).await;

    running.store(false, Ordering::Release);
    tokio::time::timeout(BOUND, worker)
        .await
        .expect("the loop stopped")
        .unwrap();

    // Nothing acknowledged was lost.
    let acknowledged = log.acknowledged.lock().unwrap().clone();
    for id in &acknowledged {
        assert!(
            direct.get(USER, id).await.unwrap().is_some(),
            "acknowledged memory {id} is missing"
        );
    }
    let failures = log.failures.lock().unwrap().clone();
    assert!(!failures.is_empty(), "the outage failed no call");
    for failure in &failures {
        assert!(
            says_why(failure),
            "a failure that does not say why: {failure}"
        );
    }
    let mut kinds: Vec<&String> = failures.iter().collect();
    kinds.sort();
    kinds.dedup();
    eprintln!(
        "{} memorize calls acknowledged and all present; {} failed calls, saying: {kinds:#?}",
        acknowledged.len(),
        failures.len(),
    );
}

/// Whether a memorize and a recall succeed within `attempts`, every failure saying why.
async fn recover(
    engine: &CortexMemory,
    log: &Log,
    next: &mut impl FnMut() -> u64,
    attempts: usize,
) -> bool {
    for _ in 0..attempts {
        match memorize_and_recall(engine, log, next()).await {
            Ok(()) => return true,
            Err(e) => assert!(says_why(&e), "{e}"),
        }
    }
    false
}
