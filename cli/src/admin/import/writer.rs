//! Writing export lines into a store: batch by batch, every write idempotent.
//!
//! A batch is read and validated whole before anything of it is written, so a malformed
//! line stops the import with its line number and none of its batch in the store. It is then
//! written through `TransferStore::import_batch`: in one transaction on SQLite (entities in
//! a transaction of their own, since what follows them needs their ids). Writes keep ids
//! and timestamps and skip what is already there, so running an interrupted import again
//! finishes it: nothing lost, nothing doubled. Every `--from` format is turned into these
//! same lines and written here.

use std::collections::{BTreeMap, HashMap};

use chrono::SubsecRound;
use cortex_app::transfer::format::{Header, Line, MemoryLine};
use cortex_core::memory::DEFAULT_MAX_CONTENT_BYTES;
use cortex_core::records::EntityId;
use cortex_core::{
    new_memory::NewMemory, provider::EmbedTask, provider::LLMProvider,
    signature::EmbeddingSignature, transfer::EntityLink, transfer::ImportItem, transfer::Imported,
    transfer::Record, transfer::TransferStore,
};

use crate::admin::error::AdminError;

/// Lines read, validated and written together.
pub const BATCH: usize = 256;

/// Written and already-present counts per line type.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    pub written: BTreeMap<&'static str, u64>,
    pub present: BTreeMap<&'static str, u64>,
    /// Memories whose vector was computed here rather than taken from the file.
    pub embedded: u64,
}

impl Tally {
    fn count(&mut self, kind: &'static str, outcome: Imported) {
        let map = match outcome {
            Imported::Written => &mut self.written,
            Imported::Present => &mut self.present,
        };
        *map.entry(kind).or_default() += 1;
    }

    pub fn total(&self) -> u64 {
        self.written.values().chain(self.present.values()).sum()
    }
}

/// Where vectors come from when a memory is written.
#[derive(Debug)]
pub enum Vectors<'a> {
    /// Only the file's: every memory line must carry a vector of `signature` (migrate).
    FromFile { signature: EmbeddingSignature },
    /// The file's when they are of the embedder's signature, else the embedder's.
    Embed { embedder: &'a dyn LLMProvider },
}

/// The embedder's answer checked as memorize checks it: one vector per text, each of the
/// signature's dimension, finite and not all zero. A bad answer writes nothing.
pub(crate) fn check_vectors(
    vectors: &[Vec<f32>],
    texts: usize,
    signature: &EmbeddingSignature,
) -> Result<(), AdminError> {
    if vectors.len() != texts {
        let problem = cortex_core::error::EmbeddingProblem::WrongCount {
            expected: texts,
            got: vectors.len(),
        };
        return Err(AdminError::Cortex(problem.into()));
    }
    for vector in vectors {
        cortex_core::embedding::validate_embedding(vector, signature.dimension)
            .map_err(|e| AdminError::Cortex(e.into()))?;
    }
    Ok(())
}

fn record(user: String, record: Record) -> ImportItem {
    ImportItem::Record { user, record }
}

/// A memory line checked as memorize would check it.
fn validate_memory(line: usize, m: &MemoryLine, user: &str) -> Result<NewMemory, AdminError> {
    let new = NewMemory::new(user, &m.content, m.kind, &m.tags, DEFAULT_MAX_CONTENT_BYTES)
        .and_then(|n| n.dated(m.created_at))
        .map_err(|e| AdminError::line(line, e.to_string()))?;
    // An expiry already past is kept: the memory arrives expired, as it left.
    let expires_at = m.expires_at.map(|t| t.trunc_subsecs(6));
    Ok(NewMemory {
        id: m.id,
        expires_at,
        records: None,
        ..new
    })
}

/// What a batch is checked against before anything is written; `--dry-run` runs only this.
#[derive(Debug, Clone)]
pub struct LineCheck {
    /// The file's vector signature, when its memory lines carry vectors.
    file_signature: Option<EmbeddingSignature>,
    /// The signature written: vectors of another are recomputed (or refused, below).
    wanted: Option<EmbeddingSignature>,
    /// Every memory must bring a vector of `wanted` (migrate: there is no embedder).
    vectors_required: bool,
    /// Every line's user becomes this one.
    as_user: Option<String>,
}

impl LineCheck {
    pub fn new(header: &Header, as_user: Option<String>) -> Self {
        Self {
            file_signature: header.vectors.then(|| header.signature.clone()).flatten(),
            wanted: None,
            vectors_required: false,
            as_user,
        }
    }

    /// Whether a memory line's own vector is written as it is.
    fn usable(&self, m: &MemoryLine) -> bool {
        match &self.wanted {
            Some(wanted) => {
                self.file_signature.as_ref() == Some(wanted)
                    && m.embedding
                        .as_ref()
                        .is_some_and(|v| v.len() == wanted.dimension)
            }
            None => false,
        }
    }

    fn user_of<'l>(&'l self, line: &'l Line) -> &'l str {
        self.as_user.as_deref().or(line.user()).unwrap_or_default()
    }

    /// Validates a batch; memory lines come back as what would be stored.
    pub fn check(&self, batch: &[(usize, Line)]) -> Result<Vec<Option<NewMemory>>, AdminError> {
        batch
            .iter()
            .map(|(no, line)| {
                let user = self.user_of(line);
                cortex_core::memory::validate_user(user)
                    .map_err(|e| AdminError::line(*no, e.to_string()))?;
                match line {
                    Line::Memory(m) => {
                        if self.vectors_required && !self.usable(m) {
                            let wanted = self.wanted.as_ref().map(|s| s.to_string());
                            return Err(AdminError::line(
                                *no,
                                format!(
                                    "no vector of {} on this memory",
                                    wanted.unwrap_or_default()
                                ),
                            ));
                        }
                        validate_memory(*no, m, user).map(Some)
                    }
                    _ => Ok(None),
                }
            })
            .collect()
    }
}

/// Writes lines into one store.
#[derive(Debug)]
pub struct Importer<'a> {
    store: &'a dyn TransferStore,
    vectors: Vectors<'a>,
    lines: LineCheck,
    /// Entities the store already knew by name under another id.
    remap: HashMap<EntityId, EntityId>,
    pub tally: Tally,
}

impl<'a> Importer<'a> {
    pub fn new(
        store: &'a dyn TransferStore,
        vectors: Vectors<'a>,
        header: &Header,
        as_user: Option<String>,
    ) -> Self {
        let mut lines = LineCheck::new(header, as_user);
        (lines.wanted, lines.vectors_required) = match &vectors {
            Vectors::FromFile { signature } => (Some(signature.clone()), true),
            Vectors::Embed { embedder } => (Some(embedder.embedding_signature()), false),
        };
        Self {
            store,
            vectors,
            lines,
            remap: HashMap::new(),
            tally: Tally::default(),
        }
    }

    /// The signature this import writes.
    pub fn signature(&self) -> EmbeddingSignature {
        match &self.vectors {
            Vectors::FromFile { signature } => signature.clone(),
            Vectors::Embed { embedder } => embedder.embedding_signature(),
        }
    }

    fn usable(&self, m: &MemoryLine) -> bool {
        self.lines.usable(m)
    }

    fn user_of<'l>(&'l self, line: &'l Line) -> &'l str {
        self.lines.user_of(line)
    }

    /// Memories of a batch that need a vector computed: not in the store yet and without a
    /// usable one in the file.
    async fn to_embed(
        &self,
        batch: &[(usize, Line)],
        checked: &[Option<NewMemory>],
    ) -> Result<Vec<usize>, AdminError> {
        let mut out = Vec::new();
        for (i, ((_, line), new)) in batch.iter().zip(checked).enumerate() {
            if let (Line::Memory(m), Some(new)) = (line, new)
                && !self.usable(m)
                && self.store.get(&new.user_id, &new.id).await?.is_none()
            {
                out.push(i);
            }
        }
        Ok(out)
    }

    /// Validates a batch, embeds what needs it, then writes it in runs through
    /// [`TransferStore::import_batch`].
    pub async fn write(&mut self, batch: &[(usize, Line)]) -> Result<(), AdminError> {
        let checked = self.lines.check(batch)?;
        let signature = self.signature();
        let mut computed: HashMap<usize, Vec<f32>> = HashMap::new();
        if let Vectors::Embed { embedder } = &self.vectors {
            let wanted = self.to_embed(batch, &checked).await?;
            if !wanted.is_empty() {
                let texts: Vec<String> = wanted
                    .iter()
                    .filter_map(|&i| checked.get(i)?.as_ref().map(|n| n.content.clone()))
                    .collect();
                let result = embedder.embed(&texts, EmbedTask::Document).await?;
                check_vectors(&result.vectors, texts.len(), &signature)?;
                self.tally.embedded += wanted.len() as u64;
                computed.extend(wanted.into_iter().zip(result.vectors));
            }
        }
        // Runs of items, each one `import_batch` (one transaction where the backend can).
        // Entities get runs of their own: the edges and links after them must be written
        // against the ids the store gave them, known only once the run is done.
        let mut run: Vec<(usize, &'static str, ImportItem)> = Vec::new();
        let mut run_is_entities = false;
        for (i, ((no, line), new)) in batch.iter().zip(checked).enumerate() {
            let user = self.user_of(line).to_owned();
            let item = match (line, new) {
                (Line::Memory(m), Some(new)) => {
                    let vector = match computed.remove(&i) {
                        Some(v) => Some(v),
                        None => m.embedding.clone().filter(|_| self.usable(m)),
                    };
                    match vector {
                        Some(embedding) => ImportItem::Memory {
                            memory: new,
                            embedding,
                        },
                        // Neither computed nor usable: it was in the store already.
                        None => {
                            self.tally.count(line.kind(), Imported::Present);
                            continue;
                        }
                    }
                }
                (Line::Supersession(s), _) => record(user, Record::Supersession(s.record.clone())),
                (Line::Event(e), _) => record(user, Record::Event(e.record.clone())),
                (Line::Entity(e), _) => record(user, Record::Entity(e.record.clone())),
                (Line::Edge(e), _) => {
                    let mut edge = e.record.clone();
                    edge.source = self.entity(edge.source);
                    edge.target = self.entity(edge.target);
                    record(user, Record::Edge(edge))
                }
                (Line::Link(l), _) => {
                    let link = EntityLink {
                        entity_id: self.entity(l.record.entity_id),
                        ..l.record.clone()
                    };
                    record(user, Record::Link(link))
                }
                (Line::Memory(_) | Line::Header(_), _) => continue,
            };
            let is_entity = matches!(line, Line::Entity(_));
            if is_entity != run_is_entities && !run.is_empty() {
                self.flush(&mut run, &signature).await?;
            }
            run_is_entities = is_entity;
            run.push((*no, line.kind(), item));
        }
        self.flush(&mut run, &signature).await
    }

    /// Writes a run of items and counts what each did.
    async fn flush(
        &mut self,
        run: &mut Vec<(usize, &'static str, ImportItem)>,
        signature: &EmbeddingSignature,
    ) -> Result<(), AdminError> {
        let (Some(first), Some(last)) = (run.first(), run.last()) else {
            return Ok(());
        };
        let lines = (first.0, last.0);
        let items: Vec<ImportItem> = run.iter().map(|(_, _, item)| item.clone()).collect();
        let done = self
            .store
            .import_batch(&items, signature)
            .await
            .map_err(|e| match lines.0 == lines.1 {
                true => AdminError::line(lines.0, e.to_string()),
                false => AdminError::Lines {
                    first: lines.0,
                    last: lines.1,
                    message: e.to_string(),
                },
            })?;
        for ((_, kind, item), outcome) in run.iter().zip(done) {
            if let (
                ImportItem::Record {
                    record: Record::Entity(e),
                    ..
                },
                Some(id),
            ) = (item, outcome.entity_id)
                && id != e.id
            {
                self.remap.insert(e.id, id);
            }
            self.tally.count(kind, outcome.outcome);
        }
        run.clear();
        Ok(())
    }

    fn entity(&self, id: EntityId) -> EntityId {
        self.remap.get(&id).copied().unwrap_or(id)
    }
}
