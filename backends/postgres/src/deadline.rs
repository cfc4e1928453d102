//! Each call's deadline. The server's `statement_timeout` bounds a statement only while the
//! server can still tell us: on a network path that drops packets without closing
//! anything (no FIN, no RST), a call would wait for an answer that never comes. So every
//! call of the store runs under a deadline of its own ([`Timeouts::call_deadline`]), and a
//! call past it is abandoned: the connections it held are closed, never handed to the next
//! call, and so is every idle connection, opened over the same path and as likely dead
//! (each would otherwise cost the next caller a recycle timeout to find out).
//!
//! What a call holds is known without threading anything through the code: the call runs
//! in a task-local scope, and each checkout from the pool notes its connection there.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use cortex_core::error::StoreError;
use deadpool_postgres::{Hook, HookError, Object, Pool, StatementCache};
use futures_util::future::Either;

use crate::config::Timeouts;
use crate::error::{PostgresError, Server};

tokio::task_local! {
    /// The call running on this task, if any.
    static CALL: Arc<Held>;
}

/// Connections by their statement cache: one per connection for its whole life, held
/// weakly so that its address cannot be reused by another connection while remembered.
#[derive(Default)]
struct Held(Mutex<Vec<Weak<StatementCache>>>);

impl Held {
    fn lock(&self) -> MutexGuard<'_, Vec<Weak<StatementCache>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A call's deadline, and the settings it comes from, as its error names them.
#[derive(Debug, Clone)]
pub(crate) struct Deadline {
    limit: Duration,
    setting: String,
}

impl Deadline {
    /// The deadline of calls over connections whose connect timeout in effect is
    /// `connect`; `None` when the statement timeout is off.
    pub(crate) fn of(timeouts: &Timeouts, connect: Duration) -> Option<Self> {
        let statement = timeouts.statement?;
        Some(Self {
            limit: timeouts.call_deadline(connect)?,
            setting: format!(
                "CORTEX_PG_STATEMENT_TIMEOUT_SECS ({statement:?}) plus connect_timeout \
                 ({connect:?})"
            ),
        })
    }

    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }

    /// What a call past this deadline returns.
    pub(crate) fn error(&self, server: &Server) -> StoreError {
        PostgresError::NoAnswer {
            server: server.clone(),
            waited: self.limit,
            setting: self.setting.clone(),
        }
        .into()
    }
}

/// The connections of calls abandoned past their deadline that went back to the pool
/// and were taken again before they could be closed: whoever takes one next drops it.
#[derive(Default)]
pub(crate) struct Abandoned(Held);

impl Abandoned {
    /// The pool's pre-recycle hook: an abandoned connection is dropped (the pool then
    /// tries the next one, or opens one) instead of being handed out.
    pub(crate) fn hook(self: &Arc<Self>) -> Hook {
        let abandoned = Arc::clone(self);
        Hook::sync_fn(
            move |client, _| match abandoned.take(&client.statement_cache) {
                true => Err(HookError::message("abandoned by a call past its deadline")),
                false => Ok(()),
            },
        )
    }

    /// Whether the connection of `cache` was abandoned; forgets it, and every remembered
    /// connection already closed.
    fn take(&self, cache: &Arc<StatementCache>) -> bool {
        let mut held = self.0.lock();
        let found = held
            .iter()
            .any(|h| std::ptr::eq(h.as_ptr(), Arc::as_ptr(cache)));
        held.retain(|h| h.strong_count() > 0 && !std::ptr::eq(h.as_ptr(), Arc::as_ptr(cache)));
        found
    }

    fn forget_closed(&self) {
        self.0.lock().retain(|h| h.strong_count() > 0);
    }
}

/// Notes a connection just taken from the pool as held by the call running on this task.
pub(crate) fn note(client: &Object) {
    let _ = CALL.try_with(|held| held.lock().push(Arc::downgrade(&client.statement_cache)));
}

/// Runs `call` within `limit`: its output, or `None` when it got no answer in time, after
/// its connections were abandoned and the pool's idle ones closed. A call inside another
/// (a store method calling another) runs under the outer one's deadline.
pub(crate) async fn within<T>(
    limit: Duration,
    pool: &Pool,
    abandoned: &Abandoned,
    call: impl Future<Output = T>,
) -> Option<T> {
    match within_unless(Some(limit), pool, abandoned, call, std::future::pending()).await {
        Ended::Done(out) => Some(out),
        Ended::TimedOut | Ended::Cut => None,
    }
}

/// How a call run by [`within_unless`] ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ended<T> {
    /// It finished (well or not) in time.
    Done(T),
    /// No answer within its deadline.
    TimedOut,
    /// Given up when `cut` completed.
    Cut,
}

/// [`within`] (with no deadline when `limit` is `None`), also given up as soon as `cut`
/// completes: a read on a replica the prober found down meanwhile goes elsewhere instead
/// of waiting out a dead link. Either way its connections are abandoned as a call past its
/// deadline's are, never handed to the next call, and the pool's idle ones closed.
pub(crate) async fn within_unless<T>(
    limit: Option<Duration>,
    pool: &Pool,
    abandoned: &Abandoned,
    call: impl Future<Output = T>,
    cut: impl Future<Output = ()>,
) -> Ended<T> {
    let cut = std::pin::pin!(cut);
    if CALL.try_with(|_| ()).is_ok() {
        let call = std::pin::pin!(call);
        return match futures_util::future::select(call, cut).await {
            Either::Left((out, _)) => Ended::Done(out),
            Either::Right(((), _)) => Ended::Cut,
        };
    }
    let held = Arc::new(Held::default());
    // Boxed so that it can be dropped (its connections going back to the pool) only after
    // they are marked as abandoned.
    let mut scoped = Box::pin(CALL.scope(Arc::clone(&held), call));
    let raced = async {
        match futures_util::future::select(scoped.as_mut(), cut).await {
            Either::Left((out, _)) => Ended::Done(out),
            Either::Right(((), _)) => Ended::Cut,
        }
    };
    let ended = match limit {
        Some(limit) => tokio::time::timeout(limit, raced)
            .await
            .unwrap_or(Ended::TimedOut),
        None => raced.await,
    };
    if let Ended::Done(out) = ended {
        return Ended::Done(out);
    }
    abandoned.0.lock().append(&mut held.lock());
    drop(scoped);
    let closed = pool.retain(|_, _| false).removed.len();
    abandoned.forget_closed();
    match (&ended, limit) {
        (Ended::TimedOut, Some(limit)) => tracing::warn!(
            waited = ?limit,
            idle_closed = closed,
            "a postgres call got no answer within its deadline; its connections are closed"
        ),
        _ => tracing::debug!(
            idle_closed = closed,
            "a postgres call was given up (its server went down); its connections are closed"
        ),
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::*;
    use deadpool_postgres::{Manager, ManagerConfig};

    fn pool() -> Pool {
        let config: tokio_postgres::Config = "host=127.0.0.1 port=1 user=u".parse().unwrap();
        let manager = Manager::from_config(config, tokio_postgres::NoTls, ManagerConfig::default());
        Pool::builder(manager).max_size(1).build().unwrap()
    }

    #[tokio::test]
    async fn a_call_past_its_deadline_is_abandoned() {
        let (pool, abandoned) = (pool(), Abandoned::default());
        let limit = Duration::from_millis(20);
        let hung = within(limit, &pool, &abandoned, std::future::pending::<()>()).await;
        assert_eq!(hung, None);
        assert_eq!(within(limit, &pool, &abandoned, async { 7 }).await, Some(7));
    }

    #[tokio::test]
    async fn a_call_is_given_up_when_cut() {
        let (pool, abandoned) = (pool(), Abandoned::default());
        let cut = tokio::time::sleep(Duration::from_millis(10));
        let hung = std::future::pending::<()>();
        let ended = within_unless(None, &pool, &abandoned, hung, cut).await;
        assert_eq!(ended, Ended::Cut);
        let done =
            within_unless(None, &pool, &abandoned, async { 7 }, std::future::pending()).await;
        assert_eq!(done, Ended::Done(7));
        let limit = Some(Duration::from_millis(10));
        let late = within_unless(
            limit,
            &pool,
            &abandoned,
            hung_call(),
            std::future::pending(),
        );
        assert_eq!(late.await, Ended::TimedOut);
    }

    async fn hung_call() {
        std::future::pending::<()>().await;
    }

    #[tokio::test]
    async fn a_call_inside_another_runs_under_the_outer_deadline() {
        let (pool, abandoned) = (pool(), Abandoned::default());
        let outer = within(Duration::from_secs(5), &pool, &abandoned, async {
            // Longer than its own limit, well within the outer call's.
            let slow = tokio::time::sleep(Duration::from_millis(50));
            within(Duration::from_millis(1), &pool, &abandoned, slow).await
        })
        .await;
        assert_eq!(outer, Some(Some(())));
    }
}
