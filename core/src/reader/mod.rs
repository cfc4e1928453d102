//! Prompts and parsers for the model calls Cortex makes: the write-time extraction and
//! supersession arbiter (the benchmark's reader and judge live in the bench crate).
//! Parsers accept what models really return and never panic.

pub mod arbiter;
pub mod extraction;
pub mod json;

/// Why a model's answer could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    #[error("no JSON object in the model's answer")]
    NoJson,
}

#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn parsers_never_panic_on_arbitrary_text(text in ".*") {
            let _ = super::extraction::parse_extraction(&text);
            let _ = super::arbiter::parse_verdict(&text, 5);
        }

        #[test]
        fn parsers_never_panic_on_json_like_text(text in r#"[\{\}\[\]":,0-9a-z \n`\-\.]*"#) {
            let _ = super::extraction::parse_extraction(&text);
            let _ = super::arbiter::parse_verdict(&text, 3);
            let _ = super::extraction::parse_event_time(&text);
        }

        #[test]
        fn wrapped_objects_are_found(key in "[a-z]{1,8}", n in 0i64..1000, prose in "[a-zA-Z .!]*") {
            let text = format!("{prose}\n```json\n{{\"{key}\": {n}}}\n```\n{prose}");
            let obj = super::json::find_json_object(&text).unwrap();
            prop_assert_eq!(obj[&key].as_i64(), Some(n));
        }
    }
}
