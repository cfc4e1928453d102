//! What every handler shares: where the engine comes from, the login seam, the sessions,
//! the login throttle and the settings.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cortex_app::engine::Engine;

use crate::auth::{Login, Sessions};
use crate::error::WebError;
use crate::throttle::LoginThrottle;

/// The pages' settings.
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// How long a login lasts.
    pub session_ttl: Duration,
    /// Memories per Browse page.
    pub page_size: usize,
    /// Results a search shows.
    pub search_results: usize,
    /// Events the timeline shows at most.
    pub timeline_events: usize,
    /// Entities the graph draws at most (the best connected first).
    pub graph_entities: usize,
    /// Whether Stats shows the whole store's size on disk: yes for one person's store
    /// (`cortex ui`), no on a server shared by many users, where it describes all of them.
    pub show_store_size: bool,
    /// Origins besides the request's own `Host` that a write may come from: the public
    /// address of a server behind a proxy that rewrites `Host`.
    pub extra_origins: Vec<String>,
    /// Failed logins one client may make in [`Self::login_window`] before it must wait.
    pub login_failures: u32,
    pub login_window: Duration,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            session_ttl: Duration::from_secs(12 * 60 * 60),
            page_size: 50,
            search_results: 20,
            timeline_events: 500,
            graph_entities: 150,
            show_store_size: false,
            extra_origins: Vec::new(),
            login_failures: 10,
            login_window: Duration::from_secs(5 * 60),
        }
    }
}

/// Where the pages get the engine: built already (`cortex ui`), or built on first use
/// (the MCP server, which starts before its store may be reachable).
#[async_trait]
pub trait EngineSource: Send + Sync + fmt::Debug {
    async fn engine(&self) -> Result<Arc<Engine>, WebError>;
}

/// An engine that is already built.
#[derive(Debug, Clone)]
pub struct Ready(pub Arc<Engine>);

#[async_trait]
impl EngineSource for Ready {
    async fn engine(&self) -> Result<Arc<Engine>, WebError> {
        Ok(Arc::clone(&self.0))
    }
}

/// The state behind [`crate::router`]: cheap to clone.
#[derive(Debug, Clone)]
pub struct WebState {
    pub source: Arc<dyn EngineSource>,
    pub login: Arc<dyn Login>,
    pub sessions: Arc<Sessions>,
    pub throttle: Arc<LoginThrottle>,
    pub config: Arc<WebConfig>,
}

impl WebState {
    /// State over a built engine with the default settings.
    pub fn new(engine: Arc<Engine>, login: Arc<dyn Login>) -> Self {
        Self::with_config(Arc::new(Ready(engine)), login, WebConfig::default())
    }

    pub fn with_config(
        source: Arc<dyn EngineSource>,
        login: Arc<dyn Login>,
        config: WebConfig,
    ) -> Self {
        Self {
            source,
            login,
            sessions: Arc::new(Sessions::new(config.session_ttl)),
            throttle: Arc::new(LoginThrottle::new(
                config.login_failures,
                config.login_window,
            )),
            config: Arc::new(config),
        }
    }

    /// The engine, or the page that says why there is none yet.
    pub async fn engine(&self) -> Result<Arc<Engine>, WebError> {
        self.source.engine().await
    }
}
