//! The engine's clock: what "now" is for expiry. Injected, so a test can stand exactly at
//! an expiry boundary instead of sleeping past it.

use std::fmt;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Duration, Utc};

/// Where the engine reads the time.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now, at the microsecond precision the stores keep.
    fn now(&self) -> DateTime<Utc>;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        crate::memory::now()
    }
}

/// A clock that stands still until told otherwise (tests, replays).
#[derive(Debug)]
pub struct ManualClock(Mutex<DateTime<Utc>>);

impl ManualClock {
    pub fn new(at: DateTime<Utc>) -> Self {
        Self(Mutex::new(at))
    }

    pub fn set(&self, at: DateTime<Utc>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }

    pub fn advance(&self, by: Duration) {
        let mut at = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *at += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
