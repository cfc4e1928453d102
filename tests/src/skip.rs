//! The one skip policy of every test in the workspace.
//!
//! A test whose prerequisite is missing (a database, the local model, the Python client, a
//! superuser, a server offering TLS) calls [`skip_or_fail`]. Outside CI that prints one
//! line and the test returns; under CI ([`in_ci`]) it panics, because CI provides every
//! prerequisite and a skip there would hide a gap.
//!
//! The line goes to the process's stderr handle directly: libtest captures what
//! `eprintln!` prints and shows it only for failing tests, so a skipped (passing) test
//! printed that way would look like one that ran.

use std::fmt::Display;
use std::io::Write;
use std::path::PathBuf;

/// Whether the tests run under CI: the variable `CI` is set to anything but the empty
/// string, `0` or `false` (any case, surrounding blanks ignored). CI services set `CI=true`;
/// `.ci/run` sets it when unset; `CI=0` or `CI=false` lets a developer opt out explicitly.
pub fn in_ci() -> bool {
    means_ci(std::env::var("CI").ok().as_deref())
}

fn means_ci(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        let v = v.trim();
        !(v.is_empty() || v == "0" || v.eq_ignore_ascii_case("false"))
    })
}

/// Skips the running test for `reason`, or fails it under CI. The caller returns right
/// after; the line names the test (libtest names each test's thread after it).
///
/// # Panics
///
/// Under CI, always: a missing prerequisite there is a failure.
pub fn skip_or_fail(reason: impl Display) {
    let current = std::thread::current();
    let test = current.name().filter(|n| *n != "main").unwrap_or("test");
    if in_ci() {
        panic!("{test} cannot run under CI: {reason}");
    }
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
}

/// `CORTEX_TEST_DATABASE_URL`, or `None` after [`skip_or_fail`] when it is unset or blank.
pub fn test_database_url() -> Option<String> {
    match std::env::var("CORTEX_TEST_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url.trim().to_owned()),
        _ => {
            skip_or_fail("CORTEX_TEST_DATABASE_URL is not set (scripts/test.sh sets it)");
            None
        }
    }
}

/// The all-MiniLM-L6-v2 directory the local-model tests use: `CORTEX_TEST_MODEL_DIR`, else
/// where `scripts/fetch-test-model.sh` puts it by default (`~/.cortex/models/`), or `None`
/// after [`skip_or_fail`] when neither holds the model.
pub fn test_model_dir() -> Option<PathBuf> {
    model_dir(
        "CORTEX_TEST_MODEL_DIR",
        "all-MiniLM-L6-v2",
        "scripts/fetch-test-model.sh",
    )
}

/// all-mpnet-base-v2: `CORTEX_TEST_MPNET_MODEL_DIR`, else where
/// `scripts/fetch-mpnet-model.sh` puts it by default, or `None` after [`skip_or_fail`].
pub fn test_mpnet_model_dir() -> Option<PathBuf> {
    model_dir(
        "CORTEX_TEST_MPNET_MODEL_DIR",
        "all-mpnet-base-v2",
        "scripts/fetch-mpnet-model.sh",
    )
}

/// The local reranker's cross-encoder (ms-marco-MiniLM-L-12-v2):
/// `CORTEX_TEST_RERANK_MODEL_DIR`, else where `scripts/fetch-reranker-model.sh` puts it by
/// default, or `None` after [`skip_or_fail`].
pub fn test_rerank_model_dir() -> Option<PathBuf> {
    model_dir(
        "CORTEX_TEST_RERANK_MODEL_DIR",
        "ms-marco-MiniLM-L-12-v2",
        "scripts/fetch-reranker-model.sh",
    )
}

fn model_dir(variable: &str, name: &str, script: &str) -> Option<PathBuf> {
    let dir = std::env::var_os(variable)
        .filter(|v| !v.is_empty())
        .map_or_else(
            || {
                std::env::var_os("HOME")
                    .map_or_else(|| PathBuf::from("/nonexistent"), PathBuf::from)
                    .join(".cortex/models")
                    .join(name)
            },
            PathBuf::from,
        );
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    skip_or_fail(format_args!(
        "no {name} model at {}: run `export {variable}=\"$(bash {script})\"` first",
        dir.display()
    ));
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_means_set_and_not_blank_zero_or_false() {
        let cases = [
            (None, false),
            (Some(""), false),
            (Some(" "), false),
            (Some("0"), false),
            (Some("false"), false),
            (Some("False"), false),
            (Some("true"), true),
            (Some("1"), true),
            (Some("yes"), true),
        ];
        for (value, expected) in cases {
            assert_eq!(means_ci(value), expected, "CI={value:?}");
        }
    }
}
