//! `cortex reembed`: every memory embedded again with the configured embedder, staged
//! beside the current vectors and switched in one transaction. Recall keeps working on the
//! old vectors until the switch; a run stopped anywhere is resumed by running it again
//! (staged vectors are kept, so nothing is embedded twice).

use cortex_core::{
    provider::EmbedTask, provider::LLMProvider, signature::EmbeddingSignature, transfer::Switch,
    transfer::TransferStore,
};
use serde::Serialize;

use crate::admin::error::AdminError;
use crate::admin::import::writer::check_vectors;
use crate::admin::progress::Progress;

/// Memories per embedding call and per staging transaction, by default.
pub const BATCH: u64 = 64;
/// A rough English average, for the estimate only; the run reports the provider's count.
const CHARS_PER_TOKEN: u64 = 4;
/// Rounds of "embed what arrived meanwhile, then switch" before giving up.
const ROUNDS: usize = 5;

/// What a re-embedding will ask of the provider.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Estimate {
    /// Memories still without a vector of the new signature.
    pub memories: u64,
    pub calls: u64,
    pub characters: u64,
    /// `characters / 4`: an estimate; providers count their own way.
    pub tokens: u64,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub embedded: u64,
    pub calls: u64,
    /// Input tokens as the provider reported them (0 for providers that report none).
    pub tokens: u64,
    /// Memories whose vectors were switched.
    pub switched: u64,
}

/// Counts what is left to embed for `signature`.
pub async fn estimate(
    store: &dyn TransferStore,
    signature: &EmbeddingSignature,
    batch: usize,
) -> Result<Estimate, AdminError> {
    let mut estimate = Estimate::default();
    let mut after = 0;
    loop {
        let page = store.unstaged(signature, after, 1000).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        estimate.memories += page.len() as u64;
        estimate.characters += page
            .iter()
            .map(|m| m.content.chars().count() as u64)
            .sum::<u64>();
    }
    estimate.calls = estimate.memories.div_ceil(batch.max(1) as u64);
    estimate.tokens = estimate.characters.div_ceil(CHARS_PER_TOKEN);
    Ok(estimate)
}

/// Embeds and stages every memory without a staged vector of the embedder's signature,
/// then switches; memories written meanwhile are embedded in a further round.
pub async fn reembed(
    store: &dyn TransferStore,
    embedder: &dyn LLMProvider,
    batch: usize,
    progress: &Progress,
) -> Result<Outcome, AdminError> {
    let signature = embedder.embedding_signature();
    let mut outcome = Outcome::default();
    for _ in 0..ROUNDS {
        let mut after = 0;
        loop {
            let page = store.unstaged(&signature, after, batch.max(1)).await?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            let texts: Vec<String> = page.iter().map(|m| m.content.clone()).collect();
            let result = embedder.embed(&texts, EmbedTask::Document).await?;
            check_vectors(&result.vectors, page.len(), &signature)?;
            let staged: Vec<_> = page.iter().map(|m| m.id).zip(result.vectors).collect();
            store.stage_vectors(&signature, &staged).await?;
            outcome.calls += 1;
            outcome.embedded += page.len() as u64;
            outcome.tokens += result.usage.input_tokens;
            progress.inc(page.len() as u64);
        }
        match store.switch_vectors(&signature).await? {
            Switch::Switched { memories } => {
                outcome.switched = memories;
                return Ok(outcome);
            }
            Switch::Missing { memories } => {
                tracing::info!(
                    memories,
                    "memories arrived during the re-embedding; embedding them"
                );
            }
        }
    }
    Err(AdminError::Usage(format!(
        "memories kept arriving faster than they were embedded ({ROUNDS} rounds); stop the \
         writers and run `cortex reembed` again: what is staged is kept"
    )))
}
