//! Reading what a page's query string and forms carry.

use cortex_app::FilterText;
use cortex_core::filter::MemoryFilter;

use crate::error::WebError;

/// The filter and position a Browse or Search page was asked for. Kinds may come as
/// repeated `kinds` keys (checkboxes); tags as repeated keys or comma-separated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListParams {
    pub q: String,
    pub kinds: Vec<String>,
    pub tags: Vec<String>,
    pub since: String,
    pub until: String,
    pub include_expired: bool,
    pub cursor: Option<String>,
}

impl ListParams {
    /// From a raw query string (absent: everything default).
    pub fn parse(query: Option<&str>) -> Self {
        let mut p = ListParams::default();
        let pairs = form_urlencoded::parse(query.unwrap_or_default().as_bytes());
        for (key, value) in pairs {
            match key.as_ref() {
                "q" => p.q = value.into_owned(),
                "kinds" => p.kinds.extend(words(&value)),
                "tags" => p.tags.extend(words(&value)),
                "since" => p.since = value.trim().to_owned(),
                "until" => p.until = value.trim().to_owned(),
                "expired" => p.include_expired = value == "on" || value == "yes",
                "cursor" if !value.trim().is_empty() => p.cursor = Some(value.into_owned()),
                _ => {}
            }
        }
        p
    }

    /// The checked filter.
    pub fn filter(&self) -> Result<MemoryFilter, WebError> {
        let mut filter = FilterText {
            kinds: &self.kinds,
            tags: &self.tags,
            tags_all: &[],
            since: Some(&self.since),
            until: Some(&self.until),
        }
        .parse()?;
        filter.include_expired = self.include_expired;
        Ok(filter)
    }

    /// This filter (and query) as a query string, with `cursor` when given.
    pub fn query_string(&self, cursor: Option<&str>) -> String {
        let mut s = form_urlencoded::Serializer::new(String::new());
        if !self.q.is_empty() {
            s.append_pair("q", &self.q);
        }
        for k in &self.kinds {
            s.append_pair("kinds", k);
        }
        if !self.tags.is_empty() {
            s.append_pair("tags", &self.tags.join(","));
        }
        if !self.since.is_empty() {
            s.append_pair("since", &self.since);
        }
        if !self.until.is_empty() {
            s.append_pair("until", &self.until);
        }
        if self.include_expired {
            s.append_pair("expired", "on");
        }
        if let Some(c) = cursor {
            s.append_pair("cursor", c);
        }
        s.finish()
    }
}

/// Comma-separated words from a text field: trimmed, blanks dropped.
pub fn words(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_the_query_string() {
        let p = ListParams::parse(Some(
            "kinds=fact&kinds=note&tags=a,+b&since=2024-01-01&expired=on&cursor=c1.9",
        ));
        assert_eq!(p.kinds, ["fact", "note"]);
        assert_eq!(p.tags, ["a", "b"]);
        assert!(p.include_expired);
        assert_eq!(p.cursor.as_deref(), Some("c1.9"));
        let again = ListParams::parse(Some(&p.query_string(p.cursor.as_deref())));
        assert_eq!(again, p);
        assert!(p.filter().is_ok());
        assert!(ListParams::parse(Some("kinds=facts")).filter().is_err());
    }
}
