//! The date arguments of `recall_timeline` (app/src/dates.rs) and the event times models
//! write (core/src/reader/extraction.rs). Nothing may panic, and a date that parses comes
//! back as the same instant from its RFC 3339 form.

#![no_main]

use chrono::{DateTime, SecondsFormat, Utc};
use cortex_app::dates::{format_instant, parse_instant};
use cortex_core::reader::extraction::parse_event_time;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };

    match parse_instant("since", Some(text)) {
        Ok(Some(t)) => {
            let formatted = format_instant(t);
            assert_eq!(
                parse_instant("since", Some(&formatted)),
                Ok(Some(t)),
                "{text:?} -> {formatted:?}"
            );
            // Every form the server accepts is one models may write as an event time.
            assert_eq!(parse_event_time(text), Some(t), "{text:?}");
        }
        Ok(None) => assert!(text.trim().is_empty(), "{text:?}"),
        Err(e) => {
            assert_eq!(e.text, text.trim());
            assert!(e.to_string().contains("since"));
        }
    }

    if let Some(t) = parse_event_time(text) {
        for formatted in [rfc3339(t), t.to_rfc3339()] {
            assert_eq!(
                parse_event_time(&formatted),
                Some(t),
                "{text:?} -> {formatted:?}"
            );
        }
    }
});

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}
