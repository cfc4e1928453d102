//! Read-your-writes: where in the primary's WAL each user's last write through this handle
//! ends, kept until every usable replica has replayed it, and a floor every replica must
//! have replayed before it serves anyone. A read for a user with a mark waits (bounded)
//! for its replica to replay the mark, or reads from the primary.
//!
//! Marks are forgotten only once every usable replica is past them, and the floor is
//! raised to what was forgotten: a replica that was down or lagging then (and may not be
//! past a forgotten mark) serves again only once it is past the floor, so forgetting a
//! mark never lets a read miss its user's write.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use super::lag::Lsn;

/// Marks kept at most; past it they are folded into the floor (every replica must then
/// replay them all before it serves anyone, which the prober sees within an interval).
const MAX_MARKS: usize = 100_000;

/// What a read for a user must see on a replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Nothing of the user's own: any usable replica will do as it is.
    Nothing,
    /// The user's last write, which ends at or before this position.
    Replayed(Lsn),
    /// A write whose position could not be read: the primary, until the prober replaces
    /// the mark by a position read after it.
    Primary,
}

/// One user's last write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    At(Lsn),
    /// Its position could not be read after the commit (at this instant): any position of
    /// the primary read after that instant is at or past the write.
    Unknown(Instant),
}

#[derive(Debug, Default)]
struct State {
    marks: HashMap<String, Mark>,
    floor: Lsn,
}

/// The marks and the floor of one store handle.
#[derive(Debug, Default)]
pub(crate) struct Written(Mutex<State>);

impl Written {
    /// No marks, and the floor at `floor` (the primary's position once migrated: a replica
    /// serves only once it has the schema this build uses).
    pub(crate) fn new(floor: Lsn) -> Self {
        Self(Mutex::new(State {
            marks: HashMap::new(),
            floor,
        }))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `user` wrote, and the write ends at or before `lsn`.
    pub(crate) fn note(&self, user: &str, lsn: Lsn) {
        self.mark(user, Mark::At(lsn));
    }

    /// `user` wrote, committed by `at`, at a position that could not be read.
    pub(crate) fn note_unknown(&self, user: &str, at: Instant) {
        self.mark(user, Mark::Unknown(at));
    }

    fn mark(&self, user: &str, mark: Mark) {
        let mut state = self.lock();
        if state.marks.len() >= MAX_MARKS && !state.marks.contains_key(user) {
            let highest = state.marks.values().filter_map(|m| match m {
                Mark::At(lsn) => Some(*lsn),
                Mark::Unknown(_) => None,
            });
            let floor = highest.fold(state.floor, Ord::max);
            state.floor = floor;
            state.marks.retain(|_, m| matches!(m, Mark::Unknown(_)));
        }
        let merged = match (state.marks.get(user), mark) {
            (Some(Mark::Unknown(at)), _) => Mark::Unknown(*at),
            (Some(Mark::At(old)), Mark::At(new)) => Mark::At(Ord::max(*old, new)),
            (_, mark) => mark,
        };
        state.marks.insert(user.to_owned(), merged);
    }

    /// A write for every user (a re-embedding's switch): no replica serves anyone until it
    /// has replayed `lsn`.
    pub(crate) fn raise_floor(&self, lsn: Lsn) {
        let mut state = self.lock();
        state.floor = Ord::max(state.floor, lsn);
    }

    /// How many users have a mark.
    pub(crate) fn marks(&self) -> usize {
        self.lock().marks.len()
    }

    /// What every replica must have replayed before it serves any read.
    pub(crate) fn floor(&self) -> Lsn {
        self.lock().floor
    }

    /// What a read for `user` must see.
    pub(crate) fn need(&self, user: &str) -> Need {
        match self.lock().marks.get(user) {
            None => Need::Nothing,
            Some(Mark::At(lsn)) => Need::Replayed(*lsn),
            Some(Mark::Unknown(_)) => Need::Primary,
        }
    }

    /// The prober's pass. `sample` is the primary's position and the instant just before
    /// it was read: it stands in for the marks of unknown position made before that
    /// instant. `replayed` is how far every usable replica has replayed (`None`: no
    /// replica is usable, nothing is forgotten): the marks at or before it go, and the
    /// floor rises to the highest of them. Returns how many marks are left.
    pub(crate) fn settle(&self, sample: Option<(Instant, Lsn)>, replayed: Option<Lsn>) -> usize {
        let mut state = self.lock();
        if let Some((read_after, lsn)) = sample {
            for mark in state.marks.values_mut() {
                if let Mark::Unknown(at) = *mark
                    && at <= read_after
                {
                    *mark = Mark::At(lsn);
                }
            }
        }
        if let Some(replayed) = replayed {
            let mut forgotten = state.floor;
            state.marks.retain(|_, mark| match mark {
                Mark::At(lsn) if *lsn <= replayed => {
                    forgotten = Ord::max(forgotten, *lsn);
                    false
                }
                _ => true,
            });
            state.floor = forgotten;
        }
        state.marks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_users_mark_is_their_latest_write() {
        let written = Written::new(10);
        assert_eq!(written.need("ada"), Need::Nothing);
        written.note("ada", 100);
        written.note("ada", 90);
        assert_eq!(written.need("ada"), Need::Replayed(100));
        written.note("ada", 120);
        assert_eq!(written.need("ada"), Need::Replayed(120));
        assert_eq!(written.need("bob"), Need::Nothing);
        assert_eq!(written.floor(), 10);
    }

    #[test]
    fn marks_go_once_every_usable_replica_is_past_them_and_raise_the_floor() {
        let written = Written::new(0);
        written.note("ada", 100);
        written.note("bob", 200);
        // No usable replica: nothing can be forgotten.
        assert_eq!(written.settle(None, None), 2);
        assert_eq!(written.settle(None, Some(150)), 1);
        assert_eq!(written.need("ada"), Need::Nothing);
        assert_eq!(written.need("bob"), Need::Replayed(200));
        // A replica that missed ada's write must pass it before serving anyone.
        assert_eq!(written.floor(), 100);
        assert_eq!(written.settle(None, Some(250)), 0);
        assert_eq!(written.floor(), 200);
        written.raise_floor(150);
        assert_eq!(written.floor(), 200);
        written.raise_floor(300);
        assert_eq!(written.floor(), 300);
    }

    #[test]
    fn an_unknown_position_reads_the_primary_until_a_later_sample_stands_in() {
        let written = Written::new(0);
        let t0 = Instant::now();
        written.note_unknown("ada", t0);
        written.note("ada", 50);
        assert_eq!(written.need("ada"), Need::Primary);
        // A sample read before the write committed says nothing about it.
        written.settle(Some((t0 - Duration::from_millis(1), 40)), Some(1000));
        assert_eq!(written.need("ada"), Need::Primary);
        written.settle(Some((t0 + Duration::from_millis(1), 70)), None);
        assert_eq!(written.need("ada"), Need::Replayed(70));
        written.settle(None, Some(70));
        assert_eq!(written.need("ada"), Need::Nothing);
        assert_eq!(written.floor(), 70);
    }

    #[test]
    fn too_many_marks_fold_into_the_floor() {
        let written = Written::new(0);
        for i in 0..MAX_MARKS {
            written.note(&format!("user-{i}"), 1000 + i as u64);
        }
        assert_eq!(written.floor(), 0);
        written.note("one-more", 5);
        assert_eq!(written.floor(), 1000 + MAX_MARKS as u64 - 1);
        assert_eq!(written.need("user-0"), Need::Nothing);
        assert_eq!(written.need("one-more"), Need::Replayed(5));
    }
}
