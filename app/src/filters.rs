//! A filter from the words a caller types (an agent's tool arguments, a command's flags),
//! parsed the same way for the MCP tools and the `cortex` command.

use cortex_core::{error::CortexError, filter::MemoryFilter, memory::MemoryKind};

use crate::dates::{DateError, parse_instant};

/// What a recall or list filter was given, as text.
#[derive(Debug, Clone, Copy, Default)]
pub struct FilterText<'a> {
    pub kinds: &'a [String],
    pub tags: &'a [String],
    pub tags_all: &'a [String],
    pub since: Option<&'a str>,
    pub until: Option<&'a str>,
}

/// A filter argument that is not usable; nothing was read or written.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    #[error(transparent)]
    Date(#[from] DateError),
    #[error(transparent)]
    Invalid(#[from] CortexError),
}

impl FilterText<'_> {
    /// The checked filter: known kinds, dates in the forms `parse_instant` reads (a plain
    /// date is midnight UTC; `until` is exclusive), `since` before `until`, tags as
    /// memorize normalises them.
    pub fn parse(&self) -> Result<MemoryFilter, FilterError> {
        let kinds = self
            .kinds
            .iter()
            .filter(|k| !k.trim().is_empty())
            .map(|k| {
                k.parse::<MemoryKind>().map_err(|e| match e {
                    CortexError::InvalidInput { reason, .. } => CortexError::InvalidInput {
                        field: "kinds",
                        reason,
                    },
                    other => other,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let since = parse_instant("since", self.since)?;
        let until = parse_instant("until", self.until)?;
        Ok(MemoryFilter::new(
            &kinds,
            self.tags,
            self.tags_all,
            since,
            until,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_every_part() {
        let kinds = strings(&["Decision", "fact", ""]);
        let tags = strings(&["Billing"]);
        let f = FilterText {
            kinds: &kinds,
            tags: &tags,
            tags_all: &[],
            since: Some("2026-11-01"),
            until: Some("2026-12-01T00:00:00Z"),
        }
        .parse()
        .unwrap();
        assert_eq!(f.kinds, [MemoryKind::Fact, MemoryKind::Decision]);
        assert_eq!(f.tags, ["billing"]);
        assert!(f.created.since.is_some() && f.created.until.is_some());
        assert!(FilterText::default().parse().unwrap().is_empty());
    }

    #[test]
    fn bad_parts_name_their_field() {
        let kinds = strings(&["facts"]);
        let got = FilterText {
            kinds: &kinds,
            ..FilterText::default()
        }
        .parse();
        assert!(
            matches!(
                got,
                Err(FilterError::Invalid(CortexError::InvalidInput {
                    field: "kinds",
                    ..
                }))
            ),
            "{got:?}"
        );
        let got = FilterText {
            since: Some("last week"),
            ..FilterText::default()
        }
        .parse();
        assert!(matches!(
            got,
            Err(FilterError::Date(DateError { field: "since", .. }))
        ));
        let got = FilterText {
            since: Some("2026-12-02"),
            until: Some("2026-12-01"),
            ..FilterText::default()
        }
        .parse();
        assert!(
            matches!(
                got,
                Err(FilterError::Invalid(CortexError::InvalidInput {
                    field: "since",
                    ..
                }))
            ),
            "{got:?}"
        );
    }
}
