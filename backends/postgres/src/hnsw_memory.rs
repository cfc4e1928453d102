//! Whether the HNSW index fits in the server's shared buffers.
//!
//! A graph search reads a few thousand index pages in no order. When the index is larger
//! than `shared_buffers` (128 MB by default, a million 384-d memories make an index of
//! 0.7-1.4 GB), most of those reads miss the buffer cache and go through the kernel's,
//! which makes each search several times slower (docs/BENCHMARKS.md). Nothing in a
//! store can change that setting (it needs a server restart), so the store says so: a
//! warning when a handle first searches with the index, and the figures in
//! [`Diagnostics::hnsw_memory`](crate::Diagnostics::hnsw_memory) and `cortex stats`.

use cortex_core::error::StoreError;

use crate::names::Names;
use crate::pg_err;
use crate::sql::get;

/// The HNSW index's size beside the server's buffer cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HnswMemory {
    /// The index's size on disk, every user's memories together (0 while there is none).
    pub index_bytes: u64,
    /// The server's `shared_buffers`.
    pub shared_buffers_bytes: u64,
}

impl HnswMemory {
    /// Whether the whole index can stay in the buffer cache (tables and other indexes
    /// share it, so an index just under the bound already competes with them).
    pub fn fits(&self) -> bool {
        self.index_bytes <= self.shared_buffers_bytes
    }
}

/// The size of the HNSW index `index` (0 while there is none) and `shared_buffers`.
pub(crate) async fn hnsw_memory(
    client: &tokio_postgres::Client,
    names: &Names,
    index: &str,
) -> Result<HnswMemory, StoreError> {
    let row = client
        .query_one(
            "SELECT COALESCE((SELECT pg_relation_size(c.oid) FROM pg_class c
                              JOIN pg_namespace n ON n.oid = c.relnamespace
                              WHERE n.nspname = $1 AND c.relname = $2), 0)::int8,
                    pg_size_bytes(current_setting('shared_buffers'))::int8",
            &[&names.schema(), &index],
        )
        .await
        .map_err(pg_err)?;
    let bytes = |i: usize| -> Result<u64, StoreError> {
        let v: i64 = get(&row, i)?;
        u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("a size of {v} bytes")))
    };
    Ok(HnswMemory {
        index_bytes: bytes(0)?,
        shared_buffers_bytes: bytes(1)?,
    })
}

/// Logs when the HNSW index `index` has outgrown `shared_buffers`, with what to do.
pub(crate) async fn warn_if_outgrown(
    client: &tokio_postgres::Client,
    names: &Names,
    index: &str,
) -> Result<(), StoreError> {
    let memory = hnsw_memory(client, names, index).await?;
    if !memory.fits() {
        tracing::warn!(
            index,
            index_bytes = memory.index_bytes,
            shared_buffers_bytes = memory.shared_buffers_bytes,
            "the HNSW index is larger than the server's shared_buffers, so its searches \
             read most pages through the kernel's cache and are several times slower; \
             raise shared_buffers above the index (docs/CONFIGURATION.md)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_fits_up_to_the_buffers_size() {
        let at = |index_bytes| HnswMemory {
            index_bytes,
            shared_buffers_bytes: 128 << 20,
        };
        assert!(at(0).fits());
        assert!(at(128 << 20).fits());
        assert!(!at((128 << 20) + 1).fits());
    }
}
