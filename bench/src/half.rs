//! The two halves of a dev set: retrieval choices are made on the tuning half, and the
//! held-out half says whether they hold on questions they were not chosen on.

use serde::Serialize;

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
