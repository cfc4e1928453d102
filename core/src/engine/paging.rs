//! Listing and paging a user's memories, newest first, and counting them.

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::filter::MemoryFilter;
use crate::listing::{self, Page};
use crate::memory::{Memory, validate_user};
use crate::store::MemoryStore;

use super::CortexMemory;

impl CortexMemory {
    /// Live memories, newest first.
    pub async fn list_memories(&self, user: &str, limit: usize) -> Result<Vec<Memory>> {
        Ok(self
            .list_page(user, &MemoryFilter::default(), limit, None)
            .await?
            .memories)
    }

    /// One page of the live memories that pass `filter`, newest first by
    /// [`ListKey`](crate::store::ListKey), starting after `cursor` (a previous page's
    /// [`Page::next_cursor`]); expired ones are left out unless the filter includes them,
    /// as they stand on this engine's clock.
    pub async fn list_page(
        &self,
        user: &str,
        filter: &MemoryFilter,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page> {
        listing::list_page(
            self.store.as_ref(),
            user,
            filter,
            limit,
            cursor,
            self.clock.now(),
        )
        .await
    }

    /// Now, on the clock that decides what has expired.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Number of memories no correction superseded, expired ones included
    /// ([`MemoryStore::count`]).
    pub async fn count(&self, user: &str) -> Result<u64> {
        validate_user(user)?;
        Ok(self.store.count(user).await?)
    }
}
