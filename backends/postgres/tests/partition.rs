//! A silent network partition: the path to the server keeps every connection open but
//! carries no byte either way (no FIN, no RST), as when a firewall or a NAT forgets the
//! flows. The server's `statement_timeout` cannot answer over it, and TCP keepalives are
//! answered by whatever box still holds the socket, so only the store's own deadlines end
//! the wait.
//!
//! A TCP proxy between the store and the server plays the network: forwarding, then a
//! black hole (every connection it carries, and every one it accepts after, kept open and
//! silent for good), then forwarding again for new connections. A recall in flight when
//! the hole opens fails with the typed deadline error in bounded time and its connections
//! are closed; opening a connection through the hole fails in bounded time; once the path
//! carries bytes again the next calls succeed at once, on new connections, and answer
//! right.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cortex_core::{
    engine::CortexMemory, error::CortexError, error::StoreError, memory::MemoryKind,
};
use cortex_postgres::error::Cause;
use cortex_postgres::{DenseMode, PostgresConfig, PostgresError, PostgresStore, Timeouts};
use cortex_providers::FakeProvider;
use support::TestSchema;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

const USER: &str = "partition";
/// The store's connect and statement timeouts: each call's deadline is their sum.
const CONNECT: Duration = Duration::from_secs(2);
const STATEMENT: Duration = Duration::from_secs(2);
/// What "bounded" means here: well past the deadlines, far short of a hang.
const BOUND: Duration = Duration::from_secs(10);
/// Past this the test itself has hung: it fails instead of waiting forever.
const HUNG: Duration = Duration::from_secs(30);

/// Which connections the proxy carries: those opened in the current epoch, while it
/// forwards. Opening or closing the hole starts a new epoch, so a connection caught in
/// the hole stays silent for good, as a flow the network forgot.
#[derive(Default)]
struct Path {
    epoch: u64,
    hole: bool,
}

/// A TCP proxy to `upstream` that can turn into a black hole and back.
struct Proxy {
    address: SocketAddr,
    path: Arc<Mutex<Path>>,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Self {
            address: listener.local_addr().unwrap(),
            path: Arc::default(),
            tasks: Arc::default(),
        };
        let (path, tasks) = (proxy.path.clone(), proxy.tasks.clone());
        let accept = tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else {
                    continue;
                };
                let Ok(outbound) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let epoch = path.lock().unwrap().epoch;
                let (from_client, to_client) = inbound.into_split();
                let (from_server, to_server) = outbound.into_split();
                let mut tasks = tasks.lock().unwrap();
                tasks.push(tokio::spawn(pump(
                    from_client,
                    to_server,
                    path.clone(),
                    epoch,
                )));
                tasks.push(tokio::spawn(pump(
                    from_server,
                    to_client,
                    path.clone(),
                    epoch,
                )));
            }
        });
        proxy.tasks.lock().unwrap().push(accept);
        proxy
    }

    /// Sets whether the path is a black hole; either way the connections open so far are
    /// left to the hole.
    fn set_hole(&self, hole: bool) {
        let mut path = self.path.lock().unwrap();
        path.epoch += 1;
        path.hole = hole;
    }

    /// Closes every connection and stops listening.
    async fn stop(&self) {
        let tasks: Vec<_> = self.tasks.lock().unwrap().drain(..).collect();
        for task in tasks {
            task.abort();
            let _ = task.await;
        }
    }
}

/// Copies bytes one way while the path carries this connection's epoch; after that it
/// holds both sockets open and silent for good (whatever it read, it drops).
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, path: Arc<Mutex<Path>>, epoch: u64) {
    let carried = || {
        let path = path.lock().unwrap();
        !path.hole && path.epoch == epoch
    };
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let read = from.read(&mut buffer).await.unwrap_or(0);
        if !carried() {
            break;
        }
        if read == 0 || to.write_all(&buffer[..read]).await.is_err() {
            let _ = to.shutdown().await;
            return;
        }
    }
    let _keep_open = (from, to);
    std::future::pending::<()>().await;
}

/// The Postgres error inside an engine error.
fn classified(e: &CortexError) -> &PostgresError {
    match e {
        CortexError::Store(StoreError::Backend { source, .. }) => source
            .downcast_ref::<PostgresError>()
            .unwrap_or_else(|| panic!("not a classified Postgres error: {e:?}")),
        other => panic!("not a store error: {other:?}"),
    }
}

/// Runs `call`, failing the test if it has not returned within [`HUNG`]; its output and
/// how long it took.
async fn timed<T>(what: &str, call: impl std::future::Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let out = tokio::time::timeout(HUNG, call)
        .await
        .unwrap_or_else(|_| panic!("{what} hung past {HUNG:?}"));
    (out, started.elapsed())
}

/// Waits until a session of `application_name` is waiting on a lock.
async fn until_waiting_on_lock(admin: &PostgresStore, application_name: &str) {
    let client = admin.pool().get().await.unwrap();
    for _ in 0..200 {
        let waiting: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE application_name = $1 AND wait_event_type = 'Lock'",
                &[&application_name],
            )
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the recall never reached the server's lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_fail_in_bounded_time_on_a_silent_partition_and_recover() {
    if !support::require_database().await {
        return;
    }
    let schema = TestSchema::new("partition", true, DenseMode::Exact).await;
    // The schema is made directly; the proxy carries the store's calls alone.
    let direct = schema.store().await;
    let application_name = format!("cortex_partition_{}", std::process::id());
    let (upstream, settings) = support::tcp_server(&application_name).await;
    let proxy = Proxy::start(upstream).await;
    let settings = format!("host=127.0.0.1 port={} {settings}", proxy.address.port());
    let config = PostgresConfig {
        timeouts: Timeouts {
            connect: CONNECT,
            statement: Some(STATEMENT),
            ..Timeouts::default()
        },
        ..support::config(&settings, &schema.schema, true, DenseMode::Exact)
    };
    let deadline = STATEMENT + CONNECT;
    let store = Arc::new(PostgresStore::connect(config.clone()).await.unwrap());
    let engine = Arc::new(CortexMemory::new(
        store.clone(),
        Arc::new(FakeProvider::new(32)),
    ));
    let tea = engine
        .memorize(
            USER,
            "Ada drinks green tea",
            MemoryKind::Note,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    let found = engine.recall(USER, "green tea", 5).await.unwrap();
    assert_eq!(found[0].memory.id, tea.memory.id);

    // (a) A recall in flight when the hole opens: held on the server by a lock until
    // then, so that its statement has been sent and only the answer is lost.
    let mut locker = direct.pool().get().await.unwrap();
    let lock = locker.transaction().await.unwrap();
    lock.batch_execute(&format!(
        "LOCK TABLE \"{}\".memories IN ACCESS EXCLUSIVE MODE",
        schema.schema
    ))
    .await
    .unwrap();
    let recall = {
        let engine = engine.clone();
        tokio::spawn(async move { timed("the recall", engine.recall(USER, "green tea", 5)).await })
    };
    until_waiting_on_lock(&direct, &application_name).await;
    proxy.set_hole(true);
    lock.rollback().await.unwrap();
    drop(locker);
    let (recalled, took) = recall.await.unwrap();
    let e = recalled.expect_err("a recall answered through the black hole");
    let message = e.to_string();
    eprintln!("in flight: failed after {took:?}: {message}");
    assert!(
        matches!(classified(&e), PostgresError::NoAnswer { waited, .. } if *waited == deadline),
        "{e:?}"
    );
    for part in [
        "did not answer",
        "CORTEX_PG_STATEMENT_TIMEOUT_SECS",
        "127.0.0.1",
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    assert!(took >= deadline - Duration::from_millis(500), "{took:?}");
    assert!(took < BOUND, "the recall took {took:?}");
    // Its connection and the idle ones are closed, not back in the pool.
    assert_eq!(store.pool().status().size, 0, "{:?}", store.pool().status());

    // (b) Opening a connection through the hole: for a call, and for a new store.
    let (recalled, took) = timed(
        "a recall on a new connection",
        engine.recall(USER, "tea", 5),
    )
    .await;
    let e = recalled.expect_err("a recall answered through the black hole");
    eprintln!("new connection: failed after {took:?}: {e}");
    assert!(
        matches!(
            classified(&e),
            PostgresError::Connect {
                cause: Cause::NoAnswer { .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("connect_timeout"), "{e}");
    assert!(took < BOUND, "the recall took {took:?}");
    let (opened, took) = timed("opening a store", PostgresStore::connect(config.clone())).await;
    let e = opened.expect_err("a store opened through the black hole");
    eprintln!("new store: failed after {took:?}: {e}");
    assert!(e.to_string().contains("connect_timeout"), "{e}");
    assert!(took < BOUND, "opening took {took:?}");

    // (c) The path carries new connections again: the first call succeeds at once (no
    // dead connection tried first), and the store answers right.
    proxy.set_hole(false);
    let (recalled, took) = timed(
        "the first recall after",
        engine.recall(USER, "green tea", 5),
    )
    .await;
    let recalled = recalled.unwrap();
    eprintln!("recovered: first recall after {took:?}");
    assert!(took < CONNECT, "the first recall took {took:?}");
    assert_eq!(recalled[0].memory.id, tea.memory.id);
    let (coffee, _) = timed(
        "a memorize after",
        engine.memorize(
            USER,
            "Ada also likes black coffee",
            MemoryKind::Note,
            &[],
            &Default::default(),
        ),
    )
    .await;
    let coffee = coffee.unwrap();
    let (recalled, _) = timed("a recall after", engine.recall(USER, "black coffee", 5)).await;
    let recalled = recalled.unwrap();
    assert_eq!(recalled[0].memory.id, coffee.memory.id);
    assert_eq!(recalled[0].memory.content, "Ada also likes black coffee");
    assert_eq!(recalled.len(), 2);

    proxy.stop().await;
}
