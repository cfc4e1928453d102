//! The results of a run: per question, averaged overall and per question type, as JSON
//! and as markdown tables.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use cortex_core::usage::ProviderUsage;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

use crate::backend::BackendKind;
use crate::half::Half;
use crate::ingest::{Granularity, Labels, Roles};
use crate::metrics::{KS, Scores, metric_names};
use crate::qa::QaOutcome;
use crate::retrieve::Retriever;

/// Version of the JSON layout below.
pub const REPORT_FORMAT: &str = "cortex-bench-longmemeval/1";

/// Named metric values in the official order (`recall_any@1`, `recall_all@1`,
/// `ndcg_any@1`, `recall_any@3`, ...), serialized as a JSON object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricMap(pub Vec<(String, f64)>);

impl MetricMap {
    /// The metrics of one ranking at every k.
    pub fn from_scores(at: &[(usize, Scores)]) -> Self {
        let mut out = Vec::with_capacity(at.len() * 3);
        for (k, s) in at {
            let [any, all, ndcg] = metric_names(*k);
            out.push((any, s.recall_any));
            out.push((all, s.recall_all));
            out.push((ndcg, s.ndcg_any));
        }
        Self(out)
    }

    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// The mean of each metric over `maps` (which all name the same metrics).
    pub fn mean<'a>(maps: impl IntoIterator<Item = &'a MetricMap>) -> Self {
        let mut sums: Vec<(String, f64)> = Vec::new();
        let mut count = 0usize;
        for map in maps {
            count += 1;
            if sums.is_empty() {
                sums = map.0.clone();
            } else {
                for ((_, sum), (_, v)) in sums.iter_mut().zip(&map.0) {
                    *sum += v;
                }
            }
        }
        if count > 0 {
            for (_, sum) in &mut sums {
                *sum /= count as f64;
            }
        }
        Self(sums)
    }
}

impl Serialize for MetricMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// One retriever's result on one question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionRetrieval {
    /// The first ten distinct session keys ranked.
    pub top_sessions: Vec<String>,
    /// The memories ranked, as positions among the question's memories, best first, and
    /// the session key each is scored under (for offline ablations).
    pub ranked: Vec<usize>,
    pub ranked_keys: Vec<String>,
    pub metrics: MetricMap,
    /// The ranking ended before ten distinct sessions although the haystack had more:
    /// a deeper `--top-k` would have been scored differently.
    pub depth_short: bool,
}

/// Everything recorded about one question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionResult {
    pub question_id: String,
    pub half: Half,
    pub question_type: String,
    pub abstention: bool,
    pub sessions: usize,
    /// Memories written (0 when the question was skipped).
    pub memories: usize,
    pub gold: Vec<String>,
    /// By retriever; empty for abstention questions (not scored for retrieval).
    pub retrieval: BTreeMap<Retriever, QuestionRetrieval>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qa: Option<QaOutcome>,
}

/// The settings a run used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunConfig {
    pub dataset: String,
    pub granularity: Granularity,
    pub roles: Roles,
    pub labels: Labels,
    pub backend: BackendKind,
    /// How many memories each retriever returned per question.
    pub depth: usize,
    pub ks: Vec<usize>,
    pub retrievers: Vec<Retriever>,
    pub embedding_model: String,
    pub embedding_dimension: usize,
    pub tier: String,
    pub limit: Option<usize>,
}

/// Question counts of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub questions: usize,
    /// Scored for retrieval (every non-abstention question).
    pub evaluated: usize,
    pub skipped_abstention: usize,
    /// Scored questions with no gold session in the corpus (the official script scores
    /// them recall_any 0, recall_all 1, nDCG 0).
    pub without_gold: usize,
    /// Memories written over the run.
    pub memories: usize,
}

/// A metric average over some questions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Averaged {
    pub questions: usize,
    pub metrics: MetricMap,
}

/// One retriever over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievalSummary {
    pub depth: usize,
    pub overall: Averaged,
    /// Keyed `tuning` and `held-out`.
    pub by_half: BTreeMap<&'static str, Averaged>,
    pub by_type: BTreeMap<String, Averaged>,
    pub depth_short: usize,
}

/// Judged answers over some questions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Accuracy {
    pub questions: usize,
    pub correct: usize,
    pub accuracy: f64,
}

impl Accuracy {
    fn of<'a>(outcomes: impl IntoIterator<Item = &'a QaOutcome>) -> Self {
        let (mut questions, mut correct) = (0, 0);
        for o in outcomes {
            questions += 1;
            correct += usize::from(o.correct);
        }
        let accuracy = if questions == 0 {
            0.0
        } else {
            correct as f64 / questions as f64
        };
        Self {
            questions,
            correct,
            accuracy,
        }
    }
}

/// The QA pass over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QaSummary {
    pub retriever: Retriever,
    pub reader_model: String,
    pub judge_model: String,
    pub reader_k: usize,
    pub reader_max_tokens: u32,
    pub overall: Accuracy,
    pub by_type: BTreeMap<String, Accuracy>,
    pub abstention: Accuracy,
}

/// How the QA pass was set up, for its summary.
#[derive(Debug, Clone, PartialEq)]
pub struct QaSetup {
    pub retriever: Retriever,
    pub reader_model: String,
    pub judge_model: String,
    pub reader_k: usize,
    pub reader_max_tokens: u32,
}

/// Provider cache effectiveness.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CacheStats {
    pub path: Option<String>,
    pub hits: u64,
    pub misses: u64,
}

/// The whole report, as written by `--out`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchReport {
    pub format: &'static str,
    pub created_at: String,
    pub config: RunConfig,
    pub counts: Counts,
    pub retrieval: BTreeMap<Retriever, RetrievalSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qa: Option<QaSummary>,
    pub usage: BTreeMap<String, ProviderUsage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheStats>,
    pub elapsed_seconds: f64,
    pub questions: Vec<QuestionResult>,
}

/// Averages per-question results into the run's summaries.
pub fn summarize(
    config: &RunConfig,
    results: &[QuestionResult],
    qa: Option<&QaSetup>,
) -> (
    Counts,
    BTreeMap<Retriever, RetrievalSummary>,
    Option<QaSummary>,
) {
    let scored: Vec<&QuestionResult> = results.iter().filter(|r| !r.abstention).collect();
    let counts = Counts {
        questions: results.len(),
        evaluated: scored.len(),
        skipped_abstention: results.len() - scored.len(),
        without_gold: scored.iter().filter(|r| r.gold.is_empty()).count(),
        memories: results.iter().map(|r| r.memories).sum(),
    };
    let mut retrieval = BTreeMap::new();
    for &retriever in &config.retrievers {
        let of = |r: &&QuestionResult| r.retrieval.get(&retriever).cloned();
        let all: Vec<QuestionRetrieval> = scored.iter().filter_map(of).collect();
        let mut by_type: BTreeMap<String, Vec<QuestionRetrieval>> = BTreeMap::new();
        let mut by_half: BTreeMap<&'static str, Vec<QuestionRetrieval>> = BTreeMap::new();
        for r in &scored {
            if let Some(q) = of(r) {
                by_half.entry(r.half.as_str()).or_default().push(q.clone());
                by_type.entry(r.question_type.clone()).or_default().push(q);
            }
        }
        let averaged = |list: &[QuestionRetrieval]| Averaged {
            questions: list.len(),
            metrics: MetricMap::mean(list.iter().map(|q| &q.metrics)),
        };
        retrieval.insert(
            retriever,
            RetrievalSummary {
                depth: config.depth,
                overall: averaged(&all),
                by_half: by_half
                    .iter()
                    .map(|(h, list)| (*h, averaged(list)))
                    .collect(),
                by_type: by_type
                    .iter()
                    .map(|(t, list)| (t.clone(), averaged(list)))
                    .collect(),
                depth_short: all.iter().filter(|q| q.depth_short).count(),
            },
        );
    }
    let qa = qa.map(|setup| {
        let mut by_type: BTreeMap<String, Vec<&QaOutcome>> = BTreeMap::new();
        for r in results {
            if let Some(o) = &r.qa {
                by_type.entry(r.question_type.clone()).or_default().push(o);
            }
        }
        QaSummary {
            retriever: setup.retriever,
            reader_model: setup.reader_model.clone(),
            judge_model: setup.judge_model.clone(),
            reader_k: setup.reader_k,
            reader_max_tokens: setup.reader_max_tokens,
            overall: Accuracy::of(results.iter().filter_map(|r| r.qa.as_ref())),
            by_type: by_type
                .into_iter()
                .map(|(t, list)| (t, Accuracy::of(list)))
                .collect(),
            abstention: Accuracy::of(
                results
                    .iter()
                    .filter(|r| r.abstention)
                    .filter_map(|r| r.qa.as_ref()),
            ),
        }
    });
    (counts, retrieval, qa)
}

/// The report as markdown: one overall table across retrievers, one per-type table for
/// each retriever, and the QA accuracy when there is one.
pub fn markdown(report: &BenchReport) -> String {
    let c = &report.config;
    let mut out = String::new();
    let roles = match c.roles {
        Roles::User => "user turns",
        Roles::All => "user and assistant turns",
    };
    let _ = writeln!(
        out,
        "LongMemEval retrieval on `{}`: {} questions scored ({} abstention skipped, {} \
         without gold), {} granularity over {roles}, {} labels, backend {}, depth {}, \
         embedder {} (dim {}), {} memories.\n",
        c.dataset,
        report.counts.evaluated,
        report.counts.skipped_abstention,
        report.counts.without_gold,
        name(&c.granularity),
        name(&c.labels),
        name(&c.backend),
        c.depth,
        c.embedding_model,
        c.embedding_dimension,
        report.counts.memories,
    );
    let header = metric_header();
    let _ = writeln!(out, "| retriever | half | n | {header} |");
    let _ = writeln!(out, "|---|---|---:|{}", "---:|".repeat(KS.len() * 3));
    half_rows(
        &mut out,
        report.retrieval.iter().map(|(r, s)| (r, &s.by_half)),
        metric_cells,
    );
    for (retriever, summary) in &report.retrieval {
        let _ = writeln!(
            out,
            "| {retriever} | all | {} | {} |",
            summary.overall.questions,
            metric_cells(&summary.overall.metrics)
        );
    }
    for (retriever, summary) in &report.retrieval {
        let _ = writeln!(out, "\nBy question type ({retriever}):\n");
        let _ = writeln!(out, "| question type | n | {header} |");
        let _ = writeln!(out, "|---|---:|{}", "---:|".repeat(KS.len() * 3));
        for (kind, averaged) in &summary.by_type {
            let _ = writeln!(
                out,
                "| {kind} | {} | {} |",
                averaged.questions,
                metric_cells(&averaged.metrics)
            );
        }
        if summary.depth_short > 0 {
            let _ = writeln!(
                out,
                "\n{retriever}: on {} questions the ranking held fewer than 10 distinct sessions \
                 while the haystack had more (depth {}; BM25 ranks only memories sharing a \
                 query term).",
                summary.depth_short, summary.depth
            );
        }
    }
    if let Some(qa) = &report.qa {
        let _ = writeln!(
            out,
            "\nQA ({} retrieval, top {} memories, reader {}, judge {}):\n",
            qa.retriever, qa.reader_k, qa.reader_model, qa.judge_model
        );
        let _ = writeln!(out, "| question type | n | correct | accuracy |");
        let _ = writeln!(out, "|---|---:|---:|---:|");
        for (kind, a) in &qa.by_type {
            let _ = writeln!(
                out,
                "| {kind} | {} | {} | {:.3} |",
                a.questions, a.correct, a.accuracy
            );
        }
        let a = &qa.abstention;
        let _ = writeln!(
            out,
            "| (abstention) | {} | {} | {:.3} |",
            a.questions, a.correct, a.accuracy
        );
        let a = &qa.overall;
        let _ = writeln!(
            out,
            "| **overall** | {} | {} | {:.3} |",
            a.questions, a.correct, a.accuracy
        );
    }
    out
}

/// Metric names grouped by metric (all recall_any, then recall_all, then nDCG), which
/// reads better across a row than the official k-major order.
fn table_columns() -> Vec<String> {
    (0..3)
        .flat_map(|m| KS.iter().map(move |k| metric_names(*k)[m].clone()))
        .collect()
}

fn metric_header() -> String {
    table_columns().join(" | ")
}

/// A value's serde name (`turn`, `official`, `sqlite`).
pub(crate) fn name<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn metric_cells(metrics: &MetricMap) -> String {
    table_columns()
        .into_iter()
        .map(|name| {
            metrics
                .get(&name)
                .map_or_else(|| "–".to_owned(), |v| format!("{v:.3}"))
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Appends a markdown row per half and retriever (`| retriever | half | n | cells |`),
/// the tuning half's rows first: `summaries` gives each retriever's averages by half.
pub fn half_rows<'a, R: std::fmt::Display + 'a>(
    out: &mut String,
    summaries: impl Iterator<Item = (&'a R, &'a BTreeMap<&'static str, Averaged>)> + Clone,
    cells: impl Fn(&MetricMap) -> String,
) {
    for half in [Half::Tuning, Half::HeldOut] {
        for (retriever, by_half) in summaries.clone() {
            if let Some(averaged) = by_half.get(half.as_str()) {
                let _ = writeln!(
                    out,
                    "| {retriever} | {} | {} | {} |",
                    half.as_str(),
                    averaged.questions,
                    cells(&averaged.metrics)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn metric_maps_keep_the_official_order_and_average() {
        let s = |v: f64| Scores {
            recall_any: v,
            recall_all: v / 2.0,
            ndcg_any: v / 4.0,
        };
        let a = MetricMap::from_scores(&[(1, s(1.0)), (3, s(0.0))]);
        let b = MetricMap::from_scores(&[(1, s(0.0)), (3, s(1.0))]);
        let names: Vec<&str> = a.0.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "recall_any@1",
                "recall_all@1",
                "ndcg_any@1",
                "recall_any@3",
                "recall_all@3",
                "ndcg_any@3"
            ]
        );
        let mean = MetricMap::mean([&a, &b]);
        assert_eq!(mean.get("recall_any@1"), Some(0.5));
        assert_eq!(mean.get("ndcg_any@3"), Some(0.125));
        let json = serde_json::to_string(&mean).unwrap();
        assert!(json.starts_with(r#"{"recall_any@1":0.5,"#), "{json}");
        assert_eq!(MetricMap::mean([]).0.len(), 0);
    }
}
