//! Where an index that keeps only its 8-bit codes in memory reads full vectors back.

use std::fmt;

use crate::error::StoreError;
use crate::memory::Memory;

/// A store's full vectors, read by memory id for the few rows the compact scan could not
/// rule out, so an index built over a source holds about a quarter of the bytes of one
/// that keeps every f32 row (docs/ARCHITECTURE.md, "The index").
///
/// A source returns the vector exactly as it was given to
/// [`MemoryIndex::insert`](super::MemoryIndex::insert): the index normalises it the same
/// way again, so its exact score is bit-equal to a resident index's.
pub trait VectorSource: Send + Sync + fmt::Debug {
    /// The stored vector of each of `memories`, in order; `None` for a memory that is no
    /// longer in the store (removed after the index was built). A store looks a memory up
    /// by whichever of its keys is cheapest (SQLite: `seq`, its row id).
    fn vectors(&self, memories: &[&Memory]) -> Result<Vec<Option<Vec<f32>>>, StoreError>;
}
