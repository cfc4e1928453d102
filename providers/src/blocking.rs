//! Blocking work (SQLite, model files, a model download) moved off the async runtime's
//! worker threads: a worker blocked on a disk write or a model load stalls every task it
//! owns, the server's other sessions included.

use cortex_core::error::ProviderError;
use thiserror::Error;

/// Blocking work that did not finish: it panicked, or the runtime shut down under it.
#[derive(Debug, Error)]
#[error("{what} did not finish on its blocking thread: {source}")]
pub(crate) struct BlockingError {
    what: &'static str,
    #[source]
    source: tokio::task::JoinError,
}

/// Runs `work` on the Tokio runtime's blocking pool, or right here when no Tokio runtime
/// drives the caller (another executor, or none), where blocking stalls no one else's
/// tasks. `what` names the work in the error.
pub(crate) async fn off_runtime<T, F>(what: &'static str, work: F) -> Result<T, BlockingError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => runtime
            .spawn_blocking(work)
            .await
            .map_err(|source| BlockingError { what, source }),
        Err(_) => Ok(work()),
    }
}

impl From<BlockingError> for ProviderError {
    fn from(e: BlockingError) -> Self {
        ProviderError::Config(e.to_string())
    }
}
