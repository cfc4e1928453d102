//! The conformance, enrichment and transfer suites with every read through a hot
//! standby. Each scenario's storage is a fresh schema of the primary; all its handles
//! (`connect`, `connect_enrichment`, `connect_transfer`) are one store handle, as in a
//! server process, whose engine and layers share one store: read-your-writes holds within
//! it, so each scenario's reads right after its writes must see them. (Two handles of one
//! database are two processes: their reads of each other's writes are held only to the
//! lag bound, which is what the scenarios with two handles would test instead; the plain
//! suite in tests/conformance.rs holds those.)
//!
//! The standby streams with no delay, so most reads find their write replayed at the
//! first check or within a few milliseconds; `routing` proves the reads are the
//! standby's, `read_your_writes` holds the wait to a delay.

use std::sync::Arc;

use async_trait::async_trait;
use cortex_conformance::{StoreFactory, TestStorage};
use cortex_core::{
    enrichment_store::EnrichmentStore, keys::KeyStore, store::MemoryStore, transfer::TransferStore,
};
use cortex_postgres::PostgresStore;
use tokio::sync::OnceCell;

use super::{config, drop_schema, unique_schema};

/// The suites' factory: a schema per scenario, read through the streaming standby.
pub struct Standby {
    pub pushdown: bool,
}

#[async_trait]
impl StoreFactory for Standby {
    async fn create(&self) -> Box<dyn TestStorage> {
        let cluster = super::cluster::cluster().await.expect("the cluster");
        let standby = cluster.standby("streaming", &[]).await.expect("a standby");
        let tag = if self.pushdown { "push" } else { "index" };
        Box::new(ThroughStandby {
            primary: cluster.primary.url.clone(),
            standby: standby.url,
            schema: unique_schema(tag),
            pushdown: self.pushdown,
            store: OnceCell::new(),
        })
    }
}

/// One scenario's schema and its one store handle.
struct ThroughStandby {
    primary: String,
    standby: String,
    schema: String,
    pushdown: bool,
    store: OnceCell<Arc<PostgresStore>>,
}

impl ThroughStandby {
    async fn handle(&self) -> Arc<PostgresStore> {
        self.store
            .get_or_init(|| async {
                let config = config(&self.primary, &self.schema, &[&self.standby], self.pushdown);
                let store = PostgresStore::connect(config)
                    .await
                    .expect("connect to the primary");
                let replicas = store.diagnostics().replicas();
                assert_eq!(replicas.len(), 1);
                assert!(
                    matches!(replicas[0].state, cortex_postgres::ReplicaState::Up { .. }),
                    "the standby should serve reads from the start: {replicas:?}"
                );
                Arc::new(store)
            })
            .await
            .clone()
    }
}

#[async_trait]
impl TestStorage for ThroughStandby {
    async fn connect(&self) -> Arc<dyn MemoryStore> {
        self.handle().await
    }

    async fn connect_enrichment(&self) -> Option<Arc<dyn EnrichmentStore>> {
        Some(self.handle().await)
    }

    async fn connect_transfer(&self) -> Option<Arc<dyn TransferStore>> {
        Some(self.handle().await)
    }

    async fn connect_keys(&self) -> Option<Arc<dyn KeyStore>> {
        Some(self.handle().await)
    }
}

impl Drop for ThroughStandby {
    fn drop(&mut self) {
        drop_schema(&self.primary, &self.schema);
    }
}

/// Each scenario as a test over `$factory`, when the cluster can run here (see `gate`).
macro_rules! through_the_standby {
    ($factory:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if crate::gate().await.is_none() {
                    return;
                }
                cortex_conformance::scenarios::$name(&$factory).await;
            }
        )*
    };
}

/// The pushdown: each recall one search on the standby, its two sides on two of the
/// standby's connections in one exported snapshot when a second is free.
mod pushdown {
    const PUSHDOWN: super::Standby = super::Standby { pushdown: true };
    cortex_conformance::conformance_suite!(@with [through_the_standby] PUSHDOWN;);
    cortex_conformance::enrichment_suite!(@with [through_the_standby] PUSHDOWN;);
    cortex_conformance::transfer_suite!(@with [through_the_standby] PUSHDOWN;);
    // Keys stay on the primary; these hold that nothing about them changes with standbys.
    cortex_conformance::key_suite!(@with [through_the_standby] PUSHDOWN;);
}

/// The in-process index: the engine's cache reads `generation` and `build_index` from
/// the standby.
mod build_index {
    const INDEX: super::Standby = super::Standby { pushdown: false };
    cortex_conformance::conformance_suite!(@with [through_the_standby] INDEX;);
    cortex_conformance::enrichment_suite!(@with [through_the_standby] INDEX;);
    cortex_conformance::transfer_suite!(@with [through_the_standby] INDEX;);
}
