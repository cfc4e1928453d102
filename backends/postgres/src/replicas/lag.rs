//! How far behind the primary a replica is, from positions alone: the primary's WAL
//! position as the prober saw it over time, and a replica's lag as the age of the oldest
//! of those positions it has not replayed yet (zero when it has replayed them all). No
//! clock of the servers is read, so their clocks may disagree with ours and each other.
//! The lag is known to within one probe interval: a position is dated when the prober
//! first saw it, not when it was written.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A position in the write-ahead log (`pg_lsn`), as a byte offset.
pub(crate) type Lsn = u64;

/// The primary's positions, oldest first, each dated when the prober first saw it.
#[derive(Debug)]
pub(crate) struct Samples {
    queue: VecDeque<(Instant, Lsn)>,
    /// How old a sample may get before it is dropped (the newest such one is kept).
    keep: Duration,
}

impl Samples {
    /// Samples kept for `keep`, which must exceed the lag bound they are held to: a
    /// replica short of the oldest one kept is at least that far behind.
    pub(crate) fn new(keep: Duration) -> Self {
        Self {
            queue: VecDeque::new(),
            keep,
        }
    }

    /// Records the primary at `lsn`, read at `at`. A position already recorded keeps its
    /// first date (an idle primary's position is not newer for being seen again); one
    /// behind the last (a primary restored or replaced) starts the record afresh. Samples
    /// older than `keep` go, but the newest of them, so that a replica that has not
    /// replayed it shows a lag of at least `keep` rather than the age of a younger one.
    pub(crate) fn push(&mut self, at: Instant, lsn: Lsn) {
        match self.queue.back() {
            Some(&(_, last)) if last == lsn => {}
            Some(&(_, last)) if last > lsn => {
                self.queue.clear();
                self.queue.push_back((at, lsn));
            }
            _ => self.queue.push_back((at, lsn)),
        }
        while self
            .queue
            .get(1)
            .is_some_and(|&(second, _)| at.saturating_duration_since(second) > self.keep)
        {
            self.queue.pop_front();
        }
    }

    /// How far behind a replica that has replayed up to `replayed` is at `now`: the age of
    /// the oldest sample past `replayed`, zero when there is none.
    pub(crate) fn lag(&self, replayed: Lsn, now: Instant) -> Duration {
        self.queue
            .iter()
            .find(|&&(_, lsn)| lsn > replayed)
            .map_or(Duration::ZERO, |&(at, _)| now.saturating_duration_since(at))
    }

    /// The newest sample, if any.
    pub(crate) fn latest(&self) -> Option<(Instant, Lsn)> {
        self.queue.back().copied()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_replica_that_replayed_everything_has_no_lag() {
        let t0 = Instant::now();
        let mut samples = Samples::new(1000 * MS);
        assert_eq!(samples.lag(0, t0), Duration::ZERO);
        samples.push(t0, 100);
        samples.push(t0 + 500 * MS, 200);
        assert_eq!(samples.lag(200, t0 + 600 * MS), Duration::ZERO);
        assert_eq!(samples.lag(250, t0 + 600 * MS), Duration::ZERO);
    }

    #[test]
    fn the_lag_is_the_age_of_the_oldest_position_not_replayed() {
        let t0 = Instant::now();
        let mut samples = Samples::new(1000 * MS);
        samples.push(t0, 100);
        samples.push(t0 + 100 * MS, 200);
        samples.push(t0 + 200 * MS, 300);
        let now = t0 + 250 * MS;
        assert_eq!(samples.lag(99, now), 250 * MS);
        assert_eq!(samples.lag(100, now), 150 * MS);
        assert_eq!(samples.lag(150, now), 150 * MS);
        assert_eq!(samples.lag(299, now), 50 * MS);
    }

    #[test]
    fn an_idle_primary_keeps_its_positions_first_date() {
        let t0 = Instant::now();
        let mut samples = Samples::new(1000 * MS);
        samples.push(t0, 100);
        for i in 1..=10 {
            samples.push(t0 + i * 500 * MS, 100);
        }
        assert_eq!(samples.len(), 1);
        // A replica stuck short of the one position is as far behind as it is old...
        assert_eq!(samples.lag(50, t0 + 5000 * MS), 5000 * MS);
        // ...and one that replayed it is not behind at all, however old it is.
        assert_eq!(samples.lag(100, t0 + 5000 * MS), Duration::ZERO);
    }

    #[test]
    fn old_samples_go_but_a_stalled_replica_still_shows_its_lag() {
        let t0 = Instant::now();
        let keep = 1000 * MS;
        let mut samples = Samples::new(keep);
        for i in 0..100u64 {
            samples.push(t0 + u32::try_from(i).unwrap() * 100 * MS, 1000 + i);
        }
        // Ten seconds of samples every 100 ms: about `keep`'s worth kept, plus the one past.
        assert!(samples.len() <= 12, "{}", samples.len());
        let now = t0 + 9900 * MS;
        // A replica that stalled at the very start is past the bound, not at a young lag.
        assert!(samples.lag(0, now) > keep, "{:?}", samples.lag(0, now));
        assert_eq!(samples.lag(1099, now), Duration::ZERO);
        assert_eq!(samples.lag(1098, now), Duration::ZERO);
        assert_eq!(samples.lag(1097, now), 100 * MS);
        assert_eq!(samples.lag(1096, now), 200 * MS);
        assert_eq!(samples.latest(), Some((now, 1099)));
    }

    #[test]
    fn a_primary_behind_its_last_position_starts_afresh() {
        let t0 = Instant::now();
        let mut samples = Samples::new(1000 * MS);
        samples.push(t0, 500);
        samples.push(t0 + 100 * MS, 40);
        assert_eq!(samples.len(), 1);
        assert_eq!(samples.lag(0, t0 + 300 * MS), 200 * MS);
        assert_eq!(samples.lag(40, t0 + 300 * MS), Duration::ZERO);
    }
}
