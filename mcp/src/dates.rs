//! The ISO-8601 forms `recall_timeline` accepts for `since` and `until`.

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};

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
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(Some(t.with_timezone(&Utc)));
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(Some(day.and_time(chrono::NaiveTime::MIN).and_utc()));
    }
    Err(DateError {
        field,
        text: text.to_owned(),
    })
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
        ] {
            let err = parse(bad).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains("since") && msg.contains("YYYY-MM-DD"), "{msg}");
        }
    }
}
