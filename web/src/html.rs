//! The layout every page shares and the pieces pages repeat. Markup is built with maud,
//! which escapes every interpolated value: a memory is always rendered as text. No
//! inline script or style anywhere: the stylesheet is `/assets/cortex.css`.

use chrono::{DateTime, Utc};
use cortex_core::memory::Memory;
use maud::{DOCTYPE, Markup, html};

use crate::auth::Session;

/// A whole page: `title`, the navigation when someone is logged in, and `body`.
pub fn layout(title: &str, session: Option<&Session>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content=(crate::policy::REFERRER);
                title { (title) " · Cortex" }
                link rel="stylesheet" href="/assets/cortex.css";
            }
            body {
                header.top {
                    span.brand { "Cortex" }
                    @if let Some(s) = session {
                        nav {
                            a href="/" { "Browse" }
                            a href="/search" { "Search" }
                            a href="/timeline" { "Timeline" }
                            a href="/graph" { "Graph" }
                            a href="/stats" { "Stats" }
                            a href="/export" { "Export" }
                        }
                        form.logout method="post" action="/logout" {
                            (csrf_field(s))
                            span.user { (s.user()) }
                            button type="submit" { "Log out" }
                        }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// The hidden field every form carries.
pub fn csrf_field(session: &Session) -> Markup {
    html! { input type="hidden" name="csrf" value=(session.csrf); }
}

/// An instant as pages show it.
pub fn when(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// An optional instant, `—` when absent.
pub fn when_opt(at: Option<DateTime<Utc>>) -> String {
    at.map(when).unwrap_or_else(|| "—".to_owned())
}

/// A memory's tags as small labels.
pub fn tags(memory: &Memory) -> Markup {
    html! {
        span.tags {
            @for t in &memory.tags { span.tag { (t) } " " }
        }
    }
}

/// A memory's content, as text, linked to its page.
pub fn content_link(memory: &Memory) -> Markup {
    html! {
        a.content href={ "/memory/" (memory.id) } { (memory.content) }
    }
}

/// The address of an entity's dossier.
pub fn entity_href(name: &str) -> String {
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("name", name)
        .finish();
    format!("/entity?{query}")
}

/// A byte count as people read it.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A relationship's label as people write it: the store keeps `works_on`, a page shows
/// "works on".
pub fn label(stored: &str) -> String {
    stored.replace('_', " ")
}
