//! The write-time layers' model calls: extraction (episodic + graph in one call) and the
//! soft-update arbiter. Their failures are returned to memorize, which logs and counts
//! them and keeps the memory.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use super::CortexMemory;
use crate::enrichment_store::{ExtractedEdge, ExtractedLink, ExtractionRecords};
use crate::error::{ProviderError, StoreError};
use crate::memory::Supersession;
use crate::memory::{Memory, MemoryId, now};
use crate::reader::ParseError;
use crate::reader::arbiter::{ArbiterCandidate, build_arbiter_prompt, parse_verdict};
use crate::reader::extraction::{
    Extraction, SELF_ENTITY, build_extraction_prompt, parse_extraction,
};
use crate::records::{EntityRole, EntityUpsert, Event};
use crate::usage::CallKind;

/// Why an enrichment step did not complete (the memory itself is stored regardless).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnrichmentError {
    #[error("no LLM provider is configured for this layer")]
    NoLlm,
    #[error("the store keeps no enrichment records (no enrichment store is configured)")]
    NoStore,
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

    /// What `memory` makes stale among its `neighbours`: those in the band just below a
    /// duplicate, as the arbiter judges them. A failed call supersedes nothing (it is
    /// counted and logged; the memory is stored either way).
    pub(super) async fn made_stale(
        &self,
        memory: &Memory,
        neighbours: Vec<(Memory, f64)>,
    ) -> Vec<MemoryId> {
        let band: Vec<Memory> = neighbours
            .into_iter()
            .filter(|(_, cos)| {
                *cos >= self.config.soft_update_floor && *cos < self.config.dedup_threshold
            })
            .take(self.config.max_arbiter_candidates)
            .map(|(m, _)| m)
            .collect();
        if band.is_empty() {
            return Vec::new();
        }
        match self.soft_update(memory, &band).await {
            Ok(stale) => stale,
            Err(e) => {
                self.enrichment_failed("soft update", memory, &e);
                Vec::new()
            }
        }
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

    /// One extraction call for the episodic event and the graph facts together, written in
    /// one transaction: a failure leaves no partial graph.
    pub(super) async fn extract(&self, memory: &Memory) -> Result<(), EnrichmentError> {
        // Checked before the model call, which would be wasted without a place to write.
        let store = self.enrichment.as_ref().ok_or(EnrichmentError::NoStore)?;
        let layers = self.config.layers;
        let prompt = build_extraction_prompt(
            &memory.content,
            memory.created_at,
            layers.episodic,
            layers.graph,
        );
        let extraction = parse_extraction(&self.generate(&prompt).await?)?;
        let records = extraction_records(memory.id, &extraction, layers.episodic, layers.graph);
        if !records.is_empty() {
            store.record_extraction(&memory.user_id, &records).await?;
        }
        Ok(())
    }
}

/// The records an extraction of memory `memory_id` writes: its event when `event`, its
/// graph facts when `graph`. The extraction layer and the caller's own structure both go
/// through here, so the two write the same records.
pub(super) fn extraction_records(
    memory_id: MemoryId,
    extraction: &Extraction,
    event: bool,
    graph: bool,
) -> ExtractionRecords {
    let mut records = ExtractionRecords::new(memory_id);
    if event && let Some(e) = &extraction.event {
        records.events.push(Event {
            memory_id,
            event_time: e.event_time,
            actor: e.actor.clone(),
            location: e.location.clone(),
            event_type: e.event_type.clone(),
        });
    }
    if graph {
        graph_records(extraction, &mut records);
    }
    records
}

/// The entities (the user as the synthetic `self` node), the memory's links to its subject
/// and mentions, and the relationships read from it.
fn graph_records(x: &Extraction, records: &mut ExtractionRecords) {
    let mut upserts: Vec<EntityUpsert> = x
        .entities
        .iter()
        .map(|e| EntityUpsert {
            name: e.name.clone(),
            entity_type: e.entity_type.clone(),
            aliases: e.aliases.clone(),
        })
        .collect();
    // Subjects and relationship ends the model did not list as entities still get nodes,
    // so no fact is dropped.
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
    let mut position: HashMap<String, usize> = HashMap::new();
    for upsert in upserts {
        if upsert.keys().is_empty() || position.contains_key(&upsert.name) {
            continue;
        }
        position.insert(upsert.name.clone(), records.entities.len());
        records.entities.push(if upsert.name == SELF_ENTITY {
            EntityUpsert {
                entity_type: Some("self".into()),
                ..upsert
            }
        } else {
            upsert
        });
    }
    let subject = x.subject.as_ref().and_then(|s| position.get(s)).copied();
    // The subject's link comes first: a mention that resolves to the same entity (an
    // alias) is then not linked again.
    if let Some(entity) = subject {
        records.links.push(ExtractedLink {
            entity,
            role: EntityRole::Subject,
        });
    }
    for entity in (0..records.entities.len()).filter(|p| Some(*p) != subject) {
        records.links.push(ExtractedLink {
            entity,
            role: EntityRole::Mention,
        });
    }
    for r in &x.relationships {
        let (Some(&source), Some(&target)) = (position.get(&r.source), position.get(&r.target))
        else {
            continue;
        };
        records.edges.push(ExtractedEdge {
            source,
            target,
            label: r.label.clone(),
            created_at: now(),
        });
    }
}
