//! Turning a question's haystack into memories, each labelled with the session key the
//! session-level metrics score it under.
//!
//! Granularity:
//! - `turn`: one memory per turn (user turns only by default, as LongMemEval's own
//!   retrievers index them);
//! - `session`: one memory per session, its turns joined by newlines; a session over the
//!   engine's content limit is split at turn boundaries (a single oversized turn at
//!   character boundaries) into chunks that all map to the same session.
//!
//! Labels (`--labels`):
//! - `official` mirrors `run_retrieval.py`: inside an answer session only the turns flagged
//!   `has_answer` carry the session's key; its other turns map to a separate, never-gold
//!   key (their `answer` -> `noans` rename), and at session granularity an answer session
//!   with no flagged indexed turn is not gold either. An answer session whose indexed
//!   turns carry no `has_answer` field at all counts as evidence throughout (the official
//!   script would crash on it).
//! - `session`: every memory carries its session id; the gold sessions are the
//!   `answer_session_ids` found in the haystack.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use clap::ValueEnum;
use cortex_core::{
    engine::CortexMemory, memory::MemoryId, memory::MemoryKind, provider::EmbedTask,
    provider::LLMProvider, provider::TokenUsage,
};
use serde::Serialize;

use crate::dataset::{Question, Turn};
use crate::error::BenchError;

/// What one memory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    Turn,
    Session,
}

/// Which turns are indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Roles {
    /// User turns only, as the official retrievers index them.
    User,
    /// User and assistant turns (needed to find what the assistant said).
    All,
}

/// How memories are labelled with sessions (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Labels {
    Official,
    Session,
}

/// Suffix of the key of an answer session's non-evidence memories.
pub const NOANS_SUFFIX: &str = "::noans";

/// One memory to write, before it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub content: String,
    /// The kind it is memorized as.
    pub kind: MemoryKind,
    /// Index of its session in the haystack (for its date).
    pub session: usize,
    /// The key the metrics rank it under.
    pub key: String,
}

/// The memories of one question and its gold keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corpus {
    pub units: Vec<Unit>,
    pub gold: BTreeSet<String>,
}

impl Corpus {
    pub fn keys(&self) -> Vec<&str> {
        self.units.iter().map(|u| u.key.as_str()).collect()
    }
}

/// The settings that shape a corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorpusOptions {
    pub granularity: Granularity,
    pub roles: Roles,
    pub labels: Labels,
    /// Largest memory, in bytes (the engine's content limit).
    pub max_bytes: usize,
}

/// Builds the memories of a question's haystack.
pub fn build_corpus(question: &Question, options: &CorpusOptions) -> Corpus {
    let answer_ids: HashSet<&str> = question
        .answer_session_ids
        .iter()
        .map(String::as_str)
        .collect();
    let mut units = Vec::new();
    for (index, (id, turns)) in question
        .haystack_session_ids
        .iter()
        .zip(&question.haystack_sessions)
        .enumerate()
    {
        let indexed: Vec<&Turn> = turns
            .iter()
            .filter(|t| options.roles == Roles::All || t.role == "user")
            .filter(|t| !t.content.trim().is_empty())
            .collect();
        let is_answer = answer_ids.contains(id.as_str());
        let flagged = indexed.iter().any(|t| t.has_answer.is_some());
        let key_of = |evidence: bool| {
            let official = options.labels == Labels::Official;
            if official && is_answer && flagged && !evidence {
                format!("{id}{NOANS_SUFFIX}")
            } else {
                id.clone()
            }
        };
        match options.granularity {
            Granularity::Turn => {
                for turn in &indexed {
                    units.push(Unit {
                        kind: MemoryKind::Note,
                        content: render_turn(turn, options.roles),
                        session: index,
                        key: key_of(turn.has_answer == Some(true)),
                    });
                }
            }
            Granularity::Session => {
                let key = key_of(indexed.iter().any(|t| t.has_answer == Some(true)));
                let rendered: Vec<String> = indexed
                    .iter()
                    .map(|t| render_turn(t, options.roles))
                    .collect();
                for content in chunk(&rendered, options.max_bytes) {
                    units.push(Unit {
                        kind: MemoryKind::Note,
                        content,
                        session: index,
                        key: key.clone(),
                    });
                }
            }
        }
    }
    // As the official script: the gold documents are the answer keys present in the corpus.
    let gold = units
        .iter()
        .filter(|u| answer_ids.contains(u.key.as_str()))
        .map(|u| u.key.clone())
        .collect();
    Corpus { units, gold }
}

/// A turn's text as stored. NUL is the one character every backend refuses.
fn render_turn(turn: &Turn, roles: Roles) -> String {
    let content = turn.content.replace('\0', " ");
    match roles {
        Roles::User => content,
        Roles::All => format!("{}: {content}", turn.role),
    }
}

/// Joins turns with newlines into chunks of at most `max_bytes`, splitting only between
/// turns unless one turn alone is too long.
pub fn chunk(turns: &[String], max_bytes: usize) -> Vec<String> {
    let max_bytes = max_bytes.max(4); // room for any one UTF-8 character
    let mut chunks = Vec::new();
    let mut current = String::new();
    for turn in turns {
        for piece in split_long(turn, max_bytes) {
            let extra = if current.is_empty() { 0 } else { 1 };
            if !current.is_empty() && current.len() + extra + piece.len() > max_bytes {
                chunks.push(std::mem::take(&mut current));
            }
            if !current.is_empty() {
                current.push('\n');
            }
            current.push_str(piece);
        }
    }
    if !current.trim().is_empty() {
        chunks.push(current);
    }
    chunks.retain(|c| !c.trim().is_empty());
    chunks
}

/// `text` in pieces of at most `max_bytes`, cut at character boundaries.
pub(crate) fn split_long(text: &str, max_bytes: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while rest.len() > max_bytes {
        let mut cut = max_bytes;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (head, tail) = rest.split_at(cut);
        pieces.push(head);
        rest = tail;
    }
    pieces.push(rest);
    pieces
}

/// Texts embedded per provider call when warming the cache.
const WARM_BATCH: usize = 64;

/// Embeds a corpus's texts in batches so that, through a caching embedder, the one-text
/// memorize calls that follow are answered from the cache. Returns the calls made and
/// the tokens they spent.
pub async fn warm(
    embedder: &Arc<dyn LLMProvider>,
    corpus: &Corpus,
) -> Result<(u64, TokenUsage), BenchError> {
    let mut calls = 0;
    let mut spent = TokenUsage::default();
    for batch in corpus.units.chunks(WARM_BATCH) {
        let texts: Vec<String> = batch.iter().map(|u| u.content.clone()).collect();
        let result = embedder.embed(&texts, EmbedTask::Document).await?;
        calls += 1;
        spent.add(result.usage);
    }
    Ok((calls, spent))
}

/// Writes a corpus through the engine, one memorize per unit, and returns the units'
/// memory ids in unit order.
pub async fn ingest(
    engine: &CortexMemory,
    user: &str,
    question_id: &str,
    corpus: &Corpus,
) -> Result<Vec<MemoryId>, BenchError> {
    let mut ids = Vec::with_capacity(corpus.units.len());
    for unit in &corpus.units {
        let stored = engine
            .memorize(user, &unit.content, unit.kind, &[], &Default::default())
            .await
            .map_err(|e| BenchError::engine(question_id, e))?;
        ids.push(stored.memory.id);
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::dataset::Answer;

    fn turn(role: &str, content: &str, has_answer: Option<bool>) -> Turn {
        Turn {
            role: role.into(),
            content: content.into(),
            has_answer,
        }
    }

    fn question() -> Question {
        Question {
            question_id: "q".into(),
            question_type: "single-session-user".into(),
            question: "What is my cat called?".into(),
            answer: Answer("Miso".into()),
            question_date: None,
            haystack_session_ids: vec!["noise".into(), "answer_1".into(), "flagless".into()],
            haystack_dates: vec![],
            haystack_sessions: vec![
                vec![
                    turn("user", "I like tea", None),
                    turn("assistant", "Nice", None),
                ],
                vec![
                    turn("user", "Hello there", Some(false)),
                    turn("assistant", "Hi!", Some(false)),
                    turn("user", "My cat is called Miso", Some(true)),
                ],
                vec![
                    turn("user", "  ", None),
                    turn("user", "Bought a lamp", None),
                ],
            ],
            answer_session_ids: vec!["answer_1".into(), "flagless".into(), "missing".into()],
        }
    }

    fn options(granularity: Granularity, roles: Roles, labels: Labels) -> CorpusOptions {
        CorpusOptions {
            granularity,
            roles,
            labels,
            max_bytes: 1000,
        }
    }

    #[test]
    fn official_turn_labels_credit_only_evidence_turns() {
        let c = build_corpus(
            &question(),
            &options(Granularity::Turn, Roles::User, Labels::Official),
        );
        assert_eq!(
            c.keys(),
            ["noise", "answer_1::noans", "answer_1", "flagless"],
            "blank turns are skipped; unflagged answer sessions count whole"
        );
        let gold: Vec<&str> = c.gold.iter().map(String::as_str).collect();
        assert_eq!(gold, ["answer_1", "flagless"]);
        assert_eq!(c.units[2].session, 1);
    }

    #[test]
    fn session_labels_and_roles() {
        let c = build_corpus(
            &question(),
            &options(Granularity::Turn, Roles::All, Labels::Session),
        );
        assert_eq!(c.units.len(), 6);
        assert_eq!(c.units[1].content, "assistant: Nice");
        assert!(c.keys().iter().all(|k| !k.ends_with(NOANS_SUFFIX)));
    }

    #[test]
    fn session_granularity_joins_turns_and_labels_the_session() {
        let c = build_corpus(
            &question(),
            &options(Granularity::Session, Roles::User, Labels::Official),
        );
        assert_eq!(c.keys(), ["noise", "answer_1", "flagless"]);
        assert_eq!(c.units[1].content, "Hello there\nMy cat is called Miso");
        let mut q = question();
        q.haystack_sessions[1][2].has_answer = Some(false);
        let c = build_corpus(
            &q,
            &options(Granularity::Session, Roles::User, Labels::Official),
        );
        assert_eq!(c.keys()[1], "answer_1::noans");
        assert!(!c.gold.contains("answer_1"));
    }

    #[test]
    fn long_sessions_split_into_chunks_of_the_same_session() {
        let mut q = question();
        q.haystack_sessions[0] = (0..10)
            .map(|i| turn("user", &format!("turn {i} {}", "x".repeat(40)), None))
            .collect();
        let mut o = options(Granularity::Session, Roles::User, Labels::Official);
        o.max_bytes = 120;
        let c = build_corpus(&q, &o);
        let noise: Vec<&Unit> = c.units.iter().filter(|u| u.key == "noise").collect();
        assert_eq!(noise.len(), 5);
        assert!(
            noise
                .iter()
                .all(|u| u.content.len() <= 120 && u.session == 0)
        );
    }

    #[test]
    fn chunking_cuts_oversized_turns_at_character_boundaries() {
        let turns = vec!["é".repeat(10), "ab".into()];
        let chunks = chunk(&turns, 7);
        assert!(chunks.iter().all(|c| c.len() <= 7), "{chunks:?}");
        assert_eq!(
            chunks.concat().replace('\n', ""),
            format!("{}ab", "é".repeat(10))
        );
        assert!(chunk(&["  ".into()], 10).is_empty());
    }
}
