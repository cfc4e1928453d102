//! The two halves of a dev set: retrieval choices are made on the tuning half, and the
//! held-out half says whether they hold on questions they were not chosen on.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::bench::report::{Averaged, MetricMap};

/// Which half a question is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Half {
    Tuning,
    HeldOut,
}

impl Half {
    /// The half of the item at `index` (a conversation, or a question): even indexes
    /// tune, odd ones are held out, so both halves span the whole file.
    pub fn of(index: usize) -> Self {
        if index.is_multiple_of(2) {
            Half::Tuning
        } else {
            Half::HeldOut
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Half::Tuning => "tuning",
            Half::HeldOut => "held-out",
        }
    }
}

/// Appends a markdown row per half and retriever (`| retriever | half | n | cells |`),
/// the tuning half's rows first: `summaries` gives each retriever's averages by half.
pub fn rows<'a, R: std::fmt::Display + 'a>(
    out: &mut String,
    summaries: impl Iterator<Item = (&'a R, &'a BTreeMap<&'static str, Averaged>)> + Clone,
    cells: impl Fn(&MetricMap) -> String,
) {
    for half in [Half::Tuning, Half::HeldOut] {
        for (retriever, by_half) in summaries.clone() {
            if let Some(averaged) = by_half.get(half.as_str()) {
                let _ = writeln!(
                    out,
                    "| {retriever} | {} | {} | {} |",
                    half.as_str(),
                    averaged.questions,
                    cells(&averaged.metrics)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_alternate_from_tuning() {
        let halves: Vec<_> = (0..4).map(Half::of).collect();
        assert_eq!(
            halves,
            [Half::Tuning, Half::HeldOut, Half::Tuning, Half::HeldOut]
        );
    }
}
