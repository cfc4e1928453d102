//! Wiring the engine from configuration, lazily.
//!
//! The engine is built on the first tool call, not at startup, so an MCP host can start the
//! server and list its tools before any key is set. A failed build is not cached: the call
//! reports it and the next call tries again, so fixing the environment of a long-lived
//! HTTP server (or a missing database that comes up later) needs no restart of clients.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::OnceCell;

pub use cortex_app::engine::{
    Engine, EngineError, build_engine, build_engine_from_env, honour_store, open_store,
};

type BuildFuture = Pin<Box<dyn Future<Output = Result<Engine, EngineError>> + Send>>;
type Builder = Arc<dyn Fn() -> BuildFuture + Send + Sync>;

/// The engine, built on first use by a builder, shared by every session of the server.
pub struct LazyEngine {
    builder: Builder,
    cell: OnceCell<Arc<Engine>>,
}

impl fmt::Debug for LazyEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyEngine")
            .field("built", &self.cell.initialized())
            .finish_non_exhaustive()
    }
}

impl LazyEngine {
    /// Builds from the process environment on first use.
    pub fn from_env() -> Self {
        Self::new(build_engine_from_env)
    }

    /// Builds with `builder` on first use; after a failure, the next use calls it again.
    pub fn new<F, Fut>(builder: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Engine, EngineError>> + Send + 'static,
    {
        Self {
            builder: Arc::new(move || Box::pin(builder())),
            cell: OnceCell::new(),
        }
    }

    /// An engine that is already built (tests, embedding the server in another program).
    pub fn ready(engine: Engine) -> Self {
        Self {
            builder: Arc::new(|| {
                Box::pin(async {
                    Err(EngineError::Unsupported(
                        "the engine was supplied prebuilt".into(),
                    ))
                })
            }),
            cell: OnceCell::new_with(Some(Arc::new(engine))),
        }
    }

    /// The engine if it has been built; never builds it (a metrics scrape must not open
    /// the store).
    pub fn built(&self) -> Option<Arc<Engine>> {
        self.cell.get().cloned()
    }

    /// The engine, building it if this is the first successful use. Concurrent first
    /// calls wait for one build instead of racing to open the store twice.
    pub async fn get(&self) -> Result<Arc<Engine>, EngineError> {
        self.cell
            .get_or_try_init(|| async {
                let engine = (self.builder)().await?;
                Ok(Arc::new(engine))
            })
            .await
            .cloned()
    }
}
