//! A graceful stop that finishes what is in flight: on SIGTERM the server stops taking
//! connections, waits until every call already received has written its answer (or a
//! deadline passes), and only then ends the sessions, whose cancellation would otherwise
//! drop a call half done and leave its client without an answer.
//!
//! A call is in flight from its request's arrival until its response body has been sent:
//! rmcp streams a tool's answer as server-sent events after the handler returns, so the
//! count follows the body, not the handler. `GET /mcp` (a session's idle event stream) is
//! not counted: it lasts as long as the session and carries no call.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use futures_util::StreamExt;
use tokio::sync::Notify;

/// How long a stop waits for calls in flight when `CORTEX_HTTP_DRAIN_SECS` is unset.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(30);

/// The calls in flight.
#[derive(Debug, Default)]
pub struct Drain {
    in_flight: AtomicUsize,
    idle: Notify,
}

/// One call in flight; dropping it ends the call.
#[derive(Debug)]
pub struct InFlight(Arc<Drain>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Drain {
    /// Counts a call until the guard drops.
    pub fn enter(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(self))
    }

    /// How many calls are in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Waits until no call is in flight, or `deadline` has passed; whether it drained.
    pub async fn wait(&self, deadline: Duration) -> bool {
        let drained = async {
            loop {
                // Registered before the check, so a call ending between the two still wakes.
                let notified = self.idle.notified();
                if self.in_flight() == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(deadline, drained).await.is_ok()
    }
}

/// Axum middleware: holds a call's [`InFlight`] until its response body is sent.
pub async fn track_calls(
    State(drain): State<Arc<Drain>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == Method::GET {
        return next.run(request).await;
    }
    let guard = drain.enter();
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _held = &guard;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_for_calls_in_flight_and_no_longer() {
        let drain = Arc::new(Drain::default());
        assert!(
            drain.wait(Duration::from_millis(1)).await,
            "nothing in flight"
        );
        let call = drain.enter();
        assert_eq!(drain.in_flight(), 1);
        assert!(
            !drain.wait(Duration::from_millis(50)).await,
            "a call in flight holds the stop until the deadline"
        );
        let ends = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(call);
        });
        assert!(drain.wait(Duration::from_secs(10)).await);
        assert_eq!(drain.in_flight(), 0);
        ends.await.unwrap();
    }
}
