//! Which memories a recall or a list may return: kinds, tags and a creation-time window.
//!
//! A filter restricts the candidates and nothing else: BM25's statistics, the lexical
//! bound and the neighbours' positions stay those of all the user's live memories, so a
//! memory that passes scores the same with or without the filter (docs/RETRIEVAL.md).

use chrono::{DateTime, Datelike, SubsecRound, Utc};

use crate::error::CortexError;
use crate::memory::{Memory, MemoryKind, normalize_tags};
use crate::records::TimeRange;

/// Most tags one filter list (`tags` or `tags_all`) may name.
pub const MAX_FILTER_TAGS: usize = 32;

/// Every condition must hold; an empty part holds for every memory, so the default
/// filter passes everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryFilter {
    /// Any of these kinds (none: every kind), in [`MemoryKind::ALL`] order, distinct.
    pub kinds: Vec<MemoryKind>,
    /// At least one of these tags (normalised as memorize normalises them).
    pub tags: Vec<String>,
    /// Every one of these tags.
    pub tags_all: Vec<String>,
    /// `created_at` in `[since, until)`.
    pub created: TimeRange,
    /// Lists expired memories too (a list's choice; recall never returns them).
    pub include_expired: bool,
    /// Only memories not expired at this instant. Set by the engine from its clock, never
    /// by a caller; a store may drop it when none of the user's memories has expired by
    /// then, which leaves every result as it is.
    pub alive_at: Option<DateTime<Utc>>,
}

impl MemoryFilter {
    /// A filter from a caller's values, checked and normalised: tags trimmed and
    /// lowercased as memorize stores them, at most [`MAX_FILTER_TAGS`] per list, and
    /// `since` strictly before `until`.
    pub fn new(
        kinds: &[MemoryKind],
        tags: &[String],
        tags_all: &[String],
        since: Option<DateTime<Utc>>,
        until: Option<DateTime<Utc>>,
    ) -> Result<Self, CortexError> {
        Self {
            kinds: kinds.to_vec(),
            tags: tags.to_vec(),
            tags_all: tags_all.to_vec(),
            created: TimeRange { since, until },
            ..Self::default()
        }
        .validated()
    }

    /// This filter checked and in its normal form (what every store receives, so two
    /// equal filters are equal values). The engine validates every filter it is given.
    pub fn validated(self) -> Result<Self, CortexError> {
        let kinds = MemoryKind::ALL
            .into_iter()
            .filter(|k| self.kinds.contains(k))
            .collect();
        let tags = filter_tags("tags", &self.tags)?;
        let tags_all = filter_tags("tags_all", &self.tags_all)?;
        let created = TimeRange {
            since: bound("since", self.created.since)?,
            until: bound("until", self.created.until)?,
        };
        if let (Some(since), Some(until)) = (created.since, created.until)
            && since >= until
        {
            return Err(CortexError::invalid(
                "since",
                format!(
                    "{} is not before until ({}); the window [since, until) would be empty",
                    since.to_rfc3339(),
                    until.to_rfc3339()
                ),
            ));
        }
        Ok(Self {
            kinds,
            tags,
            tags_all,
            created,
            include_expired: self.include_expired,
            alive_at: self.alive_at,
        })
    }

    /// No condition at all: the unfiltered path.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
            && self.tags.is_empty()
            && self.tags_all.is_empty()
            && self.created.since.is_none()
            && self.created.until.is_none()
            && self.alive_at.is_none()
    }

    /// Whether `memory` passes. Tags compare exactly: both sides are normalised.
    pub fn matches(&self, memory: &Memory) -> bool {
        (self.kinds.is_empty() || self.kinds.contains(&memory.kind))
            && (self.tags.is_empty() || self.tags.iter().any(|t| memory.tags.contains(t)))
            && self.tags_all.iter().all(|t| memory.tags.contains(t))
            && self.created.contains(memory.created_at)
            && self.alive_at.is_none_or(|now| !memory.expired_at(now))
    }
}

fn filter_tags(field: &'static str, raw: &[String]) -> Result<Vec<String>, CortexError> {
    if raw.len() > MAX_FILTER_TAGS {
        return Err(CortexError::invalid(
            field,
            format!("at most {MAX_FILTER_TAGS} tags; got {}", raw.len()),
        ));
    }
    // Memorize's own rules per tag (length, control characters), so a tag that could
    // never be stored is an error rather than a filter that silently matches nothing;
    // memorize's count limit is a memory's, not a filter's.
    let mut out: Vec<String> = Vec::with_capacity(raw.len());
    for tag in raw {
        let normal = normalize_tags(std::slice::from_ref(tag)).map_err(|e| match e {
            CortexError::InvalidInput { reason, .. } => CortexError::invalid(field, reason),
            other => other,
        })?;
        for t in normal {
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    Ok(out)
}

/// A window bound as every store compares it: stored times have microseconds, so a bound
/// is rounded up to the next microsecond (for such times `t >= ceil(s)` is `t >= s` and
/// `t < ceil(u)` is `t < u`), and years are 0000-9999, which RFC 3339 text can order.
fn bound(
    field: &'static str,
    at: Option<DateTime<Utc>>,
) -> Result<Option<DateTime<Utc>>, CortexError> {
    let Some(at) = at else {
        return Ok(None);
    };
    let truncated = at.trunc_subsecs(6);
    let up = match truncated < at {
        true => truncated + chrono::Duration::microseconds(1),
        false => at,
    };
    if !(0..=9999).contains(&up.year()) {
        return Err(CortexError::invalid(
            field,
            format!("{} is outside the years 0000-9999", up.to_rfc3339()),
        ));
    }
    Ok(Some(up))
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn memory(kind: MemoryKind, tags: &[&str], at: &str) -> Memory {
        Memory {
            id: Uuid::new_v4(),
            user_id: "u".into(),
            content: "x".into(),
            kind,
            tags: tags.iter().map(|s| s.to_string()).collect(),
            created_at: t(at),
            seq: 1,
            expires_at: None,
        }
    }

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_default_filter_passes_everything() {
        let f = MemoryFilter::default();
        assert!(f.is_empty());
        assert!(f.matches(&memory(MemoryKind::Event, &[], "1970-01-01T00:00:00Z")));
    }

    #[test]
    fn every_condition_must_hold() {
        let f = MemoryFilter::new(
            &[MemoryKind::Decision, MemoryKind::Fact],
            &strings(&["Billing", "ops"]),
            &strings(&["q3"]),
            Some(t("2026-11-01T00:00:00Z")),
            Some(t("2026-12-01T00:00:00Z")),
        )
        .unwrap();
        // Normal form: kinds in ALL order, tags lowercased.
        assert_eq!(f.kinds, [MemoryKind::Fact, MemoryKind::Decision]);
        assert_eq!(f.tags, ["billing", "ops"]);
        let ok = memory(
            MemoryKind::Decision,
            &["billing", "q3"],
            "2026-11-01T00:00:00Z",
        );
        assert!(f.matches(&ok));
        let mut other = ok.clone();
        other.kind = MemoryKind::Note;
        assert!(!f.matches(&other), "kind");
        let mut other = ok.clone();
        other.tags = strings(&["q3"]);
        assert!(!f.matches(&other), "no tag of `tags`");
        let mut other = ok.clone();
        other.tags = strings(&["billing"]);
        assert!(!f.matches(&other), "not every tag of `tags_all`");
        let mut other = ok.clone();
        other.created_at = t("2026-12-01T00:00:00Z");
        assert!(!f.matches(&other), "until is exclusive");
        other.created_at = t("2026-10-31T23:59:59.999999Z");
        assert!(
            !f.matches(&other),
            "since is inclusive, and this is before it"
        );
    }

    #[test]
    fn bad_values_are_named() {
        let err = |r: Result<MemoryFilter, CortexError>| match r {
            Err(CortexError::InvalidInput { field, reason }) => (field, reason),
            other => panic!("{other:?}"),
        };
        let (field, message) = err(MemoryFilter::new(
            &[],
            &[],
            &[],
            Some(t("2026-12-01T00:00:00Z")),
            Some(t("2026-11-01T00:00:00Z")),
        ));
        assert_eq!(field, "since");
        assert!(message.contains("not before until"), "{message}");
        let same = Some(t("2026-12-01T00:00:00Z"));
        assert_eq!(err(MemoryFilter::new(&[], &[], &[], same, same)).0, "since");
        let many: Vec<String> = (0..=MAX_FILTER_TAGS).map(|i| format!("t{i}")).collect();
        let (field, message) = err(MemoryFilter::new(&[], &[], &many, None, None));
        assert_eq!(field, "tags_all");
        assert!(message.contains("at most 32"), "{message}");
        let (field, _) = err(MemoryFilter::new(&[], &strings(&["  "]), &[], None, None));
        assert_eq!(field, "tags");
        // More tags than one memory may carry is still a filter.
        let seventeen: Vec<String> = (0..17).map(|i| format!("T{i}")).collect();
        let f = MemoryFilter::new(&[], &seventeen, &seventeen, None, None).unwrap();
        assert_eq!(f.tags.len(), 17);
        assert_eq!(f.tags[0], "t0");
        let far = DateTime::parse_from_rfc3339("9999-12-31T23:59:59.9999999Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            err(MemoryFilter::new(&[], &[], &[], None, Some(far))).0,
            "until"
        );
    }

    #[test]
    fn bounds_finer_than_a_microsecond_round_up_as_every_store_compares() {
        let at = t("2026-11-01T00:00:00Z");
        let f = MemoryFilter::new(
            &[],
            &[],
            &[],
            Some(at + chrono::Duration::nanoseconds(500)),
            Some(at + chrono::Duration::nanoseconds(1500)),
        )
        .unwrap();
        assert_eq!(
            f.created.since,
            Some(at + chrono::Duration::microseconds(1))
        );
        assert_eq!(
            f.created.until,
            Some(at + chrono::Duration::microseconds(2))
        );
        // A memory at `at` is before since; one at `at` + 1us is inside.
        assert!(!f.matches(&memory(MemoryKind::Note, &[], "2026-11-01T00:00:00Z")));
        assert!(f.matches(&memory(
            MemoryKind::Note,
            &[],
            "2026-11-01T00:00:00.000001Z"
        )));
    }
}
