//! A stored memory and the validation of what a caller asks to store.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::CortexError;

/// A memory's id: a random UUIDv4, shown in its hyphenated lowercase form.
pub type MemoryId = Uuid;

/// Most tags one memory may carry.
pub const MAX_TAGS: usize = 16;
/// Longest tag, in characters, after trimming.
pub const MAX_TAG_CHARS: usize = 64;
/// How far ahead of this clock a `created_at` may be (another machine's clock skew).
pub const FUTURE_GRACE_MINUTES: i64 = 5;
/// Default content limit: 32 KiB of UTF-8.
pub const DEFAULT_MAX_CONTENT_BYTES: usize = 32 * 1024;

/// What sort of thing a memory records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryKind {
    Fact,
    Preference,
    Event,
    Decision,
    Instruction,
    #[default]
    Note,
}

impl MemoryKind {
    pub const ALL: [MemoryKind; 6] = [
        MemoryKind::Fact,
        MemoryKind::Preference,
        MemoryKind::Event,
        MemoryKind::Decision,
        MemoryKind::Instruction,
        MemoryKind::Note,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Fact => "fact",
            MemoryKind::Preference => "preference",
            MemoryKind::Event => "event",
            MemoryKind::Decision => "decision",
            MemoryKind::Instruction => "instruction",
            MemoryKind::Note => "note",
        }
    }
}

impl fmt::Display for MemoryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MemoryKind {
    type Err = CortexError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_lowercase();
        MemoryKind::ALL
            .into_iter()
            .find(|k| k.as_str() == wanted)
            .ok_or_else(|| {
                CortexError::invalid(
                    "kind",
                    format!(
                        "unknown kind {s:?}; use one of fact, preference, event, decision, \
                         instruction, note"
                    ),
                )
            })
    }
}

/// One stored memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub id: MemoryId,
    pub user_id: String,
    /// Exactly the text the caller gave.
    pub content: String,
    pub kind: MemoryKind,
    pub tags: Vec<String>,
    pub created_at: DateTime<Utc>,
    /// Insertion order, assigned by the store, strictly increasing; breaks every ranking tie.
    pub seq: i64,
    /// From this instant on the memory is expired: never a recall candidate, listed only
    /// when asked, deleted for good by `cortex prune`. `None`: it does not expire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

impl Memory {
    /// Whether the memory has expired at `now` (expiry is exact: at `expires_at` it is).
    pub fn expired_at(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|e| e <= now)
    }

    /// Where the memory stands at `now`, given whether a correction superseded it.
    pub fn state_at(&self, superseded: bool, now: DateTime<Utc>) -> MemoryState {
        match (superseded, self.expired_at(now)) {
            (true, _) => MemoryState::Superseded,
            (false, true) => MemoryState::Expired,
            (false, false) => MemoryState::Live,
        }
    }
}

/// The one definition of "live" that every count, list and page shares, so that no two
/// screens disagree about it. A forgotten memory is deleted, so it has no state at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryState {
    /// Neither superseded nor expired: recalled and listed.
    Live,
    /// Its `expires_at` has passed: never recalled, listed only when asked, still stored
    /// until `cortex prune`.
    Expired,
    /// A correction replaced it: kept for `history`. Superseded wins over expired, since
    /// a replaced memory is history whether or not its expiry passed since.
    Superseded,
}

/// `new_id` made `old_id` stale: recall no longer returns the old memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Supersession {
    pub old_id: MemoryId,
    pub new_id: MemoryId,
    pub reason: String,
    pub created_at: DateTime<Utc>,
}

/// The current time at the microsecond precision every backend stores, so a value
/// written and read back compares equal.
pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(6)
}

/// Non-empty after trimming, free of NUL, and at most `max_bytes` of UTF-8.
pub fn validate_content(
    field: &'static str,
    text: &str,
    max_bytes: usize,
) -> Result<(), CortexError> {
    if text.trim().is_empty() {
        return Err(CortexError::invalid(field, "must not be empty"));
    }
    if text.contains('\0') {
        // Postgres text cannot hold NUL; refusing it everywhere keeps backends equal.
        return Err(CortexError::invalid(
            field,
            "must not contain NUL characters",
        ));
    }
    if text.len() > max_bytes {
        return Err(CortexError::invalid(
            field,
            format!("is {} bytes; the limit is {max_bytes}", text.len()),
        ));
    }
    Ok(())
}

/// A user id is any non-empty text of at most 256 bytes without control characters.
pub fn validate_user(user_id: &str) -> Result<(), CortexError> {
    if user_id.trim().is_empty() || user_id.len() > 256 || user_id.chars().any(char::is_control) {
        return Err(CortexError::invalid(
            "user_id",
            "must be 1-256 bytes of printable text",
        ));
    }
    Ok(())
}

/// Trims, lowercases and de-duplicates tags (first occurrence wins), enforcing the limits.
pub fn normalize_tags(tags: &[String]) -> Result<Vec<String>, CortexError> {
    let mut out: Vec<String> = Vec::with_capacity(tags.len());
    for raw in tags {
        let tag = raw.trim().to_lowercase();
        let chars = tag.chars().count();
        if chars == 0 || chars > MAX_TAG_CHARS {
            return Err(CortexError::invalid(
                "tags",
                format!("each tag must be 1-{MAX_TAG_CHARS} characters; got {raw:?}"),
            ));
        }
        if tag.chars().any(char::is_control) {
            return Err(CortexError::invalid(
                "tags",
                format!("tag {raw:?} contains a control character"),
            ));
        }
        if !out.contains(&tag) {
            out.push(tag);
        }
    }
    if out.len() > MAX_TAGS {
        return Err(CortexError::invalid(
            "tags",
            format!("at most {MAX_TAGS} tags; got {}", out.len()),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn tags_are_trimmed_lowercased_and_deduplicated() {
        let got = normalize_tags(&tags(&[" Work ", "work", "HOME", "home "])).unwrap();
        assert_eq!(got, tags(&["work", "home"]));
    }

    #[test]
    fn tag_limits_are_enforced() {
        assert!(normalize_tags(&tags(&["   "])).is_err());
        assert!(normalize_tags(&["x".repeat(65)]).is_err());
        assert!(normalize_tags(&["é".repeat(64)]).is_ok());
        let seventeen: Vec<String> = (0..17).map(|i| format!("t{i}")).collect();
        assert!(normalize_tags(&seventeen).is_err());
        // Duplicates do not count against the limit.
        let mut sixteen: Vec<String> = (0..16).map(|i| format!("t{i}")).collect();
        sixteen.push("T0".into());
        assert_eq!(normalize_tags(&sixteen).unwrap().len(), 16);
    }

    #[test]
    fn kinds_parse_case_insensitively_and_unknown_is_refused() {
        for kind in MemoryKind::ALL {
            assert_eq!(
                kind.as_str().to_uppercase().parse::<MemoryKind>().unwrap(),
                kind
            );
        }
        let err = "opinion".parse::<MemoryKind>().unwrap_err();
        assert!(matches!(
            err,
            CortexError::InvalidInput { field: "kind", .. }
        ));
    }

    #[test]
    fn content_limits() {
        assert!(validate_content("content", " \n\t", 10).is_err());
        assert!(validate_content("content", &"a".repeat(10), 10).is_ok());
        assert!(validate_content("content", &"a".repeat(11), 10).is_err());
        // The limit is in bytes: 4 three-byte characters are 12 bytes.
        assert!(validate_content("content", "日本語日", 11).is_err());
        assert!(validate_content("content", "a\0b", 10).is_err());
    }
}
