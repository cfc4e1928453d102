//! A LoCoMo run's report: per question, averaged overall and per category, as JSON and
//! as markdown tables.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use cortex_core::usage::ProviderUsage;
use serde::Serialize;

use crate::backend::BackendKind;
use crate::half::Half;
use crate::locomo::dataset::category_name;
use crate::locomo::metrics::METRICS;
use crate::report::half_rows;
use crate::report::{Averaged, CacheStats, MetricMap, name};
use crate::retrieve::Retriever;

/// Version of the JSON layout below.
pub const LOCOMO_REPORT_FORMAT: &str = "cortex-bench-locomo/1";

/// The settings a run used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LocomoConfig {
    pub dataset: String,
    pub backend: BackendKind,
    /// The `limit` of every recall (and the depth of the ablations' lists).
    pub depth: usize,
    pub retrievers: Vec<Retriever>,
    pub embedding_model: String,
    pub embedding_dimension: usize,
    pub tier: String,
    pub limit: Option<usize>,
    /// How a turn is written as a memory.
    pub memory_template: &'static str,
}

/// Counts of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LocomoCounts {
    pub conversations: usize,
    /// Memories written (one per non-empty turn).
    pub memories: usize,
    pub questions: usize,
    /// Questions with at least one evidence turn found in their conversation.
    pub scored: usize,
    /// Questions whose evidence names no turn of the conversation (not scored).
    pub without_evidence: usize,
    /// Evidence ids that named no turn (dropped).
    pub unresolved_evidence: usize,
}

/// One retriever's result on one question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LocomoRetrieval {
    /// The `dia_id`s ranked, best first.
    pub ranked: Vec<String>,
    pub metrics: MetricMap,
}

/// Everything recorded about one question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LocomoQuestionResult {
    pub sample_id: String,
    /// Position among the sample's questions.
    pub index: usize,
    pub half: Half,
    pub question: String,
    pub category: u32,
    /// The evidence turns found in the conversation.
    pub evidence: Vec<String>,
    /// By retriever; empty when the question is not scored.
    pub retrieval: BTreeMap<Retriever, LocomoRetrieval>,
}

/// One retriever over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LocomoSummary {
    pub overall: Averaged,
    /// Keyed `tuning` and `held-out`.
    pub by_half: BTreeMap<&'static str, Averaged>,
    /// Keyed `"<n> <name>"` ("4 single-hop").
    pub by_category: BTreeMap<String, Averaged>,
}

/// The whole report, as written by `--out`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LocomoReport {
    pub format: &'static str,
    pub created_at: String,
    pub config: LocomoConfig,
    pub counts: LocomoCounts,
    pub retrieval: BTreeMap<Retriever, LocomoSummary>,
    pub usage: BTreeMap<String, ProviderUsage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheStats>,
    pub elapsed_seconds: f64,
    pub questions: Vec<LocomoQuestionResult>,
}

/// Averages the scored questions per retriever, overall and per category.
pub fn summarize(
    retrievers: &[Retriever],
    results: &[LocomoQuestionResult],
) -> BTreeMap<Retriever, LocomoSummary> {
    let averaged = |list: &[&MetricMap]| Averaged {
        questions: list.len(),
        metrics: MetricMap::mean(list.iter().copied()),
    };
    retrievers
        .iter()
        .map(|&retriever| {
            let mut all = Vec::new();
            let mut by_category: BTreeMap<String, Vec<&MetricMap>> = BTreeMap::new();
            let mut by_half: BTreeMap<&'static str, Vec<&MetricMap>> = BTreeMap::new();
            for r in results {
                if let Some(found) = r.retrieval.get(&retriever) {
                    all.push(&found.metrics);
                    by_half
                        .entry(r.half.as_str())
                        .or_default()
                        .push(&found.metrics);
                    by_category
                        .entry(format!("{} {}", r.category, category_name(r.category)))
                        .or_default()
                        .push(&found.metrics);
                }
            }
            let summary = LocomoSummary {
                overall: averaged(&all),
                by_half: by_half
                    .iter()
                    .map(|(h, list)| (*h, averaged(list)))
                    .collect(),
                by_category: by_category
                    .iter()
                    .map(|(c, list)| (c.clone(), averaged(list)))
                    .collect(),
            };
            (retriever, summary)
        })
        .collect()
}

/// The report as markdown: the retrievers overall, then each one by category.
pub fn markdown(report: &LocomoReport) -> String {
    let c = &report.config;
    let n = &report.counts;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "LoCoMo retrieval on `{}`: {} of {} questions scored ({} without an evidence turn), \
         {} conversations, {} memories (one per turn: `{}`), backend {}, recall limit {}, \
         embedder {} (dim {}).\n",
        c.dataset,
        n.scored,
        n.questions,
        n.without_evidence,
        n.conversations,
        n.memories,
        c.memory_template,
        name(&c.backend),
        c.depth,
        c.embedding_model,
        c.embedding_dimension,
    );
    let header = METRICS.map(|m| m.0).join(" | ");
    let rule = "---:|".repeat(METRICS.len());
    let _ = writeln!(out, "| retriever | half | n | {header} |");
    let _ = writeln!(out, "|---|---|---:|{rule}");
    half_rows(
        &mut out,
        report.retrieval.iter().map(|(r, s)| (r, &s.by_half)),
        cells,
    );
    for (retriever, summary) in &report.retrieval {
        let _ = writeln!(
            out,
            "| {retriever} | all | {} | {} |",
            summary.overall.questions,
            cells(&summary.overall.metrics)
        );
    }
    for (retriever, summary) in &report.retrieval {
        let _ = writeln!(out, "\nBy category ({retriever}):\n");
        let _ = writeln!(out, "| category | n | {header} |");
        let _ = writeln!(out, "|---|---:|{rule}");
        for (category, averaged) in &summary.by_category {
            let _ = writeln!(
                out,
                "| {category} | {} | {} |",
                averaged.questions,
                cells(&averaged.metrics)
            );
        }
    }
    out
}

fn cells(metrics: &MetricMap) -> String {
    METRICS
        .iter()
        .map(|(name, ..)| {
            metrics
                .get(name)
                .map_or_else(|| "–".to_owned(), |v| format!("{v:.3}"))
        })
        .collect::<Vec<_>>()
        .join(" | ")
}
