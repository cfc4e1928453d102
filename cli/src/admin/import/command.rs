//! `cortex import`: a `cortex export` file (the default), or with `--from` another tool's
//! export, each checked, written idempotently and counted.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use cortex_app::StoreSettings;
use cortex_app::dates::parse_instant;
use cortex_core::provider::LLMProvider;
use serde_json::json;

use crate::admin::Context;
use crate::admin::commands::print_json;
use crate::admin::error::AdminError;
use crate::admin::import::basic_memory::BasicMemory;
use crate::admin::import::cortex::ExportReader;
use crate::admin::import::foreign::{self, Outcome};
use crate::admin::import::mcp_memory::McpMemory;
use crate::admin::import::mem0::Mem0;
use crate::admin::import::source::{Scope, Source, open_input};
use crate::admin::import::writer::{Importer, LineCheck, Tally, Vectors};
use crate::admin::import::{chatgpt, claude};
use crate::admin::progress::Progress;
use crate::cli::{ImportArgs, ImportFormat};

pub async fn import_cmd(args: ImportArgs) -> Result<(), AdminError> {
    match args.from {
        ImportFormat::Cortex => {
            if args.since.is_some() || !args.conversations.is_empty() {
                return Err(AdminError::Usage(
                    "--since and --conversation choose what to take from another tool's \
                     export (--from chatgpt, claude, ...); a cortex export is imported whole"
                        .into(),
                ));
            }
            import_export(args).await
        }
        format => import_foreign(args, format).await,
    }
}

/// The configured embedder, refused when the store holds another model's vectors.
async fn checked_embedder(ctx: &Context) -> Result<Arc<dyn LLMProvider>, AdminError> {
    let embedder = ctx.config.providers.build_embedder_async().await?;
    let configured = embedder.embedding_signature();
    if let Some(stored) = ctx.store.signature().await?
        && stored != configured
    {
        return Err(AdminError::SignatureMismatch { stored, configured });
    }
    Ok(embedder)
}

/// The tally of a run as counts: written per type, `... already present`, `embedded`.
fn tally_counts(tally: &Tally) -> BTreeMap<String, u64> {
    let mut counts: BTreeMap<String, u64> = tally
        .written
        .iter()
        .map(|(k, v)| ((*k).to_owned(), *v))
        .chain(
            tally
                .present
                .iter()
                .map(|(k, v)| (format!("{k} already present"), *v)),
        )
        .collect();
    counts.insert("embedded".to_owned(), tally.embedded);
    counts
}

/// The counts, as text or JSON; `from` is the `--from` format (none for a cortex export,
/// whose output stays what it always was).
fn print_counts(
    json: bool,
    dry: bool,
    from: Option<&str>,
    counts: &BTreeMap<String, u64>,
) -> Result<(), AdminError> {
    if json {
        return print_json(&match from {
            Some(from) => json!({"dry_run": dry, "from": from, "counts": counts}),
            None => json!({"dry_run": dry, "counts": counts}),
        });
    }
    let verb = if dry { "valid" } else { "imported" };
    let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!("{verb}: {}", parts.join(", "));
    Ok(())
}

/// Before a file is imported: when it does not end with a newline, as every export does, it
/// is read through once, so that a file cut short is refused before anything of it is
/// written (standard input cannot be read twice; there the cut is found where it is).
fn check_not_truncated(path: &Path) -> Result<(), AdminError> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let io = |e| AdminError::io(path, e);
    let mut file = File::open(path).map_err(io)?;
    // A pipe (`<(gunzip -c …)`) cannot be read twice either; an empty file is refused as one.
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() || meta.len() == 0 {
        return Ok(());
    }
    let mut last = [0u8; 1];
    file.seek(SeekFrom::End(-1)).map_err(io)?;
    file.read_exact(&mut last).map_err(io)?;
    if last[0] == b'\n' {
        return Ok(());
    }
    file.rewind().map_err(io)?;
    let mut reader = ExportReader::new(BufReader::new(file));
    reader.read_header()?;
    while !reader.read_batch()?.is_empty() {}
    Ok(())
}

/// A `cortex export` file (docs/FORMAT.md).
async fn import_export(args: ImportArgs) -> Result<(), AdminError> {
    let mut input = ExportReader::new(open_input(&args.file)?);
    let header = input.read_header()?;
    let progress = Progress::new("import", None);
    if args.dry_run {
        // No store, no model: the file alone is checked.
        let check = LineCheck::new(&header, args.as_user.clone());
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        loop {
            let batch = input.read_batch()?;
            if batch.is_empty() {
                break;
            }
            check.check(&batch)?;
            for (_, line) in &batch {
                *counts.entry(line.kind().to_owned()).or_default() += 1;
            }
            progress.inc(batch.len() as u64);
        }
        progress.finish();
        return print_counts(args.json, true, None, &counts);
    }
    check_not_truncated(&args.file)?;
    let ctx = Context::open().await?;
    let embedder = checked_embedder(&ctx).await?;
    let mut importer = Importer::new(
        &*ctx.store,
        Vectors::Embed {
            embedder: &*embedder,
        },
        &header,
        args.as_user.clone(),
    );
    // The last line of the last batch written: a cut found later says what is in.
    let mut written_through = None;
    loop {
        let batch = input.read_batch().map_err(|e| match e {
            AdminError::Truncated {
                line, last_good, ..
            } => AdminError::Truncated {
                line,
                last_good,
                written_through,
            },
            other => other,
        })?;
        let Some(&(last, _)) = batch.last() else {
            break;
        };
        importer.write(&batch).await?;
        written_through = Some(last);
        progress.inc(batch.len() as u64);
    }
    progress.finish();
    print_counts(args.json, false, None, &tally_counts(&importer.tally))
}

/// The run's scope from the flags, refusing those that do not apply to `format`.
fn scope_of(args: &ImportArgs, format: ImportFormat) -> Result<Scope, AdminError> {
    let chats = matches!(format, ImportFormat::Chatgpt | ImportFormat::Claude);
    if !args.conversations.is_empty() && !chats {
        return Err(AdminError::Usage(format!(
            "--conversation chooses conversations of a chat export (--from chatgpt or \
             --from claude); a {} file has none",
            format.name()
        )));
    }
    let stdin = args.file.as_os_str() == "-";
    if stdin && format == ImportFormat::BasicMemory {
        return Err(AdminError::Usage(
            "--from basic-memory reads a folder of notes (or one note): give its path, not -"
                .into(),
        ));
    }
    let since = parse_instant("since", args.since.as_deref())
        .map_err(|e| AdminError::Usage(e.to_string()))?;
    let user = match &args.as_user {
        Some(user) => {
            cortex_core::memory::validate_user(user)?;
            user.clone()
        }
        None => StoreSettings::from_env()?.user_id,
    };
    // A file's modification time is the latest its undated records can be from.
    let modified = (!stdin)
        .then(|| {
            std::fs::metadata(&args.file)
                .and_then(|m| m.modified())
                .ok()
        })
        .flatten();
    Ok(Scope {
        format: format.name(),
        input: args.file.clone(),
        user,
        forced_user: args.as_user.is_some(),
        since,
        conversations: args.conversations.iter().cloned().collect(),
        undated: modified.map_or_else(cortex_core::memory::now, Into::into),
    })
}

fn open_source(format: ImportFormat, path: &Path) -> Result<Box<dyn Source>, AdminError> {
    if format == ImportFormat::BasicMemory {
        return Ok(Box::new(BasicMemory {
            root: path.to_path_buf(),
        }));
    }
    let reader = open_input(path)?;
    Ok(match format {
        ImportFormat::Chatgpt => chatgpt::source(reader),
        ImportFormat::Claude => claude::source(reader),
        ImportFormat::McpMemory => Box::new(McpMemory { reader }),
        _ => Box::new(Mem0 { reader }),
    })
}

/// `--conversation` ids no conversation of the file had: said, since a mistyped id would
/// otherwise import nothing without a word.
fn warn_unmatched(scope: &Scope, outcome: &Outcome) {
    for id in scope.conversations.difference(&outcome.conversations) {
        eprintln!("warning: no conversation of the file has the id {id}");
    }
}

/// Another tool's export (`--from`, docs/FORMAT.md "Importing from other tools").
async fn import_foreign(args: ImportArgs, format: ImportFormat) -> Result<(), AdminError> {
    let scope = scope_of(&args, format)?;
    let stdin = args.file.as_os_str() == "-";
    // Every record of a file is read and checked before anything is written.
    if args.dry_run || !stdin {
        let progress = Progress::new("check", None);
        let checked = foreign::check(open_source(format, &args.file)?, &scope, &progress)?;
        progress.finish();
        warn_unmatched(&scope, &checked);
        if args.dry_run {
            return print_counts(args.json, true, Some(scope.format), &checked.counts);
        }
    }
    let ctx = Context::open().await?;
    let embedder = checked_embedder(&ctx).await?;
    let header = foreign::header();
    let vectors = Vectors::Embed {
        embedder: &*embedder,
    };
    let mut importer = Importer::new(&*ctx.store, vectors, &header, None);
    let progress = Progress::new("import", None);
    let source = open_source(format, &args.file)?;
    let written = foreign::write(source, &scope, &mut importer, &progress).await?;
    progress.finish();
    if stdin {
        warn_unmatched(&scope, &written);
    }
    let mut counts = written.counts;
    counts.extend(tally_counts(&importer.tally));
    print_counts(args.json, false, Some(scope.format), &counts)
}
