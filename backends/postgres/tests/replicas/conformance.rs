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

/// The scenarios of `conformance_suite!`, `enrichment_suite!` and `transfer_suite!`
/// (tests/src/lib.rs), over `$factory`.
macro_rules! every_suite {
    ($factory:expr) => {
        through_the_standby!($factory;
            round_trip_every_field,
            list_is_newest_first_with_limit,
            count_counts_live_memories,
            forget_by_full_id,
            forget_by_unique_prefix,
            ambiguous_prefix_deletes_nothing,
            unknown_id_is_not_found,
            short_or_malformed_prefix_is_refused,
            users_are_isolated,
            signature_guard_refuses_other_models,
            bad_vectors_write_nothing,
            failed_embed_writes_nothing,
            invalid_input_writes_nothing,
            rare_exact_token_is_recalled,
            the_current_memory_outranks_the_stale_one,
            recall_equals_brute_force_reference,
            dense_list_is_exact_on_adversarial_vectors,
            recall_is_deterministic_across_handles,
            recall_on_empty_store_is_empty,
            unicode_and_sql_text_verbatim,
            content_size_limit_is_exact,
            cached_index_follows_own_writes,
            cached_index_sees_other_handles_writes,
            unchanged_store_is_not_reread,
            concurrent_memorize_keeps_every_memory,
            one_embed_per_memorize_and_recall,
            supersession_hides_and_forget_restores,
            dedup_returns_the_existing_memory,
            soft_update_supersedes_and_keeps_history,
            reranker_reorders_and_failures_fall_back,
            survives_close_and_reopen,
            search_equals_in_process_retrieval,
            wrapped_store_keeps_capabilities_and_pushdown,
            long_query_equals_reference,
            bounded_cache_evicts_and_recall_stays_right,
            filtered_recall_equals_reference,
            filtered_search_equals_in_process_retrieval,
            pages_reach_every_memory_once,
            filtered_list_is_exact,
            replaces_supersedes_in_one_transaction,
            retag_is_recorded_in_history,
            a_correction_keeps_the_old_tags_unless_it_gives_its_own,
            list_is_newest_first_by_created_at,
            expiry_is_exact_at_the_boundary,
            bad_filters_and_cursors_change_nothing,
            events_timeline_range_and_order,
            entity_upsert_is_idempotent,
            edges_and_links,
            forget_cascades_enrichment,
            enrichment_is_isolated_per_user,
            timeline_and_dossier_reads,
            extraction_is_written_whole_or_not_at_all,
            one_extraction_call_feeds_timeline_and_graph,
            failed_enrichment_never_loses_the_memory,
            layers_never_change_recall,
            entity_without_a_usable_name_is_refused,
            caller_structure_feeds_timeline_and_graph,
            caller_structure_writes_what_extraction_writes,
            caller_structure_is_written_whole_or_not_at_all,
            caller_structure_of_a_duplicate_is_kept,
            retag_keeps_the_memorys_structure,
            transfer_copies_every_record_and_keeps_recall,
            transfer_import_is_idempotent,
            transfer_pages_cover_everything_once,
            transfer_entity_known_by_name_keeps_the_stores_id,
            transfer_switch_waits_for_every_memory,
            transfer_staging_another_model_starts_over,
            transfer_refuses_ids_of_another_user,
            transfer_imports_check_references_first,
            transfer_names_resolve_to_the_oldest_entity,
            transfer_size_is_known_on_disk,
        );
    };
}

/// The pushdown: each recall one search on the standby, its two sides on two of the
/// standby's connections in one exported snapshot when a second is free.
mod pushdown {
    every_suite!(super::Standby { pushdown: true });
}

/// The in-process index: the engine's cache reads `generation` and `build_index` from
/// the standby.
mod build_index {
    every_suite!(super::Standby { pushdown: false });
}
