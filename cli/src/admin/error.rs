//! Why an administration command failed. Every variant says what to fix.

use std::path::PathBuf;

use cortex_app::config::ConfigError;
use cortex_app::engine::EngineError;
use cortex_app::transfer::ExportError;
use cortex_core::{
    error::CortexError, error::ProviderError, error::StoreError, signature::EmbeddingSignature,
};
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Engine(#[from] EngineError),
    #[error("store: {0}")]
    Store(#[from] StoreError),
    #[error("provider: {0}")]
    Provider(#[from] ProviderError),
    #[error("{0}")]
    Cortex(#[from] CortexError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A line of an import file that cannot be read or is invalid; nothing of its batch
    /// was written.
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    /// A store failure while writing these lines: where the backend writes a batch in one
    /// transaction (SQLite), none of them was written.
    #[error("lines {first}-{last}: {message}")]
    Lines {
        first: usize,
        last: usize,
        message: String,
    },
    /// The file is not an export this build reads.
    #[error("{0}")]
    Format(String),
    /// The file is a `cortex export --format markdown` document: for reading only.
    #[error(
        "this file is a markdown export (`cortex export --format markdown`), which is for \
         reading, not for importing: export with `--format jsonl` (JSON Lines, the default) \
         and import that file"
    )]
    MarkdownExport,
    /// The file ends in the middle of a line: it was cut short (a copy or a download that
    /// stopped, a full disk). The error names the last line read whole.
    #[error("{}", truncated_message(*.line, .last_good, *.written_through))]
    Truncated {
        /// The line the file ends in.
        line: usize,
        /// What was read whole before it.
        last_good: LastGood,
        /// The last line of the file in the store (lines 2 to it, every batch before the
        /// cut); `None` when nothing of the file was written.
        written_through: Option<usize>,
    },
    /// A record of a `cortex import --from` source that cannot be read (not JSON, or not of
    /// that format) or fails the checks memorize makes. Nothing of it was written.
    #[error("{0}")]
    SourceRecord(Box<SourceStop>),
    /// A `cortex import --from` source that ends inside a record: cut short (a download or a
    /// copy that stopped). Nothing of that record was written.
    #[error("{0}")]
    SourceTruncated(Box<SourceStop>),
    /// A store failure while writing these records of a `--from` source: where the backend
    /// writes a batch in one transaction (SQLite), none of them was written.
    #[error("{records}: {message}")]
    Records { records: String, message: String },
    /// The store holds vectors of another model than the one configured.
    #[error(
        "the store holds vectors of {stored}, the configured embedder writes {configured}: set \
         CORTEX_EMBED_PROVIDER, CORTEX_EMBED_MODEL and CORTEX_EMBED_DIM back to what wrote \
         the store ({stored}), or run `cortex reembed` to move the store to {configured}"
    )]
    SignatureMismatch {
        stored: EmbeddingSignature,
        configured: EmbeddingSignature,
    },
    /// A migration's copy differs from its source.
    #[error("verification failed: {0}")]
    Verify(String),
    /// A command-line value that cannot work.
    #[error("{0}")]
    Usage(String),
    /// An export that failed in a way neither [`AdminError::Store`] nor
    /// [`AdminError::Io`] describes (`ExportError` may grow).
    #[error("{0}")]
    Export(ExportError),
}

impl From<ExportError> for AdminError {
    /// Into the variants the export used before it moved to `cortex-app`, so its messages
    /// stay the same: a store failure, or `output: ...` for a failed write.
    fn from(e: ExportError) -> Self {
        match e {
            ExportError::Store(e) => AdminError::Store(e),
            ExportError::Io(e) => AdminError::io("output", e),
            other => AdminError::Export(other),
        }
    }
}

/// Where reading an export stopped being sure: the last line read whole, and the last memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LastGood {
    /// The last line parsed whole (1 is the header; 0 when not even the header was).
    pub line: usize,
    /// The last memory line parsed whole: its line and its id.
    pub memory: Option<(usize, Uuid)>,
}

/// A record of a `cortex import --from` source, read whole: where it is and what it is
/// called, so that an error can say where reading stopped being sure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordName {
    /// Where it is: `conversation 3`, `line 7`, `note people/ana.md`.
    pub place: String,
    /// Its title or name, when it has one.
    pub title: Option<String>,
    /// Its id in the source, when it has one.
    pub id: Option<String>,
}

impl RecordName {
    pub fn new(place: impl Into<String>) -> Self {
        Self {
            place: place.into(),
            title: None,
            id: None,
        }
    }
}

impl std::fmt::Display for RecordName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.place)?;
        if let Some(title) = self.title.as_deref().filter(|t| !t.trim().is_empty()) {
            // A title is the source's text: shown on one line and not at any length.
            let shown: String = title.split_whitespace().collect::<Vec<_>>().join(" ");
            let cut: String = shown.chars().take(60).collect();
            let more = if cut.len() < shown.len() { "…" } else { "" };
            write!(f, " '{cut}{more}'")?;
        }
        if let Some(id) = &self.id {
            write!(f, " (id {id})")?;
        }
        Ok(())
    }
}

/// Where reading a `cortex import --from` source stopped, and what of it is in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceStop {
    /// The `--from` format.
    pub format: &'static str,
    /// What went wrong, and where: "conversation 4 cannot be imported: ...", "the file is
    /// truncated: ...".
    pub what: String,
    /// The last record read whole before it, if any.
    pub last_good: Option<RecordName>,
    /// Whether every record up to `last_good` is in the store (standard input, which is
    /// not read twice); otherwise nothing of the source was written.
    pub written: bool,
}

impl std::fmt::Display for SourceStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let last = match &self.last_good {
            Some(record) => format!("{record} was the last read whole"),
            None => "no record before it was read whole".to_owned(),
        };
        let next = match (self.written, &self.last_good) {
            (true, Some(_)) => {
                "Everything up to it is imported, nothing after it: run the import again \
                 with the whole file; what is already in the store is skipped"
            }
            _ => {
                "Nothing was imported: fix the file (or export it again, whole) and run the \
                 import again"
            }
        };
        write!(f, "{} import: {}; {last}. {next}", self.format, self.what)
    }
}

fn truncated_message(line: usize, last: &LastGood, written_through: Option<usize>) -> String {
    let mut text = format!("the file is truncated: line {line} ends in the middle of a record");
    match last.line {
        0 => text.push_str("; no line before it is complete"),
        good => {
            text.push_str(&format!("; the last good line is {good}"));
            match last.memory {
                Some((at, id)) => text.push_str(&format!(
                    " (the last memory read whole is {id}, on line {at})"
                )),
                None => text.push_str(" (no memory line before it)"),
            }
        }
    }
    match written_through {
        Some(through) if through >= 2 => text.push_str(&format!(
            ". Lines 2-{through} are imported, nothing after them: export the file again (or \
             copy all of it) and run the import again; what is already in the store is skipped"
        )),
        _ => text.push_str(
            ". Nothing was imported: export the file again (or copy all of it) and run the \
             import again",
        ),
    }
    text
}

impl AdminError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        AdminError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn line(line: usize, message: impl Into<String>) -> Self {
        AdminError::Line {
            line,
            message: message.into(),
        }
    }
}
