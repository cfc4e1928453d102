//! `/timeline`: the episodic events, oldest first, on a time axis and as a list by day:
//! those callers gave with memorize and those the episodic layer extracted.

use axum::extract::{RawQuery, State};
use axum::response::Html;
use chrono::{DateTime, Utc};
use cortex_app::dates::parse_instant;
use cortex_core::records::{TimeRange, TimelineEntry};
use maud::{Markup, html};

use crate::error::WebError;
use crate::html::{content_link, layout};
use crate::security::CurrentSession;
use crate::state::WebState;

/// The axis' drawing width and height, in SVG units.
const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 70.0;
/// Room left and right of the first and last event.
const MARGIN: f64 = 30.0;
const TICKS: i32 = 6;

pub async fn page(
    State(state): State<WebState>,
    current: CurrentSession,
    RawQuery(query): RawQuery,
) -> Result<Html<String>, WebError> {
    let mut since = String::new();
    let mut until = String::new();
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "since" => since = value.trim().to_owned(),
            "until" => until = value.trim().to_owned(),
            _ => {}
        }
    }
    let bad = |e: cortex_app::dates::DateError| WebError::BadRequest(e.to_string());
    let range = TimeRange {
        since: parse_instant("since", Some(&since)).map_err(bad)?,
        until: parse_instant("until", Some(&until)).map_err(bad)?,
    };
    let limit = state.config.timeline_events;
    let entries = state
        .engine()
        .await?
        .memory
        .timeline(current.session.user(), &range, limit)
        .await?;
    let body = html! {
        form.filter method="get" action="/timeline" {
            label { "Since " input type="text" name="since" value=(since) placeholder="YYYY-MM-DD"; }
            label { "Until " input type="text" name="until" value=(until) placeholder="YYYY-MM-DD (exclusive)"; }
            button type="submit" { "Show" }
        }
        @if entries.is_empty() {
            p.empty {
                "No events here. Events come from memories stored with an event (memorize's "
                code { "event" } " argument) or, with the episodic layer on, from the model."
            }
        } @else {
            p.summary {
                (entries.len()) @if entries.len() == 1 { " event" } @else { " events" }
                @if entries.len() == limit { " (the first " (limit) "; narrow the dates to see later ones)" }
                "."
            }
            (axis(&entries))
            (list(&entries))
        }
    };
    Ok(Html(
        layout("Timeline", Some(&current.session), body).into_string(),
    ))
}

/// Where instant `t` falls on the axis from `first` to `last`.
fn x_of(t: DateTime<Utc>, first: DateTime<Utc>, last: DateTime<Utc>) -> f64 {
    let span = (last - first).num_seconds() as f64;
    if span <= 0.0 {
        return WIDTH / 2.0;
    }
    MARGIN + (t - first).num_seconds() as f64 / span * (WIDTH - 2.0 * MARGIN)
}

/// The events as dots on one time axis, each a link to its line in the list below.
fn axis(entries: &[TimelineEntry]) -> Markup {
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
        return html! {};
    };
    let (first, last) = (first.event.event_time, last.event.event_time);
    let span = last - first;
    let label = if span.num_days() > 2 * 365 {
        "%Y"
    } else if span.num_days() > 60 {
        "%Y-%m"
    } else {
        "%Y-%m-%d"
    };
    let ticks: Vec<DateTime<Utc>> = if span.num_seconds() <= 0 {
        vec![first]
    } else {
        (0..TICKS).map(|i| first + span * i / (TICKS - 1)).collect()
    };
    let mid = HEIGHT / 2.0;
    html! {
        svg.timeline viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } role="img" aria-label="Events on a time axis" {
            line.axis x1="0" y1=(mid) x2=(WIDTH) y2=(mid) {}
            @for t in &ticks {
                @let x = x_of(*t, first, last);
                line.tick x1=(x) y1=(mid - 6.0) x2=(x) y2=(mid + 6.0) {}
                text.tick x=(x) y=(HEIGHT - 4.0) text-anchor="middle" { (t.format(label)) }
            }
            @for (i, e) in entries.iter().enumerate() {
                a href={ "#event-" (i) } {
                    circle.event cx=(x_of(e.event.event_time, first, last)) cy=(mid) r="6" {
                        title { (e.event.event_time.format("%Y-%m-%d %H:%M")) ": " (e.memory.content) }
                    }
                }
            }
        }
    }
}

/// The events by day, with who, where and what kind, and the memory each came from.
fn list(entries: &[TimelineEntry]) -> Markup {
    html! {
        ol.timeline {
            @for (i, e) in entries.iter().enumerate() {
                @let day = e.event.event_time.format("%Y-%m-%d").to_string();
                @let new_day = i == 0 || entries[i - 1].event.event_time.format("%Y-%m-%d").to_string() != day;
                @if new_day { li.day { (day) } }
                li.event id={ "event-" (i) } {
                    span.time { (e.event.event_time.format("%H:%M")) }
                    " "
                    (content_link(&e.memory))
                    span.facts {
                        @if let Some(t) = &e.event.event_type { span.what { (t) } }
                        @if let Some(a) = &e.event.actor { span.who { "by " (a) } }
                        @if let Some(l) = &e.event.location { span.where { "at " (l) } }
                    }
                }
            }
        }
    }
}
