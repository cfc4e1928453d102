//! What every handler shares: the engine, the login seam, the sessions and the settings.

use std::sync::Arc;
use std::time::Duration;

use cortex_core::CortexMemory;

use crate::auth::{Login, Sessions};

/// The pages' settings.
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// How long a login lasts.
    pub session_ttl: Duration,
    /// Memories per Browse page.
    pub page_size: usize,
    /// Results a search shows.
    pub search_results: usize,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            session_ttl: Duration::from_secs(12 * 60 * 60),
            page_size: 50,
            search_results: 20,
        }
    }
}

/// The state behind [`crate::router`]: cheap to clone.
#[derive(Debug, Clone)]
pub struct WebState {
    pub engine: Arc<CortexMemory>,
    pub login: Arc<dyn Login>,
    pub sessions: Arc<Sessions>,
    pub config: Arc<WebConfig>,
}

impl WebState {
    /// State with the default settings.
    pub fn new(engine: Arc<CortexMemory>, login: Arc<dyn Login>) -> Self {
        Self::with_config(engine, login, WebConfig::default())
    }

    pub fn with_config(
        engine: Arc<CortexMemory>,
        login: Arc<dyn Login>,
        config: WebConfig,
    ) -> Self {
        Self {
            engine,
            login,
            sessions: Arc::new(Sessions::new(config.session_ttl)),
            config: Arc::new(config),
        }
    }
}
