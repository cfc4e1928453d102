//! The parsers of what models answer (core/src/reader): the extraction, the arbiter's
//! verdict, the event time and the JSON finder they share (the benchmark's reader and
//! judge are property-tested in the bench crate). Any text must parse or be refused
//! without a panic, and what parses must keep the limits and shapes the callers rely on.

#![no_main]

use cortex_core::reader::extraction::{Extraction, parse_event_time, parse_extraction};
use cortex_core::reader::{arbiter, json};
use libfuzzer_sys::fuzz_target;

/// The parser's limits (private constants in extraction.rs).
const MAX_NAME_CHARS: usize = 200;
const MAX_ITEMS: usize = 32;

fuzz_target!(|data: &[u8]| {
    // Lossy, so that byte-level mutations still reach the parsers as text.
    let text = String::from_utf8_lossy(data);
    let text: &str = &text;

    let object = json::find_json_object(text);
    if let Some(object) = &object {
        let keys: Vec<String> = object.keys().take(4).cloned().collect();
        for key in keys
            .iter()
            .map(String::as_str)
            .chain(["event", "stale", "reason"])
        {
            for max in [1, 8, 64] {
                if let Some(s) = json::string_field(object, key, max) {
                    assert!(!s.is_empty() && s.chars().count() <= max, "{s:?}");
                }
            }
            let _ = json::array_field(object, key);
        }
    }

    // Every parser that needs an object fails exactly when the finder finds none.
    match parse_extraction(text) {
        Ok(extraction) => {
            assert!(object.is_some());
            check_extraction(&extraction);
        }
        Err(_) => assert!(object.is_none()),
    }

    for candidates in [0, 1, 3, text.len() % 64, usize::MAX] {
        match arbiter::parse_verdict(text, candidates) {
            Ok(verdict) => {
                assert!(object.is_some());
                for (i, index) in verdict.stale.iter().enumerate() {
                    assert!(*index < candidates, "{index} of {candidates}");
                    assert!(!verdict.stale[..i].contains(index), "repeated {index}");
                }
                assert!(!verdict.reason.is_empty());
                assert!(verdict.reason.chars().count() <= 500);
            }
            Err(_) => assert!(object.is_none()),
        }
    }

    let _ = parse_event_time(text);
});

fn check_extraction(e: &Extraction) {
    let name_ok = |name: &str| !name.is_empty() && name.chars().count() <= MAX_NAME_CHARS;
    if let Some(event) = &e.event {
        assert!(event.actor.as_deref().is_none_or(name_ok));
        assert!(event.location.as_deref().is_none_or(name_ok));
        if let Some(t) = &event.event_type {
            assert!(!t.is_empty() && *t == t.to_lowercase(), "{t:?}");
        }
    }
    assert!(e.subject.as_deref().is_none_or(name_ok));
    assert!(e.entities.len() <= MAX_ITEMS);
    for entity in &e.entities {
        assert!(name_ok(&entity.name), "{:?}", entity.name);
        assert!(entity.aliases.len() <= MAX_ITEMS);
        assert!(
            entity.aliases.iter().all(|a| name_ok(a)),
            "{:?}",
            entity.aliases
        );
        if let Some(t) = &entity.entity_type {
            assert!(!t.is_empty() && *t == t.to_lowercase(), "{t:?}");
        }
    }
    assert!(e.relationships.len() <= MAX_ITEMS);
    for r in &e.relationships {
        assert!(name_ok(&r.source) && name_ok(&r.target), "{r:?}");
        // snake_case: words joined by single underscores.
        let label = &r.label;
        assert!(
            !label.is_empty()
                && !label.starts_with('_')
                && !label.ends_with('_')
                && !label.contains("__"),
            "{label:?}"
        );
    }
}
