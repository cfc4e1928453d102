//! Which replica a user's read goes to: the replicas in a fixed order per user, starting
//! at a stable hash of the user, the first usable one taken. One user's reads keep to one
//! replica while it is usable, so the in-process index cache's generation and the index
//! it builds are read from the same server, and its caches stay warm for that user; users
//! spread evenly over the replicas; a replica that is skipped sends its users to the next
//! one, each to the same next one.

use crate::schema::lock_key;

/// Where `user`'s order starts among `n` replicas (0 when there are none). The hash is
/// FNV-1a, the same in every process and release, so two servers over the same list send
/// a user's reads to the same replica; its bits are mixed (MurmurHash3's finaliser)
/// before the remainder, as FNV-1a's low bits alone spread names that differ in their
/// last characters (`user-1`, `user-2`, ...) unevenly over a few replicas.
pub(crate) fn first(user: &str, n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let hash = mix(lock_key(&["replica", user]) as u64);
    // Below n, which is a usize.
    (hash % n as u64) as usize
}

/// MurmurHash3's 64-bit finaliser: every bit of the result depends on every bit of `h`.
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The replicas in the order `user`'s reads try them: from [`first`], round.
pub(crate) fn order(user: &str, n: usize) -> impl Iterator<Item = usize> {
    let start = first(user, n);
    (0..n).map(move |i| (start + i) % n)
}

/// The first replica in `user`'s order that `usable` accepts (`usable` is asked about each
/// one before it, in order, and may count why it was not), or `None`: the primary serves.
pub(crate) fn choose(user: &str, n: usize, mut usable: impl FnMut(usize) -> bool) -> Option<usize> {
    order(user, n).find(|&i| usable(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_keeps_to_one_replica() {
        for n in 1..6 {
            for user in [
                "ada",
                "bob",
                "",
                "ünïcode",
                "a-much-longer-user-name@example.org",
            ] {
                let start = first(user, n);
                assert!(start < n);
                assert_eq!(first(user, n), start);
                assert_eq!(choose(user, n, |_| true), Some(start));
            }
        }
        assert_eq!(first("ada", 0), 0);
        assert_eq!(choose("ada", 0, |_| true), None);
    }

    #[test]
    fn the_hash_is_the_same_in_every_process() {
        // FNV-1a of "replica\0ada\0", mixed: a change here would move every user's reads.
        let expected = {
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
            for b in b"replica\0ada\0" {
                hash ^= u64::from(*b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
            hash
        };
        assert_eq!(first("ada", 7), (mix(expected) % 7) as usize);
        assert_eq!((first("ada", 7), first("ada", 1000)), (6, 398));
        assert_eq!((first("bob", 7), first("bob", 1000)), (2, 919));
    }

    #[test]
    fn users_spread_over_the_replicas() {
        let n = 3;
        let mut counts = [0usize; 3];
        for i in 0..3000 {
            counts[first(&format!("user-{i}"), n)] += 1;
        }
        for count in counts {
            assert!((850..=1150).contains(&count), "{counts:?}");
        }
    }

    #[test]
    fn a_skipped_replica_sends_its_users_to_the_next_in_order() {
        let n = 4;
        for i in 0..200 {
            let user = format!("user-{i}");
            let start = first(&user, n);
            let order: Vec<usize> = order(&user, n).collect();
            assert_eq!(order.len(), n);
            assert_eq!(order[0], start);
            assert_eq!(order[1], (start + 1) % n);
            // The user's own replica down: the next one; that down too: the one after.
            assert_eq!(choose(&user, n, |r| r != start), Some((start + 1) % n));
            let two_down = |r: usize| r != start && r != (start + 1) % n;
            assert_eq!(choose(&user, n, two_down), Some((start + 2) % n));
            // Users of other replicas keep theirs.
            let other = (start + 1) % n;
            assert_eq!(choose(&user, n, |r| r != other), Some(start));
        }
        assert_eq!(choose("ada", n, |_| false), None);
        // Each replica is asked about once, in order, until one is usable.
        let mut asked = Vec::new();
        let chosen = choose("ada", n, |r| {
            asked.push(r);
            asked.len() == 3
        });
        assert_eq!(asked, order("ada", n).take(3).collect::<Vec<_>>());
        assert_eq!(chosen, asked.last().copied());
    }
}
