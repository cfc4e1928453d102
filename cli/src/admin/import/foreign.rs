//! An import from another tool's export (`cortex import --from FORMAT`): the source read
//! record by record and written through the same [`Importer`] as a `cortex export`.
//!
//! Two passes over a file: the first reads and checks every record (what `--dry-run` does,
//! and all it does), so a malformed or cut file is refused before anything of it is
//! written; the second reads it again and writes. Standard input cannot be read twice:
//! there records are checked as they come, and an error after some were written says so.
//! The second pass reads on a thread of its own and hands records over a short channel,
//! so memory stays that of a few records whatever the file's size.

use std::collections::BTreeSet;

use cortex_app::transfer::format::{FORMAT_NAME, FORMAT_VERSION, Header, Line};
use tokio::sync::mpsc;

use crate::admin::error::{AdminError, RecordName, SourceStop};
use crate::admin::import::source::{Counts, Scope, Source, Unit};
use crate::admin::import::writer::{BATCH, Importer, LineCheck};
use crate::admin::progress::Progress;

/// Records handed from the reading thread to the writer at most this many ahead.
const AHEAD: usize = 4;

/// What a pass found: its counts, and the conversations `--conversation` selected.
#[derive(Debug, Default)]
pub struct Outcome {
    pub counts: Counts,
    pub conversations: BTreeSet<String>,
}

impl Outcome {
    fn add(&mut self, unit: &Unit) {
        for (what, n) in &unit.counts {
            *self.counts.entry(what.clone()).or_default() += n;
        }
        self.conversations.extend(unit.conversation.iter().cloned());
    }
}

/// The header the importer is given: a source brings no vectors, so every memory is
/// embedded with the configured embedder.
pub fn header() -> Header {
    Header {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        exported_at: cortex_core::memory::now(),
        signature: None,
        vectors: false,
        users: Vec::new(),
    }
}

/// Each record's lines checked as memorize checks a memory, naming the record when one
/// fails, and the last record that passed.
struct Checker {
    lines: LineCheck,
    format: &'static str,
    last_good: Option<RecordName>,
}

impl Checker {
    fn new(format: &'static str) -> Self {
        Self {
            lines: LineCheck::new(&header(), None),
            format,
            last_good: None,
        }
    }

    fn check(&mut self, unit: &Unit) -> Result<(), AdminError> {
        let numbered: Vec<(usize, Line)> = unit.lines.iter().map(|l| (0, l.clone())).collect();
        if let Err(e) = self.lines.check(&numbered) {
            let message = match e {
                AdminError::Line { message, .. } => message,
                other => other.to_string(),
            };
            return Err(AdminError::SourceRecord(Box::new(SourceStop {
                format: self.format,
                what: format!("{} cannot be imported: {message}", unit.name),
                last_good: self.last_good.clone(),
                written: false,
            })));
        }
        self.last_good = Some(unit.name.clone());
        Ok(())
    }
}

/// Reads and checks every record, writing nothing and calling no model; the counts include
/// the lines each type of record would write.
pub fn check(
    source: Box<dyn Source>,
    scope: &Scope,
    progress: &Progress,
) -> Result<Outcome, AdminError> {
    let mut checker = Checker::new(scope.format);
    let mut outcome = Outcome::default();
    let mut failure = None;
    source.read(scope, &mut |unit| {
        if let Err(e) = checker.check(&unit) {
            failure = Some(e);
            return false;
        }
        outcome.add(&unit);
        for line in &unit.lines {
            *outcome.counts.entry(line.kind().to_owned()).or_default() += 1;
        }
        progress.inc(1);
        true
    })?;
    match failure {
        Some(e) => Err(e),
        None => Ok(outcome),
    }
}

enum Message {
    Unit(Unit),
    End(Result<(), AdminError>),
}

/// Reads the source on a thread of its own and writes its records in batches. An error
/// while reading is returned once every record read whole before it is written.
pub async fn write(
    source: Box<dyn Source>,
    scope: &Scope,
    importer: &mut Importer<'_>,
    progress: &Progress,
) -> Result<Outcome, AdminError> {
    let (tx, mut rx) = mpsc::channel::<Message>(AHEAD);
    let reading = scope.clone();
    std::thread::spawn(move || {
        let result = source.read(&reading, &mut |unit| {
            tx.blocking_send(Message::Unit(unit)).is_ok()
        });
        let _ = tx.blocking_send(Message::End(result));
    });
    let mut checker = Checker::new(scope.format);
    let mut outcome = Outcome::default();
    let mut batch = Batch::default();
    loop {
        let Some(message) = rx.recv().await else {
            return Err(AdminError::Format(format!(
                "reading {} stopped without saying why",
                scope.input.display()
            )));
        };
        match message {
            Message::Unit(unit) => {
                if let Err(e) = checker.check(&unit) {
                    batch.write(importer).await?;
                    return Err(some_written(e));
                }
                outcome.add(&unit);
                batch.push(unit);
                progress.inc(1);
                if batch.lines.len() >= BATCH {
                    batch.write(importer).await?;
                }
            }
            Message::End(Ok(())) => break,
            Message::End(Err(e)) => {
                batch.write(importer).await?;
                return Err(some_written(e));
            }
        }
    }
    batch.write(importer).await?;
    Ok(outcome)
}

/// An error of the second pass, when the records before it are in the store.
fn some_written(e: AdminError) -> AdminError {
    match e {
        AdminError::SourceRecord(mut stop) => {
            stop.written = true;
            AdminError::SourceRecord(stop)
        }
        AdminError::SourceTruncated(mut stop) => {
            stop.written = true;
            AdminError::SourceTruncated(stop)
        }
        other => other,
    }
}

/// Whole records waiting to be written, each line numbered by its record's place here.
#[derive(Debug, Default)]
struct Batch {
    lines: Vec<(usize, Line)>,
    names: Vec<RecordName>,
}

impl Batch {
    fn push(&mut self, unit: Unit) {
        let at = self.names.len();
        self.names.push(unit.name);
        self.lines.extend(unit.lines.into_iter().map(|l| (at, l)));
    }

    async fn write(&mut self, importer: &mut Importer<'_>) -> Result<(), AdminError> {
        for chunk in self.lines.chunks(BATCH) {
            importer.write(chunk).await.map_err(|e| self.named(e))?;
        }
        self.lines.clear();
        self.names.clear();
        Ok(())
    }

    /// The importer's error, naming records instead of line numbers.
    fn named(&self, e: AdminError) -> AdminError {
        let name = |at: usize| {
            self.names
                .get(at)
                .map_or_else(|| format!("record {at}"), ToString::to_string)
        };
        match e {
            AdminError::Line { line, message } => AdminError::Records {
                records: name(line),
                message,
            },
            AdminError::Lines {
                first,
                last,
                message,
            } => AdminError::Records {
                records: format!("{} to {}", name(first), name(last)),
                message,
            },
            other => other,
        }
    }
}
