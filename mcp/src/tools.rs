//! The six tools, and whom each call (and each resource read or prompt) is served as.
//! Each doc comment below is the tool's description as an agent sees it.

use std::fmt;
use std::sync::Arc;

use axum::http::request::Parts;
use cortex_app::{FilterError, FilterText};
use cortex_core::keys::{Caller, Scope};
use cortex_core::records::TimeRange;
use cortex_core::{
    engine::MemorizeOptions, error::CortexError, filter::MemoryFilter, memory::MemoryKind,
};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::Extensions;
use rmcp::{tool, tool_router};

use crate::args::{
    ForgetArgs, ListMemoriesArgs, MemorizeArgs, RecallAboutArgs, RecallArgs, RecallTimelineArgs,
    clamp_limit,
};
use crate::dates::parse_instant;
use crate::engine::{Engine, LazyEngine};
use crate::error::{Tool, ToolError};
use crate::output::{
    DossierOutput, ForgetOutput, MemoriesOutput, MemorizeOutput, MemoryView, RecallOutput,
    ScoredMemoryView, TimelineEventView, TimelineOutput,
};
use crate::read_error::ReadError;

/// The MCP server: the tools over one lazily built engine. Cloning is cheap and shares the
/// engine, which is how every HTTP session gets a handler.
#[derive(Clone)]
pub struct CortexServer {
    engine: Arc<LazyEngine>,
    /// Whether every call must come with a key's [`Caller`] (HTTP in key mode): then a
    /// call without one is refused instead of served as the configured user.
    keyed: bool,
    pub(crate) tool_router: ToolRouter<Self>,
}

impl fmt::Debug for CortexServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CortexServer")
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

// Results are spelled `Result<Json<T>, ToolError>` in full: the tool macro recognises that
// shape, not an alias, when it derives each tool's output schema.
//
// Every tool states all four hints, since MCP's defaults (destructive, not idempotent, open
// world) are the pessimistic ones. None is open-world: each reads or writes only the
// caller's memories in the server's own store (a provider it calls on the way changes
// nothing the agent sees). The reads are read-only, so repeating one changes nothing.
// memorize is not idempotent: without CORTEX_DEDUP (off by default) the same content twice
// is two memories; it is not destructive, since a correction (`replaces`) keeps the old
// memory in its history. forget is destructive (the memory is gone for good) and
// idempotent: a second call with the same id finds nothing and changes nothing.
#[tool_router(vis = "pub(crate)")]
impl CortexServer {
    pub fn new(engine: Arc<LazyEngine>) -> Self {
        Self {
            engine,
            keyed: false,
            tool_router: Self::tool_router(),
        }
    }

    /// Serves each call as the user of the API key it came with (see `auth`).
    pub fn keyed(self) -> Self {
        Self {
            keyed: true,
            ..self
        }
    }

    /// Store one durable memory for later sessions: a fact about the user or their work, a
    /// preference, a decision and its reason, a standing instruction, or a notable dated
    /// event. Write one self-contained statement per call. Do not store chit-chat,
    /// transient task state, secrets, or what recall already returns. When you know them,
    /// also pass who and what it is about (`subject`, `entities`, `relations`) and the
    /// event it records (`event`: time, place, type): they are stored with the memory, so
    /// recall_about and recall_timeline find it. Returns the new memory's id and status
    /// ("stored"; "duplicate" or "superseded" when the server detects an existing
    /// equivalent or stale memory).
    #[tool(annotations(
        title = "Memorize",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn memorize(
        &self,
        Parameters(args): Parameters<MemorizeArgs>,
        extensions: Extensions,
    ) -> Result<Json<MemorizeOutput>, ToolError> {
        let tool = Tool::Memorize;
        // The structure first: a malformed one is the caller's to fix even on an
        // unset-up server, and is refused before anything is embedded or written.
        let structure = args
            .structure()
            .into_structure()
            .map_err(|e| fail(tool, e))?;
        let engine = self.engine().await?;
        let user = self.caller(&engine, &extensions, tool)?;
        let kind = match args
            .kind
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty())
        {
            Some(kind) => kind.parse::<MemoryKind>().map_err(|e| fail(tool, e))?,
            None => MemoryKind::default(),
        };
        let tags = args.tags.unwrap_or_default();
        let options = MemorizeOptions {
            created_at: parse_instant("created_at", args.created_at.as_deref())?,
            // Agents often send "" for an argument they mean to leave out.
            replaces: args.replaces.filter(|r| !r.trim().is_empty()),
            reason: None,
            skip_extraction: false,
            expires_at: parse_instant("expires_at", args.expires_at.as_deref())?,
            structure,
        };
        let memorized = engine
            .memory
            .memorize(&user, &args.content, kind, &tags, &options)
            .await
            .map_err(|e| fail(tool, e))?;
        tracing::debug!(id = %memorized.memory.id, status = memorized.status.as_str(), "memorized");
        Ok(Json(MemorizeOutput::from(&memorized)))
    }

    /// Search long-term memory. Call this before answering anything that may depend on
    /// earlier sessions: the user's preferences, past decisions, people, projects, "what
    /// did we decide about ...". Returns stored memories ranked by relevance (meaning and
    /// keywords combined), most relevant first, with their ids; it does not write an
    /// answer, so read them and use what applies. Optional filters (kinds, tags, tags_all,
    /// since, until) narrow the search to matching memories, e.g. decisions since a date.
    #[tool(annotations(
        title = "Recall",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn recall(
        &self,
        Parameters(args): Parameters<RecallArgs>,
        extensions: Extensions,
    ) -> Result<Json<RecallOutput>, ToolError> {
        let tool = Tool::Recall;
        // Filters first: a malformed one is the caller's to fix even on an unset-up server.
        let filter = filter_of(tool, &args.filter_text())?;
        let engine = self.engine().await?;
        let user = self.caller(&engine, &extensions, tool)?;
        let limit = clamp_limit(args.limit, engine.top_k);
        let found = engine
            .memory
            .recall_filtered(&user, &args.query, limit, &filter)
            .await
            .map_err(|e| fail(tool, e))?;
        Ok(Json(RecallOutput {
            memories: found.iter().map(ScoredMemoryView::from).collect(),
        }))
    }

    /// Everything the memory graph holds about one entity (person, project, place,
    /// organisation), found by name or alias: its relationships to other entities and the
    /// memories that mention it, newest first. The graph holds the `subject`, `entities`
    /// and `relations` given to memorize (and what the server extracts itself when it
    /// runs an extraction model). An exact lookup, not a search; use recall for fuzzy
    /// questions.
    #[tool(annotations(
        title = "Recall about an entity",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn recall_about(
        &self,
        Parameters(args): Parameters<RecallAboutArgs>,
        extensions: Extensions,
    ) -> Result<Json<DossierOutput>, ToolError> {
        let tool = Tool::RecallAbout;
        let engine = self.engine().await?;
        let user = self.caller(&engine, &extensions, tool)?;
        let limit = clamp_limit(args.limit, engine.top_k);
        let dossier = engine
            .memory
            .recall_about(&user, &args.entity, limit)
            .await
            .map_err(|e| fail(tool, e))?;
        Ok(Json(DossierOutput::from(&dossier)))
    }

    /// Dated events from memory in chronological order, oldest first, each with the memory
    /// it came from: "what happened in March", "what did I do last week". The events are
    /// those given as memorize's `event` (and those the server extracts itself when it
    /// runs an extraction model). `since` and `until` are YYYY-MM-DD dates (midnight UTC)
    /// or RFC 3339 datetimes; `until` is exclusive.
    #[tool(annotations(
        title = "Recall a timeline",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn recall_timeline(
        &self,
        Parameters(args): Parameters<RecallTimelineArgs>,
        extensions: Extensions,
    ) -> Result<Json<TimelineOutput>, ToolError> {
        let tool = Tool::RecallTimeline;
        // Dates first: a malformed date is the caller's to fix even on an unset-up server.
        let range = TimeRange {
            since: parse_instant("since", args.since.as_deref())?,
            until: parse_instant("until", args.until.as_deref())?,
        };
        let engine = self.engine().await?;
        let user = self.caller(&engine, &extensions, tool)?;
        let limit = clamp_limit(args.limit, engine.top_k);
        let entries = engine
            .memory
            .timeline(&user, &range, limit)
            .await
            .map_err(|e| fail(tool, e))?;
        Ok(Json(TimelineOutput {
            events: entries.iter().map(TimelineEventView::from).collect(),
        }))
    }

    /// The most recently stored memories, newest first, with their ids, a page at a time:
    /// pass `next_cursor` back as `cursor` for the next page. Filters (kinds, tags,
    /// tags_all, since, until) as in recall. Use it to review what is stored or to find an
    /// id for forget; use recall to search.
    #[tool(annotations(
        title = "List memories",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn list_memories(
        &self,
        Parameters(args): Parameters<ListMemoriesArgs>,
        extensions: Extensions,
    ) -> Result<Json<MemoriesOutput>, ToolError> {
        let tool = Tool::ListMemories;
        let mut filter = filter_of(tool, &args.filter_text())?;
        filter.include_expired = args.include_expired.unwrap_or(false);
        let engine = self.engine().await?;
        let user = self.caller(&engine, &extensions, tool)?;
        let limit = clamp_limit(args.limit, engine.top_k);
        // Agents often send "" for an argument they mean to leave out.
        let cursor = args.cursor.as_deref().filter(|c| !c.trim().is_empty());
        let page = engine
            .memory
            .list_page(&user, &filter, limit, cursor)
            .await
            .map_err(|e| fail(tool, e))?;
        Ok(Json(MemoriesOutput {
            memories: page.memories.iter().map(MemoryView::from).collect(),
            next_cursor: page.next_cursor,
        }))
    }

    /// Permanently delete one memory, by its full id or by a prefix of at least 4 hex
    /// characters that matches exactly one memory (an ambiguous prefix deletes nothing).
    /// Use it when the user asks to forget something; to correct a memory, memorize the
    /// corrected statement with `replaces` set to the old memory's id instead.
    #[tool(annotations(
        title = "Forget",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn forget(
        &self,
        Parameters(args): Parameters<ForgetArgs>,
        extensions: Extensions,
    ) -> Result<Json<ForgetOutput>, ToolError> {
        let tool = Tool::Forget;
        let engine = self.engine().await?;
        let user = self.caller(&engine, &extensions, tool)?;
        let id = engine
            .memory
            .forget(&user, &args.memory_id)
            .await
            .map_err(|e| fail(tool, e))?;
        tracing::debug!(%id, "forgot");
        Ok(Json(ForgetOutput {
            forgotten: id.to_string(),
        }))
    }
}

impl CortexServer {
    /// Whom this call reads and writes as: the user of the API key it came with (HTTP in
    /// key mode, where a key without the scope `tool` needs is refused), else the
    /// configured user (stdio, or HTTP with the one shared token).
    fn caller(
        &self,
        engine: &Engine,
        extensions: &Extensions,
        tool: Tool,
    ) -> Result<String, ToolError> {
        let refused = match (key_caller(extensions), self.keyed) {
            (Some(caller), _) if caller.scope.allows(tool.scope()) => {
                return Ok(caller.user_id.clone());
            }
            (None, false) => return Ok(engine.user_id.clone()),
            (Some(caller), _) => ToolError::Scope {
                tool,
                scope: caller.scope,
            },
            (None, true) => ToolError::NoCaller(tool),
        };
        log(&refused);
        Err(refused)
    }

    /// The engine and whom a read (a resource, the prompt) is served as, by the same rule
    /// as a tool's caller. Every key's scope allows reading.
    pub(crate) async fn reader(
        &self,
        extensions: &Extensions,
    ) -> Result<(Arc<Engine>, String), ReadError> {
        let engine = self
            .engine
            .get()
            .await
            .map_err(|e| ReadError::Failed(ToolError::from(e)))?;
        let user = match (key_caller(extensions), self.keyed) {
            (Some(caller), _) if caller.scope.allows(Scope::Read) => caller.user_id.clone(),
            (None, false) => engine.user_id.clone(),
            _ => return Err(ReadError::NoCaller),
        };
        Ok((engine, user))
    }

    async fn engine(&self) -> Result<Arc<Engine>, ToolError> {
        self.engine.get().await.map_err(|e| {
            let err = ToolError::from(e);
            log(&err);
            err
        })
    }
}

/// The API key's caller a request came with (HTTP in key or OAuth mode).
fn key_caller(extensions: &Extensions) -> Option<&Caller> {
    extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
}

/// A tool's filter arguments, checked before anything else runs.
fn filter_of(tool: Tool, text: &FilterText<'_>) -> Result<MemoryFilter, ToolError> {
    text.parse().map_err(|e| match e {
        FilterError::Date(e) => ToolError::BadDate(e),
        FilterError::Invalid(e) => fail(tool, e),
    })
}

fn fail(tool: Tool, error: CortexError) -> ToolError {
    let err = ToolError::engine(tool, error);
    log(&err);
    err
}

/// Server-side faults are the operator's business and get a warning; a caller's bad
/// argument is routine and only shows at debug level.
fn log(err: &ToolError) {
    crate::metrics::tool_error(err);
    if err.is_server_side() {
        tracing::warn!(error = %err, "tool call failed");
    } else {
        tracing::debug!(error = %err, "tool call refused");
    }
}
