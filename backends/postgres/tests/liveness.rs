//! A pooled connection whose link went silent is not handed out: the pool's check on
//! checkout gets no answer within the connect timeout, drops it and opens another, and
//! the call succeeds instead of waiting for its deadline.
//!
//! The link is a TCP proxy between the store and the server whose open connections can be
//! frozen: their sockets stay open and nothing more crosses them, which is what a dead
//! link looks like to a client (no FIN, no RST). Connections opened after the freeze pass.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cortex_core::{engine::CortexMemory, memory::MemoryKind};
use cortex_postgres::{DenseMode, PostgresConfig, PostgresStore};
use cortex_providers::FakeProvider;
use support::TestSchema;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The store's connect timeout, which also bounds the check.
const CONNECT_TIMEOUT_SECS: u64 = 2;
/// How long the connection sits idle before its link goes silent.
const IDLE: Duration = Duration::from_millis(1200);

/// A TCP proxy to `upstream`; `freeze` silences every connection open at that moment.
struct Proxy {
    address: SocketAddr,
    generation: watch::Sender<u64>,
}

impl Proxy {
    async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (generation, watching) = watch::channel(0u64);
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                let upstream = upstream.clone();
                let mut watching = watching.clone();
                let born = *watching.borrow_and_update();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let frozen = async { watching.wait_for(|g| *g > born).await.is_ok() };
                    let frozen = tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => false,
                        frozen = frozen => frozen,
                    };
                    if frozen {
                        // Both sockets held open, never read or written again.
                        std::future::pending::<()>().await;
                    }
                });
            }
        });
        Self {
            address,
            generation,
        }
    }

    fn freeze(&self) {
        self.generation.send_modify(|g| *g += 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_on_a_dead_link_is_replaced_not_handed_out() {
    if !support::require_database().await {
        return;
    }
    let schema = TestSchema::new("liveness", true, DenseMode::Exact).await;
    let _direct = schema.store().await;
    let (upstream, settings) = support::tcp_server("cortex_liveness").await;
    let proxy = Proxy::start(upstream).await;
    let settings = format!(
        "host=127.0.0.1 port={} connect_timeout={CONNECT_TIMEOUT_SECS} {settings}",
        proxy.address.port()
    );
    // One connection: the call after the freeze can only get the frozen one, or a new one.
    let store = PostgresStore::connect(PostgresConfig {
        pool_size: 1,
        ..support::config(&settings, &schema.schema, true, DenseMode::Exact)
    })
    .await
    .unwrap();
    let engine = CortexMemory::new(Arc::new(store), Arc::new(FakeProvider::new(32)));
    let id = engine
        .memorize(
            "u",
            "the lighthouse keeper feeds the gulls",
            MemoryKind::Fact,
            &[],
            &Default::default(),
        )
        .await
        .unwrap()
        .memory
        .id;
    let recall = || engine.recall("u", "lighthouse gulls", 5);
    assert_eq!(recall().await.unwrap()[0].memory.id, id);

    tokio::time::sleep(IDLE).await;
    proxy.freeze();
    // Unchecked, the frozen connection would hold the recall until its deadline (the
    // statement timeout plus the connect timeout, over half a minute).
    let started = Instant::now();
    let bound = Duration::from_secs(3 * CONNECT_TIMEOUT_SECS + 5);
    let found = tokio::time::timeout(bound, recall())
        .await
        .expect("the recall waited on the dead connection")
        .expect("the recall failed instead of taking a new connection");
    assert_eq!(found[0].memory.id, id);
    // It did wait for the check (no answer within the connect timeout), then went on.
    assert!(started.elapsed() >= Duration::from_secs(CONNECT_TIMEOUT_SECS));
}
