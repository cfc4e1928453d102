//! The LoCoMo format (snap-research/locomo): long conversations between two speakers in
//! dated sessions, with questions whose `evidence` names the turns (`dia_id`, "D3:12"
//! = session 3, turn 12) that answer them.
//!
//! Two layouts of the same records are read:
//! - `locomo10.json`: an array of samples, each `{sample_id, conversation: {speaker_a,
//!   speaker_b, session_N, session_N_date_time, ...}, qa: [...]}`;
//! - the per-conversation files of `data/locomo10.zip` (`locomo10_v2/26.json`): one object
//!   with the conversation's keys and `qa` at the top level, named by its file stem.
//!
//! A directory is read as every `.json` file in it, in name order.
//!
//! The published evidence lists carry a few typos ("D8:6; D9:17" in one string,
//! "D:11:26", "D30:05"): each string is split on `;`, `,` and spaces and each id is
//! normalised to `D<session>:<turn>`. An id that names no turn of the conversation is
//! dropped and counted; a question left with no evidence turn is not scored.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::BenchError;

/// One conversation and its questions.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub sample_id: String,
    pub sessions: Vec<Session>,
    pub questions: Vec<LocomoQuestion>,
}

/// One dated session, in conversation order.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// N of `session_N`.
    pub number: u32,
    pub date_time: Option<String>,
    pub turns: Vec<LocomoTurn>,
}

/// One turn of a session.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct LocomoTurn {
    pub speaker: String,
    pub dia_id: String,
    #[serde(default)]
    pub text: String,
    /// The caption of an image the speaker shared, when there is one.
    #[serde(default)]
    pub blip_caption: Option<String>,
    /// The kind it is stored as (memory sets name one; LoCoMo's turns are notes).
    #[serde(default)]
    pub kind: Option<cortex_core::memory::MemoryKind>,
}

/// One question with its normalised evidence ids.
#[derive(Debug, Clone, PartialEq)]
pub struct LocomoQuestion {
    pub question: String,
    pub category: u32,
    /// Normalised `D<session>:<turn>` ids, in the order given, each once.
    pub evidence: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct RawQuestion {
    question: String,
    category: u32,
    #[serde(default)]
    evidence: Vec<String>,
}

/// The conventional names of LoCoMo's question categories.
pub fn category_name(category: u32) -> &'static str {
    match category {
        1 => "multi-hop",
        2 => "temporal",
        3 => "open-domain",
        4 => "single-hop",
        5 => "adversarial",
        _ => "other",
    }
}

/// `D<session>:<turn>` for a written id, tolerating the dataset's typos; `None` when it
/// names no turn.
pub fn normalize_dia_id(raw: &str) -> Option<String> {
    let digits = raw.trim().strip_prefix(['D', 'd'])?;
    let mut parts = digits
        .split(':')
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<u32>().ok());
    match (parts.next(), parts.next(), parts.next()) {
        (Some(Some(session)), Some(Some(turn)), None) => Some(format!("D{session}:{turn}")),
        _ => None,
    }
}

/// Every id in one evidence string ("D8:6; D9:17" holds two).
fn evidence_ids(raw: &str) -> impl Iterator<Item = String> + '_ {
    raw.split([';', ',', ' '])
        .filter(|s| !s.trim().is_empty())
        .filter_map(normalize_dia_id)
}

impl Sample {
    /// Every turn with its session's index in [`Sample::sessions`].
    pub fn turns(&self) -> impl Iterator<Item = (usize, &LocomoTurn)> {
        self.sessions
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.turns.iter().map(move |t| (i, t)))
    }

    fn from_parts(
        sample_id: String,
        conversation: &Map<String, Value>,
        qa: &Value,
    ) -> Result<Self, BenchError> {
        let fail = |reason: String| BenchError::Dataset {
            question: format!("sample {sample_id}"),
            reason,
        };
        let mut sessions: BTreeMap<u32, Session> = BTreeMap::new();
        for (key, value) in conversation {
            let Some(number) = key
                .strip_prefix("session_")
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let turns: Vec<LocomoTurn> =
                serde_json::from_value(value.clone()).map_err(|e| fail(format!("{key}: {e}")))?;
            let date_time = conversation
                .get(&format!("session_{number}_date_time"))
                .and_then(Value::as_str)
                .map(str::to_owned);
            sessions.insert(
                number,
                Session {
                    number,
                    date_time,
                    turns,
                },
            );
        }
        if sessions.is_empty() {
            return Err(fail("no session_N lists".into()));
        }
        let raw: Vec<RawQuestion> =
            serde_json::from_value(qa.clone()).map_err(|e| fail(format!("qa: {e}")))?;
        let questions = raw
            .into_iter()
            .map(|q| {
                let mut evidence: Vec<String> = Vec::new();
                for id in q.evidence.iter().flat_map(|e| evidence_ids(e)) {
                    if !evidence.contains(&id) {
                        evidence.push(id);
                    }
                }
                LocomoQuestion {
                    question: q.question,
                    category: q.category,
                    evidence,
                }
            })
            .collect();
        Ok(Self {
            sample_id,
            sessions: sessions.into_values().collect(),
            questions,
        })
    }
}

/// Parses one JSON document in either layout; `stem` names a per-conversation file's
/// sample.
pub fn parse(text: &str, stem: &str) -> Result<Vec<Sample>, BenchError> {
    let value: Value = serde_json::from_str(text).map_err(|e| BenchError::Dataset {
        question: "(file)".into(),
        reason: e.to_string(),
    })?;
    let one = |object: &Map<String, Value>, fallback: String| -> Result<Sample, BenchError> {
        let id = match object.get("sample_id") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => fallback,
        };
        let qa = object.get("qa").cloned().unwrap_or(Value::Array(vec![]));
        match object.get("conversation") {
            Some(Value::Object(conversation)) => Sample::from_parts(id, conversation, &qa),
            Some(_) => Err(BenchError::Dataset {
                question: format!("sample {id}"),
                reason: "conversation is not an object".into(),
            }),
            None => Sample::from_parts(id, object, &qa),
        }
    };
    match &value {
        Value::Array(samples) => samples
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                Value::Object(o) => one(o, format!("{stem}-{i}")),
                _ => Err(BenchError::Dataset {
                    question: format!("#{i}"),
                    reason: "a sample is not an object".into(),
                }),
            })
            .collect(),
        Value::Object(o) => Ok(vec![one(o, stem.to_owned())?]),
        _ => Err(BenchError::Dataset {
            question: "(file)".into(),
            reason: "neither a LoCoMo sample nor an array of them".into(),
        }),
    }
}

/// Reads a LoCoMo file, or every `.json` file of a directory in name order.
pub fn load(path: &Path) -> Result<Vec<Sample>, BenchError> {
    let io = |source| BenchError::Io {
        path: path.to_owned(),
        source,
    };
    let files = if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .map_err(io)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_owned()]
    };
    let mut samples = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| BenchError::Io {
            path: file.clone(),
            source,
        })?;
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parsed = parse(&text, &stem).map_err(|e| match e {
            BenchError::Dataset { question, reason } => BenchError::Dataset {
                question: format!("{}: {question}", file.display()),
                reason,
            },
            other => other,
        })?;
        samples.extend(parsed);
    }
    if samples.is_empty() {
        return Err(BenchError::Dataset {
            question: path.display().to_string(),
            reason: "no LoCoMo sample found".into(),
        });
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn evidence_typos_are_normalised() {
        assert_eq!(normalize_dia_id("D1:3").as_deref(), Some("D1:3"));
        assert_eq!(normalize_dia_id("D30:05").as_deref(), Some("D30:5"));
        assert_eq!(normalize_dia_id("D:11:26").as_deref(), Some("D11:26"));
        assert_eq!(normalize_dia_id("D"), None);
        assert_eq!(normalize_dia_id("D1:x"), None);
        assert_eq!(normalize_dia_id("S1:2"), None);
        let ids: Vec<String> = evidence_ids("D8:6; D9:17").collect();
        assert_eq!(ids, ["D8:6", "D9:17"]);
        let ids: Vec<String> = evidence_ids("D9:1 D4:4 D4:6").collect();
        assert_eq!(ids, ["D9:1", "D4:4", "D4:6"]);
    }

    const CONVERSATION: &str = r#"{
        "speaker_a": "Ann", "speaker_b": "Bo",
        "session_10_date_time": "1:00 pm on 2 May, 2023",
        "session_10": [{"speaker": "Bo", "dia_id": "D10:1", "text": "later"}],
        "session_2_date_time": "9:00 am on 1 May, 2023",
        "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "hi",
                       "blip_caption": "a photo of a dog", "img_url": ["x"]}]
    }"#;

    #[test]
    fn both_layouts_read_the_same_sample() {
        let qa = r#"[{"question": "Q?", "answer": 2022, "evidence": ["D2:1", "D2:1; D10:1"],
                      "category": 2},
                     {"question": "Trick?", "adversarial_answer": "x", "evidence": [],
                      "category": 5}]"#;
        let canonical =
            format!(r#"[{{"sample_id": "conv-1", "conversation": {CONVERSATION}, "qa": {qa}}}]"#);
        let per_file = format!(
            "{{{}, \"qa\": {qa}}}",
            CONVERSATION
                .trim()
                .trim_start_matches('{')
                .trim_end_matches('}')
        );
        let a = parse(&canonical, "ignored").unwrap();
        let b = parse(&per_file, "conv-1").unwrap();
        assert_eq!(a, b);
        let s = &a[0];
        assert_eq!(s.sample_id, "conv-1");
        let numbers: Vec<u32> = s.sessions.iter().map(|s| s.number).collect();
        assert_eq!(numbers, [2, 10], "sessions in numeric order");
        assert_eq!(
            s.sessions[0].date_time.as_deref(),
            Some("9:00 am on 1 May, 2023")
        );
        assert_eq!(
            s.sessions[0].turns[0].blip_caption.as_deref(),
            Some("a photo of a dog")
        );
        assert_eq!(s.questions[0].evidence, ["D2:1", "D10:1"]);
        assert!(s.questions[1].evidence.is_empty());
        assert_eq!(s.turns().count(), 2);
    }

    #[test]
    fn malformed_samples_are_refused_with_the_sample_named() {
        let err = parse(
            r#"[{"sample_id": "c9", "conversation": {"speaker_a": "A"}}]"#,
            "f",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("c9") && err.contains("session"), "{err}");
        let err = parse(
            r#"[{"sample_id": "c8", "conversation": {"session_1": [{"speaker": 1}]}}]"#,
            "f",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("c8") && err.contains("session_1"), "{err}");
        assert!(parse("3", "f").is_err());
    }
}
