//! `cortex-bench --format locomo`: each LoCoMo conversation goes into its own store (one
//! user) through `memorize`, one memory per turn, and each of its questions is ranked by
//! each retriever and scored by its evidence turns, at turn and at session level.

pub mod dataset;
pub mod memory_set;
pub mod metrics;
pub mod report;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cortex_core::{engine::CortexMemory, engine::EngineConfig};

use crate::backend::Backend;
use crate::error::BenchError;
use crate::half::Half;
use crate::ingest::{Corpus, Unit, ingest, split_long, warm};
use crate::longmemeval::{RunModels, Usage, merge_engine_usage, record, require_retrievers};
use crate::retrieve::{Ranker, Retriever, positions};
use dataset::{LocomoTurn, Sample};
use report::{LocomoQuestionResult, LocomoRetrieval};

/// How a turn is written as a memory (documented in the report).
pub const MEMORY_TEMPLATE: &str = "{speaker}: {text} [image: {blip_caption}]";

/// What a LoCoMo run does.
#[derive(Debug, Clone)]
pub struct LocomoOptions {
    /// The `limit` of each recall.
    pub depth: usize,
    pub retrievers: Vec<Retriever>,
    pub engine: EngineConfig,
    /// Score only the first N questions (in file order).
    pub limit: Option<usize>,
    /// How questions are split into halves.
    pub split: Split,
    /// Where to append each question's scored lists (`--lists`).
    pub lists: Option<std::path::PathBuf>,
}

/// How a run's questions are split into a tuning and a held-out half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// By conversation (LoCoMo): a conversation's questions stay together, so the
    /// held-out half is memories the choices never saw.
    Conversation,
    /// By question (a memory set: one person's memories, questions alternating).
    Question,
}

/// What a LoCoMo run produced.
#[derive(Debug, Clone)]
pub struct LocomoOutput {
    pub results: Vec<LocomoQuestionResult>,
    pub usage: Usage,
    pub memories: usize,
    pub conversations: usize,
    pub unresolved_evidence: usize,
}

/// A turn as stored: the speaker's name, the text, and the caption of a shared image
/// (LoCoMo's questions ask about them). NUL is the one character every backend refuses.
pub fn render_turn(turn: &LocomoTurn, max_bytes: usize) -> String {
    let speaker = turn.speaker.trim();
    let mut content = if speaker.is_empty() {
        turn.text.trim().to_owned()
    } else {
        format!("{speaker}: {}", turn.text.trim())
    };
    if let Some(caption) = turn.blip_caption.as_deref().map(str::trim)
        && !caption.is_empty()
    {
        content.push_str(&format!(" [image: {caption}]"));
    }
    let content = content.replace('\0', " ");
    // One memory per turn: an oversized turn keeps its first piece.
    split_long(&content, max_bytes.max(4))
        .first()
        .map_or_else(String::new, |piece| (*piece).to_owned())
}

/// A conversation's memories, one per turn with text or a caption, keyed by `dia_id`.
pub fn corpus(sample: &Sample, max_bytes: usize) -> Corpus {
    let units = sample
        .turns()
        .filter(|(_, t)| {
            !t.text.trim().is_empty() || t.blip_caption.as_deref().is_some_and(|c| !c.is_empty())
        })
        .filter_map(|(session, t)| {
            Some(Unit {
                content: render_turn(t, max_bytes),
                kind: t.kind.unwrap_or_default(),
                session,
                key: dataset::normalize_dia_id(&t.dia_id)?,
            })
        })
        .collect();
    Corpus {
        units,
        gold: BTreeSet::new(),
    }
}

/// Runs every conversation that has a question within `limit`; `done` is told after
/// each question.
pub async fn run(
    samples: &[Sample],
    options: &LocomoOptions,
    models: &RunModels,
    backend: &Backend,
    done: &mut dyn FnMut(),
) -> Result<LocomoOutput, BenchError> {
    require_retrievers(&options.retrievers)?;
    let mut output = LocomoOutput {
        results: Vec::new(),
        usage: Usage::new(),
        memories: 0,
        conversations: 0,
        unresolved_evidence: 0,
    };
    let mut budget = options.limit.unwrap_or(usize::MAX);
    for (index, sample) in samples.iter().enumerate() {
        if budget == 0 {
            break;
        }
        let take = sample.questions.len().min(budget);
        budget -= take;
        run_sample(
            index,
            sample,
            take,
            options,
            models,
            backend,
            &mut output,
            done,
        )
        .await?;
    }
    Ok(output)
}

#[allow(clippy::too_many_arguments)]
async fn run_sample(
    index: usize,
    sample: &Sample,
    take: usize,
    options: &LocomoOptions,
    models: &RunModels,
    backend: &Backend,
    output: &mut LocomoOutput,
    done: &mut dyn FnMut(),
) -> Result<(), BenchError> {
    let corpus = corpus(sample, options.engine.max_content_bytes);
    let position: HashMap<&str, usize> = corpus
        .units
        .iter()
        .enumerate()
        .map(|(i, u)| (u.key.as_str(), i))
        .collect();
    let session_of: Vec<usize> = corpus.units.iter().map(|u| u.session).collect();
    let slot = backend.question(index)?;
    let engine = CortexMemory::with_config(
        slot.store.clone(),
        models.embedder.clone(),
        options.engine.clone(),
    );
    if models.warm {
        let (calls, spent) = warm(&models.embedder, &corpus).await?;
        record(&mut output.usage, models.embedder.name(), calls, 0, spent);
    }
    let ids = ingest(&engine, &slot.user, &sample.sample_id, &corpus).await?;
    let by_id: HashMap<_, _> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    output.memories += ids.len();
    output.conversations += 1;

    let reranked = models.reranked_engine(&slot.store, &options.engine);
    let mut ranker = Ranker::new(
        &engine,
        reranked.as_ref(),
        &slot.store,
        &models.embedder,
        &slot.user,
        &sample.sample_id,
    );
    for (q_index, question) in sample.questions.iter().take(take).enumerate() {
        let (gold, evidence, unresolved) = resolve_evidence(&question.evidence, &position);
        output.unresolved_evidence += unresolved;
        let mut retrieval = BTreeMap::new();
        if !gold.is_empty() {
            if let Some(path) = &options.lists {
                let gold: Vec<usize> = gold.iter().copied().collect();
                ranker
                    .write_lists(
                        path,
                        &question.question,
                        &by_id,
                        &gold,
                        &session_of,
                        &sample.sample_id,
                    )
                    .await?;
            }
            for &retriever in &options.retrievers {
                let ranked = ranker
                    .rank(retriever, &question.question, options.depth)
                    .await?;
                let ranking = positions(&ranked, &by_id);
                retrieval.insert(retriever, scored(&ranking, &corpus, &session_of, &gold));
            }
        }
        output.results.push(LocomoQuestionResult {
            sample_id: sample.sample_id.clone(),
            index: q_index,
            half: Half::of(match options.split {
                Split::Conversation => index,
                Split::Question => q_index,
            }),
            question: question.question.clone(),
            category: question.category,
            evidence,
            retrieval,
        });
        done();
    }
    record(
        &mut output.usage,
        models.embedder.name(),
        ranker.query_embeds,
        0,
        ranker.query_tokens,
    );
    drop(ranker);
    merge_engine_usage(&mut output.usage, &engine);
    drop(engine);
    slot.finish();
    Ok(())
}

/// A ranking (positions among the memories) as the report keeps it: the turns' ids, and
/// its metrics against the evidence positions `gold`.
fn scored(
    ranking: &[usize],
    corpus: &Corpus,
    session_of: &[usize],
    gold: &BTreeSet<usize>,
) -> LocomoRetrieval {
    LocomoRetrieval {
        ranked: ranking
            .iter()
            .map(|&i| corpus.units[i].key.clone())
            .collect(),
        metrics: metrics::score(ranking, session_of, gold),
    }
}

/// A question's evidence turns as positions among the memories, the turn ids found, and
/// how many named a turn the conversation does not have.
fn resolve_evidence(
    ids: &[String],
    position: &HashMap<&str, usize>,
) -> (BTreeSet<usize>, Vec<String>, usize) {
    let mut gold = BTreeSet::new();
    let mut evidence = Vec::new();
    let mut unresolved = 0;
    for id in ids {
        match position.get(id.as_str()) {
            Some(&p) => {
                gold.insert(p);
                evidence.push(id.clone());
            }
            None => unresolved += 1,
        }
    }
    (gold, evidence, unresolved)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn turn(text: &str, caption: Option<&str>) -> LocomoTurn {
        LocomoTurn {
            speaker: "Ann ".into(),
            dia_id: "D1:1".into(),
            text: text.into(),
            blip_caption: caption.map(str::to_owned),
            kind: None,
        }
    }

    #[test]
    fn turns_carry_speaker_and_caption_within_the_limit() {
        assert_eq!(render_turn(&turn(" hi ", None), 100), "Ann: hi");
        assert_eq!(
            render_turn(&turn("look", Some("a photo of a dog")), 100),
            "Ann: look [image: a photo of a dog]"
        );
        assert_eq!(render_turn(&turn("a\0b", Some(" ")), 100), "Ann: a b");
        let long = render_turn(&turn(&"é".repeat(20), None), 11);
        assert!(long.len() <= 11 && long.starts_with("Ann: é"), "{long}");
    }
}
