//! The write-time layers' model calls: extraction (episodic + graph in one call) and the
//! soft-update arbiter. Their failures are returned to memorize, which logs and counts
//! them and keeps the memory.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use super::CortexMemory;
use crate::error::{ProviderError, StoreError};
use crate::memory::{Memory, MemoryId, now};
use crate::reader::ParseError;
use crate::reader::arbiter::{ArbiterCandidate, build_arbiter_prompt, parse_verdict};
use crate::reader::extraction::{
    Extraction, SELF_ENTITY, build_extraction_prompt, parse_extraction,
};
use crate::records::{EntityEdge, EntityId, EntityRole, EntityUpsert, Event, Supersession};
use crate::usage::CallKind;

/// Why an enrichment step did not complete (the memory itself is stored regardless).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnrichmentError {
    #[error("no LLM provider is configured for this layer")]
    NoLlm,
    #[error("the model call timed out")]
    Timeout,
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error("unusable answer: {0}")]
    Parse(#[from] ParseError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CortexMemory {
    pub(super) fn enrichment_failed(&self, step: &str, memory: &Memory, error: &EnrichmentError) {
        self.enrichment_failures.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(step, memory = %memory.id, %error, "enrichment failed; the memory is stored");
    }

    /// One generate call with the engine's timeout and budget, accounted per provider.
    async fn generate(&self, prompt: &str) -> Result<String, EnrichmentError> {
        let llm = self.llm.as_ref().ok_or(EnrichmentError::NoLlm)?;
        let call = llm.generate(prompt, 0.0, self.config.enrichment_max_tokens);
        let result = tokio::time::timeout(self.config.enrichment_timeout, call).await;
        let result = match result {
            Ok(r) => r,
            Err(_) => {
                self.usage.record(llm.name(), CallKind::Generate, None);
                return Err(EnrichmentError::Timeout);
            }
        };
        self.usage.record(
            llm.name(),
            CallKind::Generate,
            result.as_ref().ok().map(|r| r.usage),
        );
        Ok(result?.text)
    }

    /// Asks the arbiter which of `band` the new memory makes stale and supersedes those,
    /// each in the transaction that records its supersession.
    pub(super) async fn soft_update(
        &self,
        memory: &Memory,
        band: &[Memory],
    ) -> Result<Vec<MemoryId>, EnrichmentError> {
        let candidates: Vec<ArbiterCandidate<'_>> = band
            .iter()
            .map(|m| ArbiterCandidate {
                content: &m.content,
                saved_at: m.created_at,
            })
            .collect();
        let prompt = build_arbiter_prompt(&memory.content, memory.created_at, &candidates);
        let verdict = parse_verdict(&self.generate(&prompt).await?, band.len())?;
        let mut stale = Vec::new();
        for index in verdict.stale {
            let old = &band[index];
            let record = Supersession {
                old_id: old.id,
                new_id: memory.id,
                reason: verdict.reason.clone(),
                created_at: now(),
            };
            // One failed supersession (the candidate forgotten meanwhile, say) must not
            // hide the ones already committed.
            let generation = match self.store.supersede(&memory.user_id, &record).await {
                Ok(generation) => generation,
                Err(e) => {
                    self.enrichment_failed("supersede", memory, &e.into());
                    continue;
                }
            };
            let old_id = old.id;
            // At exactly one write ahead the index is the live set, so a candidate it
            // lacks was already stale: nothing to remove, the cache stays valid.
            self.update_cached(&memory.user_id, generation, move |index| {
                index.remove(&old_id);
                true
            })
            .await;
            stale.push(old.id);
        }
        Ok(stale)
    }

    /// One extraction call for the episodic event and the graph facts together.
    pub(super) async fn extract(&self, memory: &Memory) -> Result<(), EnrichmentError> {
        let layers = self.config.layers;
        let prompt = build_extraction_prompt(
            &memory.content,
            memory.created_at,
            layers.episodic,
            layers.graph,
        );
        let extraction = parse_extraction(&self.generate(&prompt).await?)?;
        if layers.episodic
            && let Some(event) = &extraction.event
        {
            let record = Event {
                memory_id: memory.id,
                event_time: event.event_time,
                actor: event.actor.clone(),
                location: event.location.clone(),
                event_type: event.event_type.clone(),
            };
            self.store.add_event(&memory.user_id, &record).await?;
        }
        if layers.graph {
            self.record_graph(memory, &extraction).await?;
        }
        Ok(())
    }

    /// Upserts the entities (the user as the synthetic `self` node), links the memory to
    /// its subject and mentions, and adds the relationships read from it.
    async fn record_graph(&self, memory: &Memory, x: &Extraction) -> Result<(), EnrichmentError> {
        let user = &memory.user_id;
        let mut ids: HashMap<String, EntityId> = HashMap::new();
        let mut upserts: Vec<EntityUpsert> = x
            .entities
            .iter()
            .map(|e| EntityUpsert {
                name: e.name.clone(),
                entity_type: e.entity_type.clone(),
                aliases: e.aliases.clone(),
            })
            .collect();
        // Subjects and relationship ends the model did not list as entities still get
        // nodes, so no fact is dropped.
        let named = x
            .subject
            .iter()
            .chain(x.relationships.iter().flat_map(|r| [&r.source, &r.target]));
        for name in named {
            upserts.push(EntityUpsert {
                name: name.clone(),
                ..EntityUpsert::default()
            });
        }
        for upsert in &upserts {
            if upsert.keys().is_empty() || ids.contains_key(&upsert.name) {
                continue;
            }
            let upsert = if upsert.name == SELF_ENTITY {
                EntityUpsert {
                    entity_type: Some("self".into()),
                    ..upsert.clone()
                }
            } else {
                upsert.clone()
            };
            let entity = self.store.upsert_entity(user, &upsert).await?;
            ids.insert(upsert.name.clone(), entity.id);
        }
        let subject = x.subject.as_ref().and_then(|s| ids.get(s)).copied();
        if let Some(subject) = subject {
            self.store
                .link_entity(user, &memory.id, &subject, EntityRole::Subject)
                .await?;
        }
        for id in ids.values().filter(|id| Some(**id) != subject) {
            self.store
                .link_entity(user, &memory.id, id, EntityRole::Mention)
                .await?;
        }
        for r in &x.relationships {
            let (Some(source), Some(target)) = (ids.get(&r.source), ids.get(&r.target)) else {
                continue;
            };
            let edge = EntityEdge {
                source: *source,
                target: *target,
                label: r.label.clone(),
                memory_id: Some(memory.id),
                created_at: now(),
            };
            self.store.add_edge(user, &edge).await?;
        }
        Ok(())
    }
}
