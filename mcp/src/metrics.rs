//! Prometheus metrics at `/metrics`: tool calls by tool and outcome with their latency,
//! refused and rate-limited requests, the model providers' calls, tokens and failures, and
//! the index cache's hits, misses, evictions and size.
//! No label names a user: one series per user would grow with the user count and tell a
//! scraper who uses the server.
//!
//! Every series is in [`SERIES`], described and registered at zero when the recorder is
//! installed, so the first scrape already lists what a dashboard plots: a series that
//! appeared only at its first event read as "no data", not as zero. The providers' series
//! are named by the engine, which is built on the first call; they appear at zero then.
//!
//! The recorder is installed once per process by the HTTP server
//! ([`install`]); without it (stdio, tests) the `metrics` macros do nothing.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use cortex_core::error::CortexError;

use crate::engine::{EngineError, LazyEngine};
use crate::error::{Tool, ToolError};

/// Latency buckets in seconds: from a cached in-process recall to a slow model call.
const SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

const TOOL_CALLS: &str = "cortex_tool_calls_total";
const TOOL_SECONDS: &str = "cortex_tool_call_seconds";
const TOOL_ERRORS: &str = "cortex_tool_errors_total";
const STORE_ERRORS: &str = "cortex_store_errors_total";
const REFUSED: &str = "cortex_http_refused_total";
const PROVIDER_CALLS: &str = "cortex_provider_calls_total";
const PROVIDER_FAILURES: &str = "cortex_provider_failures_total";
const PROVIDER_TOKENS: &str = "cortex_provider_tokens_total";
const CACHE_HITS: &str = "cortex_cache_hits_total";
const CACHE_MISSES: &str = "cortex_cache_misses_total";
const CACHE_EVICTIONS: &str = "cortex_cache_evictions_total";
const CACHE_BYTES: &str = "cortex_cache_bytes";
const CACHE_USERS: &str = "cortex_cache_users";
const ENRICHMENT_FAILURES: &str = "cortex_enrichment_failures_total";
const RERANK_FAILURES: &str = "cortex_rerank_failures_total";
// Emitted by the Postgres store when it reads from hot standbys (cortex-postgres,
// `replicas/counters.rs`); a test holds these names and labels to that crate's.
const PG_READS: &str = "cortex_pg_reads_total";
const PG_REPLICA_SKIPS: &str = "cortex_pg_replica_skips_total";
const PG_REPLICAS_USABLE: &str = "cortex_pg_replicas_usable";

/// How a tool call ended (see [`tool_call`]).
pub const OUTCOMES: [&str; 3] = ["ok", "error", "invalid"];
/// Which side a failed call was (see [`tool_error`]).
pub const SIDES: [&str; 2] = ["server", "caller"];
/// Why a request was refused before MCP (see [`refused`]).
pub const REFUSALS: [&str; 7] = [
    "credentials",
    "rate_limit",
    "host",
    "origin",
    "foreign_session",
    "sessions",
    "user_sessions",
];
/// The provider operations counted (see [`render`]).
pub const PROVIDER_KINDS: [&str; 3] = ["embed", "generate", "rerank"];
/// The directions provider tokens are counted in.
pub const DIRECTIONS: [&str; 2] = ["input", "output"];
/// Where a Postgres read was served, with read replicas (see `cortex_postgres::ROUTES`).
pub const PG_READ_ROUTES: [&str; 5] = [
    "replica",
    "replica_waited",
    "primary_wait_expired",
    "primary_no_replica",
    "primary_failover",
];
/// Why a read replica was passed over (see `cortex_postgres::SKIP_REASONS`).
pub const PG_SKIP_REASONS: [&str; 3] = ["down", "lagging", "behind"];

/// What sort of series a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    /// The word in the exposition's `# TYPE` line.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// The label values a series has at start: every combination is registered at zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Labels {
    /// No label.
    None,
    /// The tool (every tool, and `unknown`).
    Tool,
    /// The tool and the outcome.
    ToolOutcome,
    /// One fixed label over these values.
    One(&'static str, &'static [&'static str]),
    /// Named by the engine's providers, so registered when the engine is built.
    Provider,
}

/// One metric the server emits.
#[derive(Debug, Clone, Copy)]
pub struct Series {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    pub labels: Labels,
}

/// Every metric the server emits. A name used anywhere else in this file must be here:
/// a test holds the file to it, so a new series is described and seen from the start.
pub const SERIES: &[Series] = &[
    Series {
        name: TOOL_CALLS,
        kind: Kind::Counter,
        help: "Tool calls by tool and outcome (ok, error: a tool result with isError, invalid: no tool ran).",
        labels: Labels::ToolOutcome,
    },
    Series {
        name: TOOL_SECONDS,
        kind: Kind::Histogram,
        help: "Time to answer a tool call, in seconds, by tool.",
        labels: Labels::Tool,
    },
    Series {
        name: TOOL_ERRORS,
        kind: Kind::Counter,
        help: "Failed tool calls by side: the server's (store, model, setup) or the caller's (arguments, scope).",
        labels: Labels::One("side", &SIDES),
    },
    Series {
        name: STORE_ERRORS,
        kind: Kind::Counter,
        help: "Tool calls that failed in the store.",
        labels: Labels::None,
    },
    Series {
        name: REFUSED,
        kind: Kind::Counter,
        help: "Requests refused before MCP, by reason.",
        labels: Labels::One("reason", &REFUSALS),
    },
    Series {
        name: PROVIDER_CALLS,
        kind: Kind::Counter,
        help: "Model provider calls by provider and kind (embed, generate, rerank).",
        labels: Labels::Provider,
    },
    Series {
        name: PROVIDER_FAILURES,
        kind: Kind::Counter,
        help: "Model provider calls that failed, by provider.",
        labels: Labels::Provider,
    },
    Series {
        name: PROVIDER_TOKENS,
        kind: Kind::Counter,
        help: "Tokens sent to and received from model providers, by provider and direction.",
        labels: Labels::Provider,
    },
    Series {
        name: CACHE_HITS,
        kind: Kind::Counter,
        help: "Recalls served from a cached index.",
        labels: Labels::None,
    },
    Series {
        name: CACHE_MISSES,
        kind: Kind::Counter,
        help: "Recalls that built or caught up an index.",
        labels: Labels::None,
    },
    Series {
        name: CACHE_EVICTIONS,
        kind: Kind::Counter,
        help: "Cached indexes dropped to stay within CORTEX_CACHE_MAX_BYTES.",
        labels: Labels::None,
    },
    Series {
        name: CACHE_BYTES,
        kind: Kind::Gauge,
        help: "Approximate heap bytes of the cached indexes.",
        labels: Labels::None,
    },
    Series {
        name: CACHE_USERS,
        kind: Kind::Gauge,
        help: "Users with a cached index.",
        labels: Labels::None,
    },
    Series {
        name: ENRICHMENT_FAILURES,
        kind: Kind::Counter,
        help: "Extraction or arbiter calls that failed, timed out or returned garbage (the memory is kept).",
        labels: Labels::None,
    },
    Series {
        name: RERANK_FAILURES,
        kind: Kind::Counter,
        help: "Rerank calls that failed or timed out (recall returned the fused order).",
        labels: Labels::None,
    },
    Series {
        name: PG_READS,
        kind: Kind::Counter,
        help: "Postgres reads with read replicas (CORTEX_DATABASE_READ_URL), by where they were served: a replica at once or after waiting for the user's last write, or the primary because the wait ran out, no replica served, or the replica failed.",
        labels: Labels::One("route", &PG_READ_ROUTES),
    },
    Series {
        name: PG_REPLICA_SKIPS,
        kind: Kind::Counter,
        help: "Read replicas passed over when a read chose one, by reason (down, lagging past CORTEX_PG_REPLICA_MAX_LAG_MS, behind a write it may have missed).",
        labels: Labels::One("reason", &PG_SKIP_REASONS),
    },
    Series {
        name: PG_REPLICAS_USABLE,
        kind: Kind::Gauge,
        help: "Read replicas up and within the lag bound, as last probed.",
        labels: Labels::None,
    },
];

impl Series {
    /// The label sets registered at zero when the recorder is installed (none for the
    /// providers' series).
    pub fn start_labels(&self) -> Vec<Vec<(&'static str, &'static str)>> {
        let tools = Tool::ALL.map(Tool::name).into_iter().chain(["unknown"]);
        match self.labels {
            Labels::None => vec![Vec::new()],
            Labels::Tool => tools.map(|tool| vec![("tool", tool)]).collect(),
            Labels::ToolOutcome => tools
                .flat_map(|tool| OUTCOMES.map(|outcome| vec![("tool", tool), ("outcome", outcome)]))
                .collect(),
            Labels::One(label, values) => values.iter().map(|v| vec![(label, *v)]).collect(),
            Labels::Provider => Vec::new(),
        }
    }
}

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder for this process, with every series described and
/// registered at zero; later calls return the first one.
pub fn install() -> Result<PrometheusHandle, String> {
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets(SECONDS)
        .map_err(|e| e.to_string())?
        .install_recorder()
        .map_err(|e| e.to_string())?;
    for series in SERIES {
        describe(series);
        for labels in series.start_labels() {
            register(series, &labels);
        }
    }
    Ok(HANDLE.get_or_init(|| handle).clone())
}

fn describe(series: &Series) {
    match series.kind {
        Kind::Counter => metrics::describe_counter!(series.name, series.help),
        Kind::Gauge => metrics::describe_gauge!(series.name, series.help),
        Kind::Histogram => {
            metrics::describe_histogram!(series.name, metrics::Unit::Seconds, series.help)
        }
    }
}

/// Registering a series makes the exporter list it, at zero, before its first event.
fn register(series: &Series, labels: &[(&'static str, &'static str)]) {
    let labels: Vec<metrics::Label> = labels
        .iter()
        .map(|(k, v)| metrics::Label::new(*k, *v))
        .collect();
    match series.kind {
        Kind::Counter => metrics::counter!(series.name, labels).increment(0),
        Kind::Gauge => metrics::gauge!(series.name, labels).set(0.0),
        // A histogram without samples is listed with empty buckets.
        Kind::Histogram => drop(metrics::histogram!(series.name, labels)),
    }
}

/// One tool call: its outcome is `ok`, `error` (a tool result with `isError`) or
/// `invalid` (no tool ran). A name that is none of the tools counts as `unknown`: the
/// label set stays fixed whatever a client sends.
pub fn tool_call(tool: &str, outcome: &'static str, took: Duration) {
    let tool = Tool::named(tool).map_or("unknown", Tool::name);
    metrics::counter!(TOOL_CALLS, "tool" => tool, "outcome" => outcome).increment(1);
    metrics::histogram!(TOOL_SECONDS, "tool" => tool).record(took.as_secs_f64());
}

/// Why a tool call failed: the server's side (store, model, setup) or the caller's
/// (arguments, scope); store failures are counted on their own too.
pub fn tool_error(err: &ToolError) {
    let side = if err.is_server_side() {
        "server"
    } else {
        "caller"
    };
    metrics::counter!(TOOL_ERRORS, "side" => side).increment(1);
    let store = match err {
        ToolError::Engine { error, .. } => matches!(error, CortexError::Store(_)),
        ToolError::NotConfigured(EngineError::Store(_)) => true,
        _ => false,
    };
    if store {
        metrics::counter!(STORE_ERRORS).increment(1);
    }
}

/// A request refused before MCP, by `reason` (one of [`REFUSALS`]).
pub fn refused(reason: &'static str) {
    metrics::counter!(REFUSED, "reason" => reason).increment(1);
}

/// The text a scrape gets: the recorded series, and the providers' counters as the
/// engine has them now (when it has been built; a provider not called yet at zero).
pub fn render(handle: &PrometheusHandle, engine: &LazyEngine) -> String {
    if let Some(engine) = engine.built() {
        let mut usage = engine.memory.usage();
        for provider in engine.memory.providers() {
            usage.entry(provider).or_default();
        }
        for (provider, usage) in usage {
            let calls = [usage.embed_calls, usage.generate_calls, usage.rerank_calls];
            for (kind, calls) in PROVIDER_KINDS.into_iter().zip(calls) {
                metrics::counter!(PROVIDER_CALLS, "provider" => provider.clone(), "kind" => kind)
                    .absolute(calls);
            }
            metrics::counter!(PROVIDER_FAILURES, "provider" => provider.clone())
                .absolute(usage.failed_calls);
            let tokens = [usage.input_tokens, usage.output_tokens];
            for (direction, tokens) in DIRECTIONS.into_iter().zip(tokens) {
                metrics::counter!(PROVIDER_TOKENS, "provider" => provider.clone(), "direction" => direction)
                    .absolute(tokens);
            }
        }
        let cache = engine.memory.cache_stats();
        metrics::counter!(CACHE_HITS).absolute(cache.hits);
        metrics::counter!(CACHE_MISSES).absolute(cache.misses);
        metrics::counter!(CACHE_EVICTIONS).absolute(cache.evictions);
        metrics::gauge!(CACHE_BYTES).set(cache.bytes as f64);
        metrics::gauge!(CACHE_USERS).set(cache.users as f64);
        metrics::counter!(ENRICHMENT_FAILURES).absolute(engine.memory.enrichment_failures());
        metrics::counter!(RERANK_FAILURES).absolute(engine.memory.rerank_failures());
    }
    handle.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quoted strings of `source` that look like a metric name.
    fn metric_names(source: &str) -> Vec<&str> {
        source
            .split('"')
            .skip(1)
            .step_by(2)
            .filter(|s| {
                s.starts_with("cortex_") && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
            })
            .collect()
    }

    #[test]
    fn every_name_in_this_file_is_a_listed_series() {
        let listed: Vec<&str> = SERIES.iter().map(|s| s.name).collect();
        let source = include_str!("metrics.rs");
        let tests_start = source.find("#[cfg(test)]").unwrap_or(source.len());
        for name in metric_names(&source[..tests_start]) {
            assert!(
                listed.contains(&name),
                "{name} is emitted but not in SERIES"
            );
        }
        let mut sorted = listed.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), listed.len(), "a series listed twice");
    }

    /// The Postgres store emits its replica series itself: their names and label values
    /// here are that crate's.
    #[test]
    fn the_postgres_replica_series_are_listed_as_emitted() {
        let listed: Vec<&str> = SERIES.iter().map(|s| s.name).collect();
        for name in cortex_postgres::REPLICA_SERIES {
            assert!(
                listed.contains(&name),
                "{name} is emitted but not in SERIES"
            );
        }
        assert_eq!(
            [PG_READS, PG_REPLICA_SKIPS, PG_REPLICAS_USABLE],
            [
                cortex_postgres::READS_SERIES,
                cortex_postgres::SKIPS_SERIES,
                cortex_postgres::USABLE_SERIES
            ]
        );
        assert_eq!(PG_READ_ROUTES, cortex_postgres::ROUTES);
        assert_eq!(PG_SKIP_REASONS, cortex_postgres::SKIP_REASONS);
    }

    #[test]
    fn every_refusal_reason_is_registered_at_start() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let marker = "metrics::refused(\"";
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let source = std::fs::read_to_string(&path).unwrap_or_default();
            for part in source.split(marker).skip(1) {
                let reason = &part[..part.find('"').unwrap()];
                assert!(
                    REFUSALS.contains(&reason),
                    "{}: refused({reason:?}) is not in REFUSALS",
                    path.display()
                );
            }
        }
    }
}
