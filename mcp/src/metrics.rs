//! Prometheus metrics at `/metrics`: tool calls by tool and outcome with their latency,
//! refused and rate-limited requests, the model providers' calls, tokens and failures, and
//! the index cache's hits, misses, evictions and size.
//! No label names a user: one series per user would grow with the user count and tell a
//! scraper who uses the server.
//!
//! The recorder is installed once per process by the HTTP server
//! ([`install`]); without it (stdio, tests) the `metrics` macros do nothing.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use cortex_core::CortexError;

use crate::engine::{EngineError, LazyEngine};
use crate::error::{Tool, ToolError};

/// Latency buckets in seconds: from a cached in-process recall to a slow model call.
const SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder for this process; later calls return the first one.
pub fn install() -> Result<PrometheusHandle, String> {
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets(SECONDS)
        .map_err(|e| e.to_string())?
        .install_recorder()
        .map_err(|e| e.to_string())?;
    Ok(HANDLE.get_or_init(|| handle).clone())
}

/// One tool call: its outcome is `ok`, `error` (a tool result with `isError`) or
/// `invalid` (no tool ran). A name that is none of the tools counts as `unknown`: the
/// label set stays fixed whatever a client sends.
pub fn tool_call(tool: &str, outcome: &'static str, took: Duration) {
    let tool = Tool::named(tool).map_or("unknown", Tool::name);
    metrics::counter!("cortex_tool_calls_total", "tool" => tool, "outcome" => outcome).increment(1);
    metrics::histogram!("cortex_tool_call_seconds", "tool" => tool).record(took.as_secs_f64());
}

/// Why a tool call failed: the server's side (store, model, setup) or the caller's
/// (arguments, scope); store failures are counted on their own too.
pub fn tool_error(err: &ToolError) {
    let side = if err.is_server_side() {
        "server"
    } else {
        "caller"
    };
    metrics::counter!("cortex_tool_errors_total", "side" => side).increment(1);
    let store = match err {
        ToolError::Engine { error, .. } => matches!(error, CortexError::Store(_)),
        ToolError::NotConfigured(EngineError::Store(_)) => true,
        _ => false,
    };
    if store {
        metrics::counter!("cortex_store_errors_total").increment(1);
    }
}

/// A request refused before MCP, by `reason` (`credentials`, `rate_limit`, `host`).
pub fn refused(reason: &'static str) {
    metrics::counter!("cortex_http_refused_total", "reason" => reason).increment(1);
}

/// The text a scrape gets: the recorded series, and the providers' counters as the
/// engine has them now (when it has been built).
pub fn render(handle: &PrometheusHandle, engine: &LazyEngine) -> String {
    if let Some(engine) = engine.built() {
        for (provider, usage) in engine.memory.usage() {
            let series = [
                ("embed", usage.embed_calls),
                ("generate", usage.generate_calls),
                ("rerank", usage.rerank_calls),
            ];
            for (kind, calls) in series {
                metrics::counter!("cortex_provider_calls_total", "provider" => provider.clone(), "kind" => kind)
                    .absolute(calls);
            }
            metrics::counter!("cortex_provider_failures_total", "provider" => provider.clone())
                .absolute(usage.failed_calls);
            metrics::counter!("cortex_provider_tokens_total", "provider" => provider.clone(), "direction" => "input")
                .absolute(usage.input_tokens);
            metrics::counter!("cortex_provider_tokens_total", "provider" => provider, "direction" => "output")
                .absolute(usage.output_tokens);
        }
        let cache = engine.memory.cache_stats();
        metrics::counter!("cortex_cache_hits_total").absolute(cache.hits);
        metrics::counter!("cortex_cache_misses_total").absolute(cache.misses);
        metrics::counter!("cortex_cache_evictions_total").absolute(cache.evictions);
        metrics::gauge!("cortex_cache_bytes").set(cache.bytes as f64);
        metrics::gauge!("cortex_cache_users").set(cache.users as f64);
        metrics::counter!("cortex_enrichment_failures_total")
            .absolute(engine.memory.enrichment_failures());
        metrics::counter!("cortex_rerank_failures_total").absolute(engine.memory.rerank_failures());
    }
    handle.render()
}
