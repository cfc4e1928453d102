//! The everyday commands and the transfer commands, each printing text or `--json`.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};

use cortex_app::dates::parse_instant;
use cortex_app::engine::open_store;
use cortex_app::transfer::export;
use cortex_app::{FilterError, StructureArgs};
use cortex_core::listing;
use cortex_core::{
    engine::MemorizeOptions, engine::Retag, filter::MemoryFilter, memory::Memory,
    memory::MemoryKind, memory::MemoryState, store::ListKey, store::ListQuery,
    structure::MemoryStructure,
};
use serde::Serialize;
use serde_json::json;

use crate::admin::error::AdminError;
use crate::admin::migrate::migrate;
use crate::admin::progress::Progress;
use crate::admin::reembed::{estimate, reembed};
use crate::admin::{Context, StoreContext, check_not_itself, storage_of};
use crate::cli::{
    AddArgs, ExportArgs, FilterArgs, IdArgs, ListArgs, MigrateArgs, PruneArgs, ReembedArgs,
    SearchArgs, StatsArgs, TagArgs,
};

pub(crate) fn print_json(value: &impl Serialize) -> Result<(), AdminError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| AdminError::Usage(format!("cannot write JSON: {e}")))?;
    println!("{text}");
    Ok(())
}

fn show(m: &Memory) -> String {
    let tags = match m.tags.is_empty() {
        true => String::new(),
        false => format!(" [{}]", m.tags.join(", ")),
    };
    let expiry = m.expires_at.map_or(String::new(), |at| {
        format!("  (expires {})", at.format("%Y-%m-%d %H:%M"))
    });
    format!(
        "{}  {}  {}{tags}{expiry}\n    {}",
        m.id,
        m.created_at.format("%Y-%m-%d %H:%M"),
        m.kind,
        m.content.replace('\n', "\n    ")
    )
}

/// The filter flags, checked before the store is opened.
fn filter_of(args: &FilterArgs) -> Result<MemoryFilter, AdminError> {
    args.text().parse().map_err(|e| match e {
        FilterError::Date(e) => AdminError::Usage(e.to_string()),
        FilterError::Invalid(e) => e.into(),
    })
}

/// `--structure`: the JSON object of [`StructureArgs`], checked before the store is
/// opened; `None` when it gives nothing.
fn structure_of(text: &str) -> Result<Option<MemoryStructure>, AdminError> {
    let refused = |why: String| {
        AdminError::Usage(format!(
            "--structure is not a structure object ({why}); give JSON such as \
             {{\"entities\": [{{\"name\": \"Ana Silva\", \"type\": \"person\"}}], \
             \"relations\": [{{\"from\": \"Ana Silva\", \"label\": \"works at\", \
             \"to\": \"Acme\"}}], \"event\": {{\"time\": \"2026-11-20\"}}}}"
        ))
    };
    // An object, not serde's positional form of a struct (`[]` would read as empty).
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| refused(e.to_string()))?;
    if !value.is_object() {
        return Err(refused("it must be a JSON object".into()));
    }
    let args: StructureArgs = serde_json::from_value(value).map_err(|e| refused(e.to_string()))?;
    Ok(args.into_structure()?)
}

pub async fn add(args: AddArgs) -> Result<(), AdminError> {
    let kind: MemoryKind = args.kind.parse()?;
    let created_at = parse_instant("--created-at", args.created_at.as_deref())
        .map_err(|e| AdminError::Usage(e.to_string()))?;
    let expires_at = parse_instant("--expires-at", args.expires_at.as_deref())
        .map_err(|e| AdminError::Usage(e.to_string()))?;
    let structure = args
        .structure
        .as_deref()
        .map(structure_of)
        .transpose()?
        .flatten();
    let options = MemorizeOptions {
        created_at,
        replaces: args.replaces.clone(),
        reason: None,
        skip_extraction: false,
        expires_at,
        structure,
    };
    let (engine, user) = Context::engine_for(args.user.user.as_deref()).await?;
    let done = engine
        .memory
        .memorize(&user, &args.content, kind, &args.tags, &options)
        .await?;
    match args.json {
        true => print_json(&json!({
            "id": done.memory.id,
            "status": done.status.as_str(),
            "superseded": done.superseded,
            "memory": done.memory,
        })),
        false => {
            println!("{}", added_line(&done));
            Ok(())
        }
    }
}

/// What `cortex add` says: the memory written (or the duplicate kept) and, for a
/// correction, which memories it replaced. `superseded <id>` named the new, live memory
/// with the word for the old ones.
fn added_line(done: &cortex_core::engine::Memorized) -> String {
    let replaced: Vec<String> = done.superseded.iter().map(ToString::to_string).collect();
    match (done.status.as_str(), replaced.is_empty()) {
        ("duplicate", _) => format!("duplicate of {}: nothing written", done.memory.id),
        (_, true) => format!("stored {}", done.memory.id),
        (_, false) => format!(
            "stored {}, replacing {}",
            done.memory.id,
            replaced.join(", ")
        ),
    }
}

pub async fn search(args: SearchArgs) -> Result<(), AdminError> {
    let filter = filter_of(&args.filter)?;
    let (engine, user) = Context::engine_for(args.user.user.as_deref()).await?;
    let limit = args.limit.unwrap_or(engine.top_k);
    let found = engine
        .memory
        .recall_filtered(&user, &args.query, limit, &filter)
        .await?;
    if args.json {
        let rows: Vec<_> = found
            .iter()
            .map(|s| json!({"score": s.score, "memory": s.memory}))
            .collect();
        return print_json(&rows);
    }
    for (rank, hit) in found.iter().enumerate() {
        println!("{:>3}. ({:.4}) {}", rank + 1, hit.score, show(&hit.memory));
    }
    Ok(())
}

/// Pages of the list `list_memories` and the web page show (`cortex_core::listing`):
/// newest first by `created_at`, the cursor the last memory's position, so every memory
/// is reachable and none repeats, whatever is added meanwhile.
pub async fn list(args: ListArgs) -> Result<(), AdminError> {
    if !(1..=cortex_core::listing::MAX_LIMIT).contains(&args.limit) {
        return Err(AdminError::Usage("--limit must be 1 to 1000".into()));
    }
    let mut filter = filter_of(&args.filter)?;
    filter.include_expired = args.expired;
    let ctx = StoreContext::open().await?;
    let user = ctx.user(args.user.user.as_deref())?;
    let now = cortex_core::memory::now();
    let cursor = args.cursor.as_deref();
    let (shown, next) = match args.superseded {
        false => {
            let page =
                listing::list_page(&*ctx.store, &user, &filter, args.limit, cursor, now).await?;
            let shown = page.memories.into_iter().map(|m| (m, false)).collect();
            (shown, page.next_cursor)
        }
        true => with_superseded(&*ctx.store, &user, filter, args.limit, cursor, now).await?,
    };
    if args.json {
        let memories: Vec<_> = shown
            .iter()
            .map(|(m, superseded)| {
                json!({"memory": m, "superseded": superseded, "expired": m.expired_at(now)})
            })
            .collect();
        return print_json(&json!({"memories": memories, "next_cursor": next}));
    }
    for (m, superseded) in &shown {
        let state = match m.state_at(*superseded, now) {
            MemoryState::Live => "",
            MemoryState::Expired => "  (expired)",
            MemoryState::Superseded => "  (superseded)",
        };
        println!("{}{state}", show(m));
    }
    if let Some(next) = next {
        println!("-- more: cortex list --cursor {next}");
    }
    Ok(())
}

/// A page of the same list with superseded memories in it too, which no store lists:
/// every memory read, then ordered and cut as `listing` orders and cuts.
async fn with_superseded(
    store: &dyn cortex_core::transfer::TransferStore,
    user: &str,
    mut filter: MemoryFilter,
    limit: usize,
    cursor: Option<&str>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(Vec<(Memory, bool)>, Option<String>), AdminError> {
    filter.alive_at = (!filter.include_expired).then_some(now);
    let query = ListQuery {
        filter,
        limit,
        before: cursor.map(listing::decode_cursor).transpose()?,
    };
    let mut every = Vec::new();
    let mut after = 0;
    loop {
        let page = store.memories_after(user, after, 1000).await?;
        let Some(last) = page.last() else { break };
        after = last.memory.seq;
        every.extend(
            page.into_iter()
                .filter(|m| query.admits(&m.memory))
                .map(|m| (m.memory, m.superseded)),
        );
    }
    every.sort_unstable_by_key(|(m, _)| std::cmp::Reverse(ListKey::of(m)));
    let more = every.len() > limit;
    every.truncate(limit);
    let next = more
        .then(|| every.last().map(|(m, _)| listing::cursor_after(m)))
        .flatten();
    Ok((every, next))
}

pub async fn forget(args: IdArgs) -> Result<(), AdminError> {
    let (engine, user) = Context::engine_for(args.user.user.as_deref()).await?;
    let id = engine.memory.forget(&user, &args.id).await?;
    match args.json {
        true => print_json(&json!({"deleted": id})),
        false => {
            println!("deleted {id}");
            Ok(())
        }
    }
}

pub async fn prune(args: PruneArgs) -> Result<(), AdminError> {
    let (engine, user) = Context::engine_for(args.user.user.as_deref()).await?;
    let expired = engine.memory.prune_expired(&user, args.dry_run).await?;
    if args.json {
        return print_json(&json!({
            "dry_run": args.dry_run,
            "deleted": if args.dry_run { 0 } else { expired.len() },
            "expired": expired,
        }));
    }
    for m in &expired {
        println!("{}", show(m));
    }
    match args.dry_run {
        true => println!("{} expired; nothing deleted (--dry-run)", expired.len()),
        false => println!("deleted {} expired", expired.len()),
    }
    Ok(())
}

pub async fn tag(args: TagArgs) -> Result<(), AdminError> {
    let kind = args
        .kind
        .as_deref()
        .map(str::parse::<MemoryKind>)
        .transpose()?;
    let change = Retag {
        kind,
        add: args.add.clone(),
        remove: args.remove.clone(),
    };
    let (engine, user) = Context::engine_for(args.user.user.as_deref()).await?;
    let done = engine.memory.retag(&user, &args.id, &change).await?;
    match args.json {
        true => print_json(&json!({
            "id": done.memory.id,
            "replaced": done.superseded,
            "memory": done.memory,
        })),
        false => {
            let old = done.superseded.first().map(ToString::to_string);
            println!(
                "retagged {} (was {}): {}",
                done.memory.id,
                old.unwrap_or_default(),
                show(&done.memory)
            );
            Ok(())
        }
    }
}

pub async fn history(args: IdArgs) -> Result<(), AdminError> {
    let (engine, user) = Context::engine_for(args.user.user.as_deref()).await?;
    let chain = engine.memory.history(&user, &args.id).await?;
    if args.json {
        let rows: Vec<_> = chain
            .iter()
            .map(|h| {
                json!({
                    "memory": h.memory,
                    "valid_from": h.valid_from,
                    "valid_until": h.valid_until,
                    "superseded_by": h.superseded_by,
                    "reason": h.reason,
                })
            })
            .collect();
        return print_json(&rows);
    }
    for h in &chain {
        let until = h
            .valid_until
            .map_or("now".to_owned(), |t| t.format("%Y-%m-%d %H:%M").to_string());
        println!(
            "{} → {}  {}",
            h.valid_from.format("%Y-%m-%d %H:%M"),
            until,
            show(&h.memory)
        );
        if let Some(reason) = &h.reason {
            println!("    superseded: {reason}");
        }
    }
    Ok(())
}

#[derive(Debug, Default, Serialize)]
struct Stats {
    user: String,
    /// The counts the web page's Browse and Stats pages show too (`cortex_app::stats`).
    #[serde(flatten)]
    memories: cortex_app::MemoryStats,
    signature: Option<String>,
    store: String,
    /// The SQLite file with its WAL, or every table of the Postgres schema (all users).
    store_bytes: Option<u64>,
    /// The SQLite file's index snapshots, every user's (a cache beside the file, built
    /// again from it when missing; docs/ARCHITECTURE.md, "Index snapshots").
    index_snapshot_bytes: Option<u64>,
    /// Postgres: the HNSW index (every user's; 0 while there is none) and the server's
    /// `shared_buffers`: an index larger than the buffers is searched several times
    /// slower (docs/CONFIGURATION.md).
    hnsw_index_bytes: Option<u64>,
    shared_buffers_bytes: Option<u64>,
}

/// Reads the store only: no embedder or layer setting is needed, or read.
pub async fn stats(args: StatsArgs) -> Result<(), AdminError> {
    let ctx = StoreContext::open().await?;
    let user = ctx.user(args.user.user.as_deref())?;
    let mut stats = Stats {
        user: user.clone(),
        signature: ctx.store.signature().await?.map(|s| s.to_string()),
        ..Stats::default()
    };
    let footprint = ctx.settings.storage.footprint().await;
    stats.store = footprint.place;
    stats.store_bytes = footprint.bytes;
    stats.index_snapshot_bytes = footprint.index_snapshot_bytes;
    stats.hnsw_index_bytes = footprint.hnsw_index_bytes;
    stats.shared_buffers_bytes = footprint.shared_buffers_bytes;
    stats.memories =
        cortex_app::memory_stats(&*ctx.store, &user, cortex_core::memory::now()).await?;
    if args.json {
        return print_json(&stats);
    }
    println!("user        {}", stats.user);
    println!("store       {}", stats.store);
    if let Some(bytes) = stats.store_bytes {
        println!("store size  {bytes} bytes on disk");
    }
    if let Some(bytes) = stats.index_snapshot_bytes {
        println!("snapshots   {bytes} bytes of index snapshots beside the file");
    }
    if let (Some(index_bytes), Some(shared_buffers_bytes), Some(fits)) = (
        stats.hnsw_index_bytes,
        stats.shared_buffers_bytes,
        footprint.hnsw_fits,
    ) {
        let fit = match fits {
            true => "fits",
            false => "does not fit: raise shared_buffers (docs/CONFIGURATION.md)",
        };
        println!(
            "hnsw index  {index_bytes} bytes, shared_buffers {shared_buffers_bytes} bytes ({fit})"
        );
    }
    println!(
        "signature   {}",
        stats.signature.as_deref().unwrap_or("(none yet)")
    );
    let m = &stats.memories;
    println!(
        "memories    {} live, {} expired (not yet pruned), {} superseded, {} bytes of text \
         (about {} tokens to embed again)",
        m.live, m.expired, m.superseded, m.content_bytes, m.content_tokens_estimate
    );
    let join = |m: &BTreeMap<String, u64>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("by kind     {}", join(&m.by_kind));
    println!("by tag      {}", join(&m.by_tag));
    Ok(())
}

pub async fn export_cmd(args: ExportArgs) -> Result<(), AdminError> {
    let ctx = StoreContext::open().await?;
    let users = match args.all_users {
        true => ctx.store.users().await?,
        false => vec![ctx.user(args.user.user.as_deref())?],
    };
    let progress = Progress::new("export", None);
    // `-o -` is standard output, as `cortex import -` reads standard input. Progress and
    // the summary go to stderr either way, never into the data.
    let file = args.out.as_deref().filter(|p| p.as_os_str() != "-");
    let written = match file {
        Some(path) => {
            // Written beside the destination and renamed into place: a failed export
            // never leaves a truncated file where a good one was.
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            let tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| AdminError::io(dir, e))?;
            let mut out = BufWriter::new(tmp);
            let n = export(
                &*ctx.store,
                &users,
                args.with_vectors,
                args.format.into(),
                &mut out,
                &mut |n| progress.inc(n),
            )
            .await?;
            let tmp = out
                .into_inner()
                .map_err(|e| AdminError::io(path, e.into_error()))?;
            tmp.persist(path)
                .map_err(|e| AdminError::io(path, e.error))?;
            n
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            export(
                &*ctx.store,
                &users,
                args.with_vectors,
                args.format.into(),
                &mut out,
                &mut |n| progress.inc(n),
            )
            .await?
        }
    };
    progress.finish();
    eprintln!("exported {written} records of {} user(s)", users.len());
    Ok(())
}

pub async fn migrate_cmd(args: MigrateArgs) -> Result<(), AdminError> {
    // The destination is checked before either store is opened: a refused one creates
    // nothing.
    let settings = cortex_app::StoreSettings::from_env()?;
    let destination = storage_of(&args.to)?;
    check_not_itself(&settings.storage, &destination)?;
    let source = open_store(&settings.storage).await?;
    let target = open_store(&destination).await?;
    let users = source.users().await?;
    let progress = Progress::new("migrate", None);
    let (tally, verified) = migrate(&*source, &*target, &users, &progress).await?;
    progress.finish();
    if args.json {
        return print_json(
            &json!({"written": tally.written, "present": tally.present, "users": verified}),
        );
    }
    for v in &verified {
        let counts: Vec<String> = v
            .summary
            .counts
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        println!(
            "{}: {} (checksum {}) verified",
            v.user,
            counts.join(", "),
            v.summary.checksum
        );
    }
    println!("migrated {} user(s)", verified.len());
    let _ = std::io::stdout().flush();
    Ok(())
}

pub async fn reembed_cmd(args: ReembedArgs) -> Result<(), AdminError> {
    let ctx = Context::open().await?;
    let embedder = ctx.config.providers.build_embedder_async().await?;
    let target = embedder.embedding_signature();
    let stored = ctx.store.signature().await?;
    match &stored {
        Some(stored) if *stored == target => {
            println!("the store already holds vectors of {target}: nothing to do");
            return Ok(());
        }
        None => {
            println!("the store is empty: its first memory will record {target}");
            return Ok(());
        }
        Some(_) => {}
    }
    let plan = estimate(&*ctx.store, &target, args.batch as usize).await?;
    let free = matches!(embedder.name(), "local" | "fake");
    if !args.yes {
        if args.json {
            return print_json(&json!({
                "started": false,
                "from": stored.map(|s| s.to_string()),
                "to": target.to_string(),
                "estimate": plan,
            }));
        }
        let from = stored.map(|s| s.to_string()).unwrap_or_default();
        println!("re-embedding from {from} to {target}:");
        println!(
            "  {} memories, {} calls to {}, about {} input tokens ({} characters){}",
            plan.memories,
            plan.calls,
            embedder.name(),
            plan.tokens,
            plan.characters,
            if free { "; no cost: it runs here" } else { "" }
        );
        println!("nothing done yet: run `cortex reembed --yes` to start");
        return Ok(());
    }
    let progress = Progress::new("reembed", Some(plan.memories));
    let done = reembed(&*ctx.store, &*embedder, args.batch as usize, &progress).await?;
    progress.finish();
    if args.json {
        return print_json(&json!({"started": true, "to": target.to_string(), "outcome": done}));
    }
    println!(
        "switched {} memories to {target}: {} embedded in {} calls ({} tokens reported)",
        done.switched, done.embedded, done.calls, done.tokens
    );
    println!(
        "restart every running cortex-mcp on this store with the new embedder settings: a \
         running server keeps the model it started with"
    );
    Ok(())
}
