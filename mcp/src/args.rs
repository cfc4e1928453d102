//! The tools' arguments. Each field's doc comment is its description in the tool's JSON
//! schema, which is all an agent sees of it: say what to pass and what it does.
//!
//! Unknown arguments are refused (`deny_unknown_fields`): an agent that sends `offset` or
//! `user_id` believes it asked for something, and silently ignoring it returns the wrong
//! records. serde's message names the stray argument and the valid ones.

use cortex_app::{EntityArg, EventArg, FilterText, RelationArg, StructureArgs};
use cortex_core::listing::MAX_LIMIT;
use rmcp::schemars;
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorizeArgs {
    /// The memory: one self-contained statement that will make sense in a later session
    /// without this conversation (name people, projects and dates explicitly). At most
    /// 32 KiB of text.
    pub content: String,
    /// What sort of memory this is: fact, preference, event, decision, instruction or
    /// note. Defaults to note.
    #[serde(default)]
    pub kind: Option<String>,
    /// Optional short labels, e.g. ["work", "project-x"]. Up to 16 tags of at most 64
    /// characters; they are lowercased and de-duplicated.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// When this became true, if not now: a date YYYY-MM-DD (midnight UTC) or an RFC 3339
    /// datetime such as 2024-05-01T14:30:00Z, not in the future. For facts learned
    /// earlier; omit for now.
    #[serde(default)]
    pub created_at: Option<String>,
    /// The id (or a unique prefix of at least 4 hex characters) of a memory this one
    /// corrects: the old memory stops being recalled in the same write, and its history
    /// keeps both. Use it when the user corrects something stored, instead of forget.
    /// Without `tags` the correction keeps the old memory's tags; with them it has
    /// exactly those.
    #[serde(default)]
    #[schemars(example = "3f2a9c1e")]
    pub replaces: Option<String>,
    /// When this stops being true, if it will ("the office is closed until Friday"): a
    /// date YYYY-MM-DD (midnight UTC) or an RFC 3339 datetime, in the future. From then on
    /// it is never recalled. Omit for a memory that does not expire.
    #[serde(default)]
    #[schemars(example = "2026-12-31")]
    pub expires_at: Option<String>,
    /// The entity the memory is mainly about, by name ("I" for the user): recall_about
    /// on it returns this memory. Created when no entity of `entities` names it. Like
    /// `entities`, `relations` and `event`, omit it when you do not know.
    #[serde(default)]
    #[schemars(example = "Ana Silva")]
    pub subject: Option<String>,
    /// The entities the memory mentions (people, places, organizations, projects), each
    /// with an optional type and aliases; at most 32. recall_about(name or alias) returns
    /// them with every memory that mentions them.
    #[serde(default)]
    #[schemars(example = json!([{"name": "Ana Silva", "type": "person", "aliases": ["Ana"]}]))]
    pub entities: Option<Vec<EntityArg>>,
    /// Directed relationships between entities, each `from` `label` `to` (a short verb
    /// phrase); at most 32. An end no entity names is created.
    #[serde(default)]
    #[schemars(example = json!([{"from": "Ana Silva", "label": "works at", "to": "Acme"}]))]
    pub relations: Option<Vec<RelationArg>>,
    /// The dated event the memory records, for recall_timeline: `time` (RFC 3339, a date
    /// YYYY-MM-DD or a month YYYY-MM) and optionally `place`, `actor` and `type`.
    #[serde(default)]
    #[schemars(example = json!({"time": "2026-11-20", "place": "Lisbon", "type": "meeting"}))]
    pub event: Option<EventArg>,
}

impl MemorizeArgs {
    /// The structure arguments (`subject`, `entities`, `relations`, `event`) as the app
    /// reads them.
    pub fn structure(&self) -> StructureArgs {
        StructureArgs {
            subject: self.subject.clone(),
            entities: self.entities.clone(),
            relations: self.relations.clone(),
            event: self.event.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    /// What to look for, in natural language or keywords, e.g. "user's preferred
    /// programming language".
    pub query: String,
    /// How many memories to return, best first. Defaults to the server's top-k (10 unless
    /// configured); values are clamped to 1..=1000. Fewer when fewer memories pass the
    /// filters.
    #[serde(default)]
    pub limit: Option<i64>,
    /// Only memories of any of these kinds: fact, preference, event, decision,
    /// instruction, note. Omit for every kind.
    #[serde(default)]
    #[schemars(example = ["decision", "instruction"])]
    pub kinds: Option<Vec<String>>,
    /// Only memories carrying at least one of these tags (compared lowercased). At most
    /// 32.
    #[serde(default)]
    #[schemars(example = ["billing", "project-x"])]
    pub tags: Option<Vec<String>>,
    /// Only memories carrying every one of these tags. At most 32.
    #[serde(default)]
    #[schemars(example = ["work", "q3"])]
    pub tags_all: Option<Vec<String>>,
    /// Only memories created at or after this time: a date YYYY-MM-DD (midnight UTC) or an
    /// RFC 3339 datetime. Omit for no lower bound.
    #[serde(default)]
    #[schemars(example = "2026-11-01")]
    pub since: Option<String>,
    /// Only memories created strictly before this time, in the same forms as `since`
    /// ("until": "2026-12-01" ends with November 30). Must be after `since`.
    #[serde(default)]
    #[schemars(example = "2026-12-01T00:00:00Z")]
    pub until: Option<String>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallAboutArgs {
    /// The entity's name or one of its aliases (a person, project, place, organisation);
    /// case and spacing do not matter.
    pub entity: String,
    /// How many linked memories to return, newest first. Defaults to the server's top-k;
    /// clamped to 1..=1000.
    #[serde(default)]
    pub limit: Option<i64>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallTimelineArgs {
    /// Only events at or after this time: a date YYYY-MM-DD (midnight UTC) or an RFC 3339
    /// datetime such as 2024-05-01T14:30:00Z. Omit for no lower bound.
    #[serde(default)]
    pub since: Option<String>,
    /// Only events strictly before this time, in the same forms as `since`. Omit for no
    /// upper bound.
    #[serde(default)]
    pub until: Option<String>,
    /// How many events to return, oldest first. Defaults to the server's top-k; clamped
    /// to 1..=1000.
    #[serde(default)]
    pub limit: Option<i64>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListMemoriesArgs {
    /// How many memories to return, newest first. Defaults to the server's top-k; clamped
    /// to 1..=1000.
    #[serde(default)]
    pub limit: Option<i64>,
    /// Where to continue: the `next_cursor` of the previous page, as given. Omit for the
    /// first page. Memories written meanwhile do not shift the pages to come.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Also list memories that have expired (recall never returns them). Default false.
    #[serde(default)]
    pub include_expired: Option<bool>,
    /// Only memories of any of these kinds: fact, preference, event, decision,
    /// instruction, note. Omit for every kind.
    #[serde(default)]
    #[schemars(example = ["decision", "instruction"])]
    pub kinds: Option<Vec<String>>,
    /// Only memories carrying at least one of these tags (compared lowercased). At most
    /// 32.
    #[serde(default)]
    #[schemars(example = ["billing", "project-x"])]
    pub tags: Option<Vec<String>>,
    /// Only memories carrying every one of these tags. At most 32.
    #[serde(default)]
    #[schemars(example = ["work", "q3"])]
    pub tags_all: Option<Vec<String>>,
    /// Only memories created at or after this time: a date YYYY-MM-DD (midnight UTC) or an
    /// RFC 3339 datetime. Omit for no lower bound.
    #[serde(default)]
    #[schemars(example = "2026-11-01")]
    pub since: Option<String>,
    /// Only memories created strictly before this time, in the same forms as `since`
    /// ("until": "2026-12-01" ends with November 30). Must be after `since`.
    #[serde(default)]
    #[schemars(example = "2026-12-01T00:00:00Z")]
    pub until: Option<String>,
}

/// The filter arguments `recall` and `list_memories` share, as text.
macro_rules! filter_text {
    ($($args:ty),*) => {$(
        impl $args {
            pub fn filter_text(&self) -> FilterText<'_> {
                FilterText {
                    kinds: self.kinds.as_deref().unwrap_or_default(),
                    tags: self.tags.as_deref().unwrap_or_default(),
                    tags_all: self.tags_all.as_deref().unwrap_or_default(),
                    since: self.since.as_deref(),
                    until: self.until.as_deref(),
                }
            }
        }
    )*};
}

filter_text!(RecallArgs, ListMemoriesArgs);

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetArgs {
    /// The id of the memory to delete, as returned by memorize, recall or list_memories,
    /// or a prefix of it of at least 4 hex characters that matches exactly one memory.
    pub memory_id: String,
}

/// An agent's limit, or the default, clamped into the range the engine accepts. Clamping
/// rather than refusing keeps a model's guess ("limit": 0 or 5000) from costing a retry.
pub fn clamp_limit(requested: Option<i64>, default: usize) -> usize {
    let max = i64::try_from(MAX_LIMIT).unwrap_or(i64::MAX);
    match requested {
        None => default.clamp(1, MAX_LIMIT),
        Some(n) => usize::try_from(n.clamp(1, max)).unwrap_or(MAX_LIMIT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_clamped() {
        assert_eq!(clamp_limit(None, 10), 10);
        assert_eq!(clamp_limit(Some(0), 10), 1);
        assert_eq!(clamp_limit(Some(-7), 10), 1);
        assert_eq!(clamp_limit(Some(5000), 10), 1000);
        assert_eq!(clamp_limit(Some(i64::MAX), 10), 1000);
        assert_eq!(clamp_limit(Some(42), 10), 42);
    }
}
