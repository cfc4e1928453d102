//! The official LongMemEval JSON format: an array of questions, each with its own haystack
//! of dated chat sessions.

use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use crate::error::BenchError;

/// One LongMemEval question with its haystack.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Question {
    pub question_id: String,
    pub question_type: String,
    pub question: String,
    pub answer: Answer,
    #[serde(default)]
    pub question_date: Option<String>,
    pub haystack_session_ids: Vec<String>,
    /// One date per session; LongMemEval always has them, but hand-made sets may not.
    #[serde(default)]
    pub haystack_dates: Vec<String>,
    pub haystack_sessions: Vec<Vec<Turn>>,
    #[serde(default)]
    pub answer_session_ids: Vec<String>,
}

/// One chat turn.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Turn {
    pub role: String,
    pub content: String,
    /// Whether this turn holds evidence for the answer; only answer sessions carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_answer: Option<bool>,
}

/// The gold answer: the official set mixes strings and bare numbers ("How many ...").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Answer(pub String);

impl<'de> Deserialize<'de> for Answer {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::String(s) => Ok(Answer(s)),
            serde_json::Value::Number(n) => Ok(Answer(n.to_string())),
            other => Err(de::Error::custom(format!(
                "answer must be a string or a number, not {other}"
            ))),
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Question {
    /// Unanswerable questions, which the official retrieval evaluation leaves out.
    pub fn is_abstention(&self) -> bool {
        self.question_id.ends_with("_abs")
    }

    /// The date of session `index`, when the dataset gives one.
    pub fn session_date(&self, index: usize) -> Option<&str> {
        self.haystack_dates.get(index).map(String::as_str)
    }

    fn validate(&self, position: usize) -> Result<(), BenchError> {
        let fail = |reason: String| BenchError::Dataset {
            question: format!("#{position} ({})", self.question_id),
            reason,
        };
        if self.question_id.trim().is_empty() {
            return Err(fail("question_id is empty".into()));
        }
        if self.question.trim().is_empty() {
            return Err(fail("question is empty".into()));
        }
        let sessions = self.haystack_sessions.len();
        if self.haystack_session_ids.len() != sessions {
            return Err(fail(format!(
                "{} haystack_session_ids for {sessions} haystack_sessions",
                self.haystack_session_ids.len()
            )));
        }
        if !self.haystack_dates.is_empty() && self.haystack_dates.len() != sessions {
            return Err(fail(format!(
                "{} haystack_dates for {sessions} haystack_sessions",
                self.haystack_dates.len()
            )));
        }
        Ok(())
    }
}

/// Parses and checks a dataset held in memory.
pub fn parse(text: &str) -> Result<Vec<Question>, BenchError> {
    let questions: Vec<Question> = serde_json::from_str(text).map_err(|e| BenchError::Dataset {
        question: "(file)".into(),
        reason: e.to_string(),
    })?;
    for (i, q) in questions.iter().enumerate() {
        q.validate(i)?;
    }
    Ok(questions)
}

/// Reads a LongMemEval JSON file.
pub fn load(path: &Path) -> Result<Vec<Question>, BenchError> {
    let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(&text).map_err(|e| match e {
        BenchError::Dataset { question, reason } => BenchError::Dataset {
            question: format!("{}: {question}", path.display()),
            reason,
        },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn question(answer: &str, id: &str) -> String {
        format!(
            r#"[{{"question_id": "{id}", "question_type": "multi-session",
                "question": "How many?", "answer": {answer}, "question_date": "2023/05/30 (Tue) 10:00",
                "haystack_session_ids": ["s1"], "haystack_dates": ["2023/05/01 (Mon) 09:00"],
                "haystack_sessions": [[{{"role": "user", "content": "hi", "has_answer": true}},
                                       {{"role": "assistant", "content": "hello"}}]],
                "answer_session_ids": ["s1"]}}]"#
        )
    }

    #[test]
    fn answers_may_be_strings_or_numbers() {
        assert_eq!(parse(&question("3", "q1")).unwrap()[0].answer.0, "3");
        assert_eq!(parse(&question("2.5", "q1")).unwrap()[0].answer.0, "2.5");
        assert_eq!(
            parse(&question("\"three\"", "q1")).unwrap()[0].answer.0,
            "three"
        );
        assert!(parse(&question("[1]", "q1")).is_err());
    }

    #[test]
    fn turns_keep_their_evidence_flags_and_abstention_is_by_suffix() {
        let q = &parse(&question("1", "gpt4_1_abs")).unwrap()[0];
        assert!(q.is_abstention());
        assert_eq!(q.haystack_sessions[0][0].has_answer, Some(true));
        assert_eq!(q.haystack_sessions[0][1].has_answer, None);
        assert!(!parse(&question("1", "abs_q")).unwrap()[0].is_abstention());
    }

    #[test]
    fn mismatched_haystacks_are_refused_with_the_question_named() {
        let text = question("1", "q9").replace(
            r#"["s1"], "haystack_dates""#,
            r#"["s1", "s2"], "haystack_dates""#,
        );
        let err = parse(&text).unwrap_err().to_string();
        assert!(
            err.contains("q9") && err.contains("haystack_session_ids"),
            "{err}"
        );
    }
}
