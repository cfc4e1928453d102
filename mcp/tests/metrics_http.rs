//! `/metrics` right after start: every series the server emits (`metrics::SERIES`) is
//! described and listed at zero before any call, so a dashboard plots zero instead of "no
//! data"; the providers' series, which the engine names, at zero once it is built.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

#[path = "support/mcp_http.rs"]
mod mcp_http;

use cortex_mcp::metrics::{DIRECTIONS, Kind, Labels, PROVIDER_KINDS, SERIES};
use mcp_http::{Client, Server, TestStore};
use serde_json::json;

const TOKEN: &str = "metrics-test-token-0123456789";

/// `{a="x",b="y"}`, as the exporter writes a label set (nothing for none).
fn label_text(labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    format!("{{{}}}", pairs.join(","))
}

/// The line of `name` at zero for `labels`: a histogram's count.
fn zero_line(name: &str, kind: Kind, labels: &[(&str, &str)]) -> String {
    let labels = label_text(labels);
    match kind {
        Kind::Histogram => format!("{name}_count{labels} 0\n"),
        Kind::Counter | Kind::Gauge => format!("{name}{labels} 0\n"),
    }
}

fn described(text: &str, name: &str, kind: Kind, help: &str) {
    assert!(
        text.contains(&format!("# HELP {name} {help}\n")),
        "no HELP for {name}:\n{text}"
    );
    assert!(
        text.contains(&format!("# TYPE {name} {}\n", kind.as_str())),
        "no TYPE for {name}:\n{text}"
    );
}

#[test]
fn a_scrape_before_any_call_lists_every_series_at_zero() {
    let store = TestStore::sqlite();
    let env = [&store.env()[..], &[("CORTEX_HTTP_TOKEN", TOKEN)]].concat();
    let server = Server::start(&env);

    let (status, _, text) = server.get("/metrics");
    assert_eq!(status, 200, "{text}");
    let mut providers = Vec::new();
    for series in SERIES {
        if series.labels == Labels::Provider {
            assert!(!text.contains(series.name), "no engine yet:\n{text}");
            providers.push(series);
            continue;
        }
        described(&text, series.name, series.kind, series.help);
        let sets = series.start_labels();
        assert!(!sets.is_empty(), "{}", series.name);
        for labels in sets {
            let line = zero_line(series.name, series.kind, &labels);
            assert!(text.contains(&line), "no {line:?} in:\n{text}");
        }
    }
    assert_eq!(providers.len(), 3);

    // Listing builds the engine and calls no provider: the providers' series are there,
    // at zero, for the one provider this server has.
    let client = Client::open(&server, TOKEN);
    client.ok("list_memories", json!({}));
    let (_, _, text) = server.get("/metrics");
    for series in providers {
        described(&text, series.name, series.kind, series.help);
    }
    for kind in PROVIDER_KINDS {
        let line = zero_line(
            "cortex_provider_calls_total",
            Kind::Counter,
            &[("provider", "fake"), ("kind", kind)],
        );
        assert!(text.contains(&line), "no {line:?} in:\n{text}");
    }
    for direction in DIRECTIONS {
        let line = zero_line(
            "cortex_provider_tokens_total",
            Kind::Counter,
            &[("provider", "fake"), ("direction", direction)],
        );
        assert!(text.contains(&line), "no {line:?} in:\n{text}");
    }
    let line = zero_line(
        "cortex_provider_failures_total",
        Kind::Counter,
        &[("provider", "fake")],
    );
    assert!(text.contains(&line), "no {line:?} in:\n{text}");
    assert!(text.contains("cortex_tool_calls_total{tool=\"list_memories\",outcome=\"ok\"} 1\n"));
}
