//! The conformance suite every [`MemoryStore`] backend must pass.
//!
//! Scenarios are written once as async functions over a [`StoreFactory`]; the macros
//! expand them into one `#[tokio::test]` per scenario for a backend, so a failure names
//! the scenario. A new backend implements [`StoreFactory`] and adds one line:
//!
//! ```text
//! cortex_conformance::conformance_suite!(MyFactory::new());
//! ```
//!
//! That is the core suite, over [`MemoryStore`] alone. Scenarios that need a capability
//! run their checks only when the store reports it (the OpenDAL way):
//! [`Capabilities::persistent`](cortex_core::store::Capabilities::persistent) gates close and
//! reopen, [`shared`](cortex_core::store::Capabilities::shared) the scenarios with two handles,
//! and [`search`](cortex_core::store::Capabilities::search) the pushdown's parity with the
//! in-process path. A backend adds [`enrichment_suite!`] once it implements
//! [`EnrichmentStore`], and [`transfer_suite!`] once it implements [`TransferStore`].
// Test support: a failed expectation is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod counting;
pub mod migrations;
pub mod reference;
pub mod scenarios;
pub mod skip;
pub mod support;

use std::sync::Arc;

use async_trait::async_trait;
use cortex_core::{
    enrichment_store::EnrichmentStore, keys::KeyStore, store::MemoryStore, transfer::TransferStore,
};

/// Creates isolated storage for one scenario.
#[async_trait]
pub trait StoreFactory: Send + Sync {
    /// Why this backend cannot be tested here (no server reachable, say), or `None` when it
    /// can. The suite hands the reason to [`skip_or_fail`], which fails under CI.
    async fn unavailable(&self) -> Option<String> {
        None
    }

    /// New, empty storage that no other test sees.
    async fn create(&self) -> Box<dyn TestStorage>;
}

pub use skip::{in_ci, skip_or_fail};

/// One scenario's storage. Dropping it removes the storage.
#[async_trait]
pub trait TestStorage: Send + Sync {
    /// A new handle (its own connection) to this storage. Two handles behave like two
    /// processes sharing one database; dropping every handle and connecting again is a
    /// close and reopen.
    async fn connect(&self) -> Arc<dyn MemoryStore>;

    /// A new handle as an [`EnrichmentStore`], for backends that run [`enrichment_suite!`].
    async fn connect_enrichment(&self) -> Option<Arc<dyn EnrichmentStore>> {
        None
    }

    /// A new handle as a [`TransferStore`], for backends that run [`transfer_suite!`].
    async fn connect_transfer(&self) -> Option<Arc<dyn TransferStore>> {
        None
    }

    /// A new handle as a [`KeyStore`], for backends that run [`key_suite!`].
    async fn connect_keys(&self) -> Option<Arc<dyn KeyStore>> {
        None
    }
}

/// Expands every core scenario into a `#[tokio::test]` for `$factory` (an expression
/// building a [`StoreFactory`]): what a backend of [`MemoryStore`] alone must pass.
#[macro_export]
macro_rules! conformance_suite {
    ($factory:expr) => {
        $crate::conformance_suite!(@with [$crate::conformance_suite] @expand $factory;);
    };
    // The scenario names appended to the arguments of the macro `$callback` (a path in
    // brackets): a suite's list for a runner of its own, such as one with a gate.
    (@with [$($callback:tt)+] $($args:tt)*) => {
        $($callback)+!($($args)*
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
        );
    };
    (@expand $factory:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let factory = $factory;
                if let Some(reason) = $crate::StoreFactory::unavailable(&factory).await {
                    $crate::skip::skip_or_fail(reason);
                    return;
                }
                $crate::scenarios::$name(&factory).await;
            }
        )*
    };
}

/// The layers' records, for backends that implement [`EnrichmentStore`] (their
/// [`TestStorage::connect_enrichment`] returns a handle).
#[macro_export]
macro_rules! enrichment_suite {
    ($factory:expr) => {
        $crate::enrichment_suite!(@with [$crate::conformance_suite] @expand $factory;);
    };
    (@with [$($callback:tt)+] $($args:tt)*) => {
        $($callback)+!($($args)*
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
        );
    };
}

/// Export, import and re-embedding, for backends that implement [`TransferStore`] (their
/// [`TestStorage::connect_transfer`] returns a handle).
#[macro_export]
macro_rules! transfer_suite {
    ($factory:expr) => {
        $crate::transfer_suite!(@with [$crate::conformance_suite] @expand $factory;);
    };
    (@with [$($callback:tt)+] $($args:tt)*) => {
        $($callback)+!($($args)*
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
            transfer_import_memory_keeps_its_corrections_and_records,
        );
    };
}

/// API keys, for backends that implement [`KeyStore`] (their
/// [`TestStorage::connect_keys`] returns a handle).
#[macro_export]
macro_rules! key_suite {
    ($factory:expr) => {
        $crate::key_suite!(@with [$crate::conformance_suite] @expand $factory;);
    };
    (@with [$($callback:tt)+] $($args:tt)*) => {
        $($callback)+!($($args)*
            keys_round_trip_and_list_per_user,
            keys_revoke_once_and_refuse_after,
            keys_refuse_a_duplicate_id,
        );
    };
}
