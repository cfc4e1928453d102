//! The memory-set format (`cortex-bench --format memories`): what an agent stores about
//! one person (facts, preferences, decisions, instructions, events, people, projects),
//! written over dated sessions, and questions that name the memories answering them.
//!
//! ```json
//! {"name": "...", "sessions": [{"date": "2026-01-05", "memories": [
//!    {"id": "m001", "kind": "preference", "content": "..."}]}],
//!  "questions": [{"id": "q001", "question": "...", "answers": ["m001"], "tags": ["paraphrase"]}]}
//! ```
//!
//! It runs through the LoCoMo harness (one user, one memory per entry, each question
//! scored by its answers at memory and at session level): a set is read as one
//! [`Sample`] whose turns have no speaker, so each memory is stored as written, with its
//! kind and its session's date.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use cortex_core::memory::MemoryKind;
use serde::Deserialize;

use super::dataset::{LocomoQuestion, LocomoTurn, Sample, Session};
use crate::error::BenchError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSet {
    name: String,
    /// What the set is for; read by people, not by the bench, but kept in the struct so
    /// that `deny_unknown_fields` still rejects a misspelt key.
    #[serde(default, rename = "description")]
    _description: Option<String>,
    sessions: Vec<RawSession>,
    questions: Vec<RawQuestion>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSession {
    date: String,
    memories: Vec<RawMemory>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemory {
    id: String,
    kind: MemoryKind,
    content: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuestion {
    id: String,
    question: String,
    answers: Vec<String>,
    #[serde(default)]
    tags: Vec<String>,
}

/// The committed set (`bench/tests/fixtures/personal_memories.json`), built into the
/// binary for `cortex-bench --format dev`.
pub const COMMITTED: &str = include_str!("../../tests/fixtures/personal_memories.json");

/// The coding agent's set (`bench/tests/fixtures/coding_memories.json`): conventions,
/// commands, paths, error codes, ports and versions, owners, decisions, dated events.
pub const CODING: &str = include_str!("../../tests/fixtures/coding_memories.json");

/// The tags a question may carry (they describe it; nothing ranks by them). `stale`: an
/// older memory on the same topic says what is no longer true; `past`: the question
/// asks for that older value.
pub const TAGS: [&str; 6] = [
    "paraphrase",
    "lexical",
    "exact-token",
    "distractor",
    "stale",
    "past",
];

/// Parses a memory set. Every memory id is unique, every answer names a memory, every
/// date is `YYYY-MM-DD`, and every tag is one of [`TAGS`]; anything else is refused
/// with the record named.
pub fn parse(text: &str) -> Result<Sample, BenchError> {
    let fail = |at: &str, reason: String| BenchError::Dataset {
        question: at.to_owned(),
        reason,
    };
    let raw: RawSet = serde_json::from_str(text).map_err(|e| fail("memory set", e.to_string()))?;
    let mut dia_of: HashMap<&str, String> = HashMap::new();
    let mut sessions = Vec::with_capacity(raw.sessions.len());
    for (s, session) in raw.sessions.iter().enumerate() {
        chrono::NaiveDate::parse_from_str(&session.date, "%Y-%m-%d")
            .map_err(|e| fail(&format!("session {}", s + 1), format!("date: {e}")))?;
        let mut turns = Vec::with_capacity(session.memories.len());
        for (t, memory) in session.memories.iter().enumerate() {
            let dia_id = format!("D{}:{}", s + 1, t + 1);
            if dia_of.insert(&memory.id, dia_id.clone()).is_some() {
                return Err(fail(&memory.id, "memory id used twice".into()));
            }
            if memory.content.trim().is_empty() {
                return Err(fail(&memory.id, "empty content".into()));
            }
            turns.push(LocomoTurn {
                speaker: String::new(),
                dia_id,
                text: memory.content.clone(),
                blip_caption: None,
                kind: Some(memory.kind),
            });
        }
        sessions.push(Session {
            number: s as u32 + 1,
            date_time: Some(session.date.clone()),
            turns,
        });
    }
    let mut ids = BTreeSet::new();
    let mut questions = Vec::with_capacity(raw.questions.len());
    for q in &raw.questions {
        if !ids.insert(q.id.as_str()) {
            return Err(fail(&q.id, "question id used twice".into()));
        }
        if q.answers.is_empty() {
            return Err(fail(&q.id, "no answer".into()));
        }
        if let Some(tag) = q.tags.iter().find(|t| !TAGS.contains(&t.as_str())) {
            return Err(fail(&q.id, format!("unknown tag {tag:?}")));
        }
        let evidence = q
            .answers
            .iter()
            .map(|a| {
                dia_of
                    .get(a.as_str())
                    .cloned()
                    .ok_or_else(|| fail(&q.id, format!("answer {a} names no memory")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        questions.push(LocomoQuestion {
            question: q.question.clone(),
            category: 0,
            evidence,
        });
    }
    Ok(Sample {
        sample_id: raw.name,
        sessions,
        questions,
    })
}

/// Reads a memory set from a file.
pub fn load(path: &Path) -> Result<Sample, BenchError> {
    let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(&text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const SET: &str = r#"{"name": "t", "sessions": [
        {"date": "2026-01-05", "memories": [
            {"id": "a", "kind": "preference", "content": "Likes tea."},
            {"id": "b", "kind": "fact", "content": "Lives in Porto."}]},
        {"date": "2026-02-01", "memories": [
            {"id": "c", "kind": "event", "content": "Flies to Oslo on 3 March."}]}],
      "questions": [{"id": "q1", "question": "Where is home?", "answers": ["b"],
                     "tags": ["paraphrase"]},
                    {"id": "q2", "question": "Trip?", "answers": ["c", "a"]}]}"#;

    #[test]
    fn a_set_reads_as_one_sample_of_speakerless_turns() {
        let sample = parse(SET).unwrap();
        assert_eq!(sample.sample_id, "t");
        assert_eq!(sample.sessions.len(), 2);
        let turns: Vec<_> = sample.turns().collect();
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[2].0, 1);
        assert_eq!(turns[2].1.dia_id, "D2:1");
        assert_eq!(turns[1].1.kind, Some(MemoryKind::Fact));
        assert_eq!(sample.questions[0].evidence, ["D1:2"]);
        assert_eq!(sample.questions[1].evidence, ["D2:1", "D1:1"]);
    }

    #[test]
    fn bad_sets_are_refused_with_the_record_named() {
        let cases = [
            (SET.replace("\"b\"]", "\"zz\"]"), "q1"),
            (SET.replace("\"id\": \"b\"", "\"id\": \"a\""), "a"),
            (SET.replace("2026-02-01", "Feb 1"), "session 2"),
            (SET.replace("paraphrase", "easy"), "q1"),
            (SET.replace("\"fact\"", "\"gossip\""), "memory set"),
            (SET.replace("\"q2\"", "\"q1\""), "q1"),
        ];
        for (text, named) in cases {
            match parse(&text) {
                Err(BenchError::Dataset { question, .. }) => assert_eq!(question, named),
                other => panic!("{named}: {other:?}"),
            }
        }
    }

    /// What the issues ask of the committed sets, checked with the engine's own analyser.
    #[test]
    fn the_committed_sets_are_what_they_claim() {
        check_set(COMMITTED);
        check_set(CODING);
        // The coding set's stale pairs: questions about the current value with an older
        // memory on the topic, and questions that ask for that older value.
        let raw: RawSet = serde_json::from_str(CODING).unwrap();
        let tagged = |tag: &str| {
            raw.questions
                .iter()
                .filter(|q| q.tags.iter().any(|t| t == tag))
                .count()
        };
        assert!(tagged("stale") >= 15, "{} stale", tagged("stale"));
        assert!(tagged("past") >= 5, "{} past", tagged("past"));
    }

    fn check_set(text: &str) {
        use cortex_core::tokenizer::query_terms;
        use std::collections::HashSet;

        let sample = parse(text).unwrap();
        let raw: RawSet = serde_json::from_str(text).unwrap();
        let memories: HashMap<&str, &RawMemory> = raw
            .sessions
            .iter()
            .flat_map(|s| &s.memories)
            .map(|m| (m.id.as_str(), m))
            .collect();
        assert!(memories.len() >= 150, "{} memories", memories.len());
        assert!(sample.questions.len() >= 100);
        let kinds: HashSet<MemoryKind> = memories.values().map(|m| m.kind).collect();
        assert!(kinds.len() >= 5, "{kinds:?}");

        let terms = |t: &str| query_terms(t).into_iter().collect::<HashSet<_>>();
        let mut disjoint = 0;
        let mut exact = 0;
        for q in &raw.questions {
            let answer: HashSet<String> = q
                .answers
                .iter()
                .flat_map(|a| terms(&memories[a.as_str()].content))
                .collect();
            let asked = terms(&q.question);
            let shared = asked.intersection(&answer).count();
            // The tag says what the analyser finds.
            assert_eq!(
                shared == 0,
                q.tags.iter().any(|t| t == "paraphrase"),
                "{}: {shared} shared terms",
                q.id
            );
            disjoint += usize::from(shared == 0);
            if q.tags.iter().any(|t| t == "exact-token") {
                exact += 1;
                assert!(shared > 0, "{}: its rare token is in the answer", q.id);
            }
        }
        assert!(
            disjoint * 2 >= raw.questions.len(),
            "{disjoint} of {} share no term with their answer",
            raw.questions.len()
        );
        assert!(exact >= 10, "{exact} exact-token questions");
        let distractors = raw
            .questions
            .iter()
            .filter(|q| q.tags.iter().any(|t| t == "distractor"))
            .count();
        assert!(distractors >= 40);
    }
}
