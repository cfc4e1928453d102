//! Finding the JSON object in what a model actually returns: bare, inside a code fence,
//! or with prose around it.

use serde_json::{Map, Value};

/// How many candidate opening braces to try before giving up (bounds the work on
/// adversarial input).
const MAX_ATTEMPTS: usize = 64;

/// The first JSON object in `text`, if any.
pub fn find_json_object(text: &str) -> Option<Map<String, Value>> {
    for block in fenced_blocks(text) {
        if let Some(obj) = first_object(block) {
            return Some(obj);
        }
    }
    first_object(text)
}

/// Contents of ``` fences, language tag dropped.
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let body_start = after.find('\n').map_or(0, |i| i + 1);
        let body = &after[body_start..];
        match body.find("```") {
            Some(end) => {
                blocks.push(&body[..end]);
                rest = &body[end + 3..];
            }
            None => {
                blocks.push(body);
                break;
            }
        }
    }
    blocks
}

fn first_object(text: &str) -> Option<Map<String, Value>> {
    for (start, _) in text.match_indices('{').take(MAX_ATTEMPTS) {
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        if let Some(Ok(Value::Object(obj))) = values.next() {
            return Some(obj);
        }
    }
    None
}

/// A trimmed, non-empty string field (numbers are accepted as their text), at most
/// `max_chars` characters.
pub fn string_field(obj: &Map<String, Value>, key: &str, max_chars: usize) -> Option<String> {
    let text = match obj.get(key)? {
        Value::String(s) => s.trim().to_owned(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let lowered = text.to_lowercase();
    if text.is_empty() || lowered == "null" || lowered == "none" || lowered == "unknown" {
        return None;
    }
    Some(text.chars().take(max_chars).collect())
}

/// An array field's elements, or an empty slice when missing or not an array.
pub fn array_field<'a>(obj: &'a Map<String, Value>, key: &str) -> &'a [Value] {
    match obj.get(key) {
        Some(Value::Array(items)) => items,
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_objects_bare_fenced_and_in_prose() {
        assert!(find_json_object(r#"{"a": 1}"#).is_some());
        let fenced = "Sure! Here you go:\n```json\n{\"a\": 2}\n```\nAnything else?";
        assert_eq!(find_json_object(fenced).unwrap()["a"], 2);
        let prose = "The answer is {\"a\": 3} as requested {\"a\": 4}";
        assert_eq!(find_json_object(prose).unwrap()["a"], 3);
        let broken_then_good = "{not json} then {\"a\": 5}";
        assert_eq!(find_json_object(broken_then_good).unwrap()["a"], 5);
        assert!(find_json_object("no json here").is_none());
        assert!(find_json_object("[1, 2, 3]").is_none());
        assert!(find_json_object("```\nunterminated {\"a\": 6}").is_some());
    }

    #[test]
    fn string_fields_are_lenient() {
        let obj = find_json_object(r#"{"a": "  x ", "b": 7, "c": null, "d": "None", "e": ["x"]}"#)
            .unwrap();
        assert_eq!(string_field(&obj, "a", 10).as_deref(), Some("x"));
        assert_eq!(string_field(&obj, "b", 10).as_deref(), Some("7"));
        assert_eq!(string_field(&obj, "c", 10), None);
        assert_eq!(string_field(&obj, "d", 10), None);
        assert_eq!(string_field(&obj, "e", 10), None);
        assert_eq!(array_field(&obj, "e").len(), 1);
        assert!(array_field(&obj, "a").is_empty());
    }
}
