//! Writing an export: the header, then every user's lines a page at a time, as JSON Lines
//! (what `cortex import` reads back) or as a markdown document to read.

use std::io::Write;

use cortex_core::{error::StoreError, transfer::TransferStore};

use crate::transfer::format::{FORMAT_NAME, FORMAT_VERSION, Header, Line, MARKDOWN_TITLE};
use crate::transfer::pager::Pager;

/// How an export is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// JSON Lines that `cortex import` reads back (docs/FORMAT.md).
    Jsonl,
    /// A document to read; `cortex import` refuses it.
    Markdown,
}

impl ExportFormat {
    /// The file name extension an export of this format is saved under.
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Jsonl => "jsonl",
            ExportFormat::Markdown => "md",
        }
    }

    /// The media type an export of this format is served as.
    pub fn content_type(self) -> &'static str {
        match self {
            ExportFormat::Jsonl => "application/x-ndjson",
            ExportFormat::Markdown => "text/markdown; charset=utf-8",
        }
    }
}

/// One piece of an export file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub bytes: Vec<u8>,
    /// Lines (memories and records) it holds; 0 for the header.
    pub lines: u64,
}

/// Why an export stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write the export: {0}")]
    Io(#[source] std::io::Error),
}

/// An export read a page at a time, so a caller can stream it (the web page) or write it
/// (the CLI). Nothing is held but the page being encoded, however big the store.
#[derive(Debug)]
pub struct Export<'a> {
    store: &'a dyn TransferStore,
    users: &'a [String],
    vectors: bool,
    format: ExportFormat,
    /// Until the first chunk is taken.
    header: Option<Header>,
    /// The next user to start in `users`.
    next_user: usize,
    /// The user being read, `None` between users.
    pager: Option<Pager<'a>>,
}

impl<'a> Export<'a> {
    /// Reads the store's signature for the header. `vectors` puts each memory's vector in
    /// its line (JSON Lines only: markdown never shows them).
    pub async fn start(
        store: &'a dyn TransferStore,
        users: &'a [String],
        vectors: bool,
        format: ExportFormat,
    ) -> Result<Export<'a>, StoreError> {
        let header = Header {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            exported_at: cortex_core::memory::now(),
            signature: store.signature().await?,
            vectors,
            users: users.to_vec(),
        };
        Ok(Self {
            store,
            users,
            vectors,
            format,
            header: Some(header),
            next_user: 0,
            pager: None,
        })
    }

    /// The header first, then one page of lines at a time (with a `## user` heading before
    /// a user's first page in markdown); `None` at the end.
    pub async fn next_chunk(&mut self) -> Result<Option<Chunk>, StoreError> {
        if let Some(header) = self.header.take() {
            let mut bytes = Vec::new();
            self.header_into(&mut bytes, header)?;
            return Ok(Some(Chunk { bytes, lines: 0 }));
        }
        loop {
            let mut bytes = Vec::new();
            if self.pager.is_none() {
                let Some(user) = self.users.get(self.next_user) else {
                    return Ok(None);
                };
                self.next_user += 1;
                if self.format == ExportFormat::Markdown {
                    bytes.extend_from_slice(format!("## {user}\n\n").as_bytes());
                }
                self.pager = Some(Pager::new(self.store, user, self.vectors));
            }
            let page = match self.pager.as_mut() {
                Some(pager) => pager.next_page().await?,
                None => None,
            };
            let Some(page) = page else {
                self.pager = None;
                // A markdown user with no records still gets a heading, as a reader
                // looking for them expects; a JSON Lines one has nothing to say.
                if bytes.is_empty() {
                    continue;
                }
                return Ok(Some(Chunk { bytes, lines: 0 }));
            };
            for line in &page {
                self.line_into(&mut bytes, line)?;
            }
            return Ok(Some(Chunk {
                bytes,
                lines: page.len() as u64,
            }));
        }
    }

    fn header_into(&self, out: &mut Vec<u8>, header: Header) -> Result<(), StoreError> {
        let written = match self.format {
            ExportFormat::Jsonl => write_json(out, &Line::Header(header)),
            ExportFormat::Markdown => write_markdown_header(out, &header),
        };
        written.map_err(|e| unencodable("header", e))
    }

    fn line_into(&self, out: &mut Vec<u8>, line: &Line) -> Result<(), StoreError> {
        let written = match self.format {
            ExportFormat::Jsonl => write_json(out, line),
            ExportFormat::Markdown => write_markdown(out, line),
        };
        written.map_err(|e| unencodable(line.kind(), e))
    }
}

/// Writing into memory fails only when a record cannot be encoded at all, which means the
/// store handed back something its own types cannot represent.
fn unencodable(kind: &str, e: std::io::Error) -> StoreError {
    StoreError::Corrupt(format!("cannot encode a {kind} line of the export: {e}"))
}

/// Writes the whole export to `out`, calling `on_lines` with each chunk's line count;
/// returns the lines written.
pub async fn export(
    store: &dyn TransferStore,
    users: &[String],
    vectors: bool,
    format: ExportFormat,
    out: &mut dyn Write,
    on_lines: &mut dyn FnMut(u64),
) -> Result<u64, ExportError> {
    let mut export = Export::start(store, users, vectors, format).await?;
    let mut written = 0u64;
    while let Some(chunk) = export.next_chunk().await? {
        out.write_all(&chunk.bytes).map_err(ExportError::Io)?;
        written += chunk.lines;
        on_lines(chunk.lines);
    }
    out.flush().map_err(ExportError::Io)?;
    Ok(written)
}

fn write_json(out: &mut dyn Write, line: &Line) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, line)?;
    out.write_all(b"\n")
}

fn write_markdown_header(out: &mut dyn Write, header: &Header) -> std::io::Result<()> {
    writeln!(out, "{MARKDOWN_TITLE}\n")?;
    writeln!(
        out,
        "Exported {} from a store of {}.\n",
        header.exported_at.format("%Y-%m-%d %H:%M UTC"),
        header
            .signature
            .as_ref()
            .map_or("no vectors yet".to_owned(), |s| s.to_string())
    )
}

fn write_markdown(out: &mut dyn Write, line: &Line) -> std::io::Result<()> {
    match line {
        Line::Header(_) => Ok(()),
        Line::Memory(m) => {
            let tags = match m.tags.is_empty() {
                true => String::new(),
                false => format!(" · {}", m.tags.join(", ")),
            };
            let mut state = String::from(if m.superseded { " · superseded" } else { "" });
            if let Some(at) = m.expires_at {
                state.push_str(&format!(" · expires {}", at.format("%Y-%m-%d %H:%M")));
            }
            writeln!(
                out,
                "- **{}** · {}{tags}{state} · `{}`",
                m.created_at.format("%Y-%m-%d %H:%M"),
                m.kind,
                m.id
            )?;
            for text in m.content.lines() {
                writeln!(out, "  > {text}")?;
            }
            Ok(())
        }
        Line::Supersession(s) => writeln!(
            out,
            "- `{}` replaced `{}` on {}: {}",
            s.record.new_id,
            s.record.old_id,
            s.record.created_at.format("%Y-%m-%d"),
            s.record.reason
        ),
        Line::Event(e) => writeln!(
            out,
            "- event {} of `{}`{}{}",
            e.record.event_time.format("%Y-%m-%d %H:%M"),
            e.record.memory_id,
            e.record
                .actor
                .as_deref()
                .map_or(String::new(), |a| format!(", by {a}")),
            e.record
                .location
                .as_deref()
                .map_or(String::new(), |l| format!(", at {l}")),
        ),
        Line::Entity(e) => writeln!(
            out,
            "- entity **{}**{} `{}`",
            e.record.name,
            e.record
                .entity_type
                .as_deref()
                .map_or(String::new(), |t| format!(" ({t})")),
            e.record.id
        ),
        Line::Edge(e) => writeln!(
            out,
            "- `{}` —{}→ `{}`",
            e.record.source, e.record.label, e.record.target
        ),
        Line::Link(l) => writeln!(
            out,
            "- `{}` {} `{}`",
            l.record.memory_id, l.record.role, l.record.entity_id
        ),
    }
}

#[cfg(test)]
mod tests {
    use cortex_core::{
        in_memory::InMemoryStore, memory::MemoryKind, new_memory::NewMemory,
        signature::EmbeddingSignature,
    };
    use uuid::Uuid;

    use super::*;

    const ID: &str = "00000000-0000-4000-8000-000000000001";

    async fn store_with_ada() -> InMemoryStore {
        let store = InMemoryStore::new();
        let memory = NewMemory {
            id: ID.parse().unwrap(),
            user_id: "ada".into(),
            content: "lives in Porto\nwrites code".into(),
            kind: MemoryKind::Fact,
            tags: vec!["home".into(), "work".into()],
            created_at: "2024-05-01T09:30:00Z".parse().unwrap(),
            supersedes: Vec::new(),
            expires_at: Some("2030-01-02T03:04:00Z".parse().unwrap()),
            records: None,
        };
        store
            .import_memory(&memory, &[0.6, 0.8], &EmbeddingSignature::new("fake", 2))
            .await
            .unwrap();
        store
    }

    async fn chunks(
        store: &InMemoryStore,
        users: &[String],
        vectors: bool,
        format: ExportFormat,
    ) -> Vec<(String, u64)> {
        let mut export = Export::start(store, users, vectors, format).await.unwrap();
        let mut out = Vec::new();
        while let Some(chunk) = export.next_chunk().await.unwrap() {
            out.push((String::from_utf8(chunk.bytes).unwrap(), chunk.lines));
        }
        assert!(
            export.next_chunk().await.unwrap().is_none(),
            "the end stays the end"
        );
        out
    }

    #[tokio::test]
    async fn json_lines_are_the_header_then_a_page_per_chunk() {
        let store = store_with_ada().await;
        let users = vec!["ada".to_owned(), "nobody".to_owned()];
        let got = chunks(&store, &users, true, ExportFormat::Jsonl).await;
        assert_eq!(got.len(), 2, "{got:?}");
        let Line::Header(header) = serde_json::from_str(got[0].0.trim_end()).unwrap() else {
            panic!("the first chunk is the header: {}", got[0].0);
        };
        assert_eq!(
            (header.users, header.vectors, got[0].1),
            (users.clone(), true, 0)
        );
        assert_eq!(header.signature, Some(EmbeddingSignature::new("fake", 2)));
        assert_eq!(got[1].1, 1);
        let Line::Memory(m) = serde_json::from_str(got[1].0.trim_end()).unwrap() else {
            panic!("a memory line: {}", got[1].0);
        };
        assert_eq!(
            (m.id, m.embedding),
            (ID.parse::<Uuid>().unwrap(), Some(vec![0.6, 0.8]))
        );
    }

    #[tokio::test]
    async fn markdown_heads_every_user_even_one_without_records() {
        let store = store_with_ada().await;
        let users = vec!["ada".to_owned(), "nobody".to_owned()];
        let got = chunks(&store, &users, false, ExportFormat::Markdown).await;
        let header = &got[0].0;
        assert!(
            header.starts_with(&format!("{MARKDOWN_TITLE}\n\nExported "))
                && header.ends_with(" from a store of fake (dim 2).\n\n"),
            "{header:?}"
        );
        assert_eq!(
            got[1..],
            [
                (
                    format!(
                        "## ada\n\n- **2024-05-01 09:30** · fact · home, work · expires \
                         2030-01-02 03:04 · `{ID}`\n  > lives in Porto\n  > writes code\n"
                    ),
                    1
                ),
                ("## nobody\n\n".to_owned(), 0),
            ]
        );
    }

    #[tokio::test]
    async fn export_writes_every_chunk_and_counts_its_lines() {
        let store = store_with_ada().await;
        let users = vec!["ada".to_owned()];
        let mut out = Vec::new();
        let mut seen = Vec::new();
        let written = export(
            &store,
            &users,
            false,
            ExportFormat::Jsonl,
            &mut out,
            &mut |n| seen.push(n),
        )
        .await
        .unwrap();
        assert_eq!((written, seen), (1, vec![0, 1]));
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(
            !text.contains("embedding"),
            "no vectors were asked for: {text}"
        );
    }

    #[tokio::test]
    async fn an_export_can_be_driven_from_a_spawned_task() {
        // The web page streams an export from a task the runtime may move between threads.
        fn send<T: Send>(_: &T) {}
        let store = InMemoryStore::new();
        let users = Vec::new();
        let start = Export::start(&store, &users, false, ExportFormat::Jsonl);
        send(&start);
        let mut export = start.await.unwrap();
        send(&export);
        send(&export.next_chunk());
    }

    #[test]
    fn formats_name_their_files_and_media_types() {
        assert_eq!(
            [ExportFormat::Jsonl, ExportFormat::Markdown]
                .map(|f| (f.extension(), f.content_type())),
            [
                ("jsonl", "application/x-ndjson"),
                ("md", "text/markdown; charset=utf-8")
            ]
        );
    }
}
