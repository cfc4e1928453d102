//! The `cortex-mcp` program: parses `--http` and serves stdio or HTTP. Its binaries
//! (`mcp/src/main.rs`, and the wheel's in `pypi/`) are one call to [`main`] beside the
//! global allocator, which only a binary can choose.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::http::{self, HttpError, HttpPolicy, MCP_PATH};
use crate::logging::{self, LogFormat};
use crate::oauth::{JwtError, JwtVerifier};
use crate::{BearerToken, Credentials, LazyEngine, ServeError, ServerConfig, serve_stdio};
use clap::Parser;
use cortex_app::engine::{EngineError, open_key_store};
use cortex_app::{ConfigError, HttpAuth, StoreSettings, env_var};
use tokio_util::sync::CancellationToken;

/// Long-term memory for AI agents, served over MCP.
///
/// Configuration comes only from environment variables (CORTEX_DB_PATH,
/// CORTEX_EMBED_PROVIDER, GEMINI_API_KEY, ...); see docs/CONFIGURATION.md. Logs go to
/// stderr, filtered by RUST_LOG, as text or (CORTEX_LOG_FORMAT=json) JSON lines.
#[derive(Debug, Parser)]
#[command(name = "cortex-mcp", version)]
struct Cli {
    /// Serve streamable HTTP at ADDR (host:port, path /mcp) instead of stdio. Requires
    /// CORTEX_HTTP_TOKEN, or CORTEX_HTTP_AUTH=keys and keys from `cortex token create`.
    /// `--http` alone means 127.0.0.1:8765.
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = "127.0.0.1:8765"
    )]
    http: Option<String>,
}

#[derive(Debug, thiserror::Error)]
enum MainError {
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error("configuration: {0} (see docs/CONFIGURATION.md)")]
    Config(#[from] ConfigError),
    #[error("cannot open the API keys' store: {0}")]
    Keys(#[from] EngineError),
    #[error("OAuth: {0}")]
    OAuth(#[from] JwtError),
}

/// Runs `cortex-mcp` with the process's arguments and environment: what its binaries do.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match LogFormat::from_lookup(env_var) {
        Ok(format) => logging::init(format),
        Err(e) => {
            eprintln!("cortex-mcp: {e} (see docs/CONFIGURATION.md)");
            return ExitCode::FAILURE;
        }
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cortex-mcp: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), MainError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(MainError::Runtime)?;
    let result = runtime.block_on(serve(cli));
    // Tokio reads stdin on a blocking thread that cannot be interrupted; after a signal,
    // waiting for it would hang until the client writes again.
    runtime.shutdown_timeout(Duration::from_secs(2));
    result
}

async fn serve(cli: Cli) -> Result<(), MainError> {
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    match cli.http {
        None => {
            let engine = lazy_engine();
            tracing::info!("serving MCP on stdio");
            serve_stdio(Arc::clone(&engine), shutdown).await?;
            keep_indexes(&engine).await;
        }
        Some(addr) => {
            // The credentials are checked before binding: a server that would refuse every
            // request must not hold the port.
            let credentials = credentials().await?;
            let engine = lazy_engine();
            let listener = http::bind(&addr).await?;
            let bound = listener.local_addr().map_err(|source| HttpError::Bind {
                addr: addr.clone(),
                source,
            })?;
            let policy = HttpPolicy::from_lookup(env_var, &addr, bound)?;
            tracing::info!(
                allowed_hosts = %policy.hosts,
                allowed_origins = %policy.origins,
                max_sessions = policy.sessions.max,
                user_max_sessions = policy.sessions.per_user,
                session_idle_secs = policy.sessions.idle.as_secs(),
                user_rps = policy.rate.per_second,
                user_burst = policy.rate.burst,
                drain_secs = policy.drain.as_secs(),
                "listening on http://{bound}{MCP_PATH}"
            );
            let stop = http::Stop::new(shutdown, policy.drain);
            let app = http::router(Arc::clone(&engine), credentials, &policy, &stop);
            http::serve(listener, app, stop).await?;
            keep_indexes(&engine).await;
        }
    }
    Ok(())
}

/// The cached indexes written where the next start reads them (SQLite's snapshots), so
/// that its first recalls need not read back what this process wrote.
async fn keep_indexes(engine: &LazyEngine) {
    if let Some(engine) = engine.built() {
        let kept = engine.memory.keep_indexes().await;
        tracing::info!(indexes = kept, "indexes kept for the next start");
    }
}

/// What the HTTP front accepts: the one shared token, or the store's API keys. In key
/// mode the store is opened now: without it no request could be checked.
async fn credentials() -> Result<Credentials, MainError> {
    Ok(match HttpAuth::from_lookup(&env_var)? {
        HttpAuth::Token => Credentials::Token(
            BearerToken::new(env_var("CORTEX_HTTP_TOKEN").as_deref()).map_err(HttpError::from)?,
        ),
        HttpAuth::Callers { keys, oauth } => {
            let keys = match keys {
                false => None,
                true => {
                    let storage = StoreSettings::from_env()?.storage;
                    Some(open_key_store(&storage).await?)
                }
            };
            let jwt = oauth
                .map(|settings| JwtVerifier::new(settings).map(Arc::new))
                .transpose()?;
            tracing::info!(
                keys = keys.is_some(),
                oauth_issuer = jwt.as_ref().map(|j| j.settings().issuer.as_str()),
                "serving each request as the user its credential names"
            );
            Credentials::Callers { keys, jwt }
        }
    })
}

/// The engine, built on the first tool call. The settings are read once now only to log
/// a bad or contradictory one (`CORTEX_GRAPH=1` without `CORTEX_LLM_PROVIDER`, say):
/// the server serves anyway, as it does without a key or a model, because a server that
/// exits is all an MCP host shows as "Connection closed", while a served tool call shows
/// the agent (and the user) the setting to fix, with `isError`. The build reads the
/// settings again, so a model fetched into the default directory after the start is used
/// without a restart.
fn lazy_engine() -> Arc<LazyEngine> {
    if let Err(e) = ServerConfig::from_env() {
        tracing::error!(
            "configuration: {e} (see docs/CONFIGURATION.md); serving anyway: every tool call \
             reports this until the setting is fixed and the server restarted"
        );
    }
    Arc::new(LazyEngine::from_env())
}

/// Ctrl-C, or SIGTERM from docker or systemd, stops the server gracefully.
async fn cancel_on_signal(shutdown: CancellationToken) {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
    shutdown.cancel();
}
