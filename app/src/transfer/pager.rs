//! Reading one user's records out of a store a page at a time, in export order.

use cortex_core::{error::StoreError, transfer::RecordKind, transfer::TransferStore};

use crate::transfer::format::{Line, MemoryLine};

/// Records read per store call.
pub const PAGE: usize = 500;

#[derive(Debug, Clone, Copy)]
enum Stage {
    Memories { after: i64 },
    Records { kind: usize, offset: u64 },
    Done,
}

/// The pages of one user's lines: memories in insertion order, then each
/// [`RecordKind`] in turn.
#[derive(Debug)]
pub struct Pager<'a> {
    store: &'a dyn TransferStore,
    user: &'a str,
    vectors: bool,
    stage: Stage,
}

impl<'a> Pager<'a> {
    pub fn new(store: &'a dyn TransferStore, user: &'a str, vectors: bool) -> Self {
        Self {
            store,
            user,
            vectors,
            stage: Stage::Memories { after: 0 },
        }
    }

    /// The next non-empty page, or `None` when the user is exhausted.
    pub async fn next_page(&mut self) -> Result<Option<Vec<Line>>, StoreError> {
        loop {
            match self.stage {
                Stage::Done => return Ok(None),
                Stage::Memories { after } => {
                    let page = self.store.memories_after(self.user, after, PAGE).await?;
                    let Some(last) = page.last() else {
                        self.stage = Stage::Records { kind: 0, offset: 0 };
                        continue;
                    };
                    self.stage = Stage::Memories {
                        after: last.memory.seq,
                    };
                    let vectors = self.vectors;
                    return Ok(Some(
                        page.into_iter()
                            .map(|m| Line::Memory(MemoryLine::of(m, vectors)))
                            .collect(),
                    ));
                }
                Stage::Records { kind, offset } => {
                    let Some(&record_kind) = RecordKind::ALL.get(kind) else {
                        self.stage = Stage::Done;
                        continue;
                    };
                    let page = self
                        .store
                        .records(self.user, record_kind, offset, PAGE)
                        .await?;
                    if page.is_empty() {
                        self.stage = Stage::Records {
                            kind: kind + 1,
                            offset: 0,
                        };
                        continue;
                    }
                    self.stage = Stage::Records {
                        kind,
                        offset: offset + page.len() as u64,
                    };
                    return Ok(Some(
                        page.into_iter()
                            .map(|r| Line::of_record(self.user, r))
                            .collect(),
                    ));
                }
            }
        }
    }
}
