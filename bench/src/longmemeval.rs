//! The LongMemEval harness (LoCoMo's is in [`locomo`](crate::locomo)). Each question's
//! haystack goes into a fresh store through the engine, each retriever ranks it for the question, and the rankings
//! are scored at session level as the official evaluation scores them; optionally the
//! Chain-of-Note reader answers and an LLM judge grades.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::chain_of_note::ReaderMemory;
use cortex_core::{
    engine::CortexMemory, engine::EngineConfig, provider::LLMProvider, provider::TokenUsage,
    reranker::Reranker, store::MemoryStore, usage::ProviderUsage,
};

use crate::backend::Backend;
use crate::dataset::Question;
use crate::error::BenchError;
use crate::ingest::{Corpus, CorpusOptions, build_corpus, ingest, warm};
use crate::metrics::{KS, distinct_sessions, evaluate_sessions};
use crate::qa::{QaSettings, answer_and_judge};
use crate::report::{MetricMap, QuestionResult, QuestionRetrieval};
use crate::retrieve::{Ranker, Retriever, positions};

/// Sessions listed per question in the report, and the largest k scored.
const TOP_SESSIONS: usize = 10;

/// What a run does with each question.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub corpus: CorpusOptions,
    /// Memories each retriever returns per question.
    pub depth: usize,
    /// In order; the first one feeds the QA reader.
    pub retrievers: Vec<Retriever>,
    pub engine: EngineConfig,
    /// Where to append each question's scored lists (`--lists`).
    pub lists: Option<std::path::PathBuf>,
}

/// The models a run calls.
#[derive(Debug, Clone)]
pub struct RunModels {
    pub embedder: Arc<dyn LLMProvider>,
    /// Embed each question's memories in batches first (only useful through a cache).
    pub warm: bool,
    pub qa: Option<QaSettings>,
    /// For the `reranked` retriever.
    pub reranker: Option<Arc<dyn Reranker>>,
}

impl RunModels {
    /// The engine the `reranked` retriever recalls with: `engine`'s store, embedder and
    /// settings plus the reranker; `None` without one.
    pub(crate) fn reranked_engine(
        &self,
        store: &Arc<dyn MemoryStore>,
        config: &EngineConfig,
    ) -> Option<CortexMemory> {
        self.reranker.as_ref().map(|reranker| {
            CortexMemory::with_config(store.clone(), self.embedder.clone(), config.clone())
                .with_reranker(reranker.clone())
        })
    }
}

/// Provider calls and tokens by provider name. Calls answered by the cache count as
/// calls that spent no tokens.
pub type Usage = BTreeMap<String, ProviderUsage>;

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutput {
    pub results: Vec<QuestionResult>,
    pub usage: Usage,
}

/// Runs every question on `backend`; `done` is told after each one.
pub async fn run(
    questions: &[Question],
    options: &RunOptions,
    models: &RunModels,
    backend: &Backend,
    done: &mut dyn FnMut(&Question),
) -> Result<RunOutput, BenchError> {
    require_retrievers(&options.retrievers)?;
    let mut output = RunOutput {
        results: Vec::with_capacity(questions.len()),
        usage: Usage::new(),
    };
    for (index, question) in questions.iter().enumerate() {
        let result =
            run_question(index, question, options, models, backend, &mut output.usage).await?;
        output.results.push(result);
        done(question);
    }
    Ok(output)
}

async fn run_question(
    index: usize,
    question: &Question,
    options: &RunOptions,
    models: &RunModels,
    backend: &Backend,
    usage: &mut Usage,
) -> Result<QuestionResult, BenchError> {
    let corpus = build_corpus(question, &options.corpus);
    let mut result = QuestionResult {
        question_id: question.question_id.clone(),
        half: crate::half::Half::of(index),
        question_type: question.question_type.clone(),
        abstention: question.is_abstention(),
        sessions: question.haystack_sessions.len(),
        memories: corpus.units.len(),
        gold: corpus.gold.iter().cloned().collect(),
        retrieval: BTreeMap::new(),
        qa: None,
    };
    // Abstention questions are not scored for retrieval; only QA needs their haystack.
    if result.abstention && models.qa.is_none() {
        result.memories = 0;
        return Ok(result);
    }

    let slot = backend.question(index)?;
    let engine = CortexMemory::with_config(
        slot.store.clone(),
        models.embedder.clone(),
        options.engine.clone(),
    );
    if models.warm {
        let (calls, spent) = warm(&models.embedder, &corpus).await?;
        record(usage, models.embedder.name(), calls, 0, spent);
    }
    let ids = ingest(&engine, &slot.user, &question.question_id, &corpus).await?;
    let by_id: HashMap<_, _> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let keys = corpus.keys();
    let reranked = models.reranked_engine(&slot.store, &options.engine);
    let mut ranker = Ranker::new(
        &engine,
        reranked.as_ref(),
        &slot.store,
        &models.embedder,
        &slot.user,
        &question.question_id,
    );
    if let (Some(path), false) = (&options.lists, result.abstention) {
        let gold: Vec<usize> = (0..corpus.units.len())
            .filter(|&i| corpus.gold.contains(&corpus.units[i].key))
            .collect();
        let sessions: Vec<usize> = corpus.units.iter().map(|u| u.session).collect();
        ranker
            .write_lists(
                path,
                &question.question,
                &by_id,
                &gold,
                &sessions,
                &question.question_id,
            )
            .await?;
    }
    let mut reader_ranking = None;
    for (n, &retriever) in options.retrievers.iter().enumerate() {
        let needed_for_qa = n == 0 && models.qa.is_some();
        if result.abstention && !needed_for_qa {
            continue;
        }
        let ranked = ranker
            .rank(retriever, &question.question, options.depth)
            .await?;
        let ranking = positions(&ranked, &by_id);
        if !result.abstention {
            result
                .retrieval
                .insert(retriever, score(&ranking, &keys, &corpus));
        }
        if needed_for_qa {
            reader_ranking = Some(ranking);
        }
    }
    if let (Some(settings), Some(ranking)) = (&models.qa, reader_ranking) {
        result.qa = Some(read_and_judge(settings, question, &corpus, &ranking, usage).await?);
    }
    record(
        usage,
        models.embedder.name(),
        ranker.query_embeds,
        0,
        ranker.query_tokens,
    );
    drop(ranker);
    merge_engine_usage(usage, &engine);
    drop(engine);
    slot.finish();
    Ok(result)
}

/// The reader answers from the memories `ranking` puts first and the judge grades it; both
/// calls go into `usage`.
async fn read_and_judge(
    settings: &QaSettings,
    question: &Question,
    corpus: &Corpus,
    ranking: &[usize],
    usage: &mut Usage,
) -> Result<crate::qa::QaOutcome, BenchError> {
    let memories: Vec<ReaderMemory<'_>> = ranking
        .iter()
        .map(|&i| {
            let unit = &corpus.units[i];
            ReaderMemory {
                date: question
                    .session_date(unit.session)
                    .unwrap_or("unknown date"),
                content: &unit.content,
            }
        })
        .collect();
    let (outcome, [read, judged]) = answer_and_judge(settings, question, &memories).await?;
    record(usage, settings.reader.name(), 0, 1, read);
    record(usage, settings.judge.name(), 0, 1, judged);
    Ok(outcome)
}

/// One ranking's session-level metrics at every k.
fn score(ranking: &[usize], keys: &[&str], corpus: &Corpus) -> QuestionRetrieval {
    let at: Vec<_> = KS
        .iter()
        .map(|&k| (k, evaluate_sessions(ranking, keys, &corpus.gold, k)))
        .collect();
    let top = distinct_sessions(ranking, keys, TOP_SESSIONS);
    let available = keys.iter().collect::<HashSet<_>>().len();
    QuestionRetrieval {
        top_sessions: top.iter().map(|s| (*s).to_owned()).collect(),
        ranked: ranking.to_vec(),
        ranked_keys: ranking
            .iter()
            .filter_map(|&i| keys.get(i).map(|k| (*k).to_owned()))
            .collect(),
        metrics: MetricMap::from_scores(&at),
        depth_short: top.len() < TOP_SESSIONS.min(available) && ranking.len() < keys.len(),
    }
}

/// A run ranks with at least one retriever.
pub(crate) fn require_retrievers(retrievers: &[Retriever]) -> Result<(), BenchError> {
    if retrievers.is_empty() {
        return Err(BenchError::option(
            "--retriever",
            "name at least one retriever",
        ));
    }
    Ok(())
}

/// Adds what the engine's providers spent to `usage`.
pub(crate) fn merge_engine_usage(usage: &mut Usage, engine: &CortexMemory) {
    for (name, spent) in engine.usage() {
        let total = usage.entry(name).or_default();
        total.embed_calls += spent.embed_calls;
        total.generate_calls += spent.generate_calls;
        total.rerank_calls += spent.rerank_calls;
        total.failed_calls += spent.failed_calls;
        total.input_tokens += spent.input_tokens;
        total.output_tokens += spent.output_tokens;
    }
}

pub(crate) fn record(
    usage: &mut Usage,
    provider: &str,
    embeds: u64,
    generates: u64,
    tokens: TokenUsage,
) {
    if embeds == 0 && generates == 0 {
        return;
    }
    let total = usage.entry(provider.to_owned()).or_default();
    total.embed_calls += embeds;
    total.generate_calls += generates;
    total.input_tokens += tokens.input_tokens;
    total.output_tokens += tokens.output_tokens;
}
