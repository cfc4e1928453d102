//! The list pages every caller walks (the MCP tool, the web page, `cortex list`): live
//! memories newest first by [`ListKey`], a page at a time, and the cursor between pages.
//! Written over a bare [`MemoryStore`], so a caller without an embedder (the `cortex`
//! command) pages exactly as the engine does.

use chrono::{DateTime, Utc};

use crate::error::{CortexError, Result};
use crate::filter::MemoryFilter;
use crate::memory::{Memory, validate_user};
use crate::store::{ListKey, ListQuery, MemoryStore};

/// Largest `top_k` or list limit the engine accepts.
pub const MAX_LIMIT: usize = 1000;

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub memories: Vec<Memory>,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// Cursors are opaque to callers; the version prefix lets their form change later. `c1.`
/// named a sequence number, from when lists were in insertion order; it is refused, so
/// a client holding one starts again from the first page instead of skipping memories.
const CURSOR_PREFIX: &str = "c2.";

/// One page of `user`'s memories that pass `filter` (live ones; expired ones too when the
/// filter includes them, as they stand at `now`), newest first, starting after `cursor`
/// (a previous page's [`Page::next_cursor`]).
pub async fn list_page(
    store: &dyn MemoryStore,
    user: &str,
    filter: &MemoryFilter,
    limit: usize,
    cursor: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Page> {
    validate_user(user)?;
    check_limit("limit", limit)?;
    let mut filter = filter.clone().validated()?;
    filter.alive_at = (!filter.include_expired).then_some(now);
    let before = cursor.map(decode_cursor).transpose()?;
    let query = ListQuery {
        filter,
        // One more than asked tells whether another page follows.
        limit: limit + 1,
        before,
    };
    let mut memories = store.list(user, &query).await?;
    let more = memories.len() > limit;
    memories.truncate(limit);
    let next_cursor = more.then(|| memories.last().map(cursor_after)).flatten();
    Ok(Page {
        memories,
        next_cursor,
    })
}

/// The cursor of a page that ends with `last`.
pub fn cursor_after(last: &Memory) -> String {
    let key = ListKey::of(last);
    format!(
        "{CURSOR_PREFIX}{}.{:x}",
        key.created_at.timestamp_micros(),
        key.seq
    )
}

/// The position a cursor names: the last memory of the page it ended.
pub fn decode_cursor(cursor: &str) -> Result<ListKey> {
    let refused = || {
        CortexError::invalid(
            "cursor",
            format!("{cursor:?} is not a cursor a list returned; pass next_cursor as given"),
        )
    };
    let (micros, seq) = cursor
        .trim()
        .strip_prefix(CURSOR_PREFIX)
        .and_then(|rest| rest.split_once('.'))
        .ok_or_else(refused)?;
    let digits = micros.strip_prefix('-').unwrap_or(micros);
    let well_formed = |s: &str, hex: bool| {
        !s.is_empty()
            && s.bytes().all(|b| match hex {
                true => b.is_ascii_hexdigit(),
                false => b.is_ascii_digit(),
            })
    };
    if !well_formed(digits, false) || !well_formed(seq, true) {
        return Err(refused());
    }
    let created_at = micros
        .parse::<i64>()
        .ok()
        .and_then(DateTime::from_timestamp_micros)
        .ok_or_else(refused)?;
    let seq = i64::from_str_radix(seq, 16)
        .ok()
        .filter(|seq| *seq > 0)
        .ok_or_else(refused)?;
    Ok(ListKey { created_at, seq })
}

/// A `top_k` or `limit` of 1 to [`MAX_LIMIT`].
pub(crate) fn check_limit(field: &'static str, value: usize) -> Result<()> {
    if value == 0 || value > MAX_LIMIT {
        return Err(CortexError::invalid(
            field,
            format!("must be between 1 and {MAX_LIMIT}; got {value}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(created_at: &str, seq: i64) -> Memory {
        Memory {
            id: uuid::Uuid::new_v4(),
            user_id: "u".into(),
            content: "x".into(),
            kind: crate::memory::MemoryKind::Note,
            tags: Vec::new(),
            created_at: DateTime::parse_from_rfc3339(created_at)
                .unwrap()
                .with_timezone(&Utc),
            seq,
            expires_at: None,
        }
    }

    #[test]
    fn a_cursor_names_the_key_of_the_memory_it_follows() {
        for (at, seq) in [
            ("2026-01-01T00:00:00.123456Z", 1),
            ("1969-07-20T20:17:40Z", 0x7fff_ffff_ffff),
            ("0001-01-01T00:00:00Z", 42),
        ] {
            let m = memory(at, seq);
            assert_eq!(decode_cursor(&cursor_after(&m)).unwrap(), ListKey::of(&m));
        }
    }

    #[test]
    fn anything_else_is_refused() {
        for cursor in [
            "",
            "c2.",
            "c2.10",
            "c2..1",
            "c2.10.",
            "c2.+1.1",
            "c2.1.-1",
            "c2.1.0",
            "c2.x.1",
            "c1.9",
            "c2.99999999999999999999.1",
        ] {
            assert!(
                matches!(
                    decode_cursor(cursor),
                    Err(CortexError::InvalidInput {
                        field: "cursor",
                        ..
                    })
                ),
                "{cursor:?}"
            );
        }
    }
}
