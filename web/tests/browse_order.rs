//! The Browse page's order is the `created_at` it shows, newest first, whole and a page
//! at a time: it was the order memories were stored in, so a memory dated in the past and
//! stored after a newer one stood above it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

mod support;

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use cortex_core::memory::MemoryKind;
use cortex_web::WebConfig;
use support::*;

fn date(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

/// Every memory id the Browse pages list, following the "Older" links from `/`.
async fn walk(app: &axum::Router, browser: &Browser) -> Vec<String> {
    let mut seen = Vec::new();
    let mut path = "/".to_owned();
    for _ in 0..10 {
        let page = browser.get(app, &path).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        seen.extend(memory_links(&page.body));
        let marker = r#"class="older" href=""#;
        let Some(start) = page.body.find(marker) else {
            return seen;
        };
        let rest = &page.body[start + marker.len()..];
        path = rest[..rest.find('"').unwrap()].replace("&amp;", "&");
    }
    panic!("the walk does not end: {seen:?}");
}

#[tokio::test]
async fn browse_is_newest_first_by_the_date_it_shows() {
    let engine = engine();
    let at = |content: &'static str, created: Option<&'static str>| {
        let engine = engine.clone();
        async move {
            engine
                .memory
                .memorize(
                    "ada",
                    content,
                    MemoryKind::Fact,
                    &[],
                    &cortex_core::engine::MemorizeOptions {
                        created_at: created.map(date),
                        ..Default::default()
                    },
                )
                .await
                .unwrap()
                .memory
                .id
                .to_string()
        }
    };
    let acme = at("Ada started at Acme", Some("2024-03-01T00:00:00Z")).await;
    let lisbon = at("Ada moved to Lisbon", None).await;
    // Stored last, dated first: it belongs at the bottom.
    let porto = at("Ada was born in Porto", Some("1990-05-17T00:00:00Z")).await;
    let expected = vec![lisbon, acme, porto];

    let whole = app(
        engine.clone(),
        secrets(&[("k", "ada")]),
        WebConfig::default(),
    );
    let ada = log_in(&whole, "k").await;
    assert_eq!(walk(&whole, &ada).await, expected);

    let paged = app(
        engine,
        secrets(&[("k", "ada")]),
        WebConfig {
            page_size: 1,
            ..WebConfig::default()
        },
    );
    let ada = log_in(&paged, "k").await;
    assert_eq!(walk(&paged, &ada).await, expected, "a page at a time");
}
