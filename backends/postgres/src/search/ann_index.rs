//! Which approximate index a store builds and searches: HNSW's graph
//! (`super::dense_plan`) or IVFFlat's lists (`super::ivfflat`), as `ann_index` says.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use cortex_core::error::StoreError;

use super::dense_plan::{HNSW_INDEX, ensure_hnsw_index, index_valid};
use super::ivfflat::{IVFFLAT_INDEX, ensure_ivfflat_index};
use crate::config::{AnnIndex, PostgresConfig};
use crate::names::Names;
use crate::pool::Connections;

/// Builds the approximate index `config.ann_index` names (see [`ensure_hnsw_index`] and
/// [`ensure_ivfflat_index`]; an IVFFlat index's lists go to `lists`), and logs when the
/// other kind's index is there too: the search shape is the same for both, so the planner
/// would pick either by its own costs.
pub(crate) async fn ensure_ann_index(
    pool: &Connections,
    names: &Names,
    dimension: usize,
    config: &PostgresConfig,
    done: &AtomicBool,
    lists: &AtomicU32,
) -> Result<(), StoreError> {
    if done.load(Ordering::Acquire) {
        return Ok(());
    }
    let other = match config.ann_index {
        AnnIndex::Hnsw => {
            ensure_hnsw_index(pool, names, dimension, config.hnsw_build, done).await?;
            IVFFLAT_INDEX
        }
        AnnIndex::IvfFlat => {
            ensure_ivfflat_index(pool, names, dimension, config.ivfflat, done, lists).await?;
            HNSW_INDEX
        }
    };
    let client = pool.get().await?;
    if index_valid(&client, names, other).await?.is_some() {
        tracing::warn!(
            index = other,
            ann_index = config.ann_index.as_str(),
            "both the HNSW and the IVFFlat index exist, and the planner picks either; drop \
             the one CORTEX_PG_ANN_INDEX does not name (DROP INDEX CONCURRENTLY)"
        );
    }
    Ok(())
}
