//! What a migration is verified by: per user, the count of every record type and one
//! checksum over their contents.

use std::collections::BTreeMap;

use cortex_app::transfer::format::Line;
use cortex_app::transfer::pager::Pager;
use cortex_core::transfer::TransferStore;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::admin::error::AdminError;

/// One user's records as counted and hashed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Records per type; memories split into `memory (live)` and `memory (superseded)`.
    pub counts: BTreeMap<String, u64>,
    /// The sum (mod 2^128) of a SHA-256 prefix of each record's JSON, vectors included:
    /// the same for the same records in any order, and backends order some differently.
    pub checksum: String,
}

/// Counts and hashes `user`'s records in `store`.
pub async fn summarize(store: &dyn TransferStore, user: &str) -> Result<Summary, AdminError> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut sum: u128 = 0;
    let mut pager = Pager::new(store, user, true);
    while let Some(page) = pager.next_page().await? {
        for line in &page {
            let key = match line {
                Line::Memory(m) if m.superseded => "memory (superseded)".to_owned(),
                Line::Memory(_) => "memory (live)".to_owned(),
                other => other.kind().to_owned(),
            };
            *counts.entry(key).or_default() += 1;
            let json = serde_json::to_vec(line)
                .map_err(|e| AdminError::Verify(format!("cannot encode a record: {e}")))?;
            let digest = Sha256::digest(&json);
            let mut prefix = [0u8; 16];
            prefix.copy_from_slice(&digest[..16]);
            sum = sum.wrapping_add(u128::from_be_bytes(prefix));
        }
    }
    Ok(Summary {
        counts,
        checksum: format!("{sum:032x}"),
    })
}
