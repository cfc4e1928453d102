//! The supersession arbiter: one call that decides which older memories a new one makes
//! stale, with every candidate in one prompt.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

use super::ParseError;
use super::json::{array_field, find_json_object, string_field};

/// An older memory shown to the arbiter.
#[derive(Debug, Clone, PartialEq)]
pub struct ArbiterCandidate<'a> {
    pub content: &'a str,
    pub saved_at: DateTime<Utc>,
}

/// The arbiter's decision: 0-based indexes into the candidates, and why.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    pub stale: Vec<usize>,
    pub reason: String,
}

pub fn build_arbiter_prompt(
    new_content: &str,
    saved_at: DateTime<Utc>,
    candidates: &[ArbiterCandidate<'_>],
) -> String {
    let listed: Vec<String> = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                "[{}] (saved {}) \"\"\"{}\"\"\"",
                i + 1,
                c.saved_at.to_rfc3339_opts(SecondsFormat::Secs, true),
                c.content
            )
        })
        .collect();
    format!(
        "A user saved a new memory. Decide which of the older memories below it makes stale: \
         contradicted, outdated or replaced by it, so that recall returns only the current \
         fact. An older memory that the new one merely adds detail to, or that is about \
         something else, is NOT stale.\n\nNew memory (saved {}):\n\"\"\"{new_content}\"\"\"\n\n\
         Older memories:\n{}\n\nAnswer with ONLY a JSON object: {{\"stale\": [numbers of the \
         older memories the new one replaces], \"reason\": \"one short sentence\"}}. Use \
         {{\"stale\": []}} when none is stale.",
        saved_at.to_rfc3339_opts(SecondsFormat::Secs, true),
        listed.join("\n")
    )
}

/// Parses the arbiter's answer for `candidates` candidates. Numbers out of range, repeats
/// and non-numbers are dropped; no JSON object at all is an error.
pub fn parse_verdict(text: &str, candidates: usize) -> Result<Verdict, ParseError> {
    let obj = find_json_object(text).ok_or(ParseError::NoJson)?;
    let mut stale = Vec::new();
    for item in array_field(&obj, "stale") {
        let n = match item {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s
                .trim()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse()
                .ok(),
            _ => None,
        };
        let Some(n) = n.filter(|n| n.fract() == 0.0 && *n >= 1.0 && *n <= candidates as f64) else {
            continue;
        };
        let index = n as usize - 1;
        if !stale.contains(&index) {
            stale.push(index);
        }
    }
    Ok(Verdict {
        stale,
        reason: string_field(&obj, "reason", 500)
            .unwrap_or_else(|| "superseded by a newer memory".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_numbers_every_candidate() {
        let at = "2024-01-01T00:00:00Z".parse().unwrap();
        let c = [
            ArbiterCandidate {
                content: "laptop is a thinkpad",
                saved_at: at,
            },
            ArbiterCandidate {
                content: "laptop has 16GB",
                saved_at: at,
            },
        ];
        let p = build_arbiter_prompt("laptop is a macbook now", at, &c);
        assert!(p.contains("[1] (saved 2024-01-01T00:00:00Z) \"\"\"laptop is a thinkpad\"\"\""));
        assert!(p.contains("[2]") && !p.contains("[3]"));
    }

    #[test]
    fn verdicts_are_clamped_to_the_candidates() {
        let v = parse_verdict(
            r#"{"stale": [1, "2", 2, 0, 7, 1.5, null], "reason": "moved"}"#,
            3,
        )
        .unwrap();
        assert_eq!(v.stale, [0, 1]);
        assert_eq!(v.reason, "moved");
        let v = parse_verdict("```json\n{\"stale\": []}\n```", 3).unwrap();
        assert!(v.stale.is_empty());
        assert!(!v.reason.is_empty());
        assert_eq!(parse_verdict("none of them", 3), Err(ParseError::NoJson));
    }
}
