//! memorize: validate, embed once and store one memory in one transaction, with the
//! layers (dedup, soft update, extraction) and a caller's correction.

use super::enrichment::extraction_records;

use chrono::{DateTime, Utc};

use crate::embedding::validate_embedding;
use crate::enrichment_store::MemoryRecords;
use crate::error::StoreError;
use crate::error::{CortexError, EmbeddingProblem, Result};
use crate::memory::{Memory, MemoryId, MemoryKind};
use crate::new_memory::NewMemory;
use crate::provider::{EmbedTask, LLMProvider};
use crate::reader::extraction::Extraction;
use crate::signature::EmbeddingSignature;
use crate::store::MemoryStore;
use crate::structure::MemoryStructure;
use crate::usage::CallKind;

use super::{CortexMemory, Layers};

impl CortexMemory {
    /// Validates, embeds once and stores one memory in one transaction. With layers on:
    /// a near-duplicate is not written (dedup), related memories the new one makes stale
    /// are superseded (soft update), and one extraction call records its event and graph
    /// facts. A layer that fails never loses the memory.
    ///
    /// `options` (`&Default::default()` for none) add what a caller may know: a past date
    /// (what the memory shows and what `since`/`until` see; ranking is unchanged), an
    /// expiry, its structure, and a memory this one corrects (`replaces`, an id or unique
    /// prefix). A correction is written with its supersession in one transaction, so
    /// recall returns the new memory and never the old one, and `history` shows the
    /// chain; the dedup and soft-update layers stand aside for it, since the caller has
    /// said what the new memory replaces. A correction that gives no tags keeps the old
    /// memory's; one that gives tags has exactly those (docs/FORMAT.md, "Corrections").
    pub async fn memorize(
        &self,
        user: &str,
        content: &str,
        kind: MemoryKind,
        tags: &[String],
        options: &MemorizeOptions,
    ) -> Result<Memorized> {
        self.memorize_carrying(user, content, kind, Tags::OrReplaced(tags), options, None)
            .await
    }

    /// [`memorize`](Self::memorize), writing `carried` (another version's
    /// records) with the memory.
    pub(super) async fn memorize_carrying(
        &self,
        user: &str,
        content: &str,
        kind: MemoryKind,
        tags: Tags<'_>,
        options: &MemorizeOptions,
        carried: Option<MemoryRecords>,
    ) -> Result<Memorized> {
        // Every argument is checked before the embed call.
        let (new, replaced, structure) = self
            .prepare(user, content, kind, tags, options, carried)
            .await?;
        let signature = self.guard_signature().await?.1;
        let vector = self
            .embed_one(content, EmbedTask::Document, &signature)
            .await?;
        // A correction is the caller's decision: no layer second-guesses it.
        let layers = match replaced {
            Some(_) => Layers {
                dedup: false,
                soft_update: false,
                ..self.config.layers
            },
            None => self.config.layers,
        };
        let neighbours = if layers.dedup || layers.soft_update {
            self.neighbours(user, &vector, signature.dimension).await?
        } else {
            Vec::new()
        };
        if layers.dedup
            && let Some((existing, _)) = neighbours
                .iter()
                .find(|(_, cos)| *cos >= self.config.dedup_threshold)
        {
            // The memory is known already; what the caller says about it is still kept.
            if let Some(x) = &structure {
                let records = extraction_records(existing.id, x, true, true);
                self.records()?.record_extraction(user, &records).await?;
            }
            return Ok(Memorized {
                memory: existing.clone(),
                status: MemorizeStatus::Duplicate,
                superseded: Vec::new(),
            });
        }
        let added = match self.store.add(&new, &vector, &signature).await {
            Ok(added) => added,
            // Another correction of the same memory committed first.
            Err(StoreError::AlreadySuperseded(old)) => {
                return Err(CortexError::invalid(
                    "replaces",
                    format!("memory {old} was already replaced; replace its successor instead"),
                ));
            }
            Err(e) => return Err(e.into()),
        };
        let _ = self.stored_signature.set(signature);
        let memory = added.memory.clone();
        self.update_cached(user, added.generation, move |index| {
            if let Some(old) = replaced {
                index.remove(&old);
            }
            index.insert(added.memory, &vector).is_ok()
        })
        .await;

        let mut superseded: Vec<MemoryId> = replaced.into_iter().collect();
        if layers.soft_update {
            superseded.extend(self.made_stale(&memory, neighbours).await);
        }
        // The caller's own structure stands in for the model's reading of the memory.
        if (layers.episodic || layers.graph)
            && !options.skip_extraction
            && structure.is_none()
            && let Err(e) = self.extract(&memory).await
        {
            self.enrichment_failed("extraction", &memory, &e);
        }
        let status = if superseded.is_empty() {
            MemorizeStatus::Stored
        } else {
            MemorizeStatus::Superseded
        };
        Ok(Memorized {
            memory,
            status,
            superseded,
        })
    }

    /// The memory a memorize writes, checked: its date, expiry, the memory it corrects
    /// (whose tags it keeps when `tags` allows and gives none), and the records written
    /// with it (the caller's structure, validated, or else `carried`).
    pub(super) async fn prepare(
        &self,
        user: &str,
        content: &str,
        kind: MemoryKind,
        tags: Tags<'_>,
        options: &MemorizeOptions,
        carried: Option<MemoryRecords>,
    ) -> Result<(NewMemory, Option<MemoryId>, Option<Extraction>)> {
        let given = match tags {
            Tags::OrReplaced(given) | Tags::Exactly(given) => given,
        };
        let mut new = NewMemory::new(user, content, kind, given, self.config.max_content_bytes)?;
        if let Some(at) = options.created_at {
            new = new.dated(at)?;
        }
        if let Some(at) = options.expires_at {
            new = new.expiring(at, self.clock.now())?;
        }
        let replaced = match options.replaces.as_deref() {
            Some(id) => Some(self.replaceable(user, id).await?),
            None => None,
        };
        if let Some(old) = &replaced {
            let reason = options.reason.as_deref().unwrap_or(REPLACED_BY_CALLER);
            new = new.replacing(old.id, reason);
            if matches!(tags, Tags::OrReplaced(_)) && new.tags.is_empty() {
                new.tags = old.tags.clone();
            }
        }
        let replaced = replaced.map(|old| old.id);
        let structure = match &options.structure {
            Some(s) if !s.is_empty() => {
                if !self.store.capabilities().records {
                    return Err(StoreError::Unsupported(
                        "entities and events written with a memory",
                    )
                    .into());
                }
                Some(s.validated()?)
            }
            _ => None,
        };
        if let Some(x) = &structure {
            let records = extraction_records(new.id, x, true, true);
            new = new.with_records(records);
        } else if let Some(carried) = carried.filter(|c| !c.is_empty()) {
            let records = carried.for_memory(new.id);
            new = new.with_records(records);
        }
        Ok((new, replaced, structure))
    }

    /// Live memories most similar to `vector`, with their cosine, best first.
    pub(super) async fn neighbours(
        &self,
        user: &str,
        vector: &[f32],
        dimension: usize,
    ) -> Result<Vec<(Memory, f64)>> {
        let built = self.current_index(user, dimension).await?;
        let Some(built) = built.as_ref() else {
            return Ok(Vec::new());
        };
        let depth = self.config.max_arbiter_candidates.max(1) * 2;
        let now = self.clock.now();
        Ok(built
            .index
            .dense_search(vector, depth)?
            .into_iter()
            .map(|hit| (built.index.memory(hit.row).clone(), hit.score))
            .filter(|(m, _)| !m.expired_at(now))
            .collect())
    }

    /// The store's signature (if any) and the provider's, refusing a mismatch. Runs before
    /// the embed call so a mismatched store costs no provider call.
    pub(super) async fn guard_signature(
        &self,
    ) -> Result<(Option<EmbeddingSignature>, EmbeddingSignature)> {
        let got = self.embedder.embedding_signature();
        let stored = match self.stored_signature.get() {
            Some(known) => Some(known.clone()),
            None => {
                let read = self.store.signature().await?;
                if let Some(sig) = &read {
                    let _ = self.stored_signature.set(sig.clone());
                }
                read
            }
        };
        match stored {
            Some(stored) if stored != got => Err(CortexError::EmbeddingMismatch { stored, got }),
            stored => Ok((stored, got)),
        }
    }

    /// One embed call for one text, with the vector checked before anything uses it.
    pub(super) async fn embed_one(
        &self,
        text: &str,
        task: EmbedTask,
        signature: &EmbeddingSignature,
    ) -> Result<Vec<f32>> {
        let result = self.embedder.embed(&[text.to_owned()], task).await;
        let usage = result.as_ref().ok().map(|r| r.usage);
        self.usage
            .record(self.embedder.name(), CallKind::Embed, usage);
        let result = result?;
        let got = result.vectors.len();
        let Ok([vector]) = <[Vec<f32>; 1]>::try_from(result.vectors) else {
            return Err(EmbeddingProblem::WrongCount { expected: 1, got }.into());
        };
        validate_embedding(&vector, signature.dimension)?;
        Ok(vector)
    }
}

/// The supersession reason a caller's correction records (`history` shows it).
pub const REPLACED_BY_CALLER: &str = "replaced by the caller";

/// What [`CortexMemory::memorize`] may add to a memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemorizeOptions {
    /// When it became true, if not now (not in the future).
    pub created_at: Option<DateTime<Utc>>,
    /// The memory this one corrects: a full id or a unique prefix of a live memory.
    pub replaces: Option<String>,
    /// The supersession's reason for `history` (default [`REPLACED_BY_CALLER`]).
    pub reason: Option<String>,
    /// Leaves out the extraction layers' call: a retag's content is the old memory's, whose
    /// events and entity links are already recorded.
    pub skip_extraction: bool,
    /// When the memory expires (after now): from then on it is never recalled.
    pub expires_at: Option<DateTime<Utc>>,
    /// What the caller knows about the memory (its entities, their relations, its event):
    /// written with it in its transaction, as the extraction layer's records, whatever the
    /// layer flags; the extraction call is then not made.
    pub structure: Option<MemoryStructure>,
}

/// Which tags a new version of a memory gets.
#[derive(Debug, Clone, Copy)]
pub(super) enum Tags<'a> {
    /// These; when none are given and the memory corrects another, the corrected one's:
    /// a caller who corrects the text has not asked to drop the labels.
    OrReplaced(&'a [String]),
    /// Exactly these, even none: a retag has decided the whole set.
    Exactly(&'a [String]),
}

/// What memorize did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemorizeStatus {
    /// A new memory was written.
    Stored,
    /// A live memory was near-identical; nothing was written and `memory` is that one.
    Duplicate,
    /// A new memory was written and made the memories in `superseded` stale.
    Superseded,
}

impl MemorizeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MemorizeStatus::Stored => "stored",
            MemorizeStatus::Duplicate => "duplicate",
            MemorizeStatus::Superseded => "superseded",
        }
    }
}

/// The outcome of [`CortexMemory::memorize`].
#[derive(Debug, Clone, PartialEq)]
pub struct Memorized {
    pub memory: Memory,
    pub status: MemorizeStatus,
    /// Memories this one made stale (soft update).
    pub superseded: Vec<MemoryId>,
}
