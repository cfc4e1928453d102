//! Optional question answering (`--qa`): the Chain-of-Note reader answers from the
//! retrieved memories, and an LLM judge grades the answer against the gold one
//! (abstention questions with the abstention prompt).

use std::sync::Arc;

use crate::chain_of_note::{
    ReaderMemory, build_judge_prompt, build_reader_prompt, parse_judge, parse_reader_answer,
};
use cortex_core::{provider::LLMProvider, provider::TokenUsage};
use serde::Serialize;

use crate::dataset::Question;
use crate::error::BenchError;

/// The models and budgets of the QA pass.
#[derive(Debug, Clone)]
pub struct QaSettings {
    pub reader: Arc<dyn LLMProvider>,
    pub judge: Arc<dyn LLMProvider>,
    pub reader_model: String,
    pub judge_model: String,
    /// How many of the top memories the reader sees.
    pub reader_k: usize,
    pub reader_max_tokens: u32,
    pub judge_max_tokens: u32,
}

/// What the reader said and what the judge thought of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QaOutcome {
    pub hypothesis: String,
    pub abstained: bool,
    pub correct: bool,
}

/// Greedy decoding, so a cached answer is the answer.
const TEMPERATURE: f32 = 0.0;

/// Answers `question` from `memories` (best first) and judges the answer; also returns
/// what the reader and the judge call spent.
pub async fn answer_and_judge(
    settings: &QaSettings,
    question: &Question,
    memories: &[ReaderMemory<'_>],
) -> Result<(QaOutcome, [TokenUsage; 2]), BenchError> {
    let shown = &memories[..memories.len().min(settings.reader_k)];
    let prompt = build_reader_prompt(&question.question, question.question_date.as_deref(), shown);
    let fail = |e| {
        BenchError::engine(
            &question.question_id,
            cortex_core::error::CortexError::Provider(e),
        )
    };
    let read = settings
        .reader
        .generate(&prompt, TEMPERATURE, settings.reader_max_tokens)
        .await
        .map_err(fail)?;
    let answer = parse_reader_answer(&read.text);
    let judge_prompt = build_judge_prompt(
        &question.question,
        &question.answer.0,
        &answer.answer,
        question.is_abstention(),
    );
    let verdict = settings
        .judge
        .generate(&judge_prompt, TEMPERATURE, settings.judge_max_tokens)
        .await
        .map_err(fail)?;
    let outcome = QaOutcome {
        hypothesis: answer.answer,
        abstained: answer.abstained,
        correct: parse_judge(&verdict.text),
    };
    Ok((outcome, [read.usage, verdict.usage]))
}
