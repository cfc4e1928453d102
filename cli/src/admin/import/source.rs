//! What every `cortex import --from` format shares: the scope of one run (whose memories,
//! which of them, how their ids are made) and the [`Unit`] a source hands over, one record
//! of the source read whole, already turned into the export lines it becomes.
//!
//! Ids are UUID v5 of the format, the user and the record's own ids in the source, so the
//! same record imported again gets the same id and the store skips it: a second run adds
//! nothing, whatever else changed in the file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use chrono::{DateTime, Utc};
use cortex_app::transfer::format::{Line, MemoryLine};
use cortex_core::memory::{DEFAULT_MAX_CONTENT_BYTES, MAX_TAG_CHARS, MAX_TAGS, MemoryKind};
use uuid::Uuid;

use crate::admin::error::{AdminError, RecordName, SourceStop};

/// The namespace of every id an import derives. Fixed forever: changing it would make a
/// second import of the same file write everything again.
const NAMESPACE: Uuid = Uuid::from_u128(0x5c0f_7e3a_1d2b_4c69_9a8e_0b4d_6f21_c3a7);

/// Counts by what was read, written or left out ("conversation", "skipped assistant
/// message"), printed after a run.
pub type Counts = BTreeMap<String, u64>;

/// One run's settings, the same for every record.
#[derive(Debug, Clone)]
pub struct Scope {
    /// The `--from` name, part of every memory id.
    pub format: &'static str,
    /// The file or folder read, for errors.
    pub input: PathBuf,
    /// Whose memories these are: `--as-user`, else the configured user.
    pub user: String,
    /// `--as-user` was given: a source's own user ids (mem0's) are not used.
    pub forced_user: bool,
    /// `--since`: only memories dated at or after it.
    pub since: Option<DateTime<Utc>>,
    /// `--conversation`: only these conversations (all when empty).
    pub conversations: BTreeSet<String>,
    /// The date of a record that carries none: the file's modification time, else now.
    pub undated: DateTime<Utc>,
}

impl Scope {
    /// The memory id of a record of `user`'s, named by its ids in the source.
    pub fn id(&self, user: &str, parts: &[&str]) -> Uuid {
        derived_id(&[&[self.format, user], parts].concat())
    }

    /// The Cortex user of a record whose source names `own` (mem0's `user_id`).
    pub fn user_for(&self, own: Option<&str>) -> String {
        match own.filter(|u| !self.forced_user && !u.trim().is_empty()) {
            Some(own) => own.to_owned(),
            None => self.user.clone(),
        }
    }

    pub fn wants_conversation(&self, id: &str) -> bool {
        self.conversations.is_empty() || self.conversations.contains(id)
    }

    pub fn selects(&self, at: DateTime<Utc>) -> bool {
        self.since.is_none_or(|since| at >= since)
    }
}

/// An entity's id for `user`: one per normalised name, whichever format named it, so two
/// sources that know the same person write one node.
pub fn entity_id(user: &str, normalized_name: &str) -> Uuid {
    derived_id(&["entity", user, normalized_name])
}

fn derived_id(parts: &[&str]) -> Uuid {
    // NUL cannot occur in a user id; joined with it, two different lists never meet.
    Uuid::new_v5(&NAMESPACE, parts.join("\0").as_bytes())
}

/// A memory a source would write, before its text is cleaned and its tags capped.
#[derive(Debug, Clone)]
pub struct Draft {
    pub id: Uuid,
    pub user: String,
    pub text: String,
    pub kind: MemoryKind,
    pub tags: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// One record of a source read whole, as the lines it becomes. A record that cannot be
/// read whole never becomes a unit, so nothing of it is written.
#[derive(Debug)]
pub struct Unit {
    pub name: RecordName,
    pub lines: Vec<Line>,
    pub counts: Counts,
    /// The conversation it is, when selected by `--conversation`.
    pub conversation: Option<String>,
}

impl Unit {
    pub fn new(name: RecordName) -> Self {
        Self {
            name,
            lines: Vec::new(),
            counts: Counts::new(),
            conversation: None,
        }
    }

    pub fn count(&mut self, what: &str) {
        self.count_n(what, 1);
    }

    pub fn count_n(&mut self, what: &str, n: u64) {
        if n > 0 {
            *self.counts.entry(what.to_owned()).or_default() += n;
        }
    }

    /// Adds the memory unless it is empty or before `--since` (each counted); its id when
    /// added. Text over the size limit is cut at a character boundary and counted.
    pub fn memory(&mut self, scope: &Scope, draft: Draft) -> Option<Uuid> {
        let Some((content, cut)) = content(&draft.text) else {
            self.count("skipped empty");
            return None;
        };
        if !scope.selects(draft.created_at) {
            self.count("skipped before --since");
            return None;
        }
        if cut {
            self.count("memory cut to 32 KiB");
        }
        self.lines.push(Line::Memory(MemoryLine {
            id: draft.id,
            user_id: draft.user,
            content,
            kind: draft.kind,
            tags: capped(draft.tags),
            created_at: draft.created_at,
            expires_at: draft.expires_at,
            superseded: false,
            embedding: None,
        }));
        Some(draft.id)
    }
}

/// A source's text as memory content: NUL removed (no backend stores it), trimmed, cut to
/// the size limit; `None` when nothing is left. The flag says whether it was cut.
fn content(text: &str) -> Option<(String, bool)> {
    let clean = text.replace('\0', "");
    let trimmed = clean.trim();
    if trimmed.is_empty() {
        return None;
    }
    if trimmed.len() <= DEFAULT_MAX_CONTENT_BYTES {
        return Some((trimmed.to_owned(), false));
    }
    let mut end = DEFAULT_MAX_CONTENT_BYTES;
    while !trimmed.is_char_boundary(end) {
        end -= 1;
    }
    Some((trimmed[..end].trim_end().to_owned(), true))
}

/// A tag from a source's text: on one line, cut to the tag limit; `None` when blank.
pub fn tag(text: &str) -> Option<String> {
    let one_line = text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let cut: String = one_line.chars().take(MAX_TAG_CHARS).collect();
    let cut = cut.trim();
    (!cut.is_empty()).then(|| cut.to_owned())
}

/// `prefix:text` as a tag.
pub fn tag_with(prefix: &str, text: &str) -> Option<String> {
    tag(text).and_then(|t| tag(&format!("{prefix}:{t}")))
}

/// At most [`MAX_TAGS`] distinct tags, the first ones kept: a source's own labels are
/// many, and a memory with too many would be refused whole.
fn capped(tags: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tags.iter().filter_map(|t| tag(t)) {
        if out.len() < MAX_TAGS && !out.iter().any(|o| o.to_lowercase() == t.to_lowercase()) {
            out.push(t);
        }
    }
    out
}

/// A time given as seconds since the epoch (ChatGPT's).
pub fn from_unix(seconds: f64) -> Option<DateTime<Utc>> {
    if !seconds.is_finite() {
        return None;
    }
    let whole = seconds.floor();
    let nanos = ((seconds - whole) * 1e9).round().clamp(0.0, 999_999_999.0) as u32;
    DateTime::from_timestamp(whole as i64, nanos)
}

/// A time given as text: RFC 3339 with any offset, a date-time without zone (UTC), a date.
pub fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    cortex_core::reader::extraction::parse_event_time(text)
}

/// The file to read, or standard input for `-`.
pub fn open_input(path: &std::path::Path) -> Result<Box<dyn std::io::BufRead + Send>, AdminError> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(std::io::BufReader::new(std::io::stdin())));
    }
    let file = std::fs::File::open(path).map_err(|e| AdminError::io(path, e))?;
    Ok(Box::new(std::io::BufReader::new(file)))
}

/// A source read front to back, one record at a time.
pub trait Source: Send {
    /// Calls `each` with every record read whole, in order, until the end or until `each`
    /// returns false (the writer stopped). An error names the last record read whole.
    fn read(
        self: Box<Self>,
        scope: &Scope,
        each: &mut dyn FnMut(Unit) -> bool,
    ) -> Result<(), AdminError>;
}

/// The last record read whole, and the errors that name it.
#[derive(Debug)]
pub struct Tracker {
    pub format: &'static str,
    pub last_good: Option<RecordName>,
    /// Records read whole so far.
    pub read: usize,
}

impl Tracker {
    pub fn new(format: &'static str) -> Self {
        Self {
            format,
            last_good: None,
            read: 0,
        }
    }

    pub fn good(&mut self, name: &RecordName) {
        self.read += 1;
        self.last_good = Some(name.clone());
    }

    fn stop(&self, what: String) -> Box<SourceStop> {
        Box::new(SourceStop {
            format: self.format,
            what,
            last_good: self.last_good.clone(),
            written: false,
        })
    }

    pub fn truncated(&self, what: impl Into<String>) -> AdminError {
        AdminError::SourceTruncated(self.stop(what.into()))
    }

    pub fn bad(&self, record: impl Into<String>, message: impl std::fmt::Display) -> AdminError {
        let what = format!("{} cannot be imported: {message}", record.into());
        AdminError::SourceRecord(self.stop(what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_differ_by_every_part() {
        let scope = Scope {
            format: "chatgpt",
            input: PathBuf::from("x"),
            user: "ada".into(),
            forced_user: false,
            since: None,
            conversations: BTreeSet::new(),
            undated: Utc::now(),
        };
        let a = scope.id("ada", &["c1", "m1"]);
        assert_eq!(a, scope.id("ada", &["c1", "m1"]));
        assert_eq!(a.get_version_num(), 5);
        assert_ne!(a, scope.id("bob", &["c1", "m1"]));
        assert_ne!(a, scope.id("ada", &["c1m1"]));
        assert_ne!(entity_id("ada", "x"), entity_id("bob", "x"));
    }

    #[test]
    fn content_is_cut_at_a_character_and_tags_are_capped() {
        let long = "é".repeat(DEFAULT_MAX_CONTENT_BYTES);
        let (cut, was_cut) = content(&long).unwrap();
        assert!(was_cut && cut.len() <= DEFAULT_MAX_CONTENT_BYTES);
        assert_eq!(content(" \0 "), None);
        assert_eq!(tag("a\nb\tc").as_deref(), Some("a b c"));
        assert_eq!(tag(&"x".repeat(99)).unwrap().len(), MAX_TAG_CHARS);
        let many: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
        assert_eq!(capped(many).len(), MAX_TAGS);
        assert_eq!(capped(vec!["A".into(), "a".into()]), ["A"]);
        assert_eq!(
            from_unix(1_700_000_000.5).unwrap().to_rfc3339(),
            "2023-11-14T22:13:20.500+00:00"
        );
    }
}
