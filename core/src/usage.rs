//! Token and call accounting per provider, as the engine exposes it.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::provider::TokenUsage;

/// What one provider has cost this engine so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderUsage {
    pub embed_calls: u64,
    pub generate_calls: u64,
    pub rerank_calls: u64,
    pub failed_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Which provider operation a call was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    Embed,
    Generate,
    Rerank,
}

/// Adds up every provider call's tokens by provider name.
#[derive(Debug, Default)]
pub struct UsageMeter {
    totals: Mutex<BTreeMap<String, ProviderUsage>>,
}

impl UsageMeter {
    /// Records one call; `usage` is `None` when it failed.
    pub fn record(&self, provider: &str, kind: CallKind, usage: Option<TokenUsage>) {
        let mut totals = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = totals.entry(provider.to_owned()).or_default();
        match kind {
            CallKind::Embed => entry.embed_calls += 1,
            CallKind::Generate => entry.generate_calls += 1,
            CallKind::Rerank => entry.rerank_calls += 1,
        }
        match usage {
            Some(u) => {
                entry.input_tokens += u.input_tokens;
                entry.output_tokens += u.output_tokens;
            }
            None => entry.failed_calls += 1,
        }
    }

    /// The totals so far, by provider name.
    pub fn snapshot(&self) -> BTreeMap<String, ProviderUsage> {
        self.totals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_up_per_provider_and_count_failures() {
        let meter = UsageMeter::default();
        let u = |i, o| {
            Some(TokenUsage {
                input_tokens: i,
                output_tokens: o,
            })
        };
        meter.record("gemini", CallKind::Embed, u(10, 0));
        meter.record("gemini", CallKind::Embed, u(5, 0));
        meter.record("gemini", CallKind::Generate, None);
        meter.record("anthropic", CallKind::Generate, u(100, 20));
        let s = meter.snapshot();
        assert_eq!(
            s["gemini"],
            ProviderUsage {
                embed_calls: 2,
                generate_calls: 1,
                rerank_calls: 0,
                failed_calls: 1,
                input_tokens: 15,
                output_tokens: 0
            }
        );
        assert_eq!(s["anthropic"].output_tokens, 20);
    }
}
