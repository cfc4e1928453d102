//! Which pooled connections are checked before they are handed out.
//!
//! A connection whose server restarted or terminated it, or whose link died, may not look
//! closed yet (its driver task has not read the socket); handed out, it would fail the
//! caller's statement or, on a dead link, hang it until the call's deadline. An empty
//! statement answered within the connect timeout proves it alive, at one round trip (about
//! 0.4 ms a search, docs/BENCHMARKS.md). A connection checked out moments ago is trusted
//! without it, as HikariCP trusts one used within its half-second bypass window: a server
//! that ends its sessions closes their sockets, which the driver reads at once, and a link
//! goes dead silently only after far longer idle (a NAT or firewall forgetting it).
//! Back-to-back calls, which a busy server makes, then pay no round trip for the check.

use std::time::Duration;

use deadpool_postgres::{Hook, HookError, Metrics};

/// How recently a connection must have been checked out to be handed out unchecked.
pub(crate) const TRUSTED_FOR: Duration = Duration::from_millis(500);

/// Whether a connection last checked out (or opened) this long ago is checked first.
fn needs_check(idle: Duration) -> bool {
    idle >= TRUSTED_FOR
}

/// The pool's post-recycle hook: a connection idle for [`TRUSTED_FOR`] or longer is sent
/// an empty statement; one that fails it, or gives no answer within `limit`, is dropped
/// (the pool then tries the next one, or opens one) instead of being handed out.
pub(crate) fn hook(limit: Duration) -> Hook {
    Hook::async_fn(move |client, metrics: &Metrics| {
        let idle = metrics.last_used();
        Box::pin(async move {
            if !needs_check(idle) {
                return Ok(());
            }
            match tokio::time::timeout(limit, client.simple_query("")).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "dropping a pooled connection that failed its check");
                    Err(HookError::Backend(e))
                }
                Err(_) => {
                    tracing::warn!(
                        ?limit,
                        "dropping a pooled connection that did not answer its check"
                    );
                    Err(HookError::message("no answer to the liveness check"))
                }
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_connection_idle_past_the_window_is_checked() {
        assert!(!needs_check(Duration::ZERO));
        assert!(!needs_check(TRUSTED_FOR - Duration::from_millis(1)));
        assert!(needs_check(TRUSTED_FOR));
        assert!(needs_check(Duration::from_secs(3600)));
    }
}
