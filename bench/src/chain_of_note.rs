//! The Chain-of-Note reader (benchmark path, never on recall): the model notes the facts
//! the retrieved memories support, then answers from those notes, and says exactly
//! [`ABSTAIN_SENTINEL`] when they do not hold the answer. The answer comes first in the
//! output so a truncated budget never eats it.

/// The exact abstention answer.
pub const ABSTAIN_SENTINEL: &str = "I don't know";

/// One retrieved memory as the reader sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReaderMemory<'a> {
    /// When it was saved (any human-readable date).
    pub date: &'a str,
    pub content: &'a str,
}

/// The reader's parsed answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderAnswer {
    pub answer: String,
    pub notes: String,
    pub abstained: bool,
}

pub fn build_reader_prompt(
    question: &str,
    question_date: Option<&str>,
    memories: &[ReaderMemory<'_>],
) -> String {
    let listed: Vec<String> = memories
        .iter()
        .enumerate()
        .map(|(i, m)| format!("[{}] ({}) {}", i + 1, m.date, m.content))
        .collect();
    let today = question_date.map_or_else(String::new, |d| format!("Today is {d}.\n"));
    format!(
        "You answer a question from a user's saved memories.\n{today}\nMemories (oldest \
         facts may be outdated; prefer the most recent when they conflict):\n{}\n\n\
         Question: {question}\n\nFirst write the answer, then the notes it rests on, in \
         exactly this form:\nANSWER: <a short answer; if the memories do not contain it, \
         exactly \"{ABSTAIN_SENTINEL}\">\nNOTES:\n- <each supporting fact, with its memory \
         number>\n\nReason over dates and counts carefully. Answer \"{ABSTAIN_SENTINEL}\" only \
         when the memories genuinely lack the answer.",
        if listed.is_empty() {
            "(none)".to_owned()
        } else {
            listed.join("\n")
        }
    )
}

/// Reads `ANSWER:` (and `NOTES:`) from the model's output; without the marker, the first
/// non-empty line is the answer.
pub fn parse_reader_answer(text: &str) -> ReaderAnswer {
    // ASCII lowercasing keeps every byte offset, so a marker found in the lowered copy
    // indexes `text` (`to_lowercase` turns the 2-byte 'İ' into 3 bytes).
    let lower = text.to_ascii_lowercase();
    let (answer, notes) = match lower.find("answer:") {
        Some(at) => {
            let rest = &text[at + "answer:".len()..];
            match rest.to_ascii_lowercase().find("notes:") {
                Some(n) => (rest[..n].trim(), rest[n + "notes:".len()..].trim()),
                None => (rest.trim(), ""),
            }
        }
        None => (
            text.lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or(""),
            "",
        ),
    };
    let answer = answer
        .trim_matches(|c: char| c == '*' || c.is_whitespace())
        .to_owned();
    ReaderAnswer {
        abstained: is_abstention(&answer),
        answer,
        notes: notes.to_owned(),
    }
}

/// Whether an answer is the abstention sentinel (modulo case, quotes, trailing punctuation
/// and curly apostrophes).
pub fn is_abstention(answer: &str) -> bool {
    let cleaned: String = answer
        .trim()
        .trim_matches(|c: char| c == '"' || c == '\'' || c == '.' || c == '!')
        .replace('\u{2019}', "'")
        .to_lowercase();
    cleaned == ABSTAIN_SENTINEL.to_lowercase() || cleaned.is_empty()
}

/// The LLM-judge prompt: is `hypothesis` a correct answer to `question` given `gold`? For
/// unanswerable questions, a correct answer is an abstention.
pub fn build_judge_prompt(
    question: &str,
    gold: &str,
    hypothesis: &str,
    abstention: bool,
) -> String {
    if abstention {
        format!(
            "The question below cannot be answered from the user's history; the explanation \
             says why. Does the response correctly say it does not know (rather than invent \
             an answer)? Answer yes or no only.\n\nQuestion: {question}\nExplanation: \
             {gold}\nResponse: {hypothesis}"
        )
    } else {
        format!(
            "Is the response a correct answer to the question? It is correct if it contains \
             the correct answer or is equivalent to it; a response that gives only part of \
             the answer, or a wrong one, is not. Answer yes or no only.\n\nQuestion: \
             {question}\nCorrect answer: {gold}\nResponse: {hypothesis}"
        )
    }
}

/// The judge's verdict: its first word is yes.
pub fn parse_judge(text: &str) -> bool {
    text.trim_start_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase()
        .starts_with("yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_lists_memories_and_puts_the_answer_first() {
        let m = [ReaderMemory {
            date: "2024-01-02",
            content: "I adopted a cat named Miso",
        }];
        let p = build_reader_prompt("What is my cat's name?", Some("2024-03-01"), &m);
        assert!(p.contains("[1] (2024-01-02) I adopted a cat named Miso"));
        assert!(p.contains("Today is 2024-03-01."));
        assert!(p.find("ANSWER:").unwrap() < p.find("NOTES:").unwrap());
        assert!(build_reader_prompt("q", None, &[]).contains("(none)"));
    }

    #[test]
    fn answers_parse_with_or_without_markers() {
        let a = parse_reader_answer("ANSWER: Miso\nNOTES:\n- [1] adopted a cat named Miso");
        assert_eq!(a.answer, "Miso");
        assert!(a.notes.contains("[1]"));
        assert!(!a.abstained);
        let cut = parse_reader_answer("**Answer:** Miso\nNOTES:\n- [1] adopt");
        assert_eq!(cut.answer, "Miso");
        assert!(parse_reader_answer("ANSWER: I don’t know.").abstained);
        assert!(parse_reader_answer("answer: \"I don't know\"").abstained);
        assert_eq!(
            parse_reader_answer("\n  Miso the cat\nmore").answer,
            "Miso the cat"
        );
        assert!(parse_reader_answer("").abstained);
    }

    #[test]
    fn markers_after_text_that_lowercases_longer() {
        // Found by `cargo fuzz run extraction`: offsets from a fully lowercased copy
        // sliced the original out of bounds or inside a character.
        let a = parse_reader_answer("İanswer:");
        assert_eq!(a.answer, "");
        let a = parse_reader_answer("answer:İnotes:");
        assert_eq!(a.answer, "İ");
        let a = parse_reader_answer("İ ANSWER: Miso é\nNOTES: ẞ [1]");
        assert_eq!((a.answer.as_str(), a.notes.as_str()), ("Miso é", "ẞ [1]"));
    }

    #[test]
    fn judge_prompts_and_verdicts() {
        assert!(build_judge_prompt("q", "g", "h", true).contains("does not know"));
        assert!(build_judge_prompt("q", "g", "h", false).contains("Correct answer: g"));
        assert!(parse_judge("Yes."));
        assert!(parse_judge("**yes** it is"));
        assert!(!parse_judge("No, the answer is wrong"));
        assert!(!parse_judge(""));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// What the fuzz target checked while the reader lived in core: any text parses,
        /// the answer is trimmed, abstention is exactly the sentinel, and the judge reads
        /// the first word whatever punctuation leads.
        #[test]
        fn any_text_parses_to_a_trimmed_answer(text in ".*") {
            let answer = parse_reader_answer(&text);
            proptest::prop_assert_eq!(answer.abstained, is_abstention(&answer.answer));
            let untrimmed = |c: char| c == '*' || c.is_whitespace();
            proptest::prop_assert!(
                !answer.answer.starts_with(untrimmed) && !answer.answer.ends_with(untrimmed)
            );
            proptest::prop_assert_eq!(answer.notes.as_str(), answer.notes.trim());
            proptest::prop_assert_eq!(parse_judge(&text), parse_judge(&format!("** {text}")));
        }
    }
}
