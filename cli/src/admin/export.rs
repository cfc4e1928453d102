//! `cortex export`: a store's users as JSON Lines or as a readable markdown document.

use std::io::Write;

use cortex_core::TransferStore;

use crate::admin::error::AdminError;
use crate::admin::format::{FORMAT_NAME, FORMAT_VERSION, Header, Line, MARKDOWN_TITLE};
use crate::admin::pager::Pager;
use crate::admin::progress::Progress;

/// How an export is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// JSON Lines that `cortex import` reads back (docs/FORMAT.md).
    Jsonl,
    /// A document to read; `cortex import` refuses it.
    Markdown,
}

/// Writes `users`' records to `out`; returns the number of lines (or entries) written.
pub async fn export(
    store: &dyn TransferStore,
    users: &[String],
    vectors: bool,
    format: ExportFormat,
    out: &mut dyn Write,
    progress: &Progress,
) -> Result<u64, AdminError> {
    let io = |e: std::io::Error| AdminError::io("output", e);
    let header = Header {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        exported_at: cortex_core::memory::now(),
        signature: store.signature().await?,
        vectors,
        users: users.to_vec(),
    };
    let mut written = 0u64;
    match format {
        ExportFormat::Jsonl => write_json(out, &Line::Header(header)).map_err(io)?,
        ExportFormat::Markdown => {
            writeln!(out, "{MARKDOWN_TITLE}\n").map_err(io)?;
            writeln!(
                out,
                "Exported {} from a store of {}.\n",
                header.exported_at.format("%Y-%m-%d %H:%M UTC"),
                header
                    .signature
                    .as_ref()
                    .map_or("no vectors yet".to_owned(), |s| s.to_string())
            )
            .map_err(io)?;
        }
    }
    for user in users {
        if format == ExportFormat::Markdown {
            writeln!(out, "## {user}\n").map_err(io)?;
        }
        let mut pager = Pager::new(store, user, vectors);
        while let Some(page) = pager.next_page().await? {
            for line in &page {
                match format {
                    ExportFormat::Jsonl => write_json(out, line).map_err(io)?,
                    ExportFormat::Markdown => write_markdown(out, line).map_err(io)?,
                }
            }
            written += page.len() as u64;
            progress.inc(page.len() as u64);
        }
    }
    out.flush().map_err(io)?;
    Ok(written)
}

fn write_json(out: &mut dyn Write, line: &Line) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, line)?;
    out.write_all(b"\n")
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
