//! The MCP handler (server identity, the instructions an agent reads, the capabilities:
//! tools, resources and prompts) and the stdio transport.

use std::sync::Arc;
use std::time::Instant;

use axum::http::request::Parts;
use cortex_core::keys::Caller;
use tracing::Instrument;

use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{RequestContext, ServerInitializeError};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool_handler};
use tokio_util::sync::CancellationToken;

use crate::engine::LazyEngine;
use crate::read_error::ReadError;
use crate::resource_uri::ResourceUri;
use crate::tools::CortexServer;
use crate::{metrics, prompts, resources};

/// What an MCP host shows the model about this server: when to write and when to read.
pub const INSTRUCTIONS: &str = "\
Cortex is your long-term memory: what you store here is available in every later session.

When to memorize: call `memorize` for durable information worth knowing next time - facts \
about the user, their work and the people and projects around them; preferences; decisions \
and their reasons; standing instructions (\"always ...\", \"never ...\"); notable events with \
their dates. Write one self-contained statement per call that makes sense without this \
conversation: name people, projects and dates instead of saying \"he\", \"it\" or \
\"yesterday\". Do not memorize chit-chat, greetings, transient task state, secrets such as \
passwords or API keys, or what recall already returns. When you know who or what a memory \
is about, or when and where it happened, pass that too: `subject` and `entities` (with their \
type and aliases), `relations` between them, and the `event` (time, place, type).

When to recall: call `recall` before answering anything that may depend on earlier \
sessions - the user's preferences, past decisions, people, projects, or any question like \
\"what did we decide about ...\". It returns stored memories ranked by relevance, not an \
answer: read them and use what applies. If nothing relevant comes back, say so rather than \
guessing. When the question names a kind, a tag or a period (\"decisions since March\"), \
pass it as `kinds`, `tags` or `since`/`until`.

Other tools: `list_memories` shows the newest memories, a page at a time (`cursor`); to \
correct a memory, memorize the corrected statement with `replaces` set to the old one's id; \
`forget` deletes a memory by id or unique id prefix when the user asks. `recall_about` \
(everything about one entity, by name or alias) and `recall_timeline` (dated events in \
order) read the entities, relations and events stored with memories.";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CortexServer {
    /// The router's call, timed and counted per tool and outcome (see `metrics`).
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = request.name.to_string();
        let started = Instant::now();
        // rmcp runs the call on the session's task, outside the HTTP request's span: this
        // one carries its id (and the caller's user) onto every line the call logs.
        let parts = context.extensions.get::<Parts>();
        let span = tracing::info_span!(
            "tool",
            request = parts.map_or("-", |p| crate::http::request_id(&p.extensions)),
            user = parts
                .and_then(|p| p.extensions.get::<Caller>())
                .map(|c| c.user_id.as_str()),
            name = tool.as_str(),
        );
        let context = ToolCallContext::new(self, request, context);
        let response = self.tool_router.call(context).instrument(span).await;
        // `error`: a tool result with isError (what failed is counted where it is known,
        // see `tools::log`); `invalid`: no tool ran (an unknown tool, arguments that do
        // not fit its schema).
        let outcome = match &response {
            Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => "error",
            Ok(_) => "ok",
            Err(_) => "invalid",
        };
        metrics::tool_call(&tool, outcome, started.elapsed());
        response
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(resources::list())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let read = async {
            // The URI first: a malformed one is the caller's to fix even on an unset-up server.
            let parsed = ResourceUri::parse(&uri).map_err(|e| resources::uri_error(&uri, e))?;
            let (engine, user) = self.reader(&context.extensions).await?;
            resources::read(&engine, &user, &uri, parsed).await
        };
        let read = read.instrument(span("resource", "read", &context)).await;
        answer(read.map(ReadResourceResponse::from))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(prompts::list())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let get = async {
            let wanted = prompts::request_of(&request)?;
            let (engine, user) = self.reader(&context.extensions).await?;
            prompts::recall_context(&engine, &user, &wanted).await
        };
        let got = get
            .instrument(span("prompt", &request.name, &context))
            .await;
        answer(got.map(GetPromptResponse::from))
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_prompts()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("cortex-mcp", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }
}

/// The span a resource read or a prompt runs in, as a tool call's: the request id and the
/// caller's user (never the URI or the task, which hold the user's words).
fn span(what: &'static str, name: &str, context: &RequestContext<RoleServer>) -> tracing::Span {
    let parts = context.extensions.get::<Parts>();
    tracing::info_span!(
        "read",
        what,
        request = parts.map_or("-", |p| crate::http::request_id(&p.extensions)),
        user = parts
            .and_then(|p| p.extensions.get::<Caller>())
            .map(|c| c.user_id.as_str()),
        name,
    )
}

/// A read's JSON-RPC answer; a server-side failure is logged for the operator.
fn answer<T>(result: Result<T, ReadError>) -> Result<T, ErrorData> {
    result.map_err(|e| {
        if e.is_server_side() {
            tracing::warn!(error = %e, "read failed");
        } else {
            tracing::debug!(error = %e, "read refused");
        }
        ErrorData::from(e)
    })
}

/// Why serving stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error("the MCP handshake failed: {0}")]
    Handshake(#[from] Box<ServerInitializeError>),
    #[error("the server task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Serves MCP over stdin/stdout until the client closes stdin or `shutdown` is cancelled.
pub async fn serve_stdio(
    engine: Arc<LazyEngine>,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let running = CortexServer::new(engine)
        .serve_with_ct(crate::stdio::stdio(), shutdown)
        .await
        .map_err(Box::new)?;
    let reason = running.waiting().await?;
    tracing::info!(?reason, "stdio session ended");
    Ok(())
}
