//! Slowing down guesses at the login: a client that fails too many logins in a window
//! waits for the window to pass. Keys and tokens are long random secrets, so this is a
//! second fence that keeps a guessing client from costing the key store a read per try.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Most clients remembered at once; past it the oldest windows are dropped first.
const MAX_CLIENTS: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

/// Failed logins per client address (all clients share one count when the server does
/// not know addresses).
#[derive(Debug)]
pub struct LoginThrottle {
    limit: u32,
    window: Duration,
    clients: Mutex<HashMap<Option<IpAddr>, Window>>,
}

impl LoginThrottle {
    pub fn new(limit: u32, window: Duration) -> Self {
        Self {
            limit: limit.max(1),
            window,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// `None` when `client` may try to log in now, else how long it must wait.
    pub fn wait(&self, client: Option<IpAddr>) -> Option<Duration> {
        let now = Instant::now();
        let clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        let w = clients.get(&client)?;
        let elapsed = now.duration_since(w.started);
        (w.failures >= self.limit && elapsed < self.window).then(|| self.window - elapsed)
    }

    /// Counts a failed login by `client`.
    pub fn failed(&self, client: Option<IpAddr>) {
        let now = Instant::now();
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if clients.len() >= MAX_CLIENTS {
            clients.retain(|_, w| now.duration_since(w.started) < self.window);
        }
        let w = clients.entry(client).or_insert(Window {
            started: now,
            failures: 0,
        });
        if now.duration_since(w.started) >= self.window {
            *w = Window {
                started: now,
                failures: 0,
            };
        }
        w.failures = w.failures.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_waits_after_too_many_failures_and_others_do_not() {
        let t = LoginThrottle::new(3, Duration::from_secs(60));
        let a = Some(IpAddr::from([10, 0, 0, 1]));
        let b = Some(IpAddr::from([10, 0, 0, 2]));
        for _ in 0..2 {
            t.failed(a);
        }
        assert_eq!(t.wait(a), None);
        t.failed(a);
        let wait = t.wait(a).expect("a must wait after its third failure");
        assert!(wait <= Duration::from_secs(60) && wait > Duration::from_secs(50));
        assert_eq!(t.wait(b), None);
        assert_eq!(t.wait(None), None);
    }

    #[test]
    fn the_window_passes() {
        let t = LoginThrottle::new(1, Duration::ZERO);
        t.failed(None);
        assert_eq!(t.wait(None), None);
    }
}
