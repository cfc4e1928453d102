//! The ISO-8601 forms `recall_timeline` accepts for `since` and `until`.

use chrono::{DateTime, Datelike, NaiveDate, SecondsFormat, Utc};

/// A date argument that is neither an RFC 3339 datetime nor a plain `YYYY-MM-DD` date.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid {field}: {text:?} is not an ISO-8601 date; use YYYY-MM-DD (midnight UTC) or an \
     RFC 3339 datetime with a zone, such as 2024-05-01T14:30:00Z"
)]
pub struct DateError {
    pub field: &'static str,
    pub text: String,
}

/// Parses an optional date argument. Absent or blank means unbounded, because agents often
/// send `""` for an argument they mean to leave out.
pub fn parse_instant(
    field: &'static str,
    text: Option<&str>,
) -> Result<Option<DateTime<Utc>>, DateError> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let parsed = match DateTime::parse_from_rfc3339(text) {
        Ok(t) => Some(t.with_timezone(&Utc)),
        Err(_) => NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .map(|day| day.and_time(chrono::NaiveTime::MIN).and_utc()),
    };
    // Only the years 0000-9999 (UTC) RFC 3339 can write: `%Y` also reads "+10000" and
    // "-1", which the SQLite backend would compare as text out of order.
    match parsed.filter(|t| (0..=9999).contains(&t.year())) {
        Some(t) => Ok(Some(t)),
        None => Err(DateError {
            field,
            text: text.to_owned(),
        }),
    }
}

/// The one form every timestamp leaves the server in: RFC 3339, UTC, `Z`.
pub fn format_instant(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<DateTime<Utc>>, DateError> {
        parse_instant("since", Some(text))
    }

    #[test]
    fn plain_dates_are_midnight_utc() {
        let t = parse("2024-05-01").unwrap().unwrap();
        assert_eq!(format_instant(t), "2024-05-01T00:00:00Z");
    }

    #[test]
    fn rfc3339_datetimes_are_converted_to_utc() {
        let t = parse("2024-05-01T14:30:00+02:00").unwrap().unwrap();
        assert_eq!(format_instant(t), "2024-05-01T12:30:00Z");
        let t = parse("2024-05-01T14:30:00.250Z").unwrap().unwrap();
        assert_eq!(format_instant(t), "2024-05-01T14:30:00.250Z");
    }

    #[test]
    fn absent_or_blank_is_unbounded() {
        assert_eq!(parse_instant("until", None), Ok(None));
        assert_eq!(parse(" "), Ok(None));
    }

    #[test]
    fn malformed_dates_are_refused_with_the_field_and_the_forms() {
        for bad in [
            "yesterday",
            "2024-13-01",
            "2024-05-01T14:30:00",
            "01/05/2024",
            "+10000-01-01",
            "-1-01-01",
            "0000-01-01T00:00:00+01:00",
        ] {
            let err = parse(bad).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains("since") && msg.contains("YYYY-MM-DD"), "{msg}");
        }
    }
}
